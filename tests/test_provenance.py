"""Provenance invalidation (SPEC §10, seed 000): evidence archived, edited or deleted makes the
citing insight stale, transitively; the state lives in Markdown and survives a rebuild."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.index.search import search
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.model import Entry, Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.strategies.provenance import find_stale
from tests.reflect_fixtures import add_episode, make_runtime, run_reflection
from tests.store_fixtures import refuse_reads

#: logs edited by the test itself, then written by the store: no other writer (conftest.py)
pytestmark = pytest.mark.usefixtures("settle_at_once")

DEV = UserRef.of("u_dev")


def insight(rt: Runtime, text: str, cited: list[Entry], depth: int = 1) -> Entry:
    meta = {"timestamp": "2026-10-20T09:00:00+00:00", "evidence": [e.id for e in cited],
            "depth": depth, "importance": 8, "question": "q?", "status": "active",
            "insight_type": "reflection", "derivation": "dw_test",
            "evidence_hash": {e.id: e.text_hash for e in cited}}
    return rt.store.append(DEV, Kind.INSIGHT, meta, {"Insight": text})


def setup(root: Path) -> tuple[Runtime, list[Entry], Entry, Entry]:
    rt = make_runtime(root, ExtractiveLLM())
    eps = [add_episode(rt, DEV, f"2026-09-{d:02d}T10:00:00+00:00", f"Revert {d}",
                       f"The user reverted an auth change on day {d}.") for d in (2, 16, 30)]
    first = insight(rt, "All three reverts touched auth.", eps)
    second = insight(rt, "The user distrusts the auth refactor.",
                     [rt.store.get(DEV, first.id), eps[0]], depth=2)
    Indexer(rt).scan()
    return rt, eps, first, second


def status(rt: Runtime, entry_id: str) -> tuple[str, str | None]:
    e = rt.store.get(DEV, entry_id)
    return e.meta.get("status"), e.meta.get("stale_reason")


def edit_file(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_an_edited_evidence_makes_the_insight_and_its_dependent_stale(root: Path) -> None:
    rt, eps, first, second = setup(root)
    assert status(rt, first.id) == ("active", None)
    edit_file(rt.store.path_for_id(DEV, eps[1].id), "on day 16", "on day 17")
    Indexer(rt).scan()
    assert status(rt, first.id) == ("stale", f"evidence {eps[1].id} was edited")
    assert status(rt, second.id) == ("stale", f"evidence {first.id} is stale")


def delete_by_hand(rt: Runtime, entry_id: str) -> None:
    """Cut an entry, markers and all, out of its log as a person would."""
    path = rt.store.path_for_id(DEV, entry_id)
    text = path.read_text()
    end_marker = f"<!-- /entry:{entry_id} -->\n"
    start = text.index(f"<!-- entry:{entry_id} -->")
    end = text.index(end_marker) + len(end_marker)
    path.write_text(text[:start] + text[end:])


def test_a_status_written_in_another_case_is_checked_as_the_briefing_reads_it(
        root: Path) -> None:
    """`status: Active`, hand-written: the briefing read it as active and served the insight,
    provenance read it as no status it checks, so an edit of its evidence never made it
    stale."""
    rt, eps, first, _second = setup(root)
    edit_file(rt.store.path_for_id(DEV, first.id), "status: active", "status: Active")
    Indexer(rt).scan()
    edit_file(rt.store.path_for_id(DEV, eps[1].id), "on day 16", "on day 17")
    Indexer(rt).scan()
    assert status(rt, first.id) == ("stale", f"evidence {eps[1].id} was edited")


def test_a_deleted_evidence_makes_the_insight_stale(root: Path) -> None:
    rt, eps, first, second = setup(root)
    delete_by_hand(rt, eps[2].id)
    Indexer(rt).scan()
    assert status(rt, first.id) == ("stale", f"evidence {eps[2].id} was deleted")
    assert status(rt, second.id)[0] == "stale"


def _three_reverts_cited(root: Path) -> tuple[Runtime, list[Entry], Entry, Indexer, Path, str]:
    """Three Episodes of one day, an insight citing all three, indexed; with the day's log
    (where the second one is) and its text."""
    rt = make_runtime(root, ExtractiveLLM())
    eps = [add_episode(rt, DEV, f"2026-09-02T1{h}:00:00+00:00", f"Revert {h}",
                       f"The user reverted an auth change at 1{h}:00.") for h in (0, 1, 2)]
    cited = insight(rt, "All three reverts touched auth.", eps)
    indexer = Indexer(rt)
    indexer.scan()
    path = rt.store.path_for_id(DEV, eps[1].id)
    return rt, eps, cited, indexer, path, path.read_text()


def test_a_log_caught_mid_write_leaves_the_insights_citing_it_active(root: Path) -> None:
    """Synced while a writer was still rewriting it (its last entry not closed yet), a log
    lost the entries past the cut from the index, and every insight citing them went stale
    for good ("was deleted"), also once the write completed. Those entries are out of the
    index while the log stands so, as a reindex leaves them, but unknown, not deleted."""
    rt, eps, cited, indexer, path, _ = _three_reverts_cited(root)
    whole = path.read_bytes()
    for cut, kept in ((f"<!-- /entry:{eps[2].id} -->", 2), ("## Content\nThe user reverted "
                                                           "an auth change at 11", 1)):
        path.write_bytes(whole[:whole.index(cut.encode())])  # truncated, being rewritten
        indexer.sync_path(path)
        assert status(rt, cited.id) == ("active", None)
        assert {r[0] for r in rt.db().execute("SELECT id FROM entries WHERE path LIKE "
                                               "'%episodes%'")} == {e.id for e in eps[:kept]}
        path.write_bytes(whole)
        indexer.sync_path(path)
        assert status(rt, cited.id) == ("active", None)


@pytest.mark.parametrize("written", ["<", "<!-", "<!-- ent", "<!-- entry:", "<!-- entry:ep_2026",
                                     "<!-- entry:ep_20260902_0002 --"])
def test_a_log_cut_inside_an_opening_marker_leaves_the_insights_citing_it_active(
        root: Path, written: str) -> None:
    """Caught while the next entry's opening marker line was being written, a log lost every
    entry from there on from the index (its text ended between entries, not inside one), and
    the insight citing them went stale for good. They are out of the index while it stands
    so, as a reindex leaves them, but unknown, not deleted."""
    rt, eps, cited, indexer, path, _ = _three_reverts_cited(root)
    whole = path.read_bytes()
    cut = whole.index(f"<!-- entry:{eps[1].id} -->".encode())
    path.write_bytes(whole[:cut] + written.encode())
    result = indexer.sync_path(path)
    assert {r[0] for r in rt.db().execute("SELECT id FROM entries WHERE path LIKE "
                                           "'%episodes%'")} == {eps[0].id}
    assert status(rt, cited.id) == ("active", None)
    # said, as an unclosed entry is: a file left cut short for good must not pass silently
    assert any("ends inside an entry marker" in p.message for p in result.problems)
    path.write_bytes(whole)
    indexer.sync_path(path)
    assert status(rt, cited.id) == ("active", None)


def test_a_log_ending_in_other_unfinished_text_still_drops_what_it_no_longer_holds(
        root: Path) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    eps = [add_episode(rt, DEV, f"2026-09-02T1{h}:00:00+00:00", f"Revert {h}",
                       f"The user reverted an auth change at 1{h}:00.") for h in (0, 1)]
    indexer = Indexer(rt)
    indexer.scan()
    path = rt.store.path_for_id(DEV, eps[0].id)
    whole = path.read_bytes()
    cut = whole.index(f"<!-- entry:{eps[1].id} -->".encode())
    path.write_bytes(whole[:cut] + b"<!-- a note, not a marker")
    indexer.sync_path(path)
    assert {r[0] for r in rt.db().execute("SELECT id FROM entries")} == {eps[0].id}


#: Hand edits that leave an entry in its file but unreadable, as (old text, new text).
UNREADABLE = {
    "yaml typo": ("timestamp: 2026-09-02T11:00:00+00:00", "timestamp: [2026-09-02T11:00"),
    "closing marker lost": ("<!-- /entry:ep_20260902_0002 -->\n", ""),
    "timestamp refused": ("timestamp: 2026-09-02T11:00:00+00:00",
                          "timestamp: 2026-13-45T11:00:00+00:00"),
    "frontmatter typo": ("type: episode_daily", "type: [episode_daily"),
}


def _without_second(whole: str, eps: list[Entry]) -> str:
    """The log's text with the second Episode deleted for real."""
    start = whole.index(f"<!-- entry:{eps[1].id} -->")
    return whole[:start] + whole[whole.index(f"<!-- entry:{eps[2].id} -->"):]


