"""Crash recovery for every strategy, through one hook.

Each strategy settles what a crash interrupted in its own way — Reflection through its merge
journal, the derived tiers through their commit intents and window keys — behind
:meth:`Strategy.recover`. The engine calls that hook with the strategy's lock held: before every
run (:class:`Engine`), for every strategy at ``serve`` start-up (:func:`recover_all`), and before
a CLI command writes, for the strategies whose :meth:`Strategy.has_interrupted` says a writer
must not run ahead of them (:func:`settle`). A new strategy gets all three by implementing the
hook; nothing here names one. Outside a run, recovery also holds the rebuild lock shared, as
a run does (:mod:`everos_reflect.index.rebuild`), so it never overlaps a ``reindex`` or
``recluster`` of another process.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

from filelock import Timeout

from everos_reflect import root_lock
from everos_reflect.engine.engine import lock_path
from everos_reflect.engine.registry import Strategy, get_strategy, known_strategies
from everos_reflect.errors import RootGone, StrategyBusy

if TYPE_CHECKING:
    from everos_reflect.runtime import Runtime

log = logging.getLogger(__name__)


class _Rebuilding(Exception):
    """A ``reindex`` or ``recluster`` holds the rebuild lock, or is waiting for it."""


def _recover_one(runtime: Runtime, strategy: Strategy, wait: float) -> dict[str, int] | None:
    """``strategy.recover`` under its lock and the rebuild lock held shared (as a run holds
    both, in this order); ``None`` when a run holds the strategy's lock (a run recovers first
    thing itself). Raises :class:`_Rebuilding` when a rebuild is under way: recovery rewrites
    index rows and clusters that a ``reindex`` or ``recluster`` in another process empties
    and refills meanwhile."""
    from everos_reflect.index import rebuild

    try:  # a root moved away meanwhile is not made again by the lock (RootGone)
        lock = root_lock.take(runtime, lock_path(runtime.root, strategy.name), wait)
    except Timeout:
        log.info("%s is running: it settles its interrupted work itself", strategy.name)
        return None
    try:
        guard = rebuild.try_shared(runtime.index_dir)
        if guard is None:
            raise _Rebuilding(strategy.name)
        try:
            counts = {str(k): int(v) for k, v in (strategy.recover(runtime) or {}).items()}
        finally:
            rebuild.release(guard)
    finally:
        lock.release()
    if counts:
        log.warning("%s: recovered interrupted work: %s", strategy.name, counts)
    return counts


def recover_all(runtime: Runtime, *, wait: float = 0.0) -> dict[str, dict[str, int]]:
    """Ask every registered strategy to settle what a crash interrupted (``serve`` start-up).

    Returns the non-empty counts by strategy. A strategy whose lock is held is skipped (its
    run recovers itself); one whose recovery fails is logged and left for its next run, so one
    broken strategy does not keep the daemon from starting.
    """
    out: dict[str, dict[str, int]] = {}
    for name in known_strategies():
        try:
            counts = _recover_one(runtime, get_strategy(name), wait)
        except _Rebuilding:
            log.info("%s: the index is being rebuilt: its interrupted work is settled by its "
                     "next run", name)
            continue
        except RootGone:  # every other strategy's would be too: said once, by the caller
            raise
        except Exception:
            log.exception("%s: recovery failed; its next run retries it", name)
            continue
        if counts:
            out[name] = counts
    return out


def has_interrupted(root: Path) -> bool:
    """Whether any strategy has interrupted work a writing command must wait for (read-only,
    cheap: no runtime is opened)."""
    return any(get_strategy(n).has_interrupted(Path(root)) for n in known_strategies())


def settle(runtime: Runtime, *, wait: float = 10.0) -> int:
    """Settle, before a command writes, every strategy that :meth:`has_interrupted` work,
    waiting up to ``wait`` seconds for each one's lock and for a rebuild under way. Returns
    how many units were settled; raises :class:`StrategyBusy` when a rebuild outlasts
    ``wait`` (the command must not write ahead of the interrupted work)."""
    total = 0
    for name in known_strategies():
        strategy = get_strategy(name)
        if not strategy.has_interrupted(runtime.root):
            continue
        deadline = time.monotonic() + wait
        while True:
            try:
                counts = _recover_one(runtime, strategy, wait)
                break
            except _Rebuilding:
                if time.monotonic() >= deadline:
                    raise StrategyBusy(
                        f"{name} has interrupted work to settle before this command writes, "
                        "and the index is being rebuilt (reindex or recluster): run the "
                        "command again once the rebuild is done") from None
                time.sleep(0.2)
        total += sum((counts or {}).values())
    return total


__all__ = ["has_interrupted", "recover_all", "settle"]
