"""A provenance check handed a change after the root was moved away.

A sync's change subscribers run after its rows are written; a root moved away in between
(the watcher's root-moved test, seen under load) had the provenance check take its lock under
the old path, and the lock's folders, made with their parents, made the root again: an empty
folder holding `.index/locks/provenance.lock`, which other commands took for the root."""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.embedding import HashEmbedder
from everos_reflect.index import events
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.model import Kind
from everos_reflect.strategies.provenance import on_changes
from tests.reflect_fixtures import ANDREW, add_episode, make_runtime


def test_a_check_after_the_root_moved_away_waits_and_makes_no_root_again(root: Path) -> None:
    rt = make_runtime(root, ExtractiveLLM(), embedder=HashEmbedder(16))
    try:
        entry = add_episode(rt, ANDREW, "2026-08-01T10:00:00+00:00", "Walk", "A walk.")
        change = events.ChangeSet(ANDREW, Kind.EPISODE,
                                  rt.store.rel(rt.store.path_for_id(ANDREW, entry.id)), [entry])
        away = root.with_name(root.name + "-away")
        root.rename(away)
        with pytest.raises(events.Deferred, match="was moved or deleted"):
            on_changes(rt, [change])
        assert not root.exists()
        away.rename(root)
        assert on_changes(rt, [change]) == []  # back: checked (no derived records to mark)
    finally:
        rt.close()