@pytest.mark.parametrize("breakage", sorted(UNREADABLE))
def test_an_entry_made_unreadable_by_a_typo_leaves_the_insights_citing_it_active(
        root: Path, breakage: str) -> None:
    """An entry still in its file but unreadable (a hand edit broke its metadata, its closing
    marker was lost, its timestamp is refused) counted as deleted: the insight citing it went
    stale ("evidence ... was deleted") and stayed so once the typo was fixed. It is unknown
    now (out of the index, as a reindex leaves it): the insight keeps its status; fixed as it
    was, nothing changes; deleted for real, the insight goes stale as before."""
    rt, eps, cited, indexer, path, whole = _three_reverts_cited(root)
    old, new = UNREADABLE[breakage]
    assert eps[1].id == "ep_20260902_0002" and whole.count(old) == 1
    path.write_text(whole.replace(old, new))
    result = indexer.sync_path(path)
    # the broken entry's row goes, and with broken frontmatter every row of the log
    assert result.problems and result.deleted == (3 if breakage == "frontmatter typo" else 1)
    assert status(rt, cited.id) == ("active", None)
    # A derived record written meanwhile re-checks every record of the owner from Markdown.
    later = insight(rt, "The first revert came at ten.", [eps[0], eps[2]])
    indexer.scan()
    assert status(rt, cited.id) == ("active", None)
    assert status(rt, later.id) == ("active", None)

    path.write_text(whole)  # the typo fixed
    indexer.sync_path(path)
    assert status(rt, cited.id) == ("active", None)

    path.write_text(_without_second(whole, eps))  # deleted for real
    indexer.sync_path(path)
    assert status(rt, cited.id) == ("stale", f"evidence {eps[1].id} was deleted")
    assert status(rt, later.id) == ("active", None)


