"""Change events: what the indexer just changed, for whoever needs to react.

The indexer publishes one :class:`ChangeSet` per synced file after the index is written;
subscribers (clustering, provenance invalidation, any later tier) register themselves with
:func:`subscribe` from the composition root (:mod:`everos_reflect.wiring`), so ``index/``
imports none of them. A subscriber may write Markdown (e.g. mark an insight stale) and return
the paths it wrote; the indexer then syncs those in the same pass, under its own lock.

A *batch* subscriber (:func:`subscribe_batch`) gets every file's change of one indexer flush in
one call instead: provenance invalidation checks a whole owner at a time, and once per file of
a bulk scan it re-read the owner's logs hundreds of times.

A subscriber that raises is logged and skipped: derived state must never block indexing.
One that cannot take the change *now* (a lock another check holds too long) raises
:class:`Deferred`: the indexer keeps the change noted for it alone and hands it over again at
its next sync (a file event, the watcher's reconcile scan), so the change is late, never lost.
``reindex`` publishes nothing; each :func:`on_reindex` rebuilder runs once after it instead,
whole (clustering's recluster; provenance re-checks every derived record, since the logs may
have changed while nothing indexed them), and the paths it writes are synced too.

A subscriber may also hold work to the end of the indexer's pass (:func:`one_pass`, a scan of
many flushes): :func:`held_to_pass_end` keeps one object per subscriber for it, handed to the
subscriber's ``finish`` once, after the pass's last flush, where the work done per flush cost
the same each time (clustering places a user whose narrative founded a cluster once per scan,
not once per flush that founded one).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from everos_reflect.model import Entry, Kind, UserRef

if TYPE_CHECKING:
    import numpy as np

    from everos_reflect.runtime import Runtime

log = logging.getLogger(__name__)


class Deferred(Exception):
    """Raised by a subscriber that cannot take a change now (what it waits on is busy): the
    change is handed to it again by the indexer's next sync. ``written``: the paths it wrote
    before it stopped (the other owners it checked), synced as any subscriber's."""

    def __init__(self, message: str, written: Iterable[Path] = ()) -> None:
        super().__init__(message)
        self.written = [Path(p) for p in written]


@dataclass
class ChangeSet:
    """One file's index changes: entries ``upserted`` (added or changed, with their vectors),
    ``archived`` (id → the entry that replaced it, None when restored) and ``deleted`` ids.
    ``recheck``: a problem that kept some of the file's entries out of the index is gone
    (the file reads again, or was removed): which of them went meanwhile is not known, so
    whatever depends on the owner's records is checked whole, as after a ``reindex``.
    ``unparented``: the ids of ``upserted`` that were narratives (``parent_type: cluster``)
    as the index held them and are narratives no longer (empty: none of them); None when not
    known (a caller that did not work it out, a publish note written before the index kept
    it): clustering then reads the member rows, a rule of thumb a deletion in the same change
    can mislead. The default is None: "none" is said only by one who knows it."""

    ref: UserRef
    kind: Kind
    path: str
    upserted: list[Entry] = field(default_factory=list)
    archived: Mapping[str, str | None] = field(default_factory=dict)
    deleted: list[str] = field(default_factory=list)
    vectors: Mapping[str, np.ndarray] = field(default_factory=dict)
    recheck: bool = False
    unparented: frozenset[str] | None = None

    @property
    def empty(self) -> bool:
        return not (self.upserted or self.archived or self.deleted or self.recheck)


#: ``subscriber(runtime, change) -> paths written (or None)``
Subscriber = Callable[["Runtime", ChangeSet], Iterable[Path] | None]

#: ``batch_subscriber(runtime, changes) -> paths written (or None)``
BatchSubscriber = Callable[["Runtime", list[ChangeSet]], Iterable[Path] | None]

_subscribers: dict[str, Subscriber] = {}
_batch_subscribers: dict[str, BatchSubscriber] = {}
#: ``rebuild(runtime) -> paths written (or None)``: derived state a subscriber keeps, rebuilt
#: whole after ``reindex``.
Rebuilder = Callable[["Runtime"], Iterable[Path] | None]
_rebuilders: dict[str, Rebuilder] = {}
_lock = threading.Lock()
#: per thread, the open passes (:func:`one_pass`) by runtime, each with what subscribers
#: hold to its end: ``name -> (held, finish)``
_passes = threading.local()
_Held = TypeVar("_Held")


def on_reindex(name: str, rebuild: Rebuilder) -> None:
    """Register what to rebuild after a ``reindex`` (clustering's recluster, provenance)."""
    with _lock:
        _rebuilders[name] = rebuild


def rebuilders() -> dict[str, Rebuilder]:
    with _lock:
        return dict(_rebuilders)


def subscribe(name: str, subscriber: Subscriber) -> None:
    """Register (or replace) the subscriber called ``name``."""
    with _lock:
        _subscribers[name] = subscriber


