"""Crash recovery for every strategy, through one hook.

Each strategy settles what a crash interrupted in its own way — Reflection through its merge
journal, the derived tiers through their commit intents and window keys — behind
:meth:`Strategy.recover`. The engine calls that hook with the strategy's lock held: before every
run (:class:`Engine`), for every strategy at ``serve`` start-up (:func:`recover_all`), and before
a CLI command writes, for the strategies whose :meth:`Strategy.has_interrupted` says a writer
must not run ahead of them (:func:`settle`). A new strategy gets all three by implementing the
hook; nothing here names one.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from filelock import FileLock, Timeout

from everos_reflect.engine.engine import lock_path
from everos_reflect.engine.registry import Strategy, get_strategy, known_strategies

if TYPE_CHECKING:
    from everos_reflect.runtime import Runtime

log = logging.getLogger(__name__)


def _recover_one(runtime: Runtime, strategy: Strategy, wait: float) -> dict[str, int] | None:
    """``strategy.recover`` under its lock; ``None`` when a run holds the lock (a run recovers
    first thing itself)."""
    path = lock_path(runtime.root, strategy.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path), thread_local=False)
    try:
        lock.acquire(timeout=wait)
    except Timeout:
        log.info("%s is running: it settles its interrupted work itself", strategy.name)
        return None
    try:
        counts = {str(k): int(v) for k, v in (strategy.recover(runtime) or {}).items()}
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
    waiting up to ``wait`` seconds for each one's lock. Returns how many units were settled."""
    total = 0
    for name in known_strategies():
        strategy = get_strategy(name)
        if not strategy.has_interrupted(runtime.root):
            continue
        counts = _recover_one(runtime, strategy, wait)
        total += sum((counts or {}).values())
    return total


__all__ = ["has_interrupted", "recover_all", "settle"]
