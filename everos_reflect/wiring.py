"""The composition root of the library: who listens to the indexer's change events.

``index/`` publishes changes and imports no consumer; this module subscribes the consumers —
clustering (new, changed, archived and deleted Episodes; a recluster after ``reindex``) and
provenance invalidation (derived records whose evidence changed). :class:`~everos_reflect.
runtime.Runtime` calls :func:`install` once per process, so every edge (CLI, API, daemon, tests)
gets the same wiring. A new tier that reacts to changes adds one :func:`subscribe` line here.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from everos_reflect.index import events
from everos_reflect.model import Kind

if TYPE_CHECKING:
    from everos_reflect.runtime import Runtime

log = logging.getLogger(__name__)
_installed = False
_lock = threading.Lock()


def _clustering(runtime: Runtime, change: events.ChangeSet) -> Iterable[Path]:
    """Episode changes to the clustering service (clusters are derived: a failure is logged by
    the publisher and never blocks indexing; ``reindex`` rebuilds them whole)."""
    if change.kind is not Kind.EPISODE:
        return ()
    from everos_reflect.clustering.service import ClusterService

    service = ClusterService(runtime)
    if change.deleted:
        service.on_entries_removed(change.ref, list(change.deleted))
    if change.upserted:
        service.on_entries_indexed(change.ref, change.upserted, dict(change.vectors))
    if change.archived:
        service.on_entries_deprecated(change.ref, dict(change.archived))
    return ()


def _recluster(runtime: Runtime) -> None:
    from everos_reflect.clustering.service import ClusterService

    ClusterService(runtime).recluster()


def _provenance(runtime: Runtime, changes: list[events.ChangeSet]) -> Iterable[Path]:
    from everos_reflect.strategies.provenance import on_changes

    return on_changes(runtime, changes)


def install() -> None:
    """Subscribe the shipped consumers (idempotent)."""
    global _installed
    with _lock:
        if _installed:
            return
        events.subscribe("clustering", _clustering)
        events.on_reindex("clustering", _recluster)
        events.subscribe_batch("provenance", _provenance)
        _installed = True
