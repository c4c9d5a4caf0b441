"""The composition root of the library: who listens to the indexer's change events.

``index/`` publishes changes and imports no consumer; this module subscribes the consumers —
clustering (new, changed, archived and deleted Episodes; a recluster after ``reindex``) and
provenance invalidation (derived records whose evidence changed; all of them after
``reindex``). :class:`~everos_reflect.runtime.Runtime` calls :func:`install` once per process,
so every edge (CLI, API, daemon, tests) gets the same wiring. A new tier that reacts to
changes adds one :func:`subscribe` line here.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from everos_reflect.index import events
from everos_reflect.model import Kind
from everos_reflect.problem_words import counted

if TYPE_CHECKING:
    from everos_reflect.clustering.service import ClusterService
    from everos_reflect.runtime import Runtime

log = logging.getLogger(__name__)
_installed = False
_lock = threading.Lock()


def _clustering(runtime: Runtime, changes: list[events.ChangeSet]) -> Iterable[Path]:
    """Episode changes of one indexer flush to the clustering service, in ONE transaction:
    per file, a transaction cost ~4× what the assignments inside it cost (BEGIN IMMEDIATE,
    the version checks, COMMIT), and a bulk scan syncs hundreds of files per flush. Files are
    applied in the order the indexer published them, each as before, so the clusters are the
    ones per-file transactions gave.

    Clusters are derived: a failure is logged and never blocks indexing (``reindex`` rebuilds
    them whole). If one file's change fails, the whole transaction rolls back (memory is
    dropped with it) and the files are applied again one transaction each, so the others are
    not lost with it."""
    episodes = [c for c in changes if c.kind is Kind.EPISODE]
    if not episodes:
        return ()
    from everos_reflect.clustering.service import ClusterService

    service = ClusterService(runtime)
    try:
        with service.batch():
            # runs of files that only add or change Episodes go in together (one call per
            # user when their order allows it); a file that deletes or archives goes alone
            pending: list[events.ChangeSet] = []
            for change in episodes:
                if change.upserted and not (change.deleted or change.archived):
                    pending.append(change)
                    continue
                _cluster_upserts(service, pending)
                _cluster_change(service, change)
            _cluster_upserts(service, pending)
            _users_gone(runtime, service, episodes)
    except Exception:
        log.exception("clustering a flush of %s failed; applying them one by one",
                      counted(len(episodes), "file"))
        for change in episodes:
            try:
                _cluster_change(service, change)
            except Exception:
                log.exception("clustering failed for %s", change.path)
        try:
            _users_gone(runtime, service, episodes)
        except Exception:
            log.exception("dropping the clusters of users whose folder is gone failed")
    return ()


def _users_gone(runtime: Runtime, service: ClusterService,
                changes: list[events.ChangeSet]) -> None:
    """Once every change of the flush is in: the users whose logs it dropped and whose folder
    is gone (:meth:`ClusterService.on_user_gone`)."""
    for ref in sorted({c.ref for c in changes if c.deleted}):
        if runtime.store.user_gone(ref):
            service.on_user_gone(ref)


def _cluster_upserts(service: ClusterService, changes: list[events.ChangeSet]) -> None:
    if changes:
        service.on_entries_indexed_many([(c.ref, c.upserted, c.vectors, c.unparented)
                                         for c in changes])
        changes.clear()


def _cluster_change(service: ClusterService, change: events.ChangeSet) -> None:
    if change.deleted:
        service.on_entries_removed(change.ref, list(change.deleted))
    if change.upserted:
        service.on_entries_indexed(change.ref, change.upserted, dict(change.vectors),
                                   unparented=change.unparented)
    if change.archived:
        service.on_entries_deprecated(change.ref, dict(change.archived))


def _recluster(runtime: Runtime) -> None:
    from everos_reflect.clustering.service import ClusterService

    ClusterService(runtime).recluster()


def _provenance(runtime: Runtime, changes: list[events.ChangeSet]) -> Iterable[Path]:
    from everos_reflect.strategies.provenance import on_changes

    return on_changes(runtime, changes)


def _provenance_rebuild(runtime: Runtime) -> Iterable[Path]:
    """After ``reindex``: every owner's derived records checked whole. The logs may have
    changed while nothing indexed them (an Episode deleted by hand, then a rebuild); a sync
    of the same edit marks the records citing it stale, so a rebuild must as well."""
    from everos_reflect.strategies.provenance import check_all

    return check_all(runtime)


def install() -> None:
    """Subscribe the shipped consumers (idempotent)."""
    global _installed
    with _lock:
        if _installed:
            return
        events.subscribe_batch("clustering", _clustering)
        events.on_reindex("clustering", _recluster)
        events.subscribe_batch("provenance", _provenance)
        events.on_reindex("provenance", _provenance_rebuild)
        _installed = True
