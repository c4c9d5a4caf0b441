"""Per-run limits, one mechanism for every strategy: ``max_llm_calls``, ``max_tokens``,
``max_wall_seconds``, ``max_records``.

The engine makes one :class:`Budget` per run attempt from the strategy's settings and hands it
to the run (``ctx.budget``). Every LLM call of the run goes through ``ctx.llm``, a
:class:`MeteredLLM` that charges the call and its tokens to the budget (calls answered by the
offline extractive provider ask no model and are free), whoever makes it (the
Reflection pool's threads included); a strategy charges the input records it consumes
(:meth:`Budget.charge_records`). Between units of work — clusters, owners, insights — the
strategy asks :meth:`Budget.exceeded`; once it names a limit the run stops there, and the engine
records the run ``partial`` with that limit as its reason. A limit is never hit halfway through
a unit: units already started finish.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from everos_reflect.errors import ProviderUnavailable

if TYPE_CHECKING:
    from everos_reflect.llm.base import (
        LLM,
        FactsRequest,
        FactsResult,
        MergeRequest,
        MergeResult,
        Usage,
    )
    from everos_reflect.llm.tasks import TaskRequest, TaskResult

#: Defaults for a strategy that declares no limits of its own: generous, so they only stop a
#: run that has gone wrong (a derived tier declares tighter ones, SPEC §10).
DEFAULT_LIMITS: dict[str, float] = {
    "max_llm_calls": 10_000,
    "max_tokens": 50_000_000,
    "max_wall_seconds": 6 * 3600.0,
    "max_records": 1_000_000,
}
LIMIT_KEYS = tuple(DEFAULT_LIMITS)
#: The provider that answers without a model (``llm/extractive.py``): its calls cost nothing and
#: are not charged.
OFFLINE_PROVIDER = "extractive"


@dataclass
class Budget:
    """The run limits, counted as the run goes; :attr:`hit` names the one that stopped it."""

    max_llm_calls: int = int(DEFAULT_LIMITS["max_llm_calls"])
    max_tokens: int = int(DEFAULT_LIMITS["max_tokens"])
    max_wall_seconds: float = DEFAULT_LIMITS["max_wall_seconds"]
    max_records: int = int(DEFAULT_LIMITS["max_records"])
    started: float = field(default_factory=time.monotonic)
    llm_calls: int = 0
    tokens: int = 0
    #: :attr:`tokens` split as the provider reported them, so a unit that failed can record
    #: what its calls cost (the difference across it) in its audit row.
    prompt_tokens: int = 0
    completion_tokens: int = 0
    records: int = 0
    #: Records cut to fit a prompt (``llm/tasks.py``), so a unit that failed can still count
    #: those its calls showed cut (the difference across it) in the run record.
    clipped: int = 0
    #: Records left out of a prompt to fit ``[llm] max_prompt_tokens``, so a unit that failed
    #: can still count those its calls left out (the difference across it) in the run record.
    left_out: int = 0
    #: Calls promised to units in flight and not made yet (:meth:`reserve`).
    reserved: int = 0
    hit: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @classmethod
    def of(cls, settings: Mapping[str, Any]) -> Budget:
        """The limits a strategy's (validated) settings give, defaults for those it lacks."""
        get = lambda key: settings.get(key, DEFAULT_LIMITS[key])  # noqa: E731
        return cls(int(get("max_llm_calls")), int(get("max_tokens")),
                   float(get("max_wall_seconds")), int(get("max_records")))

    def charge_call(self, usage: Usage | None, *, reserved: bool = False) -> None:
        """One LLM call made (failed ones too: the provider was asked), with its tokens;
        ``reserved``: the call was promised by :meth:`reserve` and no longer is."""
        with self._lock:
            self.llm_calls += 1
            if reserved:
                self.reserved = max(0, self.reserved - 1)
            if usage is not None:
                self.tokens += usage.total_tokens
                self.prompt_tokens += usage.prompt_tokens
                self.completion_tokens += usage.completion_tokens

    def reserve(self, calls: int) -> str | None:
        """Promise ``calls`` LLM calls to a unit about to start alongside others (a pool):
        ``None`` when every limit allows it, else the limit that forbids it."""
        reason = self.exceeded(calls_ahead=calls)
        if reason is None:
            with self._lock:
                self.reserved += max(0, calls)
        return reason

    def release(self, calls: int) -> None:
        """Give back promised calls a finished unit did not make."""
        with self._lock:
            self.reserved = max(0, self.reserved - max(0, calls))

    def charge_records(self, n: int) -> None:
        """``n`` input records consumed by a unit of work."""
        with self._lock:
            self.records += max(0, int(n))

    def charge_clipped(self, n: int) -> None:
        """``n`` records shown to the model cut to fit a prompt."""
        with self._lock:
            self.clipped += max(0, int(n))

    def charge_left_out(self, n: int) -> None:
        """``n`` records left out of a prompt to fit ``[llm] max_prompt_tokens``."""
        with self._lock:
            self.left_out += max(0, int(n))

    def exceeded(self, *, calls_ahead: int = 0) -> str | None:
        """The limit that forbids starting another unit, or ``None``. ``calls_ahead``: LLM
        calls the next unit (and units still in flight) will make, so a run never starts a
        unit that would carry it past ``max_llm_calls``. Remembered in :attr:`hit`."""
        with self._lock:
            if self.llm_calls + self.reserved + max(1, calls_ahead) > self.max_llm_calls:
                return self._remember(f"max_llm_calls ({self.max_llm_calls}) reached")
            return self._remember(self._used_up(records=True))

    def spent(self) -> str | None:
        """The limit that what the run has already used (tokens, time) has reached, or
        ``None``: checked by a unit promised earlier just before it starts, since tokens are
        only known once the units before it are done. Remembered in :attr:`hit`."""
        with self._lock:
            return self._remember(self._used_up(records=False))

    def time_up(self) -> str | None:
        """The wall limit, when it has run out, else ``None``: all that bounds a unit that
        asks no model (calls and tokens it does not spend). Remembered in :attr:`hit`."""
        with self._lock:
            return self._remember(self._out_of_time())

    def _used_up(self, *, records: bool) -> str | None:
        """The first of tokens, records (when asked) and wall time that has run out."""
        if self.tokens >= self.max_tokens:
            return f"max_tokens ({self.max_tokens}) reached"
        if records and self.records >= self.max_records:
            return f"max_records ({self.max_records}) reached"
        return self._out_of_time()

    def _out_of_time(self) -> str | None:
        if time.monotonic() - self.started >= self.max_wall_seconds:
            return f"max_wall_seconds ({self.max_wall_seconds:g}) reached"
        return None

    def _remember(self, reason: str | None) -> str | None:
        if reason and self.hit is None:
            self.hit = reason
        return reason

    def deadline(self) -> float:
        """The ``time.monotonic()`` at which ``max_wall_seconds`` runs out."""
        return self.started + self.max_wall_seconds

    def token_counts(self) -> tuple[int, int]:
        """``(prompt, completion)`` tokens charged so far."""
        with self._lock:
            return self.prompt_tokens, self.completion_tokens

    def summary(self) -> dict[str, int]:
        """What the run used, for logs."""
        return {"llm_calls": self.llm_calls, "tokens": self.tokens, "records": self.records}


