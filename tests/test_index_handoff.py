"""A long scan lets an add someone waits for in between two of its batches
(everos_reflect/index/handoff.py): with ``serve`` scanning a fresh LoCoMo root, five adds in a
row waited 10.0 s each and were answered ``indexed: false``."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import numpy as np
import pytest

from everos_reflect.embedding import HashEmbedder
from everos_reflect.embedding.base import answer_waiting, pause_point
from everos_reflect.embedding.local import LocalEmbedder
from everos_reflect.index import handoff
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.model import Entry, Kind, UserRef
from everos_reflect.runtime import Runtime
from tests.reflect_fixtures import ANDREW, add_episode, make_runtime
from tests.waiting import wait_for

WRITER = "xylophone"  # in the writer's Episode only: its embedding calls are told apart


class GatedEmbedder(HashEmbedder):
    """Holds the scan inside its embedding call number ``hold_at`` until the test lets it
    go, and notes, at the scan's next call, whether the writer was done by then."""

    def __init__(self, hold_at: int) -> None:
        super().__init__(64)
        self.hold_at = hold_at
        self.scan_calls = 0
        self.held = threading.Event()
        self.go_on = threading.Event()
        self.writer_done = threading.Event()
        self.writer_done_at_next: bool | None = None
        self.writer_texts = 0  # texts embedded in the writer's calls

    def embed(self, texts: list[str]) -> np.ndarray:
        if any(WRITER in t for t in texts):
            self.writer_texts += len(texts)
        else:
            self.scan_calls += 1
            if self.scan_calls == self.hold_at:
                self.held.set()
                assert self.go_on.wait(30)
            elif self.scan_calls == self.hold_at + 1:
                self.writer_done_at_next = self.writer_done.is_set()
        return super().embed(texts)


def scan_with_a_waiting_writer(rt: Runtime, embedder: GatedEmbedder, flush_entries: int,
                               ref: UserRef, timestamp: str, content: str) -> Entry:
    """Start a scan and, while the embedder holds it, add an Episode of ``ref`` and sync it
    as an add answering does (a 20 s deadline, its own entry wanted); once that writer has
    announced itself, let the scan go, and wait for both. The Episode added."""
    scanner = Indexer(rt)
    scanner.flush_entries = flush_entries
    scan = threading.Thread(target=scanner.scan, daemon=True)
    scan.start()
    assert embedder.held.wait(30)
    entry = add_episode(rt, ref, timestamp, "Music", content)
    outcome: list[object] = []

    def write() -> None:
        try:
            outcome.append(Indexer(rt).sync_path(rt.store.path_for_id(ref, entry.id),
                                                 timeout=20, wanted=[entry.id]))
        except Exception as exc:  # the test says what it was
            outcome.append(exc)
        embedder.writer_done.set()

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    assert wait_for(lambda: handoff.someone_waiting(rt.index_dir))  # it waits for the indexer
    embedder.go_on.set()
    writer.join(30)
    scan.join(30)
    assert not writer.is_alive() and not scan.is_alive()
    assert not isinstance(outcome[0], Exception), outcome
    return entry


def test_an_add_waiting_on_a_long_scan_goes_in_between_two_batches(root: Path) -> None:
    embedder = GatedEmbedder(hold_at=2)
    rt = make_runtime(root, ExtractiveLLM(), embedder=embedder)
    for day in range(1, 7):  # six logs, one batch each
        add_episode(rt, ANDREW, f"2026-08-0{day}T10:00:00+00:00", f"Walk {day}",
                    f"Andrew walked the dog along the river, day {day}.")
    bob = UserRef("default_app", "default_project", "u_bob")
    try:
        entry = scan_with_a_waiting_writer(rt, embedder, 1, bob, "2026-08-09T10:00:00+00:00",
                                           f"Bob bought a {WRITER} for his daughter.")
        assert embedder.writer_done_at_next is True  # went in before the scan's next batch
        live = {row[0] for row in rt.db().execute("SELECT id FROM entries")}
        assert entry.id in live and len(live) == 7  # nothing the scan planned was lost
        assert not handoff.someone_waiting(rt.index_dir)
    finally:
        rt.close()


