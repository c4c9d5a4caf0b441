"""An index flush reads each Episode's epoch once: ``on_entries_indexed_many`` sorts a
flush's files by it to merge one user's consecutive files, and hands the epochs it read to
``on_entries_indexed``, which read them all a second time."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from everos_reflect.clustering import service as service_mod
from everos_reflect.clustering.service import ClusterService
from everos_reflect.model import UserRef

from .test_cluster_batch import DAY, _dump, _episode, _Runtime, _unit


def _files(seed: int) -> tuple[list[tuple[UserRef, list, dict]], int]:
    """Daily files of two users, one of them out of date order: ``(files, Episodes)``."""
    rng = np.random.default_rng(seed)
    topics = [_unit(rng, 32) for _ in range(3)]
    users = [UserRef.of("u_a"), UserRef.of("u_b")]
    files: list[tuple[UserRef, list, dict]] = []
    n = 0
    for day in [0, 1, 2, 5, 3, 4, 9]:
        for user in users if day % 2 else users[:1]:
            entries = []
            for _ in range(int(rng.integers(1, 4))):
                eid = f"ep_{n:05d}"
                n += 1
                entries.append(_episode(eid, user.user_id,
                                        (day + float(rng.uniform(0, 1))) * DAY, f"t {eid}"))
            vecs = {e.id: _unit(rng, 32, topics[int(rng.integers(3))] * 2.5, 0.5)
                    for e in entries}
            files.append((user, entries, vecs))
    return files, n


def test_a_flush_reads_each_episodes_epoch_once(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    files, n = _files(5)
    one_by_one, together = _Runtime(tmp_path / "a", 0.0), _Runtime(tmp_path / "b", 0.0)
    sa = ClusterService(one_by_one)
    with sa.batch():
        for user, entries, vectors in files:
            sa.on_entries_indexed(user, entries, vectors)

    reads: Counter[str] = Counter()
    real = service_mod.entry_epoch

    def counted(entry_id: str, ts: object) -> float:
        reads[entry_id] += 1
        return real(entry_id, ts)  # type: ignore[arg-type]

    monkeypatch.setattr(service_mod, "entry_epoch", counted)
    ClusterService(together).on_entries_indexed_many(files)
    episodes = {e.id for _, entries, _ in files for e in entries}
    assert len(episodes) == n
    assert {eid: reads[eid] for eid in episodes} == dict.fromkeys(episodes, 1)
    # the same clusters as one call per file
    assert _dump(together) == _dump(one_by_one)
