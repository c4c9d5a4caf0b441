"""The store remembers the logs it wrote itself (a write to one need not wait for it to stand
still), but only while that matters: a log written longer ago than the just-written window is
never waited for, so remembering it only grew a long-running ``serve``'s memory by one row per
log it ever wrote."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import pytest

from everos_reflect.markdown import settling, store
from everos_reflect.markdown.store import MarkdownStore
from everos_reflect.model import Kind, UserRef

ALICE = UserRef.of("alice")


def _write_days(md: MarkdownStore, days: int) -> None:
    start = date(2026, 1, 1)
    for n in range(days):
        day = start + timedelta(days=n)
        md.append(ALICE, Kind.EPISODE, {"timestamp": f"{day.isoformat()}T09:00:00+00:00"},
                  {"Subject": f"Day {n}", "Content": f"Alice did thing {n}."}, day=day)


def test_logs_written_long_ago_are_forgotten(root: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store, "_STILL_KEPT", 4, raising=False)
    monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 0)  # every write is settled at once
    md = MarkdownStore(root)
    _write_days(md, 30)
    assert len(md._still) < 8  # one row per log written: 30


def test_logs_just_written_are_kept(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store, "_STILL_KEPT", 4, raising=False)
    monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 3600 * 10**9)  # all written just now
    md = MarkdownStore(root)
    _write_days(md, 30)
    assert len(md._still) == 30
