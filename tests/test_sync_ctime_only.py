"""A scan after every log's ctime alone moved (a ``cp -al`` backup beside the root, a ``chmod``
or ``chown`` of every log) hashes each log's bytes and plans none whose bytes are those
stored: each was read, hashed and planned in full (bench/ctime_rescan.py: 2.5 s for 3,650
logs of one user after each backup). A real change is never missed: bytes other than those
stored (a same-size copy with the mtime kept), a log made unreadable, a hard link that makes
one log another's alias still go through the full sync."""

from __future__ import annotations

import os
import subprocess
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.markdown import settling
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from tests.sync_fixtures import indexed_ids

REF = UserRef.of("u_ann")

pytestmark = pytest.mark.usefixtures("settle_at_once")


def _logs(rt: Runtime, days: int) -> list[Path]:
    for d in range(1, days + 1):
        rt.store.append(REF, Kind.EPISODE, {"timestamp": f"2026-10-{d:02d}T09:00:00+00:00"},
                        {"Subject": "Tea", "Content": f"Green tea on day {d}."},
                        day=date(2026, 10, d))
    Indexer(rt).scan()
    return sorted(rt.store.iter_files(REF))


def _planned(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The logs the full sync plans from now on (their names)."""
    seen: list[str] = []
    planned = Indexer._planned

    def counting(self: Indexer, path: Path, tries: int) -> Any:
        seen.append(path.name)
        return planned(self, path, tries)

    monkeypatch.setattr(Indexer, "_planned", counting)
    return seen


@pytest.fixture
def standing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every log stands still at once: not racy, not in flux."""
    monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 0)


@pytest.mark.parametrize("how", ["chmod", "cp -al"])
def test_a_scan_after_every_log_s_ctime_moved_plans_none_and_keeps_them_all(
        rt: Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, standing: None,
        how: str) -> None:
    logs = _logs(rt, 5)
    before = indexed_ids(rt)
    Indexer(rt).scan()  # past its racy window: the stored reads count
    if how == "chmod":
        for path in logs:
            os.chmod(path, os.stat(path).st_mode)
    else:
        subprocess.run(["cp", "-al", str(rt.root), str(tmp_path / "backup")], check=True)
    planned = _planned(monkeypatch)

    report = Indexer(rt).scan()

    assert planned == [] and indexed_ids(rt) == before
    assert report.files_synced == report.files_unchanged == 5
    again = Indexer(rt).scan()  # the new ctimes are recorded: nothing to do
    assert again.files_synced == 0 and planned == []


def test_same_size_bytes_with_the_mtime_kept_are_synced_in_full(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch, standing: None) -> None:
    """``cp -p`` of an edited copy of the same size: the mtime and size as stored, the ctime
    and the bytes moved."""
    [path] = _logs(rt, 1)
    Indexer(rt).scan()
    st = os.stat(path)
    edited = path.read_text().replace("Green tea", "Black tea")
    assert len(edited.encode()) == st.st_size
    path.write_text(edited)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    planned = _planned(monkeypatch)

    Indexer(rt).scan()

    assert planned == [path.name]
    [content] = [r[0] for r in rt.db().execute("SELECT text FROM entries")]
    assert "Black tea" in content


def test_a_log_hard_linked_as_another_inside_the_root_is_synced_in_full(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch, standing: None) -> None:
    """A hard link of a log as another user's log of the same day: the same file twice in
    the root, read under its first name and refused under the other, as before."""
    [path] = _logs(rt, 1)
    Indexer(rt).scan()
    other = rt.store.log_path(UserRef.of("u_bob"), Kind.EPISODE, date(2026, 10, 1))
    other.parent.mkdir(parents=True)
    os.link(path, other)
    planned = _planned(monkeypatch)

    report = Indexer(rt).scan()

    assert sorted(planned) == [path.name, other.name]
    assert len(report.problems) == 1 and len(indexed_ids(rt)) == 1

