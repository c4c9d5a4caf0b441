"""Which entries were narratives is told to clustering exactly on a change handed over again
after a kill, too (:meth:`Indexer._replay`). The publish note held no such fact, so the replay
read the member rows, a rule of thumb: a save that deleted a member of a narrative's cluster
and took that narrative's ``parent_type`` out, killed after the index was written and before
clustering was told, was handed over with the deletion first, which recomputed the cluster
and gave the former narrative a similarity; read as an unchanged member, it stayed in the
cluster its ``parent_id`` had named, where a ``reindex`` places it by the rule. The note now
keeps the ids (migration 0030), and a :class:`events.ChangeSet` made without them says "not
known" (None), never "none of them"."""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.index import events
from everos_reflect.index.db import MIGRATIONS
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.model import Kind
from everos_reflect.runtime import Runtime
from tests.reflect_fixtures import make_runtime
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables
from tests.test_former_narrative_exact_as_reindex import (
    BOB,
    CID,
    delete,
    member_of,
    two_narratives,
)
from tests.test_narrative_unparented_by_hand_as_reindex import unparent

pytestmark = pytest.mark.usefixtures("settle_at_once")


def notes(rt: Runtime) -> list[str]:
    return [r[0] for r in rt.db().execute("SELECT path FROM publish_note ORDER BY note_id")]


def test_a_narrative_made_plain_beside_a_deletion_replayed_after_a_kill_is_placed_as_a_reindex(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    try:
        older, member = two_narratives(rt, 2)
        Indexer(rt).scan()
        assert member_of(rt, member.id) == member_of(rt, older.id) == CID
        path = delete(rt, member.id)
        assert unparent(rt, BOB, older.id) == path  # one save: both edits in one log

        with monkeypatch.context() as m:  # killed after the index is written, before the
            m.setattr(Indexer, "_publish", lambda self, jobs, notes: None)  # subscribers ran
            Indexer(rt).sync_path(path)
        assert notes(rt) == [rt.store.rel(path)]
        assert member_of(rt, older.id) == CID  # nobody told clustering yet

        Indexer(rt).scan()  # the next start hands the change over

        assert notes(rt) == []
        assert member_of(rt, older.id) != CID  # one of its own, as a reindex places it
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "after")
    finally:
        rt.close()


def test_a_note_from_before_the_migration_replays_with_the_rows_read(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A note written before the index kept the ids (NULL) is handed over as "not known",
    not as "none of them": clustering reads the rows, as before."""
    rt = make_runtime(root, ExtractiveLLM())
    try:
        older, _ = two_narratives(rt, 1)
        Indexer(rt).scan()
        path = unparent(rt, BOB, older.id)
        with monkeypatch.context() as m:
            m.setattr(Indexer, "_publish", lambda self, jobs, notes: None)
            Indexer(rt).sync_path(path)
        rt.db().execute("UPDATE publish_note SET unparented = NULL")
        rt.db().commit()
        told: list[events.ChangeSet] = []
        real = events.publish_many

        def noted(runtime: Runtime, changes: list[events.ChangeSet], **kw: object) -> set[Path]:
            told.extend(changes)
            return real(runtime, changes, **kw)  # type: ignore[arg-type]

        monkeypatch.setattr(events, "publish_many", noted)
        Indexer(rt).scan()

        assert [(c.path, c.unparented) for c in told] == [(rt.store.rel(path), None)]
        assert member_of(rt, older.id) != CID  # the rows told it too: no deletion beside it
    finally:
        rt.close()


def test_a_change_set_made_without_the_ids_says_not_known() -> None:
    change = events.ChangeSet(BOB, Kind.EPISODE, "x.md")
    assert change.unparented is None


def test_a_note_keeps_the_ids(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert "0030_publish_notes_unparented" in [name for name, _ in MIGRATIONS]
    rt = make_runtime(root, ExtractiveLLM())
    try:
        older, _ = two_narratives(rt, 1)
        Indexer(rt).scan()
        path = unparent(rt, BOB, older.id)
        monkeypatch.setattr(Indexer, "_publish", lambda self, jobs, notes: None)
        Indexer(rt).sync_path(path)
        assert [tuple(r) for r in rt.db().execute("SELECT path, unparented FROM publish_note")
                ] == [(rt.store.rel(path), f'["{older.id}"]')]
    finally:
        rt.close()
