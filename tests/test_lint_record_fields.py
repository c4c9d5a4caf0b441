"""Hand-written fields of derived records that no reader takes as written, and ``lint`` did
not name: an insight's ``question`` or a record's ``stale_reason`` that YAML reads as a list,
mapping or number (``insights`` answered a list where a question goes), an insight deeper than
its tier's ``max_depth`` (SPEC §10), a conviction's ``key`` holding a control character or
longer than any key ``ome.toml`` may name (so no run revises it). Each is read safely and
named by ``lint`` with its file and field."""

from __future__ import annotations

import json
from datetime import date

from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.lint import lint_report
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime

REF = UserRef.of("u1")
DAY = date(2026, 10, 20)
EVIDENCE = ["ep_20261012_0001", "ep_20261012_0002"]


def _record(rt: Runtime, kind: Kind, text: str, **meta: object) -> str:
    base = {"timestamp": "2026-10-20T09:00:00+00:00", "evidence": EVIDENCE, "depth": 1,
            "status": "active"}
    return rt.store.append(REF, kind, {**base, **meta}, {kind.main_section: text}, day=DAY).id


def _problems(rt: Runtime) -> dict[str, list[str]]:
    """lint's warnings by the entry they name: "file:line: message"."""
    out: dict[str, list[str]] = {}
    for p in lint_report(rt.root)["problems"]:
        if p["message"].startswith("entry "):
            out.setdefault(p["message"].split(":")[0][6:], []).append(
                f"{p['file'].rsplit('/', 1)[-1]}:{p['line']}: {p['message']}")
    return out


def _insights(rt: Runtime) -> dict[str, dict[str, object]]:
    out = CliRunner().invoke(cli, ["insights", "--user", "u1", "--include-stale", "--json",
                                   "--root", str(rt.root)])
    assert out.exit_code == 0, out.output
    return {i["id"]: i for i in json.loads(out.output)["insights"]}


def test_an_insight_question_that_is_no_text_is_read_as_none_and_named(rt: Runtime) -> None:
    listed = _record(rt, Kind.INSIGHT, "Andrew likes animals.", question=["pets", "why"])
    number = _record(rt, Kind.INSIGHT, "Andrew likes dogs.", question=42)

    got = _insights(rt)
    assert (got[listed]["question"], got[number]["question"]) == (None, "42")
    found = _problems(rt)
    assert found[listed] == [f"insight-2026-10-20.md:14: entry {listed}: question is a YAML "
                             "list, not one value: it is ignored (shown as none)"]
    assert found[number] == [f"insight-2026-10-20.md:26: entry {number}: question is read as "
                             "a number: 42, not as the text written: put it in quotes"]


def test_a_stale_reason_that_is_no_text_is_read_as_none_and_named(rt: Runtime) -> None:
    mapping = _record(rt, Kind.INSIGHT, "Andrew likes animals.", status="stale",
                      stale_reason={"a": 1})
    conviction = _record(rt, Kind.CONVICTION, "Andrew plans ahead.", key="identity",
                         depth=2, status="stale", stale_reason=[1, 2])

    assert _insights(rt)[mapping]["stale_reason"] is None
    found = _problems(rt)
    assert [m.split(": ", 1)[1] for m in found[mapping]] == [
        f"entry {mapping}: stale_reason is a YAML mapping, not one value: it is ignored "
        "(shown as none)"]
    assert [m.split(": ", 1)[1] for m in found[conviction]] == [
        f"entry {conviction}: stale_reason is a YAML list, not one value: it is ignored "
        "(shown as none)"]