@pytest.mark.parametrize("breakage", sorted(UNREADABLE))
def test_an_entry_deleted_while_unreadable_makes_the_insight_stale(
        root: Path, breakage: str) -> None:
    """Its index row dropped while it was unreadable (as a reindex has none), an entry then
    deleted for real is still seen to go (the log lost its problem: its owner is checked
    whole), and the insight citing it goes stale."""
    rt, eps, cited, indexer, path, whole = _three_reverts_cited(root)
    old, new = UNREADABLE[breakage]
    path.write_text(whole.replace(old, new))
    indexer.sync_path(path)
    path.write_text(_without_second(whole, eps))
    indexer.sync_path(path)
    assert status(rt, cited.id) == ("stale", f"evidence {eps[1].id} was deleted")


#: Ways a whole log becomes unreadable (the indexer and the store never parse it).
UNREAD_FILES = ("not UTF-8", "over the size limit", "symlink out of the root")


def _make_unread(rt: Runtime, path: Path, whole: str, how: str, away: Path) -> None:
    if how == "not UTF-8":
        path.write_bytes(whole.encode() + b"\n\xff\xfe stray bytes\n")
    elif how == "over the size limit":
        limit = 8192  # room for the insights' log; the padded Episode log goes past it
        (rt.root / "everos.toml").write_text(f"[limits]\nmax_file_bytes = {limit}\n")  # lint
        limits = replace(rt.settings.limits, max_file_bytes=limit)
        rt.settings = replace(rt.settings, limits=limits)
        rt.store.limits = limits
        path.write_text(whole + "<!-- padding -->\n" * (limit // 17 + 1))
    else:
        away.mkdir()
        (away / path.name).write_text(whole)
        path.unlink()
        path.symlink_to(away / path.name)


@pytest.mark.parametrize("how", UNREAD_FILES)
def test_a_log_that_cannot_be_read_at_all_leaves_the_insights_citing_it_active(
        root: Path, tmp_path: Path, how: str) -> None:
    """A whole log unread (not UTF-8, over limits.max_file_bytes, a symlink leading out of
    the root) yielded no unreadable ids, so every entry of it counted as deleted: the link's
    rows were dropped at once, and any re-check marked each record citing one stale for good.
    Its entries are unknown now (out of the index, as a reindex leaves them); the file is
    reported by lint and status; restored, nothing changed; removed for real, the insight goes
    stale (its owner is checked whole: which entries the log lost is not known)."""
    from everos_reflect.lint import lint_report
    from everos_reflect.strategies.provenance import load_records

    rt, eps, cited, indexer, path, whole = _three_reverts_cited(root)
    _make_unread(rt, path, whole, how, tmp_path / "elsewhere")
    result = indexer.sync_path(path)
    assert result.deleted == 3 and result.problems
    rel = rt.store.rel(path)
    assert rel in indexer.problems()  # status
    assert any(p["file"] == rel for p in lint_report(root)["problems"])
    assert status(rt, cited.id) == ("active", None)
    # A derived record written meanwhile re-checks every record of the owner from Markdown.
    later = insight(rt, "The last revert came at noon.", [eps[2], eps[0]])
    indexer.scan()
    assert status(rt, cited.id) == ("active", None)
    unknown: set[str] = set()
    records = load_records(rt, DEV, unknown)
    assert {e.id for e in eps} <= unknown and not {e.id for e in eps} & records.keys()
    assert {r[0] for r in rt.db().execute("SELECT id FROM entries WHERE kind = 'episode'")
            } == set()

    path.unlink()
    path.write_text(whole)  # readable again, as it was
    indexer.sync_path(path)
    assert status(rt, cited.id) == ("active", None)
    assert status(rt, later.id) == ("active", None)

    _make_unread(rt, path, whole, how, tmp_path / "elsewhere2")
    indexer.sync_path(path)
    path.unlink()  # removed for real
    indexer.sync_path(path)
    assert status(rt, cited.id)[0] == "stale"
    assert status(rt, later.id)[0] == "stale"


def test_an_edit_undone_lifts_the_stale_mark_and_records_it(root: Path) -> None:
    """Stale was final: an Episode edited and then restored word for word left the insight
    citing it (and the one citing that) stale for good. Once every cited record reads as
    when it was derived again, the mark is lifted, one audit row each."""
    from everos_reflect.index.audit import list_derivations

    rt, eps, first, second = setup(root)
    path = rt.store.path_for_id(DEV, eps[1].id)
    edit_file(path, "on day 16", "on day 17")
    Indexer(rt).scan()
    assert status(rt, first.id) == ("stale", f"evidence {eps[1].id} was edited")
    assert status(rt, second.id) == ("stale", f"evidence {first.id} is stale")

    edit_file(path, "on day 17", "on day 16")  # undone
    Indexer(rt).scan()
    assert status(rt, first.id) == ("active", None)
    assert status(rt, second.id) == ("active", None)
    rows = list_derivations(rt.db(), strategy="provenance")
    assert sorted((r["outputs"], r["status"]) for r in rows) == sorted(
        [([first.id], "restored"), ([second.id], "restored")])
    row = next(r for r in rows if r["outputs"] == [first.id])
    assert row["inputs"] == [e.id for e in eps]


def test_a_stale_mark_is_lifted_only_when_every_citation_reads_as_it_was() -> None:
    """find_restored is pure: a record still edited, one citing a record it has no hash for,
    one citing an unreadable entry, and one a person marked stale stay stale; a record
    citing a lifted one is lifted with it."""
    from everos_reflect.markdown.parser import parse_log
    from everos_reflect.strategies.provenance import find_restored

    ep = parse_log(
        "---\ntype: episode_daily\nschema_version: 1\nuser_id: u\ndate: '2026-10-01'\n---\n"
        "<!-- entry:ep_20261001_0001 -->\n---\nowner_id: u\ntimestamp: 2026-10-01T00:00:00Z\n"
        "parent_type: memcell\n---\n## Content\nx\n<!-- /entry:ep_20261001_0001 -->\n",
        "x/episodes/episode-2026-10-01.md").entries[0]
    a = ep.id

    def record(seq: int, evidence: list[str], hashes: dict[str, str],
               reason: str = "evidence ep_20261001_0001 was deleted", depth: int = 1) -> str:
        return (f"<!-- entry:in_20261020_{seq:04d} -->\n---\nowner_id: u\n"
                f"timestamp: 2026-10-20T00:00:00Z\nevidence: [{', '.join(evidence)}]\n"
                f"evidence_hash: {{{', '.join(f'{k}: {v}' for k, v in hashes.items())}}}\n"
                f"depth: {depth}\nderivation: d\nstatus: stale\nstale_reason: '{reason}'\n---\n"
                f"## Insight\ni{seq}\n<!-- /entry:in_20261020_{seq:04d} -->\n")

    head = "---\ntype: insight_daily\nschema_version: 1\nuser_id: u\ndate: '2026-10-20'\n---\n"
    first = record(1, [a], {a: ep.text_hash})
    log = parse_log(head + first, "x/.insights/insight-2026-10-20.md")
    lifted_first = log.entries[0]
    text = head + first + "".join([
        record(2, [a], {a: "0" * 32}),  # still edited
        record(3, [a], {}),  # no hash recorded: cannot be shown unchanged
        record(4, [a], {a: ep.text_hash}, reason="a person disagreed"),
        record(5, ["in_20261020_0001"], {"in_20261020_0001": lifted_first.text_hash},
               reason="evidence in_20261020_0001 is stale", depth=2),
        record(6, [a, "ep_20261001_0002"], {a: ep.text_hash, "ep_20261001_0002": "h"}),
    ])
    records = {e.id: e for e in [*parse_log(text, "x/.insights/insight-2026-10-20.md").entries,
                                 ep]}
    assert find_restored(records, {"ep_20261001_0002"}) == {"in_20261020_0001": 1,
                                                            "in_20261020_0005": 2}
    assert find_restored(records, {a}) == {}  # unreadable: unknown, nothing lifted


def test_an_archived_evidence_makes_the_insight_stale(root: Path) -> None:
    rt, eps, first, second = setup(root)
    narrative = add_episode(rt, DEV, "2026-10-01T10:00:00+00:00", "Reverts", "Merged story.",
                            parent_type="cluster")
    rt.store.deprecate(DEV, {eps[0].id: narrative.id})
    Indexer(rt).scan()
    assert status(rt, first.id) == (
        "stale", f"evidence {eps[0].id} was archived (replaced by {narrative.id})")
    # the depth-2 insight cites both the stale insight and the archived episode
    assert status(rt, second.id)[0] == "stale"


def test_a_reflection_merge_of_the_evidence_makes_the_insights_stale(root: Path) -> None:
    rt, eps, first, second = setup(root)
    counts = run_reflection(rt)
    assert counts.get("merged") == 1, counts
    archived = {e.id: e.deprecated_by for e in rt.store.entries(DEV, Kind.EPISODE)
                if e.deprecated_by}
    assert set(archived) == {e.id for e in eps}  # the merge archived all three sources
    (narrative_id,) = set(archived.values())
    assert rt.store.get(DEV, narrative_id).meta["parent_type"] == "cluster"
    state, reason = status(rt, first.id)
    assert state == "stale"
    assert reason is not None and reason.endswith(f"was archived (replaced by {narrative_id})")
    assert status(rt, second.id)[0] == "stale"
    # the stale state is in the insights' own Markdown and search leaves them out
    text = rt.store.path_for_id(DEV, first.id).read_text()
    assert "status: stale" in text and "stale_reason:" in text
    from everos_reflect.index.search import search

    hits = search(rt, "auth reverts", top_k=10, kind=Kind.INSIGHT)
    assert hits == []
    hits = search(rt, "auth reverts", top_k=10, kind=Kind.INSIGHT, include_stale=True)
    assert {h.id for h in hits} == {first.id, second.id}


def test_an_unrelated_change_leaves_insights_active(root: Path) -> None:
    rt, eps, first, second = setup(root)
    add_episode(rt, DEV, "2026-10-05T10:00:00+00:00", "Lunch", "Tacos.")
    edit_file(rt.store.path_for_id(DEV, eps[0].id), "<!-- /entry", "\n<!-- /entry")  # blank
    Indexer(rt).scan()
    assert status(rt, first.id) == ("active", None)
    assert status(rt, second.id) == ("active", None)


def test_a_rebuild_from_markdown_keeps_the_same_active_and_stale_sets(root: Path) -> None:
    rt, eps, first, second = setup(root)
    third = insight(rt, "Unrelated but grounded.", eps[1:])
    edit_file(rt.store.path_for_id(DEV, eps[0].id), "on day 2", "on day 3")
    Indexer(rt).scan()
    before = {e.id: e.meta.get("status") for e in rt.store.entries(DEV, Kind.INSIGHT)}
    assert before == {first.id: "stale", second.id: "stale", third.id: "active"}
    Indexer(rt).reindex()
    after = {e.id: e.meta.get("status") for e in rt.store.entries(DEV, Kind.INSIGHT)}
    assert after == before


def test_evidence_deleted_while_the_index_was_rebuilt_makes_the_insight_stale(
        root: Path) -> None:
    """An Episode deleted by hand, then ``reindex`` (or ``.index`` removed and rebuilt): the
    rebuild published no change, so the insight citing it stayed active for good, while a
    sync of the same edit marked it stale. A rebuild now gives what the sync gives."""
    rt, eps, first, second = setup(root)
    delete_by_hand(rt, eps[2].id)
    Indexer(rt).reindex()
    assert status(rt, first.id) == ("stale", f"evidence {eps[2].id} was deleted")
    assert status(rt, second.id) == ("stale", f"evidence {first.id} is stale")
    found = search(rt, "reverted auth", user_id=DEV.user_id, kinds=[Kind.INSIGHT])
    assert [h.id for h in found] == []  # the index holds the marks too


def test_an_entry_gone_from_a_log_with_broken_frontmatter_is_unknown_until_it_is_fixed(
        root: Path) -> None:
    """A log whose frontmatter is broken is not read: the index keeps what it had from it,
    so a sync saw no deletion and the insight citing the entry stayed active. A rebuild (or
    any whole check of the owner) took the entry for deleted and marked the insight stale:
    the two disagreed. Unknown while the file cannot be read; fixed, the sync publishes the
    deletion (the index still held the entry) and the insight goes stale."""
    rt, eps, first, _second = setup(root)
    path = rt.store.path_for_id(DEV, eps[2].id)
    text = path.read_text()
    start = text.index(f"<!-- entry:{eps[2].id} -->")
    end = text.index(f"<!-- /entry:{eps[2].id} -->") + len(f"<!-- /entry:{eps[2].id} -->\n")
    path.write_text((text[:start] + text[end:]).replace("type: episode_daily",
                                                        "type: [episode_daily", 1))
    Indexer(rt).scan()
    assert status(rt, first.id) == ("active", None)
    copy = root.parent / "copy"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".index"))
    rebuilt = make_runtime(copy, ExtractiveLLM())
    try:
        Indexer(rebuilt).reindex()
        assert rebuilt.store.get(DEV, first.id).meta.get("status") == "active"
    finally:
        rebuilt.close()
    edit_file(path, "type: [episode_daily", "type: episode_daily")
    Indexer(rt).scan()
    assert status(rt, first.id) == ("stale", f"evidence {eps[2].id} was deleted")