def test_with_nobody_waiting_a_scan_goes_through_without_a_pause(root: Path) -> None:
    """Nobody waiting: the scan syncs every log and makes no announcement file."""
    rt = make_runtime(root, ExtractiveLLM(), embedder=HashEmbedder(64))
    try:
        for day in range(1, 4):
            add_episode(rt, ANDREW, f"2026-08-0{day}T10:00:00+00:00", f"Walk {day}",
                        f"Andrew walked the dog, day {day}.")
        scanner = Indexer(rt)
        scanner.flush_entries = 1
        report = scanner.scan()
        assert report.files_synced == 3
        assert not handoff.waiting_file(rt.index_dir).exists()
    finally:
        rt.close()


def test_a_writer_with_no_deadline_does_not_announce_itself(root: Path) -> None:
    """The watcher and undo sync with no deadline: nobody waits for their answer, so they
    queue behind a scan as before."""
    rt = make_runtime(root, ExtractiveLLM(), embedder=HashEmbedder(64))
    try:
        entry = add_episode(rt, ANDREW, "2026-08-01T10:00:00+00:00", "Walk", "A walk.")
        Indexer(rt).sync_path(rt.store.path_for_id(ANDREW, entry.id))
        assert not handoff.waiting_file(rt.index_dir).exists()
    finally:
        rt.close()


@pytest.mark.parametrize("holders", [1, 2])
def test_someone_waiting_is_true_while_a_writer_holds_the_announcement(
        root: Path, holders: int) -> None:
    index_dir = root / ".index"
    (index_dir / "locks").mkdir(parents=True, exist_ok=True)
    assert not handoff.someone_waiting(index_dir)  # no file: nobody ever waited
    with handoff.waiting(index_dir):
        if holders == 2:
            with handoff.waiting(index_dir):
                assert handoff.someone_waiting(index_dir)
        assert handoff.someone_waiting(index_dir)
    assert not handoff.someone_waiting(index_dir)
    handoff.wait_for_writers(index_dir, timeout=0.1)  # returns at once


def test_an_announcement_that_cannot_be_made_leaves_the_write_as_before(tmp_path: Path) -> None:
    with handoff.waiting(tmp_path / "gone" / ".index"):  # no locks folder: nothing announced
        assert not handoff.someone_waiting(tmp_path / "gone" / ".index")
    assert not (tmp_path / "gone").exists()


