"""The indexer hands a whole flush of Episode files to clustering in one transaction, with the
clusters that one transaction per file gave."""

from __future__ import annotations

import logging
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from everos_reflect import wiring
from everos_reflect.clustering import service as service_mod
from everos_reflect.clustering.service import ClusterService
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.index import events
from everos_reflect.index.sync import Indexer
from everos_reflect.model import UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import load_settings

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from cluster_digest import cluster_dump

EXAMPLE = Path(__file__).resolve().parent.parent / "memory_root_example"


def _runtime(tmp_path: Path, name: str) -> Runtime:
    root = tmp_path / name
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".index"))
    return Runtime(root, load_settings(root), embedder=HashEmbedder(64))


@pytest.fixture
def per_file() -> Iterator[None]:
    """Clustering subscribed the way it was before: one transaction per file."""
    def one_file(runtime: Runtime, change: events.ChangeSet) -> None:
        if change.kind.value == "episode":
            wiring._cluster_change(ClusterService(runtime), change)

    wiring.install()
    events.unsubscribe("clustering")
    events.subscribe("clustering", one_file)
    try:
        yield
    finally:
        events.unsubscribe("clustering")
        events.subscribe_batch("clustering", wiring._clustering)


def _count_cluster_transactions(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    opened: list[int] = []
    real = service_mod.transaction

    def counted(conn):  # the service's own BEGIN IMMEDIATE
        opened.append(1)
        return real(conn)

    monkeypatch.setattr(service_mod, "transaction", counted)
    return opened


def test_a_scan_clusters_every_file_in_one_transaction(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    rt = _runtime(tmp_path, "batched")
    opened = _count_cluster_transactions(monkeypatch)
    report = Indexer(rt).scan()
    files = rt.db().execute("SELECT COUNT(*) FROM files WHERE kind='episode'").fetchone()[0]
    assert files > 10 and report.entries_upserted > files
    assert len(opened) == 1  # one flush (the example root is far below flush_entries)
    assert rt.db().execute("SELECT COUNT(*) FROM cluster_members").fetchone()[0] > files


def test_one_transaction_gives_the_clusters_of_one_transaction_per_file(tmp_path: Path,
                                                                        per_file: None) -> None:
    old = _runtime(tmp_path, "per_file")
    Indexer(old).scan()
    before = cluster_dump(old.db())
    events.unsubscribe("clustering")
    events.subscribe_batch("clustering", wiring._clustering)
    new = _runtime(tmp_path, "batched")
    Indexer(new).scan()
    assert cluster_dump(new.db()) == before
    assert before["members"]


def test_a_failing_file_rolls_back_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         caplog: pytest.LogCaptureFixture) -> None:
    """One file's clustering raises: the flush's transaction is rolled back and every other
    file is clustered in a transaction of its own; the failing file's Episodes stay out."""
    good = _runtime(tmp_path, "good")
    Indexer(good).scan()
    expected = {(r[0], r[1]) for r in good.db().execute(
        "SELECT user_id, entry_id FROM cluster_members")}

    rt = _runtime(tmp_path, "failing")
    real = ClusterService._assign_run
    bad_user = "u_andrew"

    def flaky(self, conn, ref, run, outcome):  # fails inside the transaction, after writes
        real(self, conn, ref, list(run), outcome)
        if ref.user_id == bad_user and any(eid.startswith("ep_20260904") for eid, *_ in run):
            raise RuntimeError("boom")
        run.clear()

    monkeypatch.setattr(ClusterService, "_assign_run", flaky)
    opened = _count_cluster_transactions(monkeypatch)
    with caplog.at_level(logging.ERROR):
        Indexer(rt).scan()
    got = {(r[0], r[1]) for r in rt.db().execute("SELECT user_id, entry_id FROM cluster_members")}
    lost = expected - got
    assert lost and all(u == bad_user and e.startswith("ep_20260904") for u, e in lost)
    assert got <= expected
    assert len(opened) > 2  # the batch, then one per file
    assert "one by one" in caplog.text


def test_files_handed_over_together_give_the_clusters_of_one_call_each(tmp_path: Path) -> None:
    """``on_entries_indexed_many`` merges consecutive files of a user only when that keeps the
    order: files in date order, files out of order, a file repeating an id of the one before
    (an edit) and files of two users interleaved all give what one call per file gives."""
    from .test_cluster_batch import DAY, _dump, _episode, _Runtime, _unit

    rng = np.random.default_rng(11)
    topics = [_unit(rng, 32) for _ in range(3)]
    users = [UserRef.of("u_a"), UserRef.of("u_b")]
    vec: dict[str, np.ndarray] = {}
    files: list[tuple[UserRef, list, dict]] = []
    n = 0
    for day in [0, 1, 2, 5, 3, 4, 4, 9, 8, 12]:  # two files out of order, day 4 twice
        for user in users if day % 3 else users[:1]:
            entries = []
            for _ in range(int(rng.integers(1, 4))):
                eid = f"ep_{n:05d}"
                n += 1
                vec[eid] = _unit(rng, 32, topics[int(rng.integers(3))] * 2.5, 0.5)
                entries.append(_episode(eid, user.user_id,
                                        (day + float(rng.uniform(0, 1))) * DAY, f"t {eid}"))
            files.append((user, entries, {e.id: vec[e.id] for e in entries}))
    edited = files[3][1][0]  # the same id again in the next file, with another text
    vec[edited.id] = _unit(rng, 32, topics[0] * 2.5, 0.5)
    again = _episode(edited.id, files[3][0].user_id, edited.timestamp.timestamp() + 60,
                     "edited")
    files.insert(4, (files[3][0], [again], {again.id: vec[again.id]}))

    one_by_one, together = _Runtime(tmp_path / "a", 0.0), _Runtime(tmp_path / "b", 0.0)
    sa, sb = ClusterService(one_by_one), ClusterService(together)
    with sa.batch():
        for user, entries, vectors in files:
            sa.on_entries_indexed(user, entries, vectors)
    calls: list[int] = []
    real = ClusterService.on_entries_indexed

    def counted(self, ref, entries, vectors):
        calls.append(len(entries))
        return real(self, ref, entries, vectors)

    ClusterService.on_entries_indexed = counted  # type: ignore[method-assign]
    try:
        sb.on_entries_indexed_many(files)
    finally:
        ClusterService.on_entries_indexed = real  # type: ignore[method-assign]
    assert _dump(together) == _dump(one_by_one)
    assert len(files) > len(calls) > 2  # some merged, not all
    assert sum(calls) == sum(len(e) for _, e, _ in files)
