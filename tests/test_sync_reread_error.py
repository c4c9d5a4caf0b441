"""A log read again after a settle wait that cannot be read at that moment (permissions
flipped for an instant, an editor's swap, a network share's hiccup) is retried once it
stands still, as a log that never stood still is: before, the sync dropped it without a
word (no result, ``sync_path`` answering "unchanged"), and nothing synced it until the next
edit or the reconcile scan."""

from __future__ import annotations

import errno
import logging
from datetime import date
from pathlib import Path
from typing import Any

import pytest

import everos_reflect.index.sync as sync_module
from everos_reflect.index.sync import Indexer
from everos_reflect.index.watcher import FsEvent, Watcher
from everos_reflect.model import UserRef
from everos_reflect.runtime import Runtime
from tests.sync_fixtures import indexed_ids, two_indexed_episodes
from tests.waiting import scripted_pauses, wait_for

REF = UserRef.of("u_ann")
DAY = date(2026, 10, 12)


def _two(rt: Runtime) -> tuple[Path, str, str]:
    """A log of two indexed Episodes."""
    return two_indexed_episodes(rt, REF)


def _delete(path: Path, entry_id: str) -> None:
    """``entry_id``, the log's last entry, deleted by hand: a deletion in a log written this
    instant, so the sync waits for it to stand still and reads it again."""
    text = path.read_text("utf-8")
    path.write_text(text[: text.index(f"<!-- entry:{entry_id} -->")], "utf-8")


def _refused_reads(monkeypatch: pytest.MonkeyPatch, path: Path) -> list[int]:
    """Reads of ``path`` by the indexer refused (EACCES) while the returned list is
    non-empty (each refusal pops one)."""
    refusals: list[int] = []
    real = sync_module.open_regular

    def open_log(target: Any, *args: Any, **kwargs: Any) -> Any:
        if refusals and Path(target) == path:
            refusals.pop()
            raise PermissionError(errno.EACCES, "Permission denied", str(target))
        return real(target, *args, **kwargs)

    monkeypatch.setattr(sync_module, "open_regular", open_log)
    return refusals


def test_a_log_unreadable_when_read_again_is_said_moving_and_keeps_its_entries(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    path, first, second = _two(rt)
    _delete(path, second)
    refusals = _refused_reads(monkeypatch, path)

    def writer_moves_it_and_flips_its_permissions() -> None:
        with path.open("a", encoding="utf-8") as out:
            out.write("\n")
        refusals.append(1)

    scripted_pauses(monkeypatch, [writer_moves_it_and_flips_its_permissions])
    result = Indexer(rt).sync_path(path)

    assert result.moving and not result.unchanged
    assert indexed_ids(rt) == {first, second}  # the deletion waits for a log standing still
    result = Indexer(rt).sync_path(path)  # readable and still now
    assert not result.moving and result.deleted == 1
    assert indexed_ids(rt) == {first}


def test_the_watcher_syncs_it_once_readable_without_another_edit(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    path, first, second = _two(rt)
    with Watcher(rt, debounce=0.05, reconcile_interval=0, optimize_interval=0) as watcher:
        assert wait_for(lambda: watcher.passes > 0)
        # the writer's own events are dropped: only the retry can bring the deletion in
        monkeypatch.setattr(watcher._collector, "_sink", lambda event: None)
        refusals = _refused_reads(monkeypatch, path)

        def writer_moves_it_and_flips_its_permissions() -> None:
            with path.open("a", encoding="utf-8") as out:
                out.write("\n")
            refusals.append(1)

        scripted_pauses(monkeypatch, [writer_moves_it_and_flips_its_permissions])
        _delete(path, second)
        watcher._on_event(FsEvent("modified", str(path)))  # the hand edit's own event
        assert wait_for(lambda: indexed_ids(rt) == {first})
    assert "Permission denied" in caplog.text