def test_a_hand_written_insight_is_never_rewritten(root: Path) -> None:
    rt, eps, _first, _second = setup(root)
    mine = rt.store.append(DEV, Kind.INSIGHT, {"evidence": [eps[0].id], "status": "active"},
                           {"Insight": "My own note."})
    rt.store.deprecate(DEV, {eps[0].id: eps[1].id})
    Indexer(rt).scan()
    assert status(rt, mine.id) == ("active", None)


def test_find_stale_is_pure_and_transitive() -> None:
    from everos_reflect.markdown.parser import parse_log

    text = (
        "---\ntype: insight_daily\nschema_version: 1\nuser_id: u\ndate: '2026-10-20'\n---\n"
        "<!-- entry:in_20261020_0002 -->\n---\nowner_id: u\ntimestamp: 2026-10-20T00:00:00Z\n"
        "evidence: [in_20261020_0001, ep_20261001_0001]\ndepth: 2\nderivation: d\n---\n"
        "## Insight\nb\n<!-- /entry:in_20261020_0002 -->\n"
        "<!-- entry:in_20261020_0001 -->\n---\nowner_id: u\ntimestamp: 2026-10-20T00:00:00Z\n"
        "evidence: [ep_20261001_0009, ep_20261001_0001]\ndepth: 1\nderivation: d\n---\n"
        "## Insight\na\n<!-- /entry:in_20261020_0001 -->\n"
    )
    log = parse_log(text, "x/.insights/insight-2026-10-20.md")
    ep = parse_log(
        "---\ntype: episode_daily\nschema_version: 1\nuser_id: u\ndate: '2026-10-01'\n---\n"
        "<!-- entry:ep_20261001_0001 -->\n---\nowner_id: u\ntimestamp: 2026-10-01T00:00:00Z\n"
        "parent_type: memcell\n---\n## Content\nx\n<!-- /entry:ep_20261001_0001 -->\n",
        "x/episodes/episode-2026-10-01.md")
    records = {e.id: e for e in [*log.entries, *ep.entries]}
    assert find_stale(records) == {
        "in_20261020_0001": "evidence ep_20261001_0009 was deleted",
        "in_20261020_0002": "evidence in_20261020_0001 is stale",
    }


