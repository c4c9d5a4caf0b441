"""What a batch commit costs, and that the cheaper commit leaves the same memory.

The commit path of Reflection (strategies/journal_batch.py) is what is left of a run after its
last LLM reply: these tests pin the work it saves (vector reads per archived source, YAML dumps
per fact, fsyncs per file) and that the memory it leaves is the one the step-by-step recovery
path (journal.complete, the order of a merge committed alone) leaves.
"""

from __future__ import annotations

import os
import sqlite3
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.index.vectors import VectorIndex
from everos_reflect.markdown import store as store_module
from everos_reflect.markdown import writer
from everos_reflect.markdown.store import MarkdownStore
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.strategies import journal, journal_batch
from tests.reflect_fixtures import ANDREW, add_episode, run_reflection
from tests.test_reflect_batch import (
    ONE_BATCH,
    TOPICS,
    Crash,
    assert_each_topic_merged_once,
    normalized,
    restart,
    seeded,
)

#: logs written, then written again by a reopened store: no other writer (conftest.py)
pytestmark = pytest.mark.usefixtures("settle_at_once")


def cluster_state(rt: Runtime) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Clusters and memberships, times of writing left out; centroids to 1e-6."""
    conn = rt.db()
    conn.row_factory = sqlite3.Row
    clusters = []
    for r in conn.execute("SELECT * FROM clusters ORDER BY cluster_id"):
        centroid = np.frombuffer(r["centroid"], dtype="<f4")
        clusters.append((r["cluster_id"], r["member_count"], r["first_ts"], r["last_ts"],
                         r["consolidated_entry_id"], tuple(np.round(centroid, 6))))
    members = [tuple(r) for r in conn.execute(
        "SELECT cluster_id, entry_id, ts, similarity, deprecated_by FROM cluster_members "
        "ORDER BY cluster_id, entry_id")]
    return clusters, members


def patched_during_commit(monkeypatch: pytest.MonkeyPatch, owner_of: Any, name: str,
                          make: Any) -> None:
    """Replace ``owner_of(runtime).name`` with ``make(real)`` only while a batch commits, so
    the counts below are the commit path's own and not the drafting's or the guard's (the
    owner is looked up then: a run opens its stores itself)."""
    real_commit = journal_batch.commit_many

    def commit(runtime: Runtime, indexer: Any, plans: Any) -> Any:
        owner = owner_of(runtime)
        real = getattr(owner, name)
        monkeypatch.setattr(owner, name, make(real))
        try:
            return real_commit(runtime, indexer, plans)
        finally:
            monkeypatch.setattr(owner, name, real)

    monkeypatch.setattr(journal_batch, "commit_many", commit)


def test_a_batch_leaves_the_clusters_that_merges_finished_one_by_one_leave(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch marks each cluster consolidated before its sources' logs are synced (the
    index then finds them already retired); recovery finishes each merge alone, syncing every
    file first. Both end with the same clusters, members and Markdown."""
    batched, sources = seeded(tmp_path / "batched")
    order: list[str] = []
    real_commit = journal_batch.commit_many

    def recording(runtime: Runtime, indexer: Any, plans: Any) -> Any:
        plans = list(plans)
        order.extend(p.cluster_id for p in plans)
        return real_commit(runtime, indexer, plans)

    monkeypatch.setattr(journal_batch, "commit_many", recording)
    counts = run_reflection(batched, **ONE_BATCH)
    assert counts["merged"] == len(TOPICS) and len(order) == len(TOPICS)

    alone, _ = seeded(tmp_path / "alone")

    def crash_at(reached: str) -> None:
        if reached == journal.PLANNED:
            raise Crash(reached)

    monkeypatch.setattr(journal, "checkpoint", crash_at)
    with pytest.raises(Crash):
        run_reflection(alone, **ONE_BATCH)
    monkeypatch.setattr(journal, "checkpoint", lambda reached: None)
    # the rows of one batch share their creation time: recover them in the batch's order, so
    # the narratives get the same ids
    real_pending = journal.pending
    monkeypatch.setattr(journal, "pending", lambda conn: sorted(
        real_pending(conn), key=lambda row: order.index(row[0].cluster_id)))
    counts = run_reflection(restart(tmp_path / "alone"))  # journal.complete, merge by merge
    assert counts.get("recovered_ok", 0) == len(TOPICS)

    assert_each_topic_merged_once(restart(tmp_path / "alone"), sources)
    assert normalized(tmp_path / "batched") == normalized(tmp_path / "alone")
    assert cluster_state(restart(tmp_path / "batched")) == cluster_state(
        restart(tmp_path / "alone"))


