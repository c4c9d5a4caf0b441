"""A daily log emptied (``> log``, a save cut short by a full disk: no bytes, or blank lines
alone) holds no entry: its entries leave the index, as a ``reindex`` reads it, and
``status`` and ``lint`` say the file is empty. Kept as a log "that cannot be parsed", they
stayed searchable and clustered for good with no text behind them anywhere, while a reindex
dropped them. An editor that empties a log and writes it anew is waited for: read between
the two, nothing is dropped."""

from __future__ import annotations

import os
from datetime import date
from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.lint import lint_report
from everos_reflect.markdown import settling
from everos_reflect.markdown.parser import EMPTIED
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.status import status_document
from tests.sync_fixtures import indexed_ids
from tests.waiting import scripted_pauses

REF = UserRef.of("u_ann")


def _two_logs(rt: Runtime) -> tuple[Path, str, set[str]]:
    kept = rt.store.append(REF, Kind.EPISODE, {"timestamp": "2026-10-11T09:00:00+00:00",
                                               "parent_type": "memcell"},
                           {"Subject": "Walk", "Content": "A long walk."},
                           day=date(2026, 10, 11))
    ids = {rt.store.append(REF, Kind.EPISODE, {"timestamp": f"2026-10-12T0{n}:00:00+00:00",
                                             "parent_type": "memcell"},
                           {"Subject": "Tea", "Content": f"Green tea {n}."},
                           day=date(2026, 10, 12)).id for n in (1, 2)}
    path = rt.store.log_path(REF, Kind.EPISODE, date(2026, 10, 12))
    Indexer(rt).scan()
    assert indexed_ids(rt) == ids | {kept.id}
    return path, kept.id, ids


def _aged(path: Path) -> None:
    when = path.stat().st_mtime - 3600
    os.utime(path, (when, when))


@pytest.mark.parametrize("left", [b"", b"\n\n  \n"])
def test_an_emptied_log_leaves_the_index_and_is_said_empty(rt: Runtime, left: bytes) -> None:
    path, kept, _ = _two_logs(rt)
    path.write_bytes(left)
    _aged(path)

    result = Indexer(rt).sync_path(path)

    assert result.deleted == 2 and not result.removed
    assert indexed_ids(rt) == {kept}
    assert path.read_bytes() == left  # nothing written to it
    rel = rt.store.rel(path)
    [bad] = [f for f in status_document(rt)["files_with_problems"] if f["file"] == rel]
    assert bad["problems"] == [f"1: {EMPTIED}"]
    assert [(p["file"], p["message"]) for p in lint_report(rt.root)["problems"]] == [
        (rel, EMPTIED)]
    Indexer(rt).reindex()
    assert indexed_ids(rt) == {kept}


def test_a_log_emptied_and_written_anew_while_read_keeps_its_entries(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    path, kept, ids = _two_logs(rt)
    whole = path.read_bytes()
    path.write_bytes(b"")  # an editor saving in place: emptied, then written
    pauses = scripted_pauses(monkeypatch, [lambda: path.write_bytes(whole)])

    result = Indexer(rt).sync_path(path)

    assert pauses == [settling.SETTLE_SECONDS]
    assert result.deleted == 0
    assert indexed_ids(rt) == ids | {kept}


def test_an_add_to_an_emptied_log_writes_a_new_log_there(rt: Runtime) -> None:
    path, kept, _ = _two_logs(rt)
    path.write_bytes(b"")
    added = rt.store.append(REF, Kind.EPISODE, {"timestamp": "2026-10-12T10:00:00+00:00"},
                            {"Subject": "Cake", "Content": "Lemon cake."},
                            day=date(2026, 10, 12))
    Indexer(rt).sync_path(path)
    assert added.id not in {"ep_20261012_0001", "ep_20261012_0002"}  # never an id reused
    assert indexed_ids(rt) == {kept, added.id}
