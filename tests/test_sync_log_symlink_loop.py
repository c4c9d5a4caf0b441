"""A daily log replaced by a symlink loop (``ln -sf`` of the log onto itself, two logs linked
to each other) is no log, to a sync as to a scan's listing and a ``reindex``: its entries
leave the index, ``lint`` names the loop, and a reconcile scan says nothing more of it. The
sync kept them ("cannot read ... Too many levels of symbolic links") while a reindex dropped
them, and warned again at every scan."""

from __future__ import annotations

import logging
import os
from datetime import date
from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.lint import lint_report
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from tests.sync_fixtures import indexed_ids

REF = UserRef.of("u_ann")


def _old(path: Path) -> None:
    """Stamped an hour ago (no writer at work: no settle wait)."""
    when = path.stat(follow_symlinks=False).st_mtime - 3600
    os.utime(path, (when, when), follow_symlinks=False)
    os.utime(path.parent, (when, when))


@pytest.mark.parametrize("links", ["itself", "each other"])
def test_a_log_become_a_symlink_loop_leaves_the_index_as_a_reindex_sees_it(
        rt: Runtime, caplog: pytest.LogCaptureFixture, links: str) -> None:
    kept = rt.store.append(REF, Kind.EPISODE, {"timestamp": "2026-10-11T09:00:00+00:00"},
                           {"Subject": "Walk", "Content": "A long walk."},
                           day=date(2026, 10, 11))
    gone = rt.store.append(REF, Kind.EPISODE, {"timestamp": "2026-10-12T09:00:00+00:00"},
                           {"Subject": "Tea", "Content": "Green tea."}, day=date(2026, 10, 12))
    path = rt.store.path_for_id(REF, gone.id)
    Indexer(rt).scan()
    assert indexed_ids(rt) == {kept.id, gone.id}
    path.unlink()
    if links == "itself":
        path.symlink_to(path.name)
    else:
        other = path.with_name("episode-2026-10-13.md")
        other.symlink_to(path.name)
        path.symlink_to(other.name)
    _old(path)

    caplog.set_level(logging.WARNING, logger="everos_reflect.index.sync")
    result = Indexer(rt).sync_path(path)
    assert result.removed and result.deleted == 1 and not result.not_read
    assert indexed_ids(rt) == {kept.id}
    assert Indexer(rt).scan().logs_indexed == 0
    assert "cannot read" not in caplog.text
    Indexer(rt).reindex()
    assert indexed_ids(rt) == {kept.id}
    assert any("symlink loop where a daily log goes" in p["message"]
               for p in lint_report(rt.root)["problems"])