def test_a_bulk_scan_reads_only_the_logs_derived_records_cite(root: Path) -> None:
    """Invalidation runs after every synced file: it must not re-read every log of the owner
    each time (a year of day files made a bulk scan quadratic)."""
    rt, _eps, first, _second = setup(root)
    for d in range(1, 21):  # twenty new, uncited day files
        add_episode(rt, DEV, f"2026-11-{d:02d}T10:00:00+00:00", "Lunch", f"Tacos on day {d}.")
    reads: list[str] = []
    real_read = rt.store.read

    def counting(path):  # type: ignore[no-untyped-def]
        reads.append(Path(path).name)
        return real_read(path)

    rt.store.read = counting  # type: ignore[method-assign]
    Indexer(rt).scan()
    episode_reads = [n for n in reads if n.startswith("episode-")]
    assert len(episode_reads) <= 2 * 20  # the indexer's own reads, no per-file re-scan of all
    # the owner's derived logs are checked once per indexer flush, not once per synced file
    assert sum(n.startswith("insight-") for n in reads) <= 3
    assert status(rt, first.id) == ("active", None)


def test_a_malformed_or_foreign_evidence_id_counts_as_deleted(root: Path) -> None:
    rt, eps, _first, _second = setup(root)
    bad = rt.store.append(DEV, Kind.INSIGHT, {
        "timestamp": "2026-10-21T09:00:00+00:00", "evidence": [eps[0].id, "not-an-id"],
        "depth": 1, "status": "active", "derivation": "dw_test",
        "evidence_hash": {eps[0].id: eps[0].text_hash}}, {"Insight": "Cites junk."})
    Indexer(rt).scan()
    assert status(rt, bad.id) == ("stale", "evidence not-an-id was deleted")


