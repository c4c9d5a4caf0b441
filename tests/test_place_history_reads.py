"""An indexed batch's Episodes are read once for the history they may hold.

Before COMMIT the service looks for the Episodes archived toward each Episode a batch
placed (archived by hand toward an id before it was indexed: history of its cluster,
``ClusterService._place_history``). It also read the batch's Episodes themselves, to find
the archived ones among them, though the batch knows which are archived (it retires them,
and they are noted there): two statements per user per transaction (per 500 ids), each a
text per count of ids (compiled again for most users of a LoCoMo batch). Now one statement,
one text (the ids as a JSON array)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from everos_reflect.clustering.service import ClusterService
from everos_reflect.settings import ClusteringSettings
from tests.test_cluster_service import REF, FakeRuntime, episode, store_rows
from tests.test_cluster_version_join import DIM, T0, index

HISTORY_READ = "SELECT id, ts, deprecated_by, text_hash FROM entries"


@pytest.fixture
def rt(tmp_path: Path) -> FakeRuntime:
    return FakeRuntime(tmp_path, ClusteringSettings())


def _rows(count: int, first: int = 0) -> list[tuple[str, str, object, np.ndarray]]:
    vec = np.zeros(DIM, dtype=np.float32)
    vec[1] = 1.0
    return [(f"ep_{(T0 + timedelta(minutes=n)):%Y%m%d}_{n + 1:04d}", f"Note {n}.",
             T0 + timedelta(minutes=n), vec) for n in range(first, first + count)]


def _history_reads(rt: FakeRuntime) -> list[str]:
    asked: list[str] = []
    rt.db().set_trace_callback(lambda sql: asked.append(sql) if sql.startswith(HISTORY_READ)
                               else None)
    return asked


@pytest.mark.parametrize("count", [5, 70, 600])
def test_an_indexed_batch_is_read_once_for_its_history(rt: FakeRuntime, count: int) -> None:
    asked = _history_reads(rt)
    index(rt, *_rows(count))
    assert len(asked) == 1  # was two per 500 ids


def test_an_episode_archived_toward_one_indexed_later_is_its_history(rt: FakeRuntime) -> None:
    [(later, _, at, vec)] = _rows(1, first=3)
    # archived by hand toward an id no Episode held yet, then that Episode is indexed
    gone = episode("ep_20260101_0001", "An old note.", T0 - timedelta(days=1),
                   deprecated_by=later)
    store_rows(rt, [gone], [vec])
    narrative = episode(later, "The notes so far.", at, parent_type="cluster")
    store_rows(rt, [narrative], [vec])
    ClusterService(rt).on_entries_indexed(REF, [narrative], {later: vec})
    assert [(r[0], r[1]) for r in rt.db().execute(
        "SELECT entry_id, deprecated_by FROM cluster_members WHERE deprecated_by IS NOT NULL"
    )] == [(gone.id, later)]
