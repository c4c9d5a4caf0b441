"""``resolve`` and the worldview's repair both resolve self-contradiction edges: each reads the
edge again and writes it under the relations log's lock, so neither writes over the other's
resolution. Seams, no sleeps: the other writer runs between one's read and its write."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from filelock import Timeout

from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.model import Entry, Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.strategies import beliefs
from everos_reflect.strategies.belief_store import BeliefState, repair
from everos_reflect.strategies.belief_views import ResolveRefused, resolve_relation
from tests.worldview_fixtures import superseded_edges

ADA = UserRef.of("ada")
NOTE = "Enterprise first was the decision; the tension is settled."


@pytest.fixture
def rt(root: Path) -> Iterator[Runtime]:
    runtime = Runtime(root, embedder=HashEmbedder(32))
    yield runtime
    runtime.close()


def superseded_edge(rt: Runtime) -> tuple[Entry, str]:
    """An active edge between two convictions, one of them superseded since (the repair
    resolves it), and the resolution the repair writes."""
    made = superseded_edges(rt, ADA)
    return made.edges[0], made.resolution


def test_a_resolve_between_the_repairs_read_and_write_keeps_the_persons_note(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    edge, _ = superseded_edge(rt)
    real = beliefs.superseded_edges

    def then_a_person_resolves(*args: Any) -> dict[str, str]:
        found = real(*args)  # the repair has read the edge active
        resolve_relation(rt, ADA, edge.id, NOTE)
        return found

    monkeypatch.setattr(beliefs, "superseded_edges", then_a_person_resolves)
    repair(rt, ADA, BeliefState.load(rt, ADA))
    meta = rt.store.get(ADA, edge.id).meta
    assert meta["status"] == beliefs.RESOLVED
    assert meta["resolution"] == NOTE


def test_a_repair_between_resolves_read_and_write_is_not_written_over(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    edge, automatic = superseded_edge(rt)
    log_lock = rt.store._lock_file(rt.store.rel(rt.store.path_for_id(ADA, edge.id)))
    real_acquire = rt.store._acquire
    repair_wrote: list[dict[str, Any]] = []
    real_update = rt.store.update_metas
    settled = threading.Event()  # the repair is done, or waits for the log's lock
    errors: list[BaseException] = []

    def acquire(lock: Any, lock_file: Path) -> None:
        if threading.current_thread() is worker and Path(lock_file) == log_lock:
            try:
                lock.acquire(timeout=0)
            except Timeout:
                settled.set()  # held by `resolve`: the repair waits for it
            else:
                lock.release()
        real_acquire(lock, lock_file)

    def update_metas(ref: UserRef, updates: Any) -> None:
        if threading.current_thread() is worker:
            repair_wrote.append(dict(updates))
        real_update(ref, updates)

    def run_repair() -> None:
        try:
            repair(rt, ADA, BeliefState.load(rt, ADA))
        except BaseException as exc:  # said by the test, not lost in the thread
            errors.append(exc)
        finally:
            settled.set()

    worker = threading.Thread(target=run_repair, name="repair")
    real_status = beliefs.status_of

    def status_of(entry: Entry) -> str:
        status = real_status(entry)
        # `resolve` has read the edge active and is about to write: the repair runs now
        if (threading.current_thread() is not worker and entry.id == edge.id
                and worker.ident is None):
            worker.start()
            assert settled.wait(60)
        return status

    monkeypatch.setattr(rt.store, "_acquire", acquire)
    monkeypatch.setattr(rt.store, "update_metas", update_metas)
    monkeypatch.setattr(beliefs, "status_of", status_of)
    resolve_relation(rt, ADA, edge.id, NOTE)
    worker.join(60)
    assert not worker.is_alive() and not errors
    meta = rt.store.get(ADA, edge.id).meta
    assert meta["resolution"] == NOTE
    # the repair found the edge resolved by then, and wrote nothing over it
    assert all(edge.id not in w for w in repair_wrote), (repair_wrote, automatic)


def test_resolve_refuses_an_edge_the_repair_resolved_first(rt: Runtime) -> None:
    edge, automatic = superseded_edge(rt)
    repair(rt, ADA, BeliefState.load(rt, ADA))
    with pytest.raises(ResolveRefused, match="is resolved, not active"):
        resolve_relation(rt, ADA, edge.id, NOTE)
    assert rt.store.get(ADA, edge.id).meta["resolution"] == automatic


def test_resolve_refuses_an_archived_edge(rt: Runtime) -> None:
    """An edge a hand edit archived (``deprecated_entries``) is in no listing and no census:
    resolved, it answered "resolved" and kept the note where nothing shows it."""
    edge, _ = superseded_edge(rt)
    (other,) = rt.store.append_many(ADA, Kind.RELATION, [
        ({"timestamp": "2026-10-12T08:00:00+00:00", "relation_type": "self_contradiction",
          "between": edge.meta["between"], "status": "active"}, {"Relation": "Tension, again."})])
    rt.store.deprecate(ADA, {edge.id: other.id})
    with pytest.raises(ResolveRefused, match=f"is archived \\(replaced by {other.id}\\)"):
        resolve_relation(rt, ADA, edge.id, NOTE)
    meta = rt.store.get(ADA, edge.id).meta
    assert meta["status"] == "active" and "resolution" not in meta
