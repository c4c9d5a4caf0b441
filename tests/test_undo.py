"""undo_merge and the `undo` command: one merge reverted in Markdown, index, clusters and audit.

The merges here are written by hand through the store, in the format the Reflection pipeline
writes (narrative with ``parent_type: cluster``, facts under it, ``deprecated_entries`` toward
it, one ``reflection_report`` row), so these tests pin undo to that format alone.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from click.testing import CliRunner, Result
from filelock import FileLock

from everos_reflect.cli import demo_cmds
from everos_reflect.cli.main import cli
from everos_reflect.clustering.service import ClusterService
from everos_reflect.embedding import HashEmbedder
from everos_reflect.engine.engine import lock_path
from everos_reflect.errors import (
    EverosError,
    InvalidId,
    MarkdownError,
    StrategyBusy,
    UndoRefused,
    UnknownEntry,
)
from everos_reflect.index.db import transaction, utcnow_iso
from everos_reflect.index.search import search
from everos_reflect.index.sync import Indexer
from everos_reflect.model import Entry, Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import ClusteringSettings, Settings
from everos_reflect.strategies import undo as undo_mod
from everos_reflect.strategies.undo import undo_merge
from tests.api_client import ApiClient

#: logs edited by the test itself, then written by the store: no other writer (conftest.py)
pytestmark = pytest.mark.usefixtures("settle_at_once")

REF = UserRef.of("u_andrew")
SETTINGS = Settings(clustering=ClusteringSettings(threshold=0.3, time_window_days=7.0,
                                                  rejoin_threshold=0.3, member_threshold=0.0))
PETS = [
    (date(2026, 8, 10), "Andrew pets", "Andrew has no pets; his apartment does not allow a dog."),
    (date(2026, 8, 12), "Andrew pets dog", "Andrew adopted a dog named Toby; Andrew pets: a dog."),
    (date(2026, 8, 14), "Andrew pets dogs",
     "Andrew adopted a second dog named Buddy; Andrew pets: two dogs, Toby and Buddy."),
]


@pytest.fixture
def rt(root: Path) -> Runtime:
    runtime = Runtime(root, SETTINGS, embedder=HashEmbedder(64))
    yield runtime
    runtime.close()


def add(rt: Runtime, day: date, subject: str, content: str) -> Entry:
    meta = {"timestamp": datetime(day.year, day.month, day.day, 10, tzinfo=UTC),
            "parent_type": "memcell", "session_id": f"s_{day:%m%d}"}
    return rt.store.append(REF, Kind.EPISODE, meta, {"Subject": subject, "Content": content},
                           day=day)


def add_fact(rt: Runtime, parent: Entry, text: str, day: date) -> Entry:
    meta = {"timestamp": parent.meta["timestamp"], "parent_type": "episode",
            "parent_id": parent.id}
    return rt.store.append(REF, Kind.ATOMIC_FACT, meta, {"Fact": text}, day=day)


def pets(rt: Runtime, count: int = 3) -> list[Entry]:
    """Andrew's pet fragments, each with one fact, indexed and clustered together."""
    entries = []
    for day, subject, content in PETS[:count]:
        entry = add(rt, day, subject, content)
        add_fact(rt, entry, content.split(";")[0], day)
        entries.append(entry)
    add(rt, date(2026, 8, 11), "Taxes", "Filed the federal tax return late again.")
    Indexer(rt).scan()
    return entries


def live_facts_of(rt: Runtime, parent_ids: list[str]) -> list[Entry]:
    return [f for f in rt.store.entries(REF, Kind.ATOMIC_FACT)
            if f.parent_id in parent_ids and f.deprecated_by is None]


def merge(rt: Runtime, sources: list[Entry], content: str, *, day: date,
          existing: Entry | None = None) -> Entry:
    """Write one merge the way the Reflection pipeline does, in its order."""
    service = ClusterService(rt)
    cluster_id = service.cluster_of(REF, sources[0].id)
    assert cluster_id is not None
    replaced = ([existing] if existing else []) + sources
    old_facts = live_facts_of(rt, [e.id for e in replaced])
    latest = max(rt.store.get(REF, e.id).timestamp for e in replaced)
    narrative = rt.store.append(
        REF, Kind.EPISODE,
        {"timestamp": latest, "parent_type": "cluster", "parent_id": cluster_id,
         "sources": [e.id for e in replaced], "reflection": f"rj_{day:%m%d}"},
        {"Subject": "Andrew's pets", "Content": content}, day=day)
    for sentence in content.split(". "):
        add_fact(rt, narrative, sentence, day)
    rt.store.deprecate(REF, {i: narrative.id for i in
                             [e.id for e in replaced] + [f.id for f in old_facts]})
    indexer = Indexer(rt)
    for kind in (Kind.EPISODE, Kind.ATOMIC_FACT):
        indexer.sync_path(rt.store.log_path(REF, kind, day))
    indexer.scan()
    vector = rt.vectors.get_vectors(Kind.EPISODE, REF, [narrative.id])[narrative.id]
    service.mark_consolidated(cluster_id, narrative.id, vector, [e.id for e in replaced])
    conn = rt.db()
    with transaction(conn):
        conn.execute(
            "INSERT INTO reflection_report (id, app_id, project_id, owner_id, cluster_id, mode,"
            " source_count, source_members, merged_entry_id, deprecated_fact_count, status,"
            " created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (f"rr_{narrative.id}", REF.app, REF.project, REF.user_id, cluster_id,
             "update" if existing else "init", len(sources), json.dumps([e.id for e in sources]),
             narrative.id, len(old_facts), "ok", utcnow_iso()))
    return rt.store.get(REF, narrative.id)