def subscribe_batch(name: str, subscriber: BatchSubscriber) -> None:
    """Register (or replace) the batch subscriber called ``name`` (see the module docstring)."""
    with _lock:
        _batch_subscribers[name] = subscriber


def unsubscribe(name: str) -> None:
    with _lock:
        _subscribers.pop(name, None)
        _batch_subscribers.pop(name, None)


def subscribers() -> dict[str, Subscriber]:
    with _lock:
        return dict(_subscribers)


def names() -> set[str]:
    """Every subscriber's name, per-file and batch."""
    with _lock:
        return {*_subscribers, *_batch_subscribers}


def _hand_over(name: str, call: Callable[[], Iterable[Path] | None], what: str,
               written: set[Path], deferred: set[str] | None) -> None:
    """One subscriber call: what it wrote joins ``written``; a :class:`Deferred` names it in
    ``deferred`` (logged and skipped, as any failure, when the caller keeps no such set)."""
    try:
        written.update(Path(p) for p in call() or ())
    except Deferred as exc:
        written.update(exc.written)
        if deferred is None:
            log.warning("change subscriber %s put off %s: %s", name, what, exc)
        else:
            log.info("change subscriber %s put off %s until the next sync: %s", name, what, exc)
            deferred.add(name)
    except Exception:
        log.exception("change subscriber %s failed for %s", name, what)


def publish(runtime: Runtime, change: ChangeSet, *, skip: Iterable[str] = (),
            deferred: set[str] | None = None) -> set[Path]:
    """Hand ``change`` to every subscriber except ``skip``; the paths they wrote. The names
    of those that put it off (:class:`Deferred`) are added to ``deferred``."""
    if change.empty:
        return set()
    written: set[Path] = set()
    skipped = set(skip)
    for name, subscriber in subscribers().items():
        if name not in skipped:
            _hand_over(name, lambda s=subscriber: s(runtime, change),  # type: ignore[misc]
                       change.path, written, deferred)
    return written


def publish_many(runtime: Runtime, changes: Iterable[ChangeSet], *,
                 skip: Iterable[str] = (), deferred: set[str] | None = None) -> set[Path]:
    """Hand each change to the per-file subscribers, then all of them at once to the batch
    subscribers (except ``skip``); the paths they wrote. The names of those that put the
    changes off (:class:`Deferred`) are added to ``deferred``: the caller hands the changes to
    them again later."""
    changes = [c for c in changes if not c.empty]
    if not changes:
        return set()
    skipped = set(skip)
    written: set[Path] = set()
    for change in changes:
        written |= publish(runtime, change, skip=skipped, deferred=deferred)
    with _lock:
        batch = dict(_batch_subscribers)
    for name, subscriber in batch.items():
        if name not in skipped:
            _hand_over(name, lambda s=subscriber: s(runtime, changes),  # type: ignore[misc]
                       f"{len(changes)} changes", written, deferred)
    return written


@contextmanager
def one_pass(runtime: Runtime) -> Iterator[None]:
    """One pass of the indexer over ``runtime`` on this thread (a scan, a batch of paths):
    what subscribers hold to its end (:func:`held_to_pass_end`) is handed to them once it
    is over, whether it ends or fails (the flushes before a failure are committed). A pass
    opened inside another one of the same runtime (the paths a subscriber wrote, synced in
    the pass) is part of it. A ``finish`` that raises is logged, as a subscriber is."""
    open_passes: dict[int, dict[str, tuple[Any, Callable[[Any], None]]]] | None = getattr(
        _passes, "open", None)
    if open_passes is None:
        open_passes = _passes.open = {}
    key = id(runtime)
    if key in open_passes:
        yield
        return
    open_passes[key] = {}
    try:
        yield
    finally:
        for name, (held, finish) in open_passes.pop(key).items():
            _hand_over(name, lambda h=held, f=finish: f(h),  # type: ignore[misc]
                       "the end of a sync pass", set(), None)


def held_to_pass_end(runtime: Runtime, name: str, make: Callable[[], _Held],
                     finish: Callable[[_Held], None]) -> _Held | None:
    """What subscriber ``name`` holds to the end of this thread's open pass over ``runtime``
    (:func:`one_pass`): made by ``make`` when first asked, handed to ``finish`` when the pass
    ends. None when no pass is open: the caller does its work now."""
    open_passes = getattr(_passes, "open", None)
    held = None if open_passes is None else open_passes.get(id(runtime))
    if held is None:
        return None
    if name not in held:
        held[name] = (make(), finish)
    return held[name][0]


def summary(changes: Iterable[ChangeSet]) -> dict[str, Any]:
    """Counts for logs and tests."""
    out = {"upserted": 0, "archived": 0, "deleted": 0}
    for c in changes:
        out["upserted"] += len(c.upserted)
        out["archived"] += len(c.archived)
        out["deleted"] += len(c.deleted)
    return out
