"""A write killed before its rename (``kill -9``, a power cut) leaves its temp file, a whole
copy of the log, beside it: ``.episode-….md.<12 hex>.tmp``. Nothing removed them, and
nothing said they were there (``lint`` and ``status`` skip them; ``git status`` lists each).
The next write of the log removes those old enough to be no live write's, under the log's
lock, and says so; the log loses nothing (a write is not made until its rename)."""

from __future__ import annotations

import logging
import os
import time
from datetime import date

import pytest

from everos_reflect.markdown import store as store_module
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime

REF = UserRef.of("u_ann")
DAY = date(2026, 10, 12)


def _add(rt: Runtime, hour: int) -> str:
    return rt.store.append(REF, Kind.EPISODE, {"timestamp": f"2026-10-12T{hour:02d}:00:00Z"},
                           {"Subject": "Tea", "Content": f"Tea at {hour}."}, day=DAY).id


def test_the_next_write_removes_what_a_killed_write_left_and_says_so(
        rt: Runtime, caplog: pytest.LogCaptureFixture) -> None:
    first = _add(rt, 9)
    path = rt.store.path_for_id(REF, first)
    old = time.time() - store_module.LEFTOVER_SECONDS - 5
    left = path.with_name(f".{path.name}.0123456789ab.tmp")  # a killed write's
    left.write_bytes(path.read_bytes() + b"<!-- half an entry")
    os.utime(left, (old, old))
    young = path.with_name(f".{path.name}.ba9876543210.tmp")  # a live write's, maybe
    young.write_bytes(b"x")
    others = [path.with_name(f".{path.name}.swp"), path.with_name(f".{path.name}.notatag.tmp"),
              path.with_name(".episode-2026-10-13.md.0123456789ab.tmp")]
    for other in others:
        other.write_bytes(b"a person's")
        os.utime(other, (old, old))
    caplog.set_level(logging.WARNING, logger=store_module.__name__)

    second = _add(rt, 10)

    assert not left.exists() and young.exists() and all(o.exists() for o in others)
    assert f"removed {left}: a copy of {path.name} an interrupted write left" in caplog.text
    assert [e.id for e in rt.store.read(path).entries] == [first, second]


def test_a_folder_is_listed_once_for_many_writes(rt: Runtime,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Listed at every write, a folder of 3,650 daily logs cost 1.4 ms a write
    (bench/leftover_listing.py): it is listed at most once a minute."""
    path = rt.store.path_for_id(REF, _add(rt, 9))
    listed: list[str] = []
    real = os.listdir

    def listdir(folder: str) -> list[str]:
        if os.fspath(folder) == os.fspath(path.parent):
            listed.append(folder)
        return real(folder)

    monkeypatch.setattr(os, "listdir", listdir)
    for hour in range(10, 20):
        _add(rt, hour)

    assert len(listed) == 1


class _Later:
    """The ``time`` module ``seconds`` later (wall clock and monotonic clock alike)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def time(self) -> float:
        return time.time() + self.seconds

    def monotonic(self) -> float:
        return time.monotonic() + self.seconds

    def __getattr__(self, name: str) -> object:
        return getattr(time, name)


def test_a_write_killed_after_the_folder_was_listed_is_removed_once_a_minute_old(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    first = _add(rt, 9)
    path = rt.store.path_for_id(REF, first)
    _add(rt, 10)  # the folder is listed: no temp file there yet
    left = path.with_name(f".{path.name}.0123456789ab.tmp")  # a write killed just now
    left.write_bytes(path.read_bytes() + b"<!-- half an entry")
    _add(rt, 11)
    assert left.exists()  # maybe a live write's
    caplog.set_level(logging.WARNING, logger=store_module.__name__)

    monkeypatch.setattr(store_module, "time", _Later(store_module.LEFTOVER_SECONDS + 5))
    _add(rt, 12)

    assert not left.exists()
    assert f"removed {left}: a copy of {path.name} an interrupted write left" in caplog.text


def test_a_scan_that_sees_a_temp_file_has_the_next_write_look_again(
        rt: Runtime, caplog: pytest.LogCaptureFixture) -> None:
    """An old temp file put back after the folder was listed (a backup restored with its
    times) is removed by the next write once a scan saw it, not a minute later."""
    from everos_reflect.index.sync import Indexer

    first = _add(rt, 9)
    path = rt.store.path_for_id(REF, first)
    _add(rt, 10)  # listed
    left = path.with_name(f".{path.name}.0123456789ab.tmp")
    left.write_bytes(path.read_bytes())
    old = time.time() - store_module.LEFTOVER_SECONDS - 5
    os.utime(left, (old, old))
    caplog.set_level(logging.WARNING, logger=store_module.__name__)

    Indexer(rt).scan()
    second = _add(rt, 11)

    assert not left.exists() and f"removed {left}" in caplog.text
    assert [e.id for e in rt.store.read(path).entries][-1] == second