def test_a_batch_reads_no_stored_vectors_per_archived_source(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt, sources = seeded(root)
    reads: list[int] = []

    def counting(real_get: Any) -> Any:
        def get_vectors(*args: Any, **kwargs: Any) -> Any:
            reads.append(1)
            return real_get(*args, **kwargs)
        return get_vectors

    patched_during_commit(monkeypatch, lambda runtime: runtime.vectors, "get_vectors", counting)
    counts = run_reflection(rt, **ONE_BATCH)

    assert counts["merged"] == len(TOPICS)
    archived = sum(len(ids) for ids in sources.values())  # 9 source Episodes
    # the narratives' vectors come from the embedding cache, and the index finds each source
    # already retired: no stored vector is read, none per archived source (there were 9)
    assert reads == [] and archived == 9
    assert_each_topic_merged_once(rt, sources)


def test_a_merge_finished_alone_reads_no_stored_vectors_per_archived_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recovery (journal.complete, also a merge finished alone after a batch step failed)
    synced the sources' logs before it marked the cluster: each archived source made the
    index rebuild its cluster's centroid from the stored vectors of the members left, one
    read per source, in the indexer's lock an add waits for. It marks first, as a batch."""
    _, sources = seeded(tmp_path)

    def crash_at(reached: str) -> None:
        if reached == journal.PLANNED:
            raise Crash(reached)

    monkeypatch.setattr(journal, "checkpoint", crash_at)
    with pytest.raises(Crash):
        run_reflection(restart(tmp_path), **ONE_BATCH)
    monkeypatch.setattr(journal, "checkpoint", lambda reached: None)
    reads: list[int] = []
    completing = [False]
    real_complete, real_get = journal.complete, VectorIndex.get_vectors

    def complete(*args: Any, **kwargs: Any) -> Any:
        completing[0] = True
        try:
            return real_complete(*args, **kwargs)
        finally:
            completing[0] = False

    def get_vectors(self: VectorIndex, *args: Any, **kwargs: Any) -> Any:
        if completing[0]:
            reads.append(len(args[2]) if len(args) > 2 else 0)
        return real_get(self, *args, **kwargs)

    monkeypatch.setattr(journal, "complete", complete)
    monkeypatch.setattr(VectorIndex, "get_vectors", get_vectors)
    counts = run_reflection(restart(tmp_path))

    assert counts.get("recovered_ok", 0) == len(TOPICS)
    assert reads == []  # there were 9 archived sources, each read its cluster's vectors
    assert_each_topic_merged_once(restart(tmp_path), sources)


def test_an_add_to_a_source_log_as_a_batch_commits_rebuilds_no_centroid(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An add to one of the sources' logs, let in once the batch had archived them, synced
    the archive marks with its own Episode: the clusters were marked consolidated only after
    the narratives' embedding, so the add retired each source itself, rebuilding the
    cluster's centroid from the stored vectors of the members left (one read per archived
    source) before it answered. The clusters are marked before the logs are let go."""
    rt, sources = seeded(root)
    reads: list[int] = []
    real_get = VectorIndex.get_vectors

    def add_then() -> None:
        first = rt.store.get(ANDREW, sources["garden"][0])
        day = first.timestamp.date()
        added = add_episode(rt, ANDREW, f"{day}T23:00:00+00:00", "Dentist",
                            "Booked a dentist appointment for Tuesday.")
        assert rt.store.path_for_id(ANDREW, added.id) == rt.store.path_for_id(ANDREW, first.id)

        def get_vectors(self: VectorIndex, *args: Any, **kwargs: Any) -> Any:
            reads.append(1)
            return real_get(self, *args, **kwargs)

        with monkeypatch.context() as patch:
            patch.setattr(VectorIndex, "get_vectors", get_vectors)
            Indexer(rt).sync_path(rt.store.path_for_id(ANDREW, added.id),
                                  wanted=[added.id])  # as the API's add does

    def at(reached: str) -> None:
        if reached == journal.DEPRECATED:
            add_then()

    monkeypatch.setattr(journal, "checkpoint", at)
    counts = run_reflection(rt, **ONE_BATCH)

    assert counts["merged"] == len(TOPICS)
    assert reads == []
    assert_each_topic_merged_once(rt, sources)


def test_facts_with_the_same_metadata_dump_their_yaml_once(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    dumps: list[Any] = []
    real_dump = writer._dump

    def counting(mapping: Any) -> str:
        dumps.append(dict(mapping))
        return real_dump(mapping)

    monkeypatch.setattr(writer, "_dump", counting)
    monkeypatch.setattr(writer, "_DUMPED", {})
    stamp = datetime(2026, 8, 3, 10, 0, tzinfo=UTC)
    meta = {"owner_id": "u_a", "timestamp": stamp, "parent_type": "episode",
            "parent_id": "ep_20260803_0001", "reflection": "rj_0123456789abcdef"}
    blocks = [writer.render_entry(f"af_20260803_{n:04d}", meta, {"Fact": f"fact {n}"})
              for n in range(1, 6)]

    assert len(dumps) == 1
    for n, block in enumerate(blocks, start=1):
        assert block.startswith(f"<!-- entry:af_20260803_{n:04d} -->\n---\n"
                                + real_dump(meta) + f"---\n## Fact\nfact {n}\n")
    # metadata that differs, or is not flat, is dumped on its own
    writer.render_entry("af_20260803_0009", {**meta, "parent_id": "ep_20260803_0002"},
                        {"Fact": "x"})
    writer.render_entry("af_20260803_0010", {**meta, "sources": ["ep_1"]}, {"Fact": "x"})
    # the same instant at another offset is other text
    writer.render_entry("af_20260803_0011",
                        {**meta, "timestamp": datetime.fromisoformat("2026-08-03T12:00:00+02:00")},
                        {"Fact": "x"})
    assert len(dumps) == 4


def test_a_batch_fsyncs_each_file_once_and_each_folder_once_per_step(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt, sources = seeded(root)
    synced: list[str] = []
    def recording(real_fsync: Any) -> Any:
        def fsync(fd: int) -> None:
            synced.append(os.readlink(f"/proc/self/fd/{fd}"))
            real_fsync(fd)
        return fsync

    patched_during_commit(monkeypatch, lambda _: store_module.os, "fsync", recording)
    assert run_reflection(rt, **ONE_BATCH)["merged"] == len(TOPICS)

    folders = [p for p in synced if Path(p).is_dir()]
    files = [p for p in synced if not Path(p).is_dir()]
    # 13 files written (2 narrative logs, 2 fact logs, 9 source logs), each fsynced once
    assert len(files) == 13
    # per step, each folder once: narratives (2 users), facts (2 users), archive (each user's
    # episode folder; the sources had no facts)
    assert len(folders) == 2 + 2 + 2 < len(files)
    assert_each_topic_merged_once(rt, sources)


def test_a_durable_group_fsyncs_its_folders_even_when_it_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    real_fsync = os.fsync
    monkeypatch.setattr(store_module.os, "fsync", lambda fd: (
        synced.append(os.readlink(f"/proc/self/fd/{fd}")), real_fsync(fd)))
    with pytest.raises(Crash), store_module.durable_group():
        store_module._atomic_write(tmp_path / "a" / "one.md", b"1")
        store_module._atomic_write(tmp_path / "a" / "two.md", b"2")
        with store_module.durable_group():  # joins the outer group
            store_module._atomic_write(tmp_path / "b" / "three.md", b"3")
        assert synced and not any(Path(p).is_dir() for p in synced)  # files only, so far
        raise Crash("after the writes")
    assert [p for p in synced if Path(p).is_dir()] == [str(tmp_path / "a"), str(tmp_path / "b")]
    # outside a group, each write fsyncs its folder at once
    synced.clear()
    store_module._atomic_write(tmp_path / "a" / "four.md", b"4")
    assert synced[-1] == str(tmp_path / "a") and len(synced) == 2


def test_a_batch_parses_each_source_log_once_before_archiving_into_it(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt, sources = seeded(root)
    parsed: list[Path] = []

    def recording(real_parse: Any) -> Any:
        def parse(data: bytes, path: Path, *, entries: bool = True) -> Any:
            if entries:
                parsed.append(path)
            return real_parse(data, path, entries=entries)
        return parse

    patched_during_commit(monkeypatch, lambda runtime: runtime.store, "_parse", recording)
    assert run_reflection(rt, **ONE_BATCH)["merged"] == len(TOPICS)

    # the stale check, the facts lookup and the archive's id check share one parse per log
    source_logs = {rt.store.path_for_id(ref, i) for ref, _, word in TOPICS
                   for i in sources[word]}
    assert source_logs <= set(parsed)
    assert max(parsed.count(p) for p in source_logs) == 1
    assert_each_topic_merged_once(rt, sources)


def test_reusing_parses_parses_the_same_bytes_once_and_changed_bytes_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MarkdownStore(tmp_path)
    ref = UserRef.of("u_a")
    first = store.append(ref, Kind.EPISODE, {"timestamp": "2026-08-03T10:00:00+00:00"},
                         {"Subject": "s", "Content": "one"}, day=date(2026, 8, 3))
    path = store.path_for_id(ref, first.id)
    parsed: list[Path] = []
    real_parse = store._parse

    def parse(data: bytes, p: Path, *, entries: bool = True) -> Any:
        if entries:
            parsed.append(p)
        return real_parse(data, p, entries=entries)

    monkeypatch.setattr(store, "_parse", parse)
    with store.reusing_parses():
        assert store.read(path) is store.read(path)
        assert len(parsed) == 1
        store.append(ref, Kind.EPISODE, {"timestamp": "2026-08-03T11:00:00+00:00"},
                     {"Subject": "s", "Content": "two"}, day=date(2026, 8, 3))
        assert [e.content for e in store.read(path).entries] == ["one", "two"]
        assert len(parsed) == 2
    store.read(path)
    store.read(path)
    assert len(parsed) == 4  # outside the block every read parses