def test_an_insight_deeper_than_the_configured_max_depth_is_named(rt: Runtime) -> None:
    (rt.root / "ome.toml").write_text("[strategies.reflect_insights]\nmax_depth = 3\n")
    deep = _record(rt, Kind.INSIGHT, "Andrew likes animals.", depth=4)
    at_cap = _record(rt, Kind.INSIGHT, "Andrew likes dogs.", depth=3)
    reconciled = _record(rt, Kind.INSIGHT, "Andrew changed his mind.", depth=4,
                         insight_type="reconciliation")  # reconcile's cap: 8

    found = _problems(rt)
    assert [m.split(": ", 1)[1] for m in found[deep]] == [
        f"entry {deep}: depth 4 is above max_depth 3 of reflect_insights (SPEC §10: a record "
        "is at most max_depth deep; fix the depth, or raise [strategies.reflect_insights] "
        "max_depth in ome.toml)"]
    assert at_cap not in found and reconciled not in found


def test_a_conviction_key_with_a_control_character_is_named_escaped(rt: Runtime) -> None:
    odd = _record(rt, Kind.CONVICTION, "Andrew is an animal person.", depth=2,
                  key="iden\x1b[31mtity")

    found = _problems(rt)
    assert [m.split(": ", 1)[1] for m in found[odd]] == [
        f"entry {odd}: key 'iden\\x1b[31mtity' is not a key update_worldview writes (a "
        "letter, then at most 63 letters, digits, _ or -): no run revises this conviction, as "
        "ome.toml's keys cannot name it"]
    assert "\x1b" not in json.dumps(lint_report(rt.root), ensure_ascii=False)


def test_a_conviction_key_longer_than_a_configured_key_may_be_is_named(rt: Runtime) -> None:
    longest = _record(rt, Kind.CONVICTION, "Andrew plans ahead.", depth=2, key="k" * 64)
    longer = _record(rt, Kind.CONVICTION, "Andrew saves.", depth=2, key="k" * 65)

    found = _problems(rt)
    assert longest not in found
    assert [m.split(": ", 1)[1] for m in found[longer]] == [
        f"entry {longer}: key '{'k' * 60}…' (65 characters) is not a key update_worldview "
        "writes (a letter, then at most 63 letters, digits, _ or -): no run revises this "
        "conviction, as ome.toml's keys cannot name it"]


def test_an_evidence_hash_that_is_no_mapping_is_named(rt: Runtime) -> None:
    listed = _record(rt, Kind.INSIGHT, "Andrew likes animals.", evidence_hash=["a", "b"])
    number = _record(rt, Kind.LESSON, "Check the logs first.", task_type="deploy",
                     evidence=["tk_20261012_0001"], evidence_hash=7)
    kept = _record(rt, Kind.INSIGHT, "Andrew likes dogs.",
                   evidence_hash=dict.fromkeys(EVIDENCE, "h"))

    found = _problems(rt)
    assert [m.split(": ", 1)[1] for m in found[listed]] == [
        f"entry {listed}: evidence_hash ['a', 'b'] is not a mapping of each cited id to its "
        "hash (read as none: an edit of a record it cites is not noticed)"]
    assert [m.split(": ", 1)[1] for m in found[number]] == [
        f"entry {number}: evidence_hash 7 is not a mapping of each cited id to its hash (read "
        "as none: an edit of a record it cites is not noticed)"]
    assert kept not in found


def test_a_relation_resolution_that_is_no_text_is_read_as_none_and_named(rt: Runtime) -> None:
    first = _record(rt, Kind.CONVICTION, "Andrew plans ahead.", key="identity", depth=2)
    second = _record(rt, Kind.CONVICTION, "Andrew improvises.", key="strategy", depth=2)
    edge = _record(rt, Kind.RELATION, "A clash.", evidence=[first, second], depth=3,
                   between=[first, second], relation_type="self_contradiction",
                   status="resolved", resolution={"by": "hand"})

    out = CliRunner().invoke(cli, ["relations", "--user", "u1", "--json",
                                   "--root", str(rt.root)])
    assert out.exit_code == 0, out.output
    assert [r["resolution"] for r in json.loads(out.output)["relations"]] == [None]
    assert [m.split(": ", 1)[1] for m in _problems(rt)[edge]] == [
        f"entry {edge}: resolution is a YAML mapping, not one value: it is ignored (shown as "
        "none)"]