def deprecated_in_markdown(rt: Runtime) -> dict[str, str | None]:
    return {e.id: e.deprecated_by for kind in (Kind.EPISODE, Kind.ATOMIC_FACT)
            for e in rt.store.entries(REF, kind)}


def deprecated_in_index(rt: Runtime) -> dict[str, str | None]:
    return {r["id"]: r["deprecated_by"] for r in rt.db().execute(
        "SELECT id, deprecated_by FROM entries WHERE user_id=?", (REF.user_id,))}


def cluster_state(rt: Runtime) -> set[tuple[frozenset[str], str | None]]:
    """Each cluster as (live members, consolidated narrative): what a rebuild must agree on."""
    service = ClusterService(rt)
    return {(frozenset(m.entry_id for m in service.members(c.cluster_id)),
             c.consolidated_entry_id) for c in service.clusters(REF)}


def report_status(rt: Runtime, merged_id: str) -> str:
    return rt.db().execute("SELECT status FROM reflection_report WHERE merged_entry_id=?",
                           (merged_id,)).fetchone()["status"]


def snapshot(rt: Runtime) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in rt.store.iter_files(REF)}


def test_fixture_clusters_the_pet_fragments_together(rt: Runtime) -> None:
    sources = pets(rt)
    service = ClusterService(rt)
    cluster_ids = {service.cluster_of(REF, e.id) for e in sources}
    assert len(cluster_ids) == 1 and None not in cluster_ids


def test_undo_of_an_init_merge_restores_sources_facts_cluster_and_report(rt: Runtime) -> None:
    sources = pets(rt)
    source_ids = [e.id for e in sources]
    source_facts = [f.id for f in live_facts_of(rt, source_ids)]
    before_merge = {p: b for p, b in snapshot(rt).items()}
    cluster_id = ClusterService(rt).cluster_of(REF, source_ids[0])
    narrative = merge(rt, sources, "Andrew had no pets. He adopted Toby. He now has two dogs.",
                      day=date(2026, 8, 20))
    narrative_facts = [f.id for f in live_facts_of(rt, [narrative.id])]
    assert len(narrative_facts) == 3
    assert {i: deprecated_in_markdown(rt)[i] for i in source_ids} == dict.fromkeys(
        source_ids, narrative.id)

    result = undo_merge(rt, REF, narrative.id)

    assert result.mode == "init" and result.cluster_id == cluster_id
    assert result.restored == source_ids
    assert result.restored_facts == sorted(source_facts)
    assert result.archived == [narrative.id]
    assert result.archived_facts == sorted(narrative_facts)
    assert result.previous_narrative is None and result.cluster_narrative is None
    assert result.reports == [f"rr_{narrative.id}"] and result.cascaded == []
    # Markdown: the keys the merge added are gone, so the source files are byte for byte as
    # before the merge; the narrative and its facts are archived as "undone".
    after = snapshot(rt)
    for path in {str(rt.store.path_for_id(REF, i)) for i in source_ids + source_facts}:
        assert after[path] == before_merge[path]
    marked = deprecated_in_markdown(rt)
    assert all(marked[i] is None for i in source_ids + source_facts)
    assert all(marked[i] == "undone" for i in [narrative.id, *narrative_facts])
    assert "  " + narrative.id + ": undone" in rt.store.path_for_id(REF, narrative.id).read_text()
    # Index, search, clusters and audit agree at once.
    assert deprecated_in_index(rt) == marked
    hits = search(rt, "Andrew pets dog", user_id=REF.user_id, top_k=10)
    assert narrative.id not in {h.id for h in hits}
    assert set(source_ids) <= {h.id for h in hits}
    service = ClusterService(rt)
    assert {m.entry_id for m in service.members(cluster_id)} == set(source_ids)
    assert service.cluster(cluster_id).consolidated_entry_id is None
    assert report_status(rt, narrative.id) == "undone"
    # A rebuild from Markdown gives the same state.
    clusters = cluster_state(rt)
    Indexer(rt).reindex()
    assert deprecated_in_index(rt) == marked
    assert cluster_state(rt) == clusters


def test_undo_of_an_update_merge_hands_the_cluster_back_to_the_previous_narrative(
        rt: Runtime) -> None:
    first, second = pets(rt, 2)
    n1 = merge(rt, [first, second], "Andrew had no pets. He adopted a dog named Toby.",
               day=date(2026, 8, 13))
    third = add(rt, *PETS[2])
    Indexer(rt).scan()
    service = ClusterService(rt)
    cluster_id = service.cluster_of(REF, n1.id)
    assert service.cluster_of(REF, third.id) == cluster_id
    n1_facts = [f.id for f in live_facts_of(rt, [n1.id])]
    n2 = merge(rt, [third], "Andrew had no pets. He adopted Toby, then Buddy. Two dogs now.",
               day=date(2026, 8, 20), existing=n1)
    assert service.cluster(cluster_id).consolidated_entry_id == n2.id

    result = undo_merge(rt, REF, n2.id)

    assert result.mode == "update"
    assert result.previous_narrative == n1.id
    assert result.restored == sorted([n1.id, third.id])
    assert result.restored_facts == sorted(n1_facts)
    assert result.cluster_narrative == n1.id
    marked = deprecated_in_markdown(rt)
    assert marked[n1.id] is None and marked[third.id] is None and marked[n2.id] == "undone"
    # The first merge stays as it was: its sources still point at n1.
    assert marked[first.id] == n1.id and marked[second.id] == n1.id
    assert service.cluster(cluster_id).consolidated_entry_id == n1.id
    assert {m.entry_id for m in service.members(cluster_id)} == {n1.id, third.id}
    assert report_status(rt, n2.id) == "undone" and report_status(rt, n1.id) == "ok"
    clusters = cluster_state(rt)
    Indexer(rt).reindex()
    assert deprecated_in_index(rt) == marked
    assert cluster_state(rt) == clusters


