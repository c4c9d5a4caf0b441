"""Strategies registered for a test's length (the engine's, the API's and the watcher's tests)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from everos_reflect.engine import registry
from everos_reflect.engine.registry import RunContext, Strategy


class Quick(Strategy):
    """Answers at once: a trigger's whole round trip without any tier's work."""

    name = "quick_test"
    description = "answers at once"

    def run(self, ctx: RunContext) -> dict[str, int]:
        return {"touched": 1}


@contextmanager
def registered(strategy: Strategy | type[Strategy]) -> Iterator[None]:
    """``strategy`` known to the registry inside the block, forgotten after it even when the
    test fails (a strategy left behind would show in every later test's listings)."""
    registry.register(strategy)
    try:
        yield
    finally:
        registry.unregister(strategy.name)
