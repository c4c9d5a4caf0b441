"""A merge interrupted by a crash, then its user's folder renamed or removed by hand, before the
next start recovers it (SPEC §5 crash safety with hand edits in between).

Recovery used to finish the merge under the old user's name: past the point of no return it
wrote a new folder for that user (a narrative and facts whose sources were elsewhere, left
live), and before it the narrative that moved with the folder stayed live beside its live
sources, so the next run merged them again into a second narrative.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.markdown import settling
from everos_reflect.markdown.parser import parse_log
from everos_reflect.model import Entry, Kind, UserRef
from everos_reflect.runtime import Runtime
from tests.reflect_fixtures import ANDREW, reports, run_reflection
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables
from tests.test_reflect_crash import STEPS, crashed, restart

#: single-threaded crash simulations: nothing else writes the logs (conftest.py)
pytestmark = pytest.mark.usefixtures("settle_at_once")

BOB = UserRef.of("u_bob")


def users_folder(root: Path) -> Path:
    return root / "default_app" / "default_project" / "users"


def entries_of(rt: Runtime, ref: UserRef) -> dict[str, Entry]:
    """Every entry of ``ref`` parsed from Markdown, each file without an error (a moved log
    whose front matter still names the old user is read as its folder's, with a warning)."""
    found: dict[str, Entry] = {}
    for path in rt.store.iter_files(ref):
        log = parse_log(path.read_text("utf-8"), str(path))
        assert log.ok and not [d for d in log.diagnostics if d.severity == "error"], path
        found.update((e.id, e) for e in log.entries)
    return found


def live_narratives(entries: dict[str, Entry]) -> list[Entry]:
    return [e for e in entries.values() if e.parent_type == "cluster" and e.deprecated_by is None]


@pytest.mark.parametrize("step", STEPS)
def test_folder_renamed_after_a_crash_finishes_the_merge_in_the_new_folder(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    rt, original = crashed(root, monkeypatch, step)
    monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 0)  # renamed long after the writes
    shutil.move(users_folder(root) / "u_andrew", users_folder(root) / "u_bob")

    run_reflection(restart(root))

    rt = restart(root)
    assert not (users_folder(root) / "u_andrew").exists(), "recovery wrote the old user's folder"
    entries = entries_of(rt, BOB)
    assert original <= set(entries), "an entry was lost"
    live = live_narratives(entries)
    assert len(live) == 1, [e.id for e in live]
    for source in live[0].sources:
        assert entries[source].deprecated_by == live[0].id, source
    assert rt.db().execute("SELECT COUNT(*) FROM merge_journal").fetchone()[0] == 0
    # finished, not redone: before its narrative was written (planned), its unchanged sources
    # told where it went (it was abandoned under u_andrew, a user nobody has, and redone)
    assert [(r["owner_id"], r["status"]) for r in reports(rt)] == [("u_bob", "ok")]
    Indexer(rt).scan()  # the index as a rebuild leaves it
    assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "rebuilt")


@pytest.mark.parametrize("step", STEPS)
def test_folder_removed_after_a_crash_writes_nothing_for_the_merge(
    root: Path, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    rt, _ = crashed(root, monkeypatch, step)
    shutil.rmtree(users_folder(root) / "u_andrew")

    counts = run_reflection(restart(root))

    rt = restart(root)
    assert not (users_folder(root) / "u_andrew").exists(), "recovery wrote the old user's folder"
    assert counts.get("recovered_abandoned") == 1, counts
    (row,) = reports(rt)
    assert row["status"] == "abandoned"
    assert "the folder of user u_andrew was removed or renamed by hand" in row["error"]
    assert rt.db().execute("SELECT COUNT(*) FROM merge_journal").fetchone()[0] == 0


@pytest.mark.parametrize("step", STEPS)
def test_folder_renamed_then_made_again_by_a_new_episode_finishes_the_merge_where_it_went(
    root: Path, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    # The application goes on appending to u_andrew's log after the rename: recovery saw the
    # folder there and settled the merge in it: a narrative of sources it does not hold was
    # written there (then merged with the new Episode), or the merge abandoned there while
    # the moved narrative stayed live beside a second merge of the same sources in u_bob.
    rt, original = crashed(root, monkeypatch, step)
    monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 0)
    shutil.move(users_folder(root) / "u_andrew", users_folder(root) / "u_bob")
    new = rt.store.append(ANDREW, Kind.EPISODE, {"timestamp": "2026-12-01T10:00:00+00:00",
                                                 "parent_type": "memcell"},
                          {"Subject": "New job", "Content": "Andrew started a new job."})

    run_reflection(restart(root))

    rt = restart(root)
    assert {i: e.deprecated_by for i, e in entries_of(rt, ANDREW).items()} == {new.id: None}
    entries = entries_of(rt, BOB)
    assert original <= set(entries), "an entry was lost"
    [live] = live_narratives(entries)
    for source in live.sources:
        assert entries[source].deprecated_by == live.id, source
    assert [(r["owner_id"], r["status"]) for r in reports(rt)] == [("u_bob", "ok")]
    assert rt.db().execute("SELECT COUNT(*) FROM merge_journal").fetchone()[0] == 0