def two_merges(rt: Runtime) -> tuple[list[Entry], Entry, Entry]:
    first, second = pets(rt, 2)
    n1 = merge(rt, [first, second], "Andrew had no pets. He adopted a dog named Toby.",
               day=date(2026, 8, 13))
    third = add(rt, *PETS[2])
    Indexer(rt).scan()
    n2 = merge(rt, [third], "Andrew had no pets. He adopted Toby, then Buddy. Two dogs now.",
               day=date(2026, 8, 20), existing=n1)
    return [first, second, third], n1, n2


def test_undo_syncs_its_sources_logs_in_one_batch_then_the_narratives(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two index syncs, whatever the number of source logs: restored sources first (they
    rejoin the cluster), then the narrative's and its facts' logs. One sync per log wrote a
    LanceDB version per log: a 150-source undo took ~25 s, a 1,000-source one over 10 min."""
    sources = pets(rt, 3)  # three days: three source logs
    narrative = merge(rt, sources, "Andrew had no pets. He adopted Toby, then Buddy.",
                      day=date(2026, 8, 20))
    batches: list[list[str]] = []
    sync = Indexer._sync

    def counted(self: Indexer, paths: list[Path], **kwargs: object) -> object:
        batches.append(sorted(p.name for p in paths))
        return sync(self, paths, **kwargs)

    monkeypatch.setattr(Indexer, "_sync", counted)
    undo_merge(rt, REF, narrative.id)
    days = ("08-10", "08-12", "08-14")  # the sources' days (PETS)
    assert batches == [
        sorted(f"{kind}-2026-{day}.md" for kind in ("atomic_fact", "episode") for day in days),
        ["atomic_fact-2026-08-20.md", "episode-2026-08-20.md"]]
    assert {e.id for e in rt.store.entries(REF, Kind.EPISODE) if e.deprecated_by is None} >= {
        s.id for s in sources}


def test_undo_refuses_when_a_later_merge_built_on_it_and_changes_nothing(rt: Runtime) -> None:
    _, n1, n2 = two_merges(rt)
    before = snapshot(rt)
    with pytest.raises(UndoRefused, match=f"folded into {n2.id}"):
        undo_merge(rt, REF, n1.id)
    assert snapshot(rt) == before
    assert report_status(rt, n1.id) == "ok"


def test_cascade_undoes_the_later_merge_first(rt: Runtime) -> None:
    sources, n1, n2 = two_merges(rt)
    result = undo_merge(rt, REF, n1.id, cascade=True)
    assert [c.merged_entry_id for c in result.cascaded] == [n2.id]
    assert result.merged_entry_id == n1.id
    marked = deprecated_in_markdown(rt)
    assert all(marked[e.id] is None for e in sources)
    assert marked[n1.id] == "undone" and marked[n2.id] == "undone"
    assert all(marked[f.id] is None for f in rt.store.entries(REF, Kind.ATOMIC_FACT)
               if f.parent_id in {e.id for e in sources})
    service = ClusterService(rt)
    cluster_id = result.cluster_id
    assert service.cluster(cluster_id).consolidated_entry_id is None
    assert {m.entry_id for m in service.members(cluster_id)} == {e.id for e in sources}
    assert report_status(rt, n1.id) == "undone" and report_status(rt, n2.id) == "undone"
    assert deprecated_in_index(rt) == marked


def test_unknown_non_merge_and_malformed_ids_are_refused(rt: Runtime) -> None:
    sources = pets(rt, 2)
    with pytest.raises(UnknownEntry, match="no entry ep_20990101_0001"):
        undo_merge(rt, REF, "ep_20990101_0001")
    with pytest.raises(EverosError, match="not a merged narrative"):
        undo_merge(rt, REF, sources[0].id)
    with pytest.raises(InvalidId, match=r"invalid episode id .*: a merged narrative is an episode"):
        undo_merge(rt, REF, live_facts_of(rt, [sources[0].id])[0].id)
    with pytest.raises(InvalidId, match="invalid entry id"):
        undo_merge(rt, REF, "../etc/passwd")


def test_undo_of_a_merge_whose_narrative_was_deleted_by_hand_restores_its_sources(
        rt: Runtime) -> None:
    # A person deleted the narrative's entry (hand edits are first-class): its sources stayed
    # archived toward an id no entry holds, hidden from search for good, and undo refused
    # with "no entry ... for user ... check --user".
    sources = pets(rt, 2)
    narrative = merge(rt, sources, "Andrew had no pets. He adopted Toby.",
                      day=date(2026, 8, 20))
    facts = live_facts_of(rt, [narrative.id])
    path = rt.store.path_for_id(REF, narrative.id)
    text = path.read_text()
    close = f"<!-- /entry:{narrative.id} -->\n"
    start, end = text.index(f"<!-- entry:{narrative.id} -->"), text.index(close) + len(close)
    path.write_text(text[:start] + text[end:])
    Indexer(rt).scan()

    result = undo_merge(rt, REF, narrative.id)

    assert result.restored == [s.id for s in sources] and result.archived == []
    assert sorted(result.archived_facts) == sorted(f.id for f in facts)
    markdown = deprecated_in_markdown(rt)
    assert all(markdown[s.id] is None for s in sources)
    assert all(markdown[f.id] == "undone" for f in facts)
    assert deprecated_in_index(rt) == markdown
    assert report_status(rt, narrative.id) == "undone"
    hits = search(rt, "Toby", user_id=REF.user_id, top_k=10, mode="keyword")
    assert sources[1].id in {h.id for h in hits}
    with pytest.raises(UnknownEntry, match=r"no longer in the logs.*nothing to undo"):
        undo_merge(rt, REF, narrative.id)


def test_undo_of_a_narrative_archived_undone_by_hand_restores_its_sources(
        rt: Runtime) -> None:
    # `deprecated_entries: {narrative: undone}` written by hand, the sources' keys left: undo
    # answered "already undone" and the sources stayed archived toward it for good.
    sources = pets(rt, 2)
    narrative = merge(rt, sources, "Andrew had no pets. He adopted Toby.",
                      day=date(2026, 8, 20))
    facts = live_facts_of(rt, [narrative.id])
    rt.store.deprecate(REF, {narrative.id: "undone"})
    Indexer(rt).scan()

    result = undo_merge(rt, REF, narrative.id)

    assert result.restored == [s.id for s in sources] and result.archived == []
    markdown = deprecated_in_markdown(rt)
    assert [markdown[s.id] for s in sources] == [None, None]
    assert {markdown[f.id] for f in facts} == {"undone"} and markdown[narrative.id] == "undone"
    assert deprecated_in_index(rt) == markdown
    with pytest.raises(EverosError, match="already undone"):
        undo_merge(rt, REF, narrative.id)


def test_a_second_undo_of_the_same_merge_is_refused(rt: Runtime) -> None:
    narrative = merge(rt, pets(rt, 2), "Andrew had no pets. He adopted Toby.",
                      day=date(2026, 8, 20))
    undo_merge(rt, REF, narrative.id)
    before = snapshot(rt)
    with pytest.raises(EverosError, match="already undone"):
        undo_merge(rt, REF, narrative.id)
    assert snapshot(rt) == before


def test_undo_waits_for_a_running_reflection_then_reports_busy(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    narrative = merge(rt, pets(rt, 2), "Andrew had no pets. He adopted Toby.",
                      day=date(2026, 8, 20))
    monkeypatch.setattr(undo_mod, "LOCK_WAIT_SECONDS", 0.05)
    path = lock_path(rt.root, "reflect_episodes")
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path)), pytest.raises(StrategyBusy, match="reflect_episodes is running"):
        undo_merge(rt, REF, narrative.id)
    assert deprecated_in_markdown(rt)[narrative.id] is None
    assert undo_merge(rt, REF, narrative.id).archived == [narrative.id]


def _undo_killed_after_restoring(rt: Runtime, monkeypatch: pytest.MonkeyPatch
                                 ) -> tuple[list[Entry], Entry]:
    """A merge of two sources, then an undo that dies once the sources are restored, before
    the narrative is archived: the sources and the narrative as merged."""
    sources = pets(rt, 2)
    narrative = merge(rt, sources, "Andrew had no pets. He adopted Toby.",
                      day=date(2026, 8, 20))
    real = rt.store.deprecate

    def crash(*args: object, **kwargs: object) -> None:
        raise OSError("killed")

    monkeypatch.setattr(rt.store, "deprecate", crash)
    with pytest.raises(OSError):
        undo_merge(rt, REF, narrative.id)
    monkeypatch.setattr(rt.store, "deprecate", real)
    return sources, narrative


def test_a_crash_after_restoring_is_finished_by_running_undo_again(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    sources, narrative = _undo_killed_after_restoring(rt, monkeypatch)
    marked = deprecated_in_markdown(rt)
    assert all(marked[e.id] is None for e in sources) and marked[narrative.id] is None
    result = undo_merge(rt, REF, narrative.id)
    assert result.restored == sorted(e.id for e in sources)
    assert result.archived == [narrative.id]
    assert deprecated_in_markdown(rt)[narrative.id] == "undone"
    assert report_status(rt, narrative.id) == "undone"
    assert rt.db().execute("SELECT COUNT(*) FROM merge_journal").fetchone()[0] == 0


def test_a_crash_after_restoring_is_finished_by_the_next_start(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    """The chaos run found it: an undo killed between its patches left the narrative live
    beside its restored sources, and nothing but undoing again finished it."""
    from everos_reflect.index.sync import Indexer
    from everos_reflect.strategies import journal

    sources, narrative = _undo_killed_after_restoring(rt, monkeypatch)
    assert journal.has_pending(rt.root)

    journal.recover(rt, Indexer(rt))  # what every start, run and writing command does first

    marked = deprecated_in_markdown(rt)
    assert marked[narrative.id] == "undone"
    assert all(marked[e.id] is None for e in sources)
    assert report_status(rt, narrative.id) == "undone"
    assert not journal.has_pending(rt.root)


def test_status_counts_an_interrupted_undo_as_an_undo_not_a_merge(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    from everos_reflect.strategies.consistency import index_report

    sources = pets(rt, 2)
    narrative = merge(rt, sources, "Andrew had no pets. He adopted Toby.",
                      day=date(2026, 8, 20))

    def crash(*args: object, **kwargs: object) -> None:
        raise OSError("killed")

    monkeypatch.setattr(rt.store, "deprecate", crash)
    with pytest.raises(OSError):
        undo_merge(rt, REF, narrative.id)
    report = index_report(rt.db())
    assert (report["interrupted"], report["interrupted_undos"]) == (0, 1)


# --------------------------------------------------------------------------- the command


def invoke(root: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["undo", *args, "--root", str(root)])


def test_cli_undo_prints_what_it_restored_and_archived(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    sources = pets(rt, 2)
    narrative = merge(rt, sources, "Andrew had no pets. He adopted Toby.", day=date(2026, 8, 20))
    monkeypatch.setattr(demo_cmds, "open_runtime", lambda root: rt)
    result = invoke(rt.root, narrative.id, "--user", "u_andrew")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"undid init merge {narrative.id} (cluster {narrative.parent_id})"
    assert lines[1] == f"  restored 2 episodes: {sources[0].id}, {sources[1].id}"
    assert f"  archived {narrative.id} and 2 atomic facts (deprecated_by: undone)" in lines
    again = invoke(rt.root, narrative.id, "--user", "u_andrew", "--json")
    assert again.exit_code == 1 and "already undone" in again.stderr and again.stdout == ""


@pytest.mark.parametrize("remerge", [False, True])
def test_cli_undo_says_whether_reflection_holds_the_cluster_back(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch, remerge: bool) -> None:
    """It said "the cluster may be merged again" though, by default, Reflection holds the
    restored sources back until a new member joins (the undo hold)."""
    if remerge:
        (rt.root / "ome.toml").write_text(
            "[strategies.reflect_episodes]\nremerge_undone = true\n")
    sources = pets(rt, 2)
    narrative = merge(rt, sources, "Andrew had no pets. He adopted Toby.", day=date(2026, 8, 20))
    monkeypatch.setattr(demo_cmds, "open_runtime", lambda root: rt)
    result = invoke(rt.root, narrative.id, "--user", "u_andrew")
    assert result.exit_code == 0, result.output
    said = next(line for line in result.stdout.splitlines() if "cluster narrative" in line)
    if remerge:
        assert said == "  cluster narrative: none (the next Reflection run may merge it again)"
    else:
        assert said == ("  cluster narrative: none; Reflection holds the cluster back until a "
                        "new member joins it (remerge_undone = true merges it again)")


def test_cli_undo_json_lists_the_cascade(rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    _, n1, n2 = two_merges(rt)
    monkeypatch.setattr(demo_cmds, "open_runtime", lambda root: rt)
    refused = invoke(rt.root, n1.id, "--user", "u_andrew")
    assert refused.exit_code == 1
    assert refused.stderr.startswith(f"error: a later merge built on {n1.id}")
    result = invoke(rt.root, n1.id, "--user", "u_andrew", "--cascade", "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["merged_entry_id"] == n1.id
    assert [c["merged_entry_id"] for c in document["cascaded"]] == [n2.id]


def test_cli_undo_errors_are_one_line(root: Path) -> None:
    cases = [
        (["ep_20990101_0001", "--user", "u_andrew"], "no entry ep_20990101_0001"),
        (["nonsense", "--user", "u_andrew"], "invalid entry id"),
        (["ep_20990101_0001", "--user", "../x"], "invalid user_id"),
    ]
    for args, message in cases:
        result = invoke(root, *args)
        assert result.exit_code == 1
        assert result.stderr.count("\n") == 1 and message in result.stderr
        assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr
        assert result.stdout == ""


def test_a_refused_undo_on_a_root_never_indexed_leaves_no_index_behind(root: Path) -> None:
    # each left a system.db of empty tables, made by looking for a journal to settle
    rt = Runtime(root, SETTINGS, embedder=HashEmbedder(64))
    try:
        episode = add(rt, date(2026, 8, 10), "Andrew pets", "Andrew adopted a dog.")
    finally:
        rt.close()
    cases = [
        ([episode.id, "--user", "u_andrew"], "is not a merged narrative"),
        (["ep_20260810_0009", "--user", "u_andrew"], "no entry ep_20260810_0009"),
        (["ep_20260810_0009", "--user", "u_andrew", "--cascade"], "no entry ep_20260810_0009"),
    ]
    for args, message in cases:
        result = invoke(root, *args)
        assert result.exit_code == 1
        assert result.stderr.startswith("error: ") and message in result.stderr
    assert not (root / ".index" / "sqlite").exists()


def test_a_merge_undoes_after_its_index_was_deleted(root: Path) -> None:
    import shutil

    rt = Runtime(root, SETTINGS, embedder=HashEmbedder(64))
    try:
        sources = pets(rt, 2)
        narrative = merge(rt, sources, "Andrew had no pets. He adopted Toby.",
                          day=date(2026, 8, 20))
    finally:
        rt.close()
    shutil.rmtree(root / ".index")  # derived: safe to delete
    rt = Runtime(root, SETTINGS, embedder=HashEmbedder(64))
    try:
        result = undo_merge(rt, REF, narrative.id)
        assert result.restored == sorted(e.id for e in sources)
        assert deprecated_in_markdown(rt)[narrative.id] == "undone"
    finally:
        rt.close()


# --------------------------------------------------------------------------- the real pipeline


def test_undo_reverts_merges_written_by_the_reflection_pipeline(root: Path) -> None:
    from everos_reflect.llm.base import MergeRequest, MergeResult, ScriptedLLM
    from everos_reflect.llm.extractive import ExtractiveLLM
    from tests.reflect_fixtures import (
        ANDREW,
        PETS,
        add_episode,
        make_runtime,
        run_reflection,
        seed_pets,
    )

    def echo(req: MergeRequest) -> MergeResult:  # faithful: the coverage guard lets it through
        parts = ([req.existing.content] if req.existing else []) + [
            m.content for m in req.chronological()]
        return MergeResult("Andrew's pets", "\n\n".join(parts), provider="scripted",
                           model="echo")

    rt = make_runtime(root, ScriptedLLM([echo, echo], fallback=ExtractiveLLM()))
    sources = seed_pets(rt)
    assert run_reflection(rt, run_id="run_1").get("merged") == 1
    [n1] = [e for e in rt.store.entries(ANDREW, Kind.EPISODE) if e.parent_type == "cluster"]
    timestamp, subject, content = PETS[-1]
    late = add_episode(rt, ANDREW, timestamp.replace("09-07T10", "09-08T11"),
                       subject + " again", content + " Andrew walks both dogs daily.")
    assert run_reflection(rt, run_id="run_2").get("merged") == 1
    n2 = next(e for e in rt.store.entries(ANDREW, Kind.EPISODE)
              if e.parent_type == "cluster" and e.id != n1.id)
    assert rt.store.get(ANDREW, n1.id).deprecated_by == n2.id
    cluster_id = n1.parent_id
    service = ClusterService(rt)

    with pytest.raises(UndoRefused):
        undo_merge(rt, ANDREW, n1.id)
    update = undo_merge(rt, ANDREW, n2.id)
    assert (update.mode, update.previous_narrative, update.cluster_narrative) == (
        "update", n1.id, n1.id)
    assert update.restored == sorted([n1.id, late.id])
    assert service.cluster(cluster_id).consolidated_entry_id == n1.id

    init = undo_merge(rt, ANDREW, n1.id)
    assert init.mode == "init" and init.restored == [e.id for e in sources]
    marked = {e.id: e.deprecated_by for e in rt.store.entries(ANDREW, Kind.EPISODE)}
    assert marked == {**{e.id: None for e in [*sources, late]}, n1.id: "undone",
                      n2.id: "undone"}
    statuses = [r["status"] for r in rt.db().execute(
        "SELECT status FROM reflection_report ORDER BY created_at")]
    assert statuses == ["undone", "undone"]
    assert {m.entry_id for m in service.members(cluster_id)} == {e.id for e in [*sources, late]}
    assert service.cluster(cluster_id).consolidated_entry_id is None
    hits = search(rt, "how many pets does Andrew have", user_id="u_andrew", top_k=10)
    assert {h.id for h in hits}.isdisjoint({n1.id, n2.id})
    # Undo sticks: the same fragments are held back, until the user asks for a re-merge.
    assert run_reflection(rt, run_id="run_3") == {"held_back": 1}
    assert run_reflection(rt, run_id="run_4", remerge_undone=True).get("merged") == 1


@pytest.mark.parametrize("edit", [False, True])
def test_undo_of_a_narrative_edited_by_hand_says_the_edits_are_archived_with_it(
        root: Path, monkeypatch: pytest.MonkeyPatch, edit: bool) -> None:
    # A person added a line to the narrative, then undid the merge: the line left live memory
    # with the narrative (archived, still in its log) and nothing said so.
    from everos_reflect.llm.extractive import ExtractiveLLM
    from tests.reflect_fixtures import ANDREW, make_runtime, run_reflection, seed_pets

    rt = make_runtime(root, ExtractiveLLM())
    seed_pets(rt)
    assert run_reflection(rt).get("merged") == 1
    [narrative] = [e for e in rt.store.entries(ANDREW, Kind.EPISODE)
                   if e.parent_type == "cluster"]
    if edit:
        path = rt.store.path_for_id(ANDREW, narrative.id)
        text = path.read_text()
        assert text.count(narrative.content) == 1
        path.write_text(text.replace(narrative.content,
                                     narrative.content + " Buddy is afraid of thunder."))
    monkeypatch.setattr(demo_cmds, "open_runtime", lambda _: rt)
    said = invoke(rt.root, narrative.id, "--user", "u_andrew")
    assert said.exit_code == 0, said.output
    note = (f"  note: {narrative.id} was edited by hand after the merge; those edits are "
            "archived with it (still in its log): add them again as an Episode if they "
            "should stay live")
    assert (note in said.stdout.splitlines()) is edit
    assert rt.store.get(ANDREW, narrative.id).deprecated_by == "undone"
    shown = CliRunner().invoke(cli, ["provenance", narrative.id, "--user", "u_andrew",
                                     "--root", str(rt.root)])
    assert ("its Content was edited by hand after the merge" in shown.stdout) is edit
    assert ("recorded per sentence" in shown.stdout) is not edit


def test_undo_answers_edited_by_hand_in_its_document(root: Path) -> None:
    from everos_reflect.llm.extractive import ExtractiveLLM
    from tests.reflect_fixtures import ANDREW, make_runtime, run_reflection, seed_pets

    rt = make_runtime(root, ExtractiveLLM())
    try:
        seed_pets(rt)
        run_reflection(rt)
        [narrative] = [e for e in rt.store.entries(ANDREW, Kind.EPISODE)
                       if e.parent_type == "cluster"]
        path = rt.store.path_for_id(ANDREW, narrative.id)
        path.write_text(path.read_text().replace(narrative.content, "Rewritten by hand."))
        document = undo_merge(rt, ANDREW, narrative.id).to_dict()
    finally:
        rt.close()
    assert document["edited_by_hand"] is True and document["status"] == "ok"


def test_undo_scans_a_huge_log_in_pieces_and_refuses_one_that_mentions_the_merge(
        root: Path) -> None:
    """A log far over ``limits.max_file_bytes`` (grown by hand or hostile) was read whole to
    look for the narrative's id: the undo held it all in memory. It is now searched piece by
    piece: one that does not mention the merge is passed over, one that does stops the undo
    (its keys could not be restored) with the reason, before anything is written."""
    import tracemalloc
    from dataclasses import replace

    from everos_reflect.settings import LimitsSettings

    settings = replace(SETTINGS, limits=LimitsSettings(max_file_bytes=1 << 20))
    rt = Runtime(root, settings, embedder=HashEmbedder(64))
    try:
        narrative = merge(rt, pets(rt, 2), "Andrew had no pets. He adopted Toby.",
                          day=date(2026, 8, 20))
        huge = rt.store.log_path(REF, Kind.EPISODE, date(2026, 7, 1))
        huge.write_bytes(b"x" * (24 << 20))
        tracemalloc.start()
        try:
            result = undo_merge(rt, REF, narrative.id)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert result.archived == [narrative.id]
        assert peak < 8 << 20, f"undo peaked at {peak:,} bytes"

        second = merge(rt, [rt.store.get(REF, i) for i in result.restored],
                       "Andrew had no pets. Then Toby.", day=date(2026, 8, 21))
        with huge.open("ab") as fh:
            fh.write(f"\n  {result.restored[0]}: {second.id}\n".encode())
        before = snapshot(rt)
        with pytest.raises(EverosError, match=r"limits\.max_file_bytes"):
            undo_merge(rt, REF, second.id)
        assert snapshot(rt) == before
    finally:
        rt.close()


def _undo_within(rt: Runtime, merged_id: str, seconds: float = 10) -> object:
    """undo_merge in a thread: its outcome (result or exception); fails if it blocks."""
    outcome: list[object] = []

    def work() -> None:
        try:
            outcome.append(undo_merge(rt, REF, merged_id))
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "blocked on the FIFO"
    return outcome[0]


class _Blocked(NamedTuple):
    outcome: Any  # what the undo raised or returned
    log: Path
    narrative: Entry
    kept: bytes  # the log's bytes before it was taken away
    sources: list[Entry]


def _undo_blocked_at(rt: Runtime, log_of: Callable[[], Path],
                     block: Callable[[Path], None]) -> _Blocked:
    """Merge three pet sources, put ``block`` where the log ``log_of`` names stood (a log
    undo would restore keys in) and undo, checking that nothing was written.
    :func:`_put_back_and_undo` then checks the undo does all of it once the log is back."""
    sources = pets(rt)
    narrative = merge(rt, sources, "Andrew had no pets. He adopted Toby. He now has two dogs.",
                      day=date(2026, 8, 20))
    log = log_of()
    kept = log.read_bytes()
    log.unlink()
    block(log)
    before = snapshot(rt)
    outcome = _undo_within(rt, narrative.id)
    assert snapshot(rt) == before  # nothing written
    return _Blocked(outcome, log, narrative, kept, sources)


def _put_back_and_undo(rt: Runtime, blocked: _Blocked) -> None:
    """The person puts the log back: the undo then restores every source."""
    blocked.log.unlink()
    blocked.log.write_bytes(blocked.kept)
    result = _undo_within(rt, blocked.narrative.id)
    assert not isinstance(result, Exception), result
    assert sorted(result.restored) == sorted(e.id for e in blocked.sources)


@pytest.mark.parametrize("kind_folder", ["episodes", ".atomic_facts"])
def test_undo_refuses_a_fifo_in_place_of_a_log_it_would_patch_and_writes_nothing(
    rt: Runtime, kind_folder: str
) -> None:
    # the log of the middle source (its episode and its fact): undo would restore keys there
    blocked = _undo_blocked_at(
        rt, lambda: next((rt.store.user_dir(REF) / kind_folder).glob("*-2026-08-12.md")),
        os.mkfifo)

    said = str(blocked.outcome)
    assert isinstance(blocked.outcome, MarkdownError), said
    assert rt.store.rel(blocked.log) in said and "a FIFO (named pipe) stands where" in said
    _put_back_and_undo(rt, blocked)


def _rebuild_could_start(rt: Runtime) -> bool:
    """Whether a reindex or recluster could take the rebuild lock now (non-blocking)."""
    import fcntl

    from everos_reflect.index import rebuild

    fd = os.open(rebuild.lock_file(rt.index_dir), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def test_undo_rebuilds_the_users_clusters_under_the_rebuild_lock(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    # undo's fallback recluster of the user rewrote the clusters with no lock: a `reindex`
    # in another process could empty and refill them meanwhile.
    narrative = merge(rt, pets(rt, 2), "Andrew had no pets. He adopted Toby.",
                      day=date(2026, 8, 20))
    seen: list[bool] = []
    real = ClusterService.recluster

    def recluster(self: ClusterService, ref: UserRef | None = None) -> dict[str, int]:
        seen.append(_rebuild_could_start(rt))
        return real(self, ref)

    monkeypatch.setattr(undo_mod, "_cluster_agrees", lambda *a, **k: False)
    monkeypatch.setattr(ClusterService, "recluster", recluster)
    assert undo_merge(rt, REF, narrative.id).archived == [narrative.id]
    assert seen == [False]
    assert _rebuild_could_start(rt)  # released once the undo is done


def test_undo_during_a_rebuild_is_refused_and_changes_nothing(rt: Runtime) -> None:
    from everos_reflect.index import rebuild

    narrative = merge(rt, pets(rt, 2), "Andrew had no pets. He adopted Toby.",
                      day=date(2026, 8, 20))
    before = snapshot(rt)
    with rebuild.rebuilding(rt.index_dir), pytest.raises(StrategyBusy,
                                                         match="index is being rebuilt"):
        undo_merge(rt, REF, narrative.id)
    assert snapshot(rt) == before
    assert undo_merge(rt, REF, narrative.id).archived == [narrative.id]


def test_an_undo_its_users_disk_cannot_finish_yet_holds_up_no_other_user(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    """Recovery finishes every interrupted undo before each Reflection run: one it could not
    finish for an OSError (the user's disk still full) raised from there, and failed every
    run, for every user, for as long as it lasted. It is logged and kept now; the run goes
    on, and the undo is finished once the disk takes it."""
    from everos_reflect.strategies import journal
    from tests.reflect_fixtures import run_reflection, seed_pets

    sources = pets(rt, 2)
    narrative = merge(rt, sources, "Andrew had no pets. He adopted Toby.",
                      day=date(2026, 8, 20))
    real = rt.store.deprecate

    def full(ref: UserRef, mapping: object) -> object:
        if ref == REF:
            raise OSError(28, "No space left on device")
        return real(ref, mapping)  # type: ignore[arg-type]

    monkeypatch.setattr(rt.store, "deprecate", full)
    with pytest.raises(OSError):
        undo_merge(rt, REF, narrative.id)
    sam = UserRef.of("u_sam")
    seed_pets(rt, sam)

    counts = run_reflection(rt)

    assert counts.get("merged") == 1, counts  # sam's cluster
    assert journal.has_pending(rt.root)  # andrew's undo waits for room
    monkeypatch.setattr(rt.store, "deprecate", real)
    journal.recover(rt, Indexer(rt))
    assert deprecated_in_markdown(rt)[narrative.id] == "undone"
    assert not journal.has_pending(rt.root)


def _delete_entry(rt: Runtime, entry: Entry) -> None:
    """Cut ``entry`` out of its log by hand (its frontmatter key, if any, stays)."""
    path = rt.store.path_for_id(REF, entry.id)
    text = path.read_text()
    close = f"<!-- /entry:{entry.id} -->\n"
    start, end = text.index(f"<!-- entry:{entry.id} -->"), text.index(close) + len(close)
    path.write_text(text[:start] + text[end:])


@pytest.mark.parametrize("how", ["log", "entry"])
def test_undo_names_a_source_deleted_by_hand_and_answers_partial(
        rt: Runtime, how: str) -> None:
    # The first source's log (or its entry alone) was deleted by hand: undo said "restored 1"
    # (or listed the deleted id as restored) of a merge of two, naming nothing it could not
    # bring back, and answered ok.
    sources = pets(rt, 2)
    narrative = merge(rt, sources, "Andrew had no pets. He adopted Toby.",
                      day=date(2026, 8, 20))
    if how == "log":
        rt.store.path_for_id(REF, sources[0].id).unlink()
    else:
        _delete_entry(rt, sources[0])
    Indexer(rt).scan()

    result = undo_merge(rt, REF, narrative.id)

    assert result.restored == [sources[1].id]
    assert result.missing == [sources[0].id]
    document = result.to_dict()
    assert (document["status"], document["missing"]) == ("partial", [sources[0].id])
    assert deprecated_in_markdown(rt)[sources[1].id] is None
    assert report_status(rt, narrative.id) == "undone"


def test_undo_of_a_deleted_narrative_names_a_deleted_source_from_the_audit(
        rt: Runtime) -> None:
    sources = pets(rt, 3)
    narrative = merge(rt, sources, "Andrew had no pets. He adopted Toby and Buddy.",
                      day=date(2026, 8, 20))
    _delete_entry(rt, narrative)
    rt.store.path_for_id(REF, sources[2].id).unlink()
    Indexer(rt).scan()

    result = undo_merge(rt, REF, narrative.id)

    assert result.restored == [sources[0].id, sources[1].id]
    assert result.missing == [sources[2].id] and result.status == "partial"


def test_an_undo_that_restores_every_source_answers_ok(rt: Runtime) -> None:
    sources = pets(rt, 2)
    narrative = merge(rt, sources, "Andrew had no pets. He adopted Toby.",
                      day=date(2026, 8, 20))
    document = undo_merge(rt, REF, narrative.id).to_dict()
    assert (document["status"], document["missing"]) == ("ok", [])


def test_cli_undo_names_a_source_it_could_not_restore_and_exits_3(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    sources = pets(rt, 2)
    narrative = merge(rt, sources, "Andrew had no pets. He adopted Toby.", day=date(2026, 8, 20))
    rt.store.path_for_id(REF, sources[0].id).unlink()
    Indexer(rt).scan()
    monkeypatch.setattr(demo_cmds, "open_runtime", lambda root: rt)

    result = invoke(rt.root, narrative.id, "--user", "u_andrew")

    assert result.exit_code == 3, result.output
    lines = result.stdout.splitlines()
    assert lines[1] == f"  restored 1 episode: {sources[1].id}"
    assert lines[-1] == (f"  could not restore 1 source: {sources[0].id} (no longer in the "
                         "logs: deleted by hand)")


def test_api_undo_answers_partial_naming_the_source_it_could_not_restore(
        rt: Runtime) -> None:
    sources = pets(rt, 2)
    narrative = merge(rt, sources, "Andrew had no pets. He adopted Toby.", day=date(2026, 8, 20))
    rt.store.path_for_id(REF, sources[0].id).unlink()
    Indexer(rt).scan()
    resp = ApiClient(rt)("POST", "/api/v1/ome/undo",
                         json={"entry_id": narrative.id, "user_id": "u_andrew"})
    assert resp.status_code == 200, resp.text
    data = resp.json()["data"]
    assert (data["status"], data["restored"], data["missing"]) == (
        "partial", [sources[1].id], [sources[0].id])


@pytest.mark.parametrize(("link", "said"), [
    ("gone.md", "a symlink to {folder}/gone.md, which does not exist, stands where this log "
                "goes"),
    ("episode-2026-08-12.md", "a symlink loop stands where this log goes"),
], ids=["dangling", "loop"])
def test_undo_names_a_broken_link_in_place_of_a_log_it_would_patch_and_writes_nothing(
        rt: Runtime, link: str, said: str) -> None:
    """It said "not a regular file (a FIFO, device or folder)" of a link to a file gone."""
    blocked = _undo_blocked_at(
        rt, lambda: rt.store.user_dir(REF) / "episodes" / "episode-2026-08-12.md",
        lambda log: log.symlink_to(link))

    assert isinstance(blocked.outcome, MarkdownError), blocked.outcome
    log = blocked.log
    assert str(blocked.outcome) == (
        f"{rt.store.rel(log)}: cannot undo {blocked.narrative.id}: "
        f"{said.format(folder=rt.store.rel(log.parent))}; move it away or put this log back, "
        "then undo again")
    _put_back_and_undo(rt, blocked)
