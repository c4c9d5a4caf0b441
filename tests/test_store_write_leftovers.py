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
