"""The LLM interface strategies talk to, its request/result values, and an in-memory fake.

One generic call, ``run_task(name, request)`` (the structured tasks of ``llm/tasks.py``), plus
Reflection's two typed shortcuts: *merge* a cluster's Episodes into one narrative, and *extract*
atomic facts from a text (both are tasks too). Every provider raises
:class:`~everos_reflect.errors.ProviderUnavailable` for any failure (network, refusal, an
unusable reply), so a strategy needs exactly one ``except`` to skip a unit of work and go on.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from everos_reflect.model import ID_MENTION_RE

if TYPE_CHECKING:
    from everos_reflect.llm.prompts import Prompts
    from everos_reflect.llm.tasks import TaskRequest, TaskResult

MergeMode = Literal["init", "update"]

# Entry ids as SPEC §3 writes them; used to catch a reply citing entries it was never shown.
CITED_ID_RE = ID_MENTION_RE

#: The ``time.monotonic()`` by which the call being made must be over, or None: a run's
#: ``max_wall_seconds``, set around each call by the run's metered client
#: (``engine/limits.py``). A provider that retries does not start a try that cannot end by
#: then: against a dead server the last call of a run overshot its wall limit by
#: ``timeout_seconds`` × (``max_retries`` + 1) and the backoff between.
CALL_DEADLINE: ContextVar[float | None] = ContextVar("everos_call_deadline", default=None)


@dataclass(frozen=True)
class MergeMember:
    """One Episode handed to a merge: its id, when it happened, and its text.

    ``provenance`` (optional) names, per sentence of ``content`` (as ``split_sentences`` cuts
    it), the original Episodes that sentence stands for — set for an earlier narrative, so a
    sentence carried over keeps crediting its first sources. None: every sentence is ``id``'s.
    """

    id: str
    timestamp: datetime
    subject: str
    content: str
    provenance: tuple[tuple[str, ...], ...] | None = None


@dataclass(frozen=True)
class MergeRequest:
    """Merge ``members`` (chronological) into one narrative.

    ``init`` merges a cluster for the first time; ``update`` folds only the new ``members`` into
    ``existing``, the narrative an earlier merge wrote. ``language`` overrides the prompts'
    language setting (None = use it; "auto" = stay in the input's language).
    """

    mode: MergeMode
    members: list[MergeMember]
    existing: MergeMember | None = None
    language: str | None = None
    prompts: Prompts | None = None

    def __post_init__(self) -> None:
        if self.mode not in ("init", "update"):
            raise ValueError(f"merge mode must be 'init' or 'update', got {self.mode!r}")
        if not self.members:
            raise ValueError("a merge needs at least one member")
        if self.mode == "update" and self.existing is None:
            raise ValueError("an update merge needs the existing narrative")

    def chronological(self) -> list[MergeMember]:
        """Members ordered by time (stable, so equal timestamps keep the caller's order)."""
        return sorted(self.members, key=lambda m: m.timestamp)

    def shown_ids(self) -> set[str]:
        """Every entry id the model was shown; a reply may cite these and no others."""
        ids = {m.id for m in self.members}
        if self.existing is not None:
            ids.add(self.existing.id)
        for m in [*self.members, *([self.existing] if self.existing else [])]:
            ids.update(CITED_ID_RE.findall(m.subject))
            ids.update(CITED_ID_RE.findall(m.content))
        return ids


@dataclass(frozen=True)
class Usage:
    """Token counts reported by the provider (zero for offline providers)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
        )


@dataclass(frozen=True)
class MergeResult:
    """The merged narrative, and who wrote it (recorded in the audit row)."""

    title: str
    content: str
    usage: Usage = field(default_factory=Usage)
    provider: str = ""
    model: str = ""
    #: Per sentence of ``content``, the source Episode ids it carries (None: not known; the
    #: strategy then attributes sentences to sources by embedding similarity).
    provenance: tuple[tuple[str, ...], ...] | None = None


@dataclass(frozen=True)
class FactsRequest:
    """Extract atomic facts from ``text`` (usually a merged narrative)."""

    text: str
    language: str | None = None
    prompts: Prompts | None = None


@dataclass(frozen=True)
class FactsResult:
    facts: list[str]
    usage: Usage = field(default_factory=Usage)


@runtime_checkable
class LLM(Protocol):
    """What Reflection needs from a language model. Implementations must be thread-safe."""

    provider: str
    model: str

    def merge(self, req: MergeRequest) -> MergeResult:
        """Raise ProviderUnavailable on any failure."""
        ...

    def extract_facts(self, req: FactsRequest) -> FactsResult:
        """Raise ProviderUnavailable on any failure."""
        ...

    def run_task(self, name: str, req: TaskRequest) -> TaskResult:
        """Any registered task. Raise ProviderUnavailable on any failure, NeedsLLM when an
        offline provider has no honest way to do it."""
        ...


class ScriptExhausted(AssertionError):
    """A ScriptedLLM was called more often than its script allows (a test bug, not an outage).

    Deliberately not ProviderUnavailable: a strategy would swallow that and skip the cluster,
    hiding the mistake.
    """


TaskScript = dict | object  # a reply object, a TaskResult, an exception or a callable
MergeScript = MergeResult | tuple[str, str] | BaseException | type[BaseException] | Callable
FactsScript = FactsResult | list[str] | BaseException | type[BaseException] | Callable


class ScriptedLLM:
    """The in-memory LLM for tests: replays queued replies and records every request.

    Queue items for ``merges``: a MergeResult, a ``(title, content)`` pair, an exception
    (instance or class, raised), or a callable ``request -> MergeResult`` (to build a reply from
    what was asked, or to block on an event). ``facts`` likewise, with a ``list[str]`` shortcut.
    With ``fallback`` set, an empty queue delegates to it (e.g. an ExtractiveLLM); otherwise an
    empty queue raises :class:`ScriptExhausted`.

    ``tasks`` queues replies of other tasks by name: a ``dict`` is a raw reply object and goes
    through the task's own validator (so citations to unseen numbers fail exactly as they do
    against a server), a ``TaskResult`` is returned as is; exceptions and callables as above.
    Every task call is recorded in ``task_requests`` as ``(name, request)``.
    """

    def __init__(
        self,
        merges: Iterable[MergeScript] = (),
        facts: Iterable[FactsScript] = (),
        *,
        fallback: LLM | None = None,
        provider: str = "scripted",
        model: str = "scripted-v1",
        tasks: dict[str, Iterable[TaskScript]] | None = None,
    ) -> None:
        self.provider = provider
        self.model = model
        self.fallback = fallback
        self._merges: deque[MergeScript] = deque(merges)
        self._facts: deque[FactsScript] = deque(facts)
        self.merge_requests: list[MergeRequest] = []
        self.facts_requests: list[FactsRequest] = []
        self._tasks: dict[str, deque[TaskScript]] = {
            name: deque(items) for name, items in (tasks or {}).items()}
        self.task_requests: list[tuple[str, TaskRequest]] = []
        self._lock = threading.Lock()

    def queue_task(self, name: str, *items: TaskScript) -> None:
        with self._lock:
            self._tasks.setdefault(name, deque()).extend(items)

    def run_task(self, name: str, req: TaskRequest) -> TaskResult:
        from everos_reflect.errors import ProviderUnavailable
        from everos_reflect.llm.tasks import InvalidReply, TaskResult, get_task, parse_reply

        if name in ("merge", "facts") and not self._tasks.get(name):
            if name == "merge":
                merged = self.merge(req.payload)
                return TaskResult((merged.title, merged.content), merged.usage,
                                  merged.provider or self.provider, merged.model or self.model)
            facts = self.extract_facts(req.payload)
            return TaskResult(facts.facts, facts.usage, self.provider, self.model)
        spec = get_task(name)
        with self._lock:
            self.task_requests.append((name, req))
            queue = self._tasks.get(name)
            item = queue.popleft() if queue else None
        if item is None:
            if self.fallback is None:
                raise ScriptExhausted(f"unexpected {name!r} task call")
            return self.fallback.run_task(name, req)
        item = _raise_or_call(item, req)
        if isinstance(item, TaskResult):
            return item
        try:
            value = parse_reply(spec, item, req)
        except InvalidReply as exc:
            raise ProviderUnavailable(f"scripted {name!r} reply rejected: {exc}") from exc
        return TaskResult(value, Usage(), self.provider, self.model)

    def queue_merge(self, *items: MergeScript) -> None:
        with self._lock:
            self._merges.extend(items)

    def queue_facts(self, *items: FactsScript) -> None:
        with self._lock:
            self._facts.extend(items)

    def merge(self, req: MergeRequest) -> MergeResult:
        with self._lock:
            self.merge_requests.append(req)
            item = self._merges.popleft() if self._merges else None
        if item is None:
            if self.fallback is None:
                raise ScriptExhausted(f"unexpected merge call #{len(self.merge_requests)}")
            return self.fallback.merge(req)
        item = _raise_or_call(item, req)
        if isinstance(item, tuple):
            title, content = item
            return MergeResult(title, content, Usage(), self.provider, self.model)
        return item

    def extract_facts(self, req: FactsRequest) -> FactsResult:
        with self._lock:
            self.facts_requests.append(req)
            item = self._facts.popleft() if self._facts else None
        if item is None:
            if self.fallback is None:
                raise ScriptExhausted(f"unexpected extract_facts call #{len(self.facts_requests)}")
            return self.fallback.extract_facts(req)
        item = _raise_or_call(item, req)
        if isinstance(item, list):
            return FactsResult(list(item), Usage())
        return item


def _raise_or_call(item: object, req: object) -> object:
    if isinstance(item, BaseException):
        raise item
    if isinstance(item, type) and issubclass(item, BaseException):
        raise item("scripted failure")
    if callable(item) and not isinstance(item, (MergeResult, FactsResult, dict)):
        return item(req)
    return item