def test_find_stale_checks_each_record_of_a_deep_chain_a_bounded_number_of_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Depths written backwards (a person's edit: each record claims to be shallower than the
    # one it cites) made the depth-ordered walk settle one record per pass: 300 records were
    # checked about 45,000 times. Staleness now spreads from each newly stale record to the
    # records citing it, so each is checked at most once plus once per cited record.
    from everos_reflect.markdown.parser import parse_log
    from everos_reflect.strategies import provenance

    n = 300
    head = "---\ntype: insight_daily\nschema_version: 1\nuser_id: u\ndate: '2026-10-20'\n---\n"
    blocks = []
    for i in range(1, n + 1):
        cited = "ep_20261001_0009" if i == 1 else f"in_20261020_{i - 1:04d}"
        blocks.append(
            f"<!-- entry:in_20261020_{i:04d} -->\n---\nowner_id: u\n"
            f"timestamp: 2026-10-20T00:00:00Z\nevidence: [{cited}]\ndepth: {n + 1 - i}\n"
            f"derivation: d\n---\n## Insight\nlink {i}\n<!-- /entry:in_20261020_{i:04d} -->\n")
    log = parse_log(head + "".join(blocks), "x/.insights/insight-2026-10-20.md")
    records = {e.id: e for e in log.entries}
    checks = 0
    real = provenance.evidence_problem

    def counted(*args: object) -> str | None:
        nonlocal checks
        checks += 1
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(provenance, "evidence_problem", counted)
    stale = find_stale(records)
    assert stale["in_20261020_0001"] == "evidence ep_20261001_0009 was deleted"
    assert all(stale[f"in_20261020_{i:04d}"] == f"evidence in_20261020_{i - 1:04d} is stale"
               for i in range(2, n + 1))
    assert len(stale) == n
    assert checks <= 2 * n


def test_a_person_s_stale_mark_worded_evidence_something_is_not_lifted(root: Path) -> None:
    """Only provenance's own reasons are lifted. Matched by their first word alone, a person's
    mark on a derived insight ("evidence looks thin to me") was lifted by the next check,
    though nothing it cites had changed; so was one of provenance's wordings naming a record
    the insight does not cite."""
    from everos_reflect.strategies.provenance import check

    rt, eps, first, second = setup(root)
    marks = {first.id: "evidence looks thin to me",
             second.id: f"evidence {eps[2].id} was edited"}  # second cites eps[0] and first
    for entry_id, reason in marks.items():
        rt.store.update_meta(DEV, entry_id, {"status": "stale", "stale_reason": reason})
    assert check(rt, DEV).restored == []
    Indexer(rt).scan()
    for entry_id, reason in marks.items():
        assert status(rt, entry_id) == ("stale", reason)

    rt.store.update_meta(DEV, second.id, {"stale_reason": f"evidence {first.id} is stale"})
    rt.store.update_meta(DEV, first.id, {"stale_reason": f"evidence {eps[1].id} was deleted"})
    assert sorted(check(rt, DEV).restored) == sorted([first.id, second.id])  # provenance's own


def test_a_folder_where_a_cited_log_was_is_no_log_and_stops_nothing(root: Path) -> None:
    """A folder named like a log is no log (the indexer drops its rows and publishes their
    deletion). Reading it for the citations raised: the provenance check of the owner failed
    on every change (nothing of theirs went stale) and every revalidate_insights run failed."""
    from everos_reflect.strategies.provenance import check
    from tests.test_revalidate import run

    rt, eps, first, second = setup(root)
    path = rt.store.path_for_id(DEV, eps[1].id)
    path.unlink()
    path.mkdir()
    Indexer(rt).scan()
    assert status(rt, first.id) == ("stale", f"evidence {eps[1].id} was deleted")
    assert status(rt, second.id) == ("stale", f"evidence {first.id} is stale")
    assert check(rt, DEV).written == []
    # offline and nothing raised: the insight left with two live Episodes waits for a model,
    # the one citing it waits for that one's verdict (it was retired: "fewer than 2 cited
    # records remain", the stale insight it cites counted as gone)
    assert run(rt) == {"needs_llm": 1, "waiting_on_cited": 1}
    assert status(rt, first.id)[0] == "stale"
    assert status(rt, second.id)[0] == "stale"


def test_an_oserror_marking_one_owner_stale_leaves_the_other_owners_checked(
        root: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """One indexer flush carries the edits of two owners' evidence. Marking ada's insight
    stale raised an OSError (her disk quota full), which ended the provenance subscriber for
    the whole flush: bob's insight, citing an edited record too, stayed active (and no later
    event re-checks it). Each owner is checked on its own now; ada's failure is logged."""
    import logging

    rt = make_runtime(root, ExtractiveLLM())
    ada, bob = UserRef.of("ada"), UserRef.of("bob")
    cited: dict[UserRef, Entry] = {}
    for ref in (ada, bob):
        eps = [add_episode(rt, ref, f"2026-09-0{d}T10:00:00+00:00", f"Revert {d}",
                           f"The user reverted an auth change on day {d}.") for d in (2, 3)]
        cited[ref] = rt.store.append(ref, Kind.INSIGHT, {
            "timestamp": "2026-10-20T09:00:00+00:00", "evidence": [e.id for e in eps],
            "depth": 1, "status": "active", "derivation": "dw_test",
            "evidence_hash": {e.id: e.text_hash for e in eps}}, {"Insight": "Auth reverts."})
    indexer = Indexer(rt)
    indexer.scan()
    for ref in (ada, bob):
        edit_file(rt.store.path_for_id(ref, cited[ref].meta["evidence"][0]), "on day 2",
                  "on day 4")
    real = rt.store.update_meta

    def update_meta(ref: UserRef, entry_id: str, changes: Any) -> Any:
        if ref == ada:
            raise OSError(122, "Disk quota exceeded")
        return real(ref, entry_id, changes)

    monkeypatch.setattr(rt.store, "update_meta", update_meta)
    with caplog.at_level(logging.ERROR):
        indexer.scan()

    assert rt.store.get(bob, cited[bob].id).meta["status"] == "stale"
    assert rt.store.get(ada, cited[ada].id).meta["status"] == "active"
    assert any("ada" in r.getMessage() and r.exc_info for r in caplog.records)


def test_a_log_this_process_may_not_read_is_unknown_and_named_not_a_crash(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A daily log without read permission raised PermissionError out of ``get_many`` (so out
    of provenance, search, ``explain`` and Reflection). It is unread now, as a log over the
    size limit is: its entries are unknown (never deleted), the insight citing them keeps its
    status, lint names the file, and once readable again nothing has changed. Tests run as
    root, where ``chmod 000`` blocks no read: the store's open is refused instead."""
    from everos_reflect.errors import MarkdownError
    from everos_reflect.lint import lint_report

    rt, eps, cited, indexer, path, _ = _three_reverts_cited(root)
    refuse_reads(monkeypatch, path)
    unknown: set[str] = set()
    found = rt.store.get_many(DEV, [*(e.id for e in eps), cited.id], unknown)
    assert set(found) == {cited.id} and unknown == {e.id for e in eps}
    later = insight(rt, "The last revert came at noon.", [eps[2], eps[0]])
    indexer.scan()  # a derived record written: every record of the owner is re-checked
    assert status(rt, cited.id) == ("active", None) and status(rt, later.id) == ("active", None)
    rel = rt.store.rel(path)
    assert [p["message"] for p in lint_report(root)["problems"] if p["file"] == rel] == [
        "not read: Permission denied"]
    before = path.read_bytes()
    with pytest.raises(MarkdownError, match="not writing this file: not read: Permission"):
        rt.store.deprecate(DEV, {eps[1].id: later.id})  # not "no entry …": why it is not
    assert path.read_bytes() == before

    monkeypatch.undo()
    assert set(rt.store.get_many(DEV, [e.id for e in eps])) == {e.id for e in eps}
    indexer.scan()
    assert status(rt, cited.id) == ("active", None) and status(rt, later.id) == ("active", None)


@pytest.mark.parametrize("written", ["deep", "[2, 3]", "0"])
def test_a_record_whose_depth_a_person_broke_is_restored_with_its_depth_recomputed(
        root: Path, written: str) -> None:
    """A hand edit made ``depth`` unreadable on an insight citing an insight: it read as 1,
    no deeper than the insight it cites, so once its evidence read as before again it was
    never lifted, and offline nothing else ever lifts it. SPEC §10 defines depth from the
    citations (1 + the deepest cited), so the restore writes that value back."""
    rt, eps, first, second = setup(root)
    edit_file(rt.store.path_for_id(DEV, second.id), "depth: 2", f"depth: {written}")
    path = rt.store.path_for_id(DEV, eps[1].id)
    edit_file(path, "on day 16", "on day 17")
    Indexer(rt).scan()
    assert status(rt, second.id) == ("stale", f"evidence {first.id} is stale")

    edit_file(path, "on day 17", "on day 16")  # undone
    Indexer(rt).scan()
    assert status(rt, first.id) == ("active", None)
    assert status(rt, second.id) == ("active", None)
    assert rt.store.get(DEV, second.id).meta["depth"] == 2


def test_a_record_whose_recomputed_depth_passes_its_tier_s_max_depth_stays_stale(
        root: Path) -> None:
    """The recomputed depth is held to the ``max_depth`` of the tier that writes the record
    (``reflect_insights``: 2 unless ``ome.toml`` says otherwise), as a write would be."""
    from everos_reflect.strategies.provenance import check

    rt, eps, _first, second = setup(root)
    top = insight(rt, "Auth work needs a review.", [rt.store.get(DEV, second.id), eps[2]],
                  depth=3)
    edit_file(rt.store.path_for_id(DEV, top.id), "depth: 3", "depth: deep")
    path = rt.store.path_for_id(DEV, eps[1].id)
    edit_file(path, "on day 16", "on day 17")
    Indexer(rt).scan()
    edit_file(path, "on day 17", "on day 16")
    Indexer(rt).scan()
    assert status(rt, second.id) == ("active", None)
    assert status(rt, top.id) == ("stale", f"evidence {second.id} is stale")
    assert rt.store.get(DEV, top.id).meta["depth"] == "deep"  # not rewritten either

    (root / "ome.toml").write_text("[strategies.reflect_insights]\nmax_depth = 3\n")
    assert check(rt, DEV).restored == [top.id]
    assert rt.store.get(DEV, top.id).meta["depth"] == 3


def test_one_check_settles_a_record_marked_stale_for_citing_one_it_restores(
        root: Path) -> None:
    """A record the first stale mark missed (its entry unreadable then) and a cited record
    lifted in the same check: the check marked it stale for citing a record it then made
    active again, and only a second check (the next change of the owner, maybe never)
    lifted it. One check settles both now, and writes nothing for the record in the end."""
    from datetime import date

    from everos_reflect.strategies.provenance import check

    rt, eps, first, second = setup(root)
    top = rt.store.append(DEV, Kind.INSIGHT, {
        "timestamp": "2026-10-21T09:00:00+00:00", "evidence": [first.id, eps[2].id],
        "depth": 2, "importance": 8, "question": "q?", "status": "active",
        "insight_type": "reflection", "derivation": "dw_test",
        "evidence_hash": {first.id: first.text_hash, eps[2].id: eps[2].text_hash}},
        {"Insight": "Auth reverts cluster late in the month."}, day=date(2026, 10, 21))
    top_log = rt.store.path_for_id(DEV, top.id)
    closing = f"<!-- /entry:{top.id} -->"
    edit_file(top_log, closing, "")  # unreadable: unknown, left as it is
    path = rt.store.path_for_id(DEV, eps[1].id)
    edit_file(path, "on day 16", "on day 17")
    Indexer(rt).scan()
    assert status(rt, first.id) == ("stale", f"evidence {eps[1].id} was edited")
    assert top.id not in {e.id for e in rt.store.entries(DEV, Kind.INSIGHT)}

    edit_file(path, "on day 17", "on day 16")
    top_log.write_text(top_log.read_text().rstrip("\n") + f"\n{closing}\n")
    before = top_log.read_bytes()
    done = check(rt, DEV)  # as revalidate_insights or one indexer flush of both files does
    assert sorted(done.restored) == sorted([first.id, second.id])
    assert status(rt, first.id) == ("active", None)
    assert status(rt, top.id) == ("active", None)
    assert top_log.read_bytes() == before  # marked and lifted in one check: no write
    assert check(rt, DEV).written == []  # nothing left for a second check



@pytest.mark.parametrize(("daily", "path", "prefix", "main"), [
    ("insight_daily", ".insights/insight", "in", "Insight"),
    ("conviction_daily", ".worldview/worldview", "wv", "Conviction"),
    ("relation_daily", ".relations/relation", "rel", "Relation"),
])
def test_a_garbled_evidence_mapping_is_no_made_up_id(
        daily: str, path: str, prefix: str, main: str) -> None:
    """A hand edit's ``evidence: {x: 1}`` was read as the id "{'x': 1}": provenance marked the
    record stale for "evidence {'x': 1} was deleted" and the views showed that id as cited.
    Lint names the garbled list; nothing reads (or writes back) an id nobody wrote."""
    from everos_reflect.markdown.parser import parse_log
    from everos_reflect.strategies import belief_views

    eid = f"{prefix}_20261020_0001"
    text = (
        f"---\ntype: {daily}\nschema_version: 1\nuser_id: u\ndate: '2026-10-20'\n---\n"
        f"<!-- entry:{eid} -->\n---\nowner_id: u\ntimestamp: 2026-10-20T00:00:00Z\n"
        "evidence: {x: 1}\nbetween: {y: 2}\ndepth: 1\nstatus: active\nderivation: d\n---\n"
        f"## {main}\nb\n<!-- /entry:{eid} -->\n"
    )
    log = parse_log(text, f"x/{path}-2026-10-20.md")
    entry = log.entries[0]
    assert find_stale({entry.id: entry}) == {}
    view = (belief_views.conviction_dict(entry) if prefix == "wv"
            else belief_views.relation_dict(entry) if prefix == "rel" else {})
    assert view.get("evidence", []) == [] and view.get("between", []) == []
    messages = [d.message for d in log.diagnostics]
    assert any(f"entry {eid}: evidence is" in m and "not a list of ids" in m for m in messages)