def test_a_writer_with_a_deadline_never_stands_aside_for_itself(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write someone waits for whose own sync is long (a log of hundreds of Episodes not
    indexed yet) reached a batch boundary, found its own announcement, let go of the indexer
    and waited the whole pause (10 s) for itself before answering."""
    rt = make_runtime(root, ExtractiveLLM(), embedder=HashEmbedder(64))
    try:
        entry = add_episode(rt, ANDREW, "2026-08-01T10:00:00+00:00", "Walk", "A walk.")
        add_episode(rt, ANDREW, "2026-08-01T11:00:00+00:00", "Run", "A run.")
        paused: list[Path] = []
        monkeypatch.setattr(handoff, "wait_for_writers",
                            lambda index_dir, timeout=0.0: paused.append(index_dir))
        writer = Indexer(rt)
        writer.flush_entries = 1  # two batches in the writer's own sync
        result = writer.sync_path(rt.store.path_for_id(ANDREW, entry.id), timeout=20)
        assert paused == []
        assert not result.unchanged
        assert {row[0] for row in rt.db().execute("SELECT id FROM entries")} == {
            entry.id, entry.id.replace("0001", "0002")}
    finally:
        rt.close()


@pytest.mark.parametrize("same_log", [False, True])
def test_an_add_goes_in_between_the_batches_of_one_long_log(root: Path, same_log: bool) -> None:
    """One log of many new Episodes (a history pasted in) was one embedding call: an add
    waiting meanwhile waited its whole 10 s and was answered ``indexed: false``. It goes in
    between two batches of the log now; when it wrote to that very log, the scan plans the
    log again and loses nothing, twice-indexes nothing."""
    embedder = GatedEmbedder(hold_at=1)
    rt = make_runtime(root, ExtractiveLLM(), embedder=embedder)
    for hour in range(10, 18):  # one log, eight Episodes: four batches of two
        add_episode(rt, ANDREW, f"2026-08-01T{hour}:00:00+00:00", f"Walk {hour}",
                    f"Andrew walked the dog along the river at {hour} o'clock.")
    writer_ref = ANDREW if same_log else UserRef("default_app", "default_project", "u_bob")
    try:
        entry = scan_with_a_waiting_writer(rt, embedder, 2, writer_ref,
                                           "2026-08-01T19:00:00+00:00",
                                           f"Bought a {WRITER} at the market.")
        if same_log:  # the add did that log's work itself: the scan found it done
            assert embedder.scan_calls == 1
        else:
            assert embedder.writer_done_at_next is True
        live = [tuple(row) for row in rt.db().execute("SELECT user_id, id FROM entries")]
        assert (writer_ref.user_id, entry.id) in live and len(live) == len(set(live)) == 9
        assert rt.vectors.count(Kind.EPISODE) == 9
        for rel, sha in rt.db().execute("SELECT path, sha256 FROM files"):
            assert sha == hashlib.sha256((root / rel).read_bytes()).hexdigest(), rel
    finally:
        rt.close()


def test_an_add_to_the_long_log_being_scanned_indexes_only_its_own_entry(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The add wrote to the very log the scan was working through: its sync embedded that
    whole log (thousands of pasted Episodes: as long as the rest of the scan) before it
    answered. With more than a batch of other new texts in the log, it indexes its own entry
    alone; the scan, let go, plans the log again and indexes the rest, nothing twice."""
    embedder = GatedEmbedder(hold_at=1)
    rt = make_runtime(root, ExtractiveLLM(), embedder=embedder)
    for hour in range(10, 18):  # one log, eight Episodes: four batches of two
        add_episode(rt, ANDREW, f"2026-08-01T{hour}:00:00+00:00", f"Walk {hour}",
                    f"Andrew walked the dog along the river at {hour} o'clock.")
    monkeypatch.setattr(Indexer, "flush_entries", 2)  # the writer's batch too
    try:
        entry = scan_with_a_waiting_writer(rt, embedder, 2, ANDREW,
                                           "2026-08-01T19:00:00+00:00",
                                           f"Bought a {WRITER} at the market.")
        assert embedder.writer_texts == 1  # its own Episode, not the log's eight others
        # the scan: its held batch of two, then the six others in three (the two vectors made
        # before the pause are kept, the writer's entry was found indexed)
        assert embedder.scan_calls == 4
        ids = [row[0] for row in rt.db().execute("SELECT id FROM entries")]
        assert entry.id in ids and len(ids) == len(set(ids)) == 9
        assert rt.vectors.count(Kind.EPISODE) == 9
        for rel, sha in rt.db().execute("SELECT path, sha256 FROM files"):
            assert sha == hashlib.sha256((root / rel).read_bytes()).hexdigest(), rel
    finally:
        rt.close()


def _partly_synced(rt: Runtime) -> tuple[Entry, Path]:
    """Five new Episodes in one log, synced as an add of the last one does when the four
    others are more than a batch: that Episode alone. It, and its log."""
    for hour in range(10, 15):
        entry = add_episode(rt, ANDREW, f"2026-08-01T{hour}:00:00+00:00", f"Walk {hour}",
                            f"Andrew walked the dog at {hour} o'clock.")
    path = rt.store.path_for_id(ANDREW, entry.id)
    writer = Indexer(rt)
    writer.flush_entries = 2  # four other new texts: more than a batch
    writer.sync_path(path, timeout=20, wanted=[entry.id])
    return entry, path


def test_a_partial_sync_leaves_the_log_to_the_next_one(root: Path) -> None:
    """An add's narrowed sync writes its entry and marks the log unread: a later sync (the
    watcher's) plans the log whole and indexes what was left, and a scan after the log is
    deleted drops the entry (no row for the log: it stayed in the index for good)."""
    rt = make_runtime(root, ExtractiveLLM(), embedder=HashEmbedder(64))
    try:
        entry, path = _partly_synced(rt)
        db = rt.db()
        assert [row[0] for row in db.execute("SELECT id FROM entries")] == [entry.id]
        assert Indexer(rt).pending()["files_changed"] == 1
        result = Indexer(rt).sync_path(path)
        assert result.upserted == 4 and result.embedded == 4  # the rest; its own kept
        assert db.execute("SELECT COUNT(*) FROM entries").fetchone()[0] == 5
        assert rt.vectors.count(Kind.EPISODE) == 5
        assert Indexer(rt).sync_path(path).unchanged
        assert Indexer(rt).pending()["files_changed"] == 0
    finally:
        rt.close()


def test_a_log_deleted_after_a_partial_sync_leaves_nothing_behind(root: Path) -> None:
    rt = make_runtime(root, ExtractiveLLM(), embedder=HashEmbedder(64))
    try:
        _, path = _partly_synced(rt)
        path.unlink()
        report = Indexer(rt).scan()
        assert report.files_removed == 1
        assert rt.db().execute("SELECT COUNT(*) FROM entries").fetchone()[0] == 0
        assert rt.vectors.count(Kind.EPISODE) == 0
    finally:
        rt.close()


class PausingEmbedder(HashEmbedder):
    """Embeds a text at a time, with a pause point between two (as the local model's calls
    of one batch each); holds the scan at its first text, and notes who embedded in turn."""

    def __init__(self) -> None:
        super().__init__(64)
        self.held = threading.Event()
        self.go_on = threading.Event()
        self.writer_done = threading.Event()
        self.turns: list[str] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        if any(WRITER in t for t in texts):
            self.turns.append("writer")
            return super().embed(texts)
        rows = []
        for i, text in enumerate(texts):
            if i:
                pause_point()
            self.turns.append("scan")
            if len(self.turns) == 1:
                self.held.set()
                assert self.go_on.wait(30)
            rows.append(super().embed([text])[0])
        return np.array(rows)


@pytest.mark.parametrize("same_log", [False, True])
def test_an_add_goes_in_between_two_model_calls_of_one_embedding_call(
        root: Path, same_log: bool) -> None:
    """A flush's texts are embedded in calls of 256; one such call held an add for seconds
    (during a Reflection, the watcher's sync of the narratives it wrote: adds to `serve` took
    up to 7.6 s). The add goes in at the next pause point inside the call; when it wrote to
    one of the flush's logs, the flush is planned again and nothing is indexed twice."""
    embedder = PausingEmbedder()
    rt = make_runtime(root, ExtractiveLLM(), embedder=embedder)
    for hour in range(10, 14):  # one call of four texts
        add_episode(rt, ANDREW, f"2026-08-01T{hour}:00:00+00:00", f"Walk {hour}",
                    f"Andrew walked the dog along the river at {hour} o'clock.")
    writer_ref = ANDREW if same_log else UserRef("default_app", "default_project", "u_bob")
    try:
        entry = scan_with_a_waiting_writer(rt, embedder, 256,  # type: ignore[arg-type]
                                           writer_ref, "2026-08-01T19:00:00+00:00",
                                           f"Bought a {WRITER} at the market.")
        assert embedder.turns == ["scan", "writer", "scan", "scan", "scan"]
        ids = [tuple(row) for row in rt.db().execute("SELECT user_id, id FROM entries")]
        assert (writer_ref.user_id, entry.id) in ids and len(ids) == len(set(ids)) == 5
        assert rt.vectors.count(Kind.EPISODE) == 5
        for rel, sha in rt.db().execute("SELECT path, sha256 FROM files"):
            assert sha == hashlib.sha256((root / rel).read_bytes()).hexdigest(), rel
    finally:
        rt.close()


def test_a_log_is_changed_since_read_only_when_its_stats_moved(
        root: Path, tmp_path: Path) -> None:
    """After a pause, a flush is planned again only if one of its logs changed; a log
    refused as a symlink out of the root was stat'ed as the link itself and must not count
    as changed every time (each false alarm re-read the whole flush)."""
    rt = make_runtime(root, ExtractiveLLM(), embedder=HashEmbedder(64))
    try:
        entry = add_episode(rt, ANDREW, "2026-08-01T10:00:00+00:00", "Walk", "A walk.")
        plain = rt.store.path_for_id(ANDREW, entry.id)
        outside = tmp_path / "elsewhere.md"
        outside.write_text(plain.read_text())
        linked = plain.with_name("episode-2026-08-02.md")
        linked.symlink_to(outside)
        indexer = Indexer(rt)
        jobs = [indexer._prepare(plain), indexer._prepare(linked)]
        assert all(job is not None for job in jobs)
        assert [indexer._changed_since_read(job) for job in jobs] == [False, False]
        with plain.open("a") as fh:
            fh.write("\n")
        linked.unlink()
        assert [indexer._changed_since_read(job) for job in jobs] == [True, True]
    finally:
        rt.close()


class GatedSession:
    """The bundled model's session: its first call waits for ``go``; every call notes the
    name of the thread that made it."""

    def __init__(self, session: object) -> None:
        self.session = session
        self.order: list[str] = []
        self.go = threading.Event()

    def run(self, *args: object, **kwargs: object) -> object:
        self.order.append(threading.current_thread().name)
        if len(self.order) == 1:
            assert self.go.wait(30)
        return self.session.run(*args, **kwargs)  # type: ignore[attr-defined]


def test_a_sync_waiting_for_a_model_slot_lets_a_waiting_add_in(root: Path) -> None:
    """During a Reflection its merge workers' model calls fill the slots; the watcher, syncing
    what the run wrote, waited for one holding the indexer, and an add waited behind it (up
    to 4 s on LoCoMo). The sync lets the add in while it waits: the add's sentence goes to the
    model next, before the sync's texts, and both are indexed."""
    embedder = LocalEmbedder(batch_size=1, threads=1, calls_at_once=1)
    embedder.load()
    gate = GatedSession(embedder._session)
    embedder._session = gate
    rt = make_runtime(root, ExtractiveLLM(), embedder=embedder)
    bob = UserRef("default_app", "default_project", "u_bob")
    try:
        walk = add_episode(rt, ANDREW, "2026-08-01T10:00:00+00:00", "Walk",
                           "Andrew walked the dog along the river.")
        worker = threading.Thread(target=embedder.embed, args=(["a merge worker's batch"],),
                                  name="worker", daemon=True)
        worker.start()
        assert wait_for(lambda: gate.order == ["worker"])  # it holds the only slot
        watcher = threading.Thread(target=Indexer(rt).sync_paths,
                                   args=([rt.store.path_for_id(ANDREW, walk.id)],),
                                   name="watcher", daemon=True)
        watcher.start()
        # the watcher waits for the slot, the indexer held
        assert wait_for(lambda: len(embedder._calls._cond._waiters) == 1)
        entry = add_episode(rt, bob, "2026-08-02T10:00:00+00:00", "Music",
                            f"Bob bought a {WRITER} for his daughter.")

        def add() -> None:
            with answer_waiting():
                Indexer(rt).sync_path(rt.store.path_for_id(bob, entry.id), timeout=20,
                                      wanted=[entry.id])

        adder = threading.Thread(target=add, name="add", daemon=True)
        adder.start()
        assert wait_for(lambda: embedder._calls._urgent == 1)  # the add waits for the slot
        gate.go.set()
        for thread in (worker, watcher, adder):
            thread.join(30)
            assert not thread.is_alive()
        assert list(dict.fromkeys(gate.order)) == ["worker", "add", "watcher"]
        assert {row[0] for row in rt.db().execute("SELECT id FROM entries")} == {walk.id,
                                                                                 entry.id}
        assert rt.vectors.count(Kind.EPISODE) == 2
        for rel, sha in rt.db().execute("SELECT path, sha256 FROM files"):
            assert sha == hashlib.sha256((root / rel).read_bytes()).hexdigest(), rel
    finally:
        gate.go.set()
        rt.close()