class MeteredLLM:
    """The runtime's LLM, charging every call of one run to that run's :class:`Budget`.

    Everything else (``provider``, ``model``, provider-specific attributes) passes through.
    """

    def __init__(self, llm: LLM, budget: Budget, *, reserved: int = 0) -> None:
        self._llm = llm
        self._budget = budget
        self._left = reserved  # calls this unit was promised and has not made yet
        self._mutex = threading.Lock()

    def close(self) -> None:
        """The unit is done: give back the promised calls it did not make."""
        with self._mutex:
            left, self._left = self._left, 0
        self._budget.release(left)

    @property
    def provider(self) -> str:
        return self._llm.provider

    @property
    def model(self) -> str:
        return self._llm.model

    @property
    def inner(self) -> LLM:
        return self._llm

    @property
    def metered(self) -> bool:
        """Whether calls are charged (the offline provider's are free)."""
        return self._llm.provider != OFFLINE_PROVIDER

    def merge(self, req: MergeRequest) -> MergeResult:
        return self._charged(lambda: self._llm.merge(req))

    def extract_facts(self, req: FactsRequest) -> FactsResult:
        return self._charged(lambda: self._llm.extract_facts(req))

    def run_task(self, name: str, req: TaskRequest) -> TaskResult:
        return self._charged(lambda: self._llm.run_task(name, req))

    def _charged(self, call: Any) -> Any:
        if not self.metered:  # no model is asked: nothing to limit
            return call()
        from everos_reflect.llm.base import CALL_DEADLINE

        usage = None
        # the run's wall limit goes down to the provider: no retry starts that cannot end
        # before it (the units already started still finish their try)
        deadline = CALL_DEADLINE.set(self._budget.deadline())
        try:
            result = call()
            usage = getattr(result, "usage", None)
            return result
        except ProviderUnavailable as exc:
            usage = exc.usage  # replies that came and were refused were paid for too
            raise
        finally:
            CALL_DEADLINE.reset(deadline)
            with self._mutex:
                promised = self._left > 0
                self._left -= 1 if promised else 0
            self._budget.charge_call(usage, reserved=promised)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llm, name)


__all__ = ["DEFAULT_LIMITS", "LIMIT_KEYS", "Budget", "MeteredLLM"]
