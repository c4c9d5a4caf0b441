"""A derived record citing itself, or records citing each other in a ring, is named by ``lint``
(``status`` over the index does not read citations; over the Markdown it shares lint's scan).

SPEC §10 gives a derived record depth 1 + the deepest record it cites: a cycle has no depth and
none of it rests on Episodes alone. Only a hand edit makes one, and both commands said all was
well of such a root (``explain`` even hid the self-citation).
"""

from __future__ import annotations

from pathlib import Path

from everos_reflect.index.sync import Indexer
from everos_reflect.lint import lint_report
from everos_reflect.llm.extractive import ExtractiveLLM
from everos_reflect.strategies.consistency import MAX_CITATION_CYCLES, citation_cycles
from tests.reflect_fixtures import ANDREW, add_episode, make_runtime

DAY = "2026-10-20"


def _record(seq: int, evidence: list[str], *, kind: str = "in", key: str = "evidence") -> str:
    rid = f"{kind}_20261020_{seq:04d}"
    section = {"in": "Insight", "rel": "Relation"}[kind]
    return (f"<!-- entry:{rid} -->\n---\nowner_id: u_andrew\ntimestamp: {DAY}T09:00:00Z\n"
            f"{key}: [{', '.join(evidence)}]\ndepth: 1\nstatus: active\n"
            f"{'relation_type: self_contradiction' + chr(10) if kind == 'rel' else ''}---\n"
            f"## {section}\nnote {seq}\n<!-- /entry:{rid} -->\n")


def _log(folder: str, stem: str, records: list[str]) -> str:
    return (f"---\ntype: {stem}_daily\nschema_version: 1\nuser_id: u_andrew\ndate: '{DAY}'\n"
            f"---\n" + "".join(records))


def _root(tmp_path: Path, insights: list[str], relations: list[str] | None = None):
    rt = make_runtime(tmp_path / "root", ExtractiveLLM())
    ep = add_episode(rt, ANDREW, "2026-10-01T09:00:00Z", "Dog", "Andrew adopted a beagle.")
    user = rt.store.user_dir(ANDREW)
    (user / ".insights").mkdir(exist_ok=True)
    (user / ".insights" / f"insight-{DAY}.md").write_text(
        _log(".insights", "insight", [r.replace("EP", ep.id) for r in insights]))
    if relations is not None:
        (user / ".relations").mkdir(exist_ok=True)
        (user / ".relations" / f"relation-{DAY}.md").write_text(
            _log(".relations", "relation", [r.replace("EP", ep.id) for r in relations]))
    Indexer(rt).scan()
    return rt


def _problems(rt) -> list[str]:
    """lint's messages, each with its line."""
    return [f"{p['line']}: {p['message']}" for p in lint_report(rt.root)["problems"]]


def test_a_record_citing_itself_is_an_error(tmp_path: Path) -> None:
    rt = _root(tmp_path, [_record(1, ["EP", "in_20261020_0001"]), _record(2, ["EP"])])
    try:
        linted = _problems(rt)
        want = ("7: in_20261020_0001 cites itself: a record cannot rest on itself (remove its "
                "own id from its evidence)")
        assert linted == [want]
    finally:
        rt.close()


def test_a_ring_of_citations_across_tiers_is_named_once_at_its_smallest_id(
        tmp_path: Path) -> None:
    """in_3 → in_2 → rel_1 (between) → in_3: one cycle, reported at in_2's entry."""
    rt = _root(tmp_path, [_record(3, ["EP", "in_20261020_0002"]),
                          _record(2, ["rel_20261020_0001"])],
               [_record(1, ["in_20261020_0003", "EP"], kind="rel", key="between")])
    try:
        linted = _problems(rt)
        want = ("18: in_20261020_0002 is in a citation cycle (in_20261020_0002 -> "
                "rel_20261020_0001 -> in_20261020_0003 -> in_20261020_0002): none of these "
                "records rests on Episodes alone (remove one of the citations)")
        assert linted == [want]
    finally:
        rt.close()


def test_records_citing_records_without_a_ring_are_fine(tmp_path: Path) -> None:
    rt = _root(tmp_path, [_record(1, ["EP"]), _record(2, ["EP", "in_20261020_0001"]),
                          _record(3, ["in_20261020_0001", "in_20261020_0002"])])
    try:
        assert _problems(rt) == []
    finally:
        rt.close()


def test_cycles_are_found_in_any_shape_and_bounded() -> None:
    assert citation_cycles({"a": ["a", "e"], "b": ["c"], "c": ["b"], "e": []}) == [
        ["a", "a"], ["b", "c", "b"]]
    # a long ring is one cycle, listed from its smallest id in citing order
    ring = {f"n{i:05d}": [f"n{(i + 1) % 5000:05d}"] for i in range(5000)}
    (cycle,) = citation_cycles(ring)
    assert cycle[:3] == ["n00000", "n00001", "n00002"] and len(cycle) == 5001
    # every record citing every other: no more than the bound is named
    clique = {f"c{i}": [f"c{j}" for j in range(40) if j != i] for i in range(40)}
    assert len(citation_cycles(clique)) == MAX_CITATION_CYCLES


def test_explain_shows_a_citation_it_does_not_walk_again(tmp_path: Path) -> None:
    """The self-citation and the ring's way back were left out of the tree without a word."""
    from everos_reflect.strategies.insight_views import explain, render_tree

    rt = _root(tmp_path, [_record(1, ["EP", "in_20261020_0001"]), _record(2, ["in_20261020_0003"]),
                          _record(3, ["EP", "in_20261020_0002"])])
    try:
        tree = explain(rt, ANDREW, "in_20261020_0001")
        assert tree["cites_back"] == ["in_20261020_0001"]
        assert render_tree(tree)[-1] == (
            "  in_20261020_0001  (cited again: itself, a citation cycle; see lint)")
        tree = explain(rt, ANDREW, "in_20261020_0002")
        (three,) = tree["evidence"]
        assert three["id"] == "in_20261020_0003" and three["cites_back"] == ["in_20261020_0002"]
        assert "    in_20261020_0002  (cited again: a record above it, a citation cycle; see " \
            "lint)" in render_tree(tree)
    finally:
        rt.close()


def test_an_id_written_twice_in_evidence_is_one_citation_in_explain_and_lint(
        tmp_path: Path) -> None:
    """``cites_back`` named a doubled self-citation twice, and a doubled id's subtree was shown
    twice; lint names each cycle once however often its links are written."""
    from everos_reflect.strategies.insight_views import explain, render_tree

    rt = _root(tmp_path, [_record(1, ["EP", "EP", "in_20261020_0001", "in_20261020_0001"]),
                          _record(2, ["in_20261020_0003", "in_20261020_0003"]),
                          _record(3, ["EP", "in_20261020_0002", "in_20261020_0002"])])
    try:
        tree = explain(rt, ANDREW, "in_20261020_0001")
        assert tree["cites_back"] == ["in_20261020_0001"]
        assert [e["id"] for e in tree["evidence"]] == ["ep_20261001_0001"]
        assert sum("cited again" in line for line in render_tree(tree)) == 1
        (three,) = explain(rt, ANDREW, "in_20261020_0002")["evidence"]
        assert three["cites_back"] == ["in_20261020_0002"]
        assert [e["id"] for e in three["evidence"]] == ["ep_20261001_0001"]
        assert [p.split(":", 1)[1].split()[0] for p in _problems(rt)] == [
            "in_20261020_0001", "in_20261020_0002"]
    finally:
        rt.close()
