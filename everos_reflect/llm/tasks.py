"""Structured LLM tasks: one named task = a prompt template, a JSON schema and a validator.

Every call any strategy makes goes through here (SPEC §9): the prompt comes from the task's
template (overridable per strategy through :class:`~everos_reflect.llm.prompts.Prompts`), the
request carries ``response_format`` with the task's JSON schema, and the reply is validated by
the task's parser before anyone sees it. A provider implements one generic method,
``run_task(name, request)``; Reflection's merge and fact extraction are two such tasks.

Records shown to the model are numbered ``[1] … [N]`` (:class:`Numbering`); a reply cites those
numbers and :meth:`Numbering.resolve` remaps them to real ids, rejecting any number the model
was not shown (seed 000's renumber-then-remap). A rejected reply is an :class:`InvalidReply`,
which providers retry like a transient failure and finally turn into ``ProviderUnavailable``.

A new tier adds its task with :func:`register_task` from its own module.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from string import Template
from typing import TYPE_CHECKING, Any

from everos_reflect.errors import EverosError
from everos_reflect.llm.base import Usage
from everos_reflect.model import (
    CONTROL_CHARS,
    LINE_BREAKS_AS_NEWLINES,
    SURROGATES,
    blank,
    hidden_format_problem,
    quoted_value,
)
from everos_reflect.problem_words import json_type

if TYPE_CHECKING:
    from everos_reflect.llm.prompts import Message, Prompts


class InvalidReply(Exception):
    """A reply arrived but is unusable (wrong shape, empty, citing unseen records)."""


class NeedsLLM(EverosError):
    """The configured provider has no honest offline way to do this task."""


# -- numbered records ------------------------------------------------------------------------

_LINE_BREAKS_RE = re.compile(r"\s+")
# A record line must not be able to pass for another record's number or close the data block.
_FAKE_NUMBER_RE = re.compile(r"\[(\s*\d+\s*)\]")
_BLOCK_TAG_RE = re.compile(r"<(\s*+/?\s*records\b)", re.IGNORECASE)  # as prompts.py


@dataclass(frozen=True)
class Record:
    """One record shown to the model: its real id, kind, date and text."""

    id: str
    kind: str
    text: str
    timestamp: datetime | None = None


#: The most characters of one record a prompt shows. A record's text comes from a person (a
#: hand-written Episode or task, an edited insight) or a model, and only the log's file-size
#: cap bounds it: 100 insights of 256 KiB made a 25 MB prompt.
MAX_RECORD_PROMPT_CHARS = 8_000
#: The most characters the records of one prompt show together: with many long records each
#: is cut to an equal share of this (never below :data:`MIN_RECORD_PROMPT_CHARS`), so a
#: window of ``max_records`` long records is about 50k tokens, not ``max_records`` × 8,000.
MAX_RECORDS_PROMPT_CHARS = 200_000
#: The least a record is cut to when many share :data:`MAX_RECORDS_PROMPT_CHARS`, as long as
#: that many fit (up to 200 records); past that, long records share the cap equally, so it
#: holds whatever ``max_records`` allows (a floor that stayed put made the prompt grow by
#: 1,000 characters per record past 200, without bound).
MIN_RECORD_PROMPT_CHARS = 1_000
#: The most records one call of a tier may show (``max_records`` above it is refused when
#: ``ome.toml`` loads): past it a long record's share of the cap is under 200 characters.
MAX_RECORDS_PER_CALL = MAX_RECORDS_PROMPT_CHARS // 200
#: The most characters of a record's label (built from metadata a person may edit, e.g. a
#: conviction's key) and of one filled-in value (the stale insight, the current worldview).
MAX_LABEL_PROMPT_CHARS = 200
MAX_VALUE_PROMPT_CHARS = 20_000


def clip_text(text: str, limit: int) -> str:
    """``text``, or its first ``limit`` characters followed by a mark saying how long it was:
    the model is told it sees part of the record, and the record keeps its number (its id)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… (clipped from {len(text):,} characters)"


def record_cap(lengths: Sequence[int], *, total: int = MAX_RECORDS_PROMPT_CHARS,
               per_record: int = MAX_RECORD_PROMPT_CHARS,
               floor: int = MIN_RECORD_PROMPT_CHARS) -> int:
    """The characters each record may show so that together they fit in ``total``: short
    records keep their whole text and the long ones share what is left equally (clamped to
    ``floor``..``per_record``; the floor is lowered to ``total`` // records when more records
    than ``total`` // ``floor`` are shown, so ``total`` always holds)."""
    floor = min(floor, total // max(1, len(lengths)))
    remaining = total
    ordered = sorted(lengths)
    for i, length in enumerate(ordered):
        share = remaining // (len(ordered) - i)
        if length > share:
            return max(floor, min(per_record, share))
        remaining -= length
    return per_record


def clip_records(records: Sequence[Record]) -> tuple[tuple[Record, ...], list[str]]:
    """``records`` as one prompt may show them, and the ids of the ones cut.

    Every prompt of every strategy goes through here (:class:`TaskRequest` clips its records
    on creation), so no tier can put a record's whole text, however long, into a prompt: each
    record is cut to :func:`record_cap`, marked by :func:`clip_text`, and keeps its id."""
    cap = record_cap([len(r.text) for r in records])
    out: list[Record] = []
    clipped: list[str] = []
    for record in records:
        text = clip_text(record.text, cap)
        kind = clip_text(record.kind, MAX_LABEL_PROMPT_CHARS)
        if text is record.text and kind is record.kind:
            out.append(record)
            continue
        clipped.append(record.id)
        out.append(Record(record.id, kind, text, record.timestamp))
    return tuple(out), clipped


def _inert(text: str) -> str:
    """``text`` on one line, unable to fake a record number or the data block's tags."""
    text = _LINE_BREAKS_RE.sub(" ", text).strip()
    return _BLOCK_TAG_RE.sub(r"‹\1", _FAKE_NUMBER_RE.sub(r"(\1)", text))


def record_line(n: int, record: Record) -> str:
    """``[n] 2026-10-12 episode: text`` on one line; neither the text nor the label (built
    from metadata a person may edit, e.g. a conviction's key) can fake a number or a tag."""
    day = record.timestamp.date().isoformat() if record.timestamp else "undated"
    return f"[{n}] {day} {_inert(record.kind)}: {_inert(record.text)}"


class Numbering:
    """Records numbered 1..N for one prompt, and the way back from numbers to ids."""

    def __init__(self, records: Sequence[Record]) -> None:
        self.records = list(records)

    def __len__(self) -> int:
        return len(self.records)

    def block(self) -> str:
        """The records as the prompt shows them: one ``[n] …`` line each, inside a data tag."""
        lines = [record_line(n, r) for n, r in enumerate(self.records, start=1)]
        return "<records>\n" + "\n".join(lines) + "\n</records>"

    def resolve(self, numbers: object, *, what: str = "evidence") -> list[str]:
        """Real ids of the cited numbers (order kept, repeats dropped).

        Raises :class:`InvalidReply` for anything but a list of integers 1..N: a reply citing a
        record it was not shown fails the whole call, it is not quietly trimmed.
        """
        if not isinstance(numbers, list):
            raise InvalidReply(f"{what!r} must be a list of record numbers")
        # a dict finds a repeat at once: a reply repeating [1..1000] through 16 MB (4 million
        # numbers) took 40 s in a list look-up per number, per call and per retry
        ids: dict[str, None] = {}
        for value in numbers:
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidReply(f"{quoted_value(what)} holds {quoted_value(value)}, not a "
                                   "record number")
            if not 1 <= value <= len(self.records):
                raise InvalidReply(
                    f"{what!r} cites [{value}] but only [1]..[{len(self.records)}] were shown"
                )
            ids.setdefault(self.records[value - 1].id)
        return list(ids)


# -- tasks -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskRequest:
    """The input of one task call.

    ``records`` are shown numbered (``$records`` in the template); ``values`` fill the other
    placeholders (already rendered text, e.g. ``question``); ``payload`` carries a typed request
    for tasks that build their own messages (merge, facts).
    """

    records: tuple[Record, ...] = ()
    values: Mapping[str, str] = field(default_factory=dict)
    payload: Any = None
    prompts: Prompts | None = None
    language: str | None = None
    #: Ids of the records cut to fit (:func:`clip_records`) and names of the values cut to
    #: :data:`MAX_VALUE_PROMPT_CHARS`, for the caller's log and run counts.
    clipped: tuple[str, ...] = field(default=(), init=False)
    clipped_values: tuple[str, ...] = field(default=(), init=False)

    def __post_init__(self) -> None:
        # Bounded here, where every task call is built, rather than by each strategy: a tier
        # that forgot to clip put records of any length into its prompts.
        records, clipped = clip_records(self.records)
        long_values = tuple(k for k, v in self.values.items()
                            if len(str(v)) > MAX_VALUE_PROMPT_CHARS)
        values = {k: clip_text(str(v), MAX_VALUE_PROMPT_CHARS) for k, v in self.values.items()}
        object.__setattr__(self, "records", records)
        object.__setattr__(self, "clipped", tuple(clipped))
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "clipped_values", long_values)

    @property
    def numbering(self) -> Numbering:
        return Numbering(self.records)


@dataclass(frozen=True)
class TaskResult:
    """A validated reply, its token usage, and who wrote it (recorded in audits)."""

    value: Any
    usage: Usage = field(default_factory=Usage)
    provider: str = ""
    model: str = ""


Parser = Callable[[dict[str, Any], TaskRequest], Any]
Builder = Callable[[TaskRequest, "Prompts"], list["Message"]]
Offline = Callable[[TaskRequest], Any]


@dataclass(frozen=True)
class TaskSpec:
    """One named task. ``schema`` is sent as ``response_format``; ``parse`` validates a reply
    (raising :class:`InvalidReply`) and returns the value callers get. ``template`` is the
    default prompt (placeholders ``$records``, ``$language_rule`` and ``values``' keys);
    ``messages`` replaces template rendering for tasks with their own prompt code. ``offline``
    is the honest offline implementation, when there is one."""

    name: str
    schema_name: str
    schema: dict[str, Any]
    parse: Parser
    template: str = ""
    placeholders: frozenset[str] = frozenset({"records"})
    messages: Builder | None = None
    offline: Offline | None = None


_TASKS: dict[str, TaskSpec] = {}
_lock = threading.Lock()


def register_task(spec: TaskSpec) -> TaskSpec:
    """Make ``spec`` available to every provider (registering a name again replaces it)."""
    with _lock:
        _TASKS[spec.name] = spec
    return spec


def get_task(name: str) -> TaskSpec:
    _load_builtin()
    try:
        return _TASKS[name]
    except KeyError:
        raise EverosError(f"unknown LLM task {name!r} (known: {', '.join(sorted(_TASKS))})") \
            from None


def known_tasks() -> dict[str, TaskSpec]:
    _load_builtin()
    return dict(_TASKS)


def _load_builtin() -> None:
    # The SPEC §9 tasks live in task_catalog; imported lazily to keep this module's imports flat.
    from everos_reflect.llm import task_catalog  # noqa: F401


def render_messages(spec: TaskSpec, req: TaskRequest, prompts: Prompts) -> list[Message]:
    """System rules, then the task's template with its records and values filled in."""
    if spec.messages is not None:
        return spec.messages(req, prompts)
    # the values are text a model or a person wrote (a question, a stale insight, the current
    # convictions): their lines stay, but none may pose as a record or open or close the block
    values = {k: _BLOCK_TAG_RE.sub(r"‹\1", _FAKE_NUMBER_RE.sub(r"(\1)", str(v)))
              for k, v in req.values.items()}
    values["records"] = req.numbering.block()
    values["language_rule"] = prompts.language_rule(req.language)
    text = Template(prompts.task_template(spec.name, spec.template)).safe_substitute(values)
    return [{"role": "system", "content": prompts.system}, {"role": "user", "content": text}]


def fit_request(name: str, records: Sequence[Record], values: Mapping[str, str], *,
                budget: int | None, prompts: Prompts | None = None, min_records: int = 1,
                keep_last: bool = False) -> tuple[TaskRequest, tuple[str, ...]]:
    """The request of task ``name`` showing as many of ``records`` as its prompt fits in
    ``budget`` estimated tokens (``[llm] max_prompt_tokens``), and the ids left out.

    ``records`` come in the caller's priority order, the least important last (first with
    ``keep_last``: chronological records of which the newest matter most); those left out
    are the least important. The rest are numbered as shown, so a reply's ``[n]`` resolves to
    a record the model saw. When not even ``min_records`` fit (what the task needs, e.g. two
    to cite), every record is kept and the client refuses the request unsent, as before.
    """
    from everos_reflect.llm.budget import estimate_tokens
    from everos_reflect.llm.prompts import DEFAULT_PROMPTS

    spec = get_task(name)
    ordered = list(reversed(records)) if keep_last else list(records)

    def request(n: int) -> TaskRequest:
        kept = ordered[:n]
        return TaskRequest(records=tuple(reversed(kept)) if keep_last else tuple(kept),
                           values=dict(values), prompts=prompts)

    def fits(req: TaskRequest) -> bool:
        return estimate_tokens(render_messages(spec, req, prompts or DEFAULT_PROMPTS)) <= budget

    whole = request(len(ordered))
    least = max(0, min(min_records, len(ordered)))
    if budget is None or spec.messages is not None or fits(whole):
        return whole, ()
    best = request(least)
    if not fits(best):
        return whole, ()
    # the prompt grows with the records shown (each one's share of the cap shrinks as more
    # share it, never the whole): the most that fit, by bisection, each kept size checked
    lo, hi = least, len(ordered)  # lo fits, hi does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        candidate = request(mid)
        if fits(candidate):
            lo, best = mid, candidate
        else:
            hi = mid
    left_out = ordered[lo:]
    return best, tuple(r.id for r in (reversed(left_out) if keep_last else left_out))


def task_template_problem(spec: TaskSpec, text: str) -> str | None:
    """Why ``text`` cannot replace ``spec``'s template (None: it can)."""
    template = Template(text)
    if not template.is_valid():
        return "invalid template: a '$' must start a placeholder (write '$$' for a dollar sign)"
    used = set(template.get_identifiers())
    allowed = set(spec.placeholders) | {"language_rule"}
    missing = {"records"} & set(spec.placeholders) - used
    unknown = used - allowed
    if missing:
        word = "placeholder" if len(missing) == 1 else "placeholders"
        return f"missing {word} " + ", ".join(f"${n}" for n in sorted(missing))
    if unknown:
        word = "placeholder" if len(unknown) == 1 else "placeholders"
        return (f"unknown {word} " + ", ".join(f"${n}" for n in sorted(unknown))
                + " (allowed: " + ", ".join(f"${n}" for n in sorted(allowed)) + ")")
    return None


def parse_reply(spec: TaskSpec, obj: object, req: TaskRequest) -> Any:
    """Validate one reply object with the task's parser (extra keys are ignored)."""
    if not isinstance(obj, dict):
        raise InvalidReply(f"expected a JSON object, got {json_type(obj)}")
    return spec.parse(obj, req)


def run_offline(spec: TaskSpec, req: TaskRequest, provider: str) -> Any:
    """The task's offline value, or :class:`NeedsLLM` when no honest one exists."""
    if spec.offline is None:
        raise NeedsLLM(f"the {spec.name!r} task needs an LLM: the {provider} provider cannot "
                       "do it honestly (set [llm] provider = \"openai\" with a base_url/api_key)")
    return spec.offline(req)


def offline_task(provider: Any, name: str, req: TaskRequest) -> TaskResult:
    """``run_task`` for an offline provider: merge and facts through its own methods, every
    other task through the task's offline implementation, or :class:`NeedsLLM`."""
    if name == "merge":
        merged = provider.merge(req.payload)
        return TaskResult((merged.title, merged.content), merged.usage, provider.provider,
                          provider.model)
    if name == "facts":
        facts = provider.extract_facts(req.payload)
        return TaskResult(facts.facts, facts.usage, provider.provider, provider.model)
    value = run_offline(get_task(name), req, provider.provider)
    return TaskResult(value, Usage(), provider.provider, provider.model)


# -- small validators shared by the task catalog ---------------------------------------------


#: Control characters no text a model writes may hold: the set every user edge refuses
#: (:data:`~everos_reflect.model.CONTROL_CHARS`: C0 but tab, line feed and carriage return,
#: DEL, and C1). Written into a daily log, a NUL made the Markdown a "binary file" to grep,
#: git and editors, and an ESC drove the terminal of whoever read it. The C1 half was let
#: through: a NEL (U+0085) put a closing entry marker on a line of its own for every reader
#: that splits lines as ``str.splitlines`` and YAML do, and a CSI (U+009B) is an ESC ``[``.
_CONTROL = CONTROL_CHARS


#: :data:`~everos_reflect.model.LINE_BREAKS_AS_NEWLINES` but the control characters: the
#: Unicode line and paragraph separators, which are text. An item a tier checks itself keeps its
#: control characters for the tier to refuse that item (a NEL taken as a line break was written).
_SEPARATORS_AS_NEWLINES = {k: v for k, v in LINE_BREAKS_AS_NEWLINES.items()
                           if not _CONTROL.match(chr(k))}


def _no_control(value: str, what: str, shown: str | None = "") -> str:
    """``value`` as written, unless it holds a control character, a lone surrogate or an
    invisible formatting character (:func:`~everos_reflect.model.hidden_format`: a bidi
    override, a zero-width space) that ``shown`` (the text the model was given) does not
    hold: :class:`InvalidReply` naming it and where. ``shown`` None: the caller refuses a
    control or invisible formatting character itself, one item at a time (the derived tiers,
    :func:`~everos_reflect.strategies.beliefs.text_problem`): one item holding a terminal
    escape failed the whole call, the reply's good items with it, on every run."""
    found = _CONTROL.search(value) if shown is not None else None
    if found is not None:
        raise InvalidReply(f"{what} holds the control character U+{ord(found.group()):04X}")
    # a JSON "\ud83d" escape with no pair parses to a lone surrogate, which no UTF-8 file can
    # hold: the merge's write raised a bare UnicodeEncodeError (the cluster failed, never
    # retried), and a narrative holding one failed the facts call as a bad api_key header
    found = SURROGATES.search(value)
    if found is not None:
        raise InvalidReply(f"{what} holds the lone surrogate U+{ord(found.group()):04X}, "
                           "which is no text")
    if shown is None:
        return value.translate(_SEPARATORS_AS_NEWLINES).strip()
    # one showing nothing is refused or dropped as empty by the caller, as it was
    problem = None if blank(value) else hidden_format_problem(value, shown)
    if problem is not None:
        raise InvalidReply(f"{what} {problem}")
    # U+2028 / U+2029 are line breaks to YAML, editors and ``str.splitlines``, not to a daily
    # log: the text is taken with the line breaks they mean, as the writer would write it, so
    # the narrative its facts and sentences come from is the one the log holds
    return value.translate(LINE_BREAKS_AS_NEWLINES).strip()


def got(obj: Mapping[str, Any], key: str) -> str:
    """What ``obj`` holds under ``key``, for an error: its type, or that there is no such key
    and which keys there are. A model answering under names of its own (``{"response":
    {...}}``, ``{"lesson": [...]}``) read "'lessons' must be a list of strings", as if its
    lessons were of the wrong type."""
    if key in obj:
        return json_type(obj[key])
    return f"nothing: no {key!r} key (keys there: {quoted_value(list(obj)[:10])})"


#: The most characters of one text item of a derived tier's reply (an insight, a conviction,
#: an edge's text, a lesson). A longer one is refused alone by its tier
#: (:func:`~everos_reflect.strategies.beliefs.text_problem`), the reply's other items kept.
MAX_ITEM_CHARS = 2_000


def text_field(obj: Mapping[str, Any], key: str, *, limit: int | None = 20_000,
               shown: str | None = "") -> str:
    """``obj[key]``: text, not blank, at most ``limit`` characters (None: the caller bounds
    it, one item at a time), as :func:`_no_control` allows it (``shown``)."""
    value = obj.get(key)
    if not isinstance(value, str):
        raise InvalidReply(f"{key!r} must be a string, got {got(obj, key)}")
    value = value.strip()
    if blank(value):  # a zero-width space or a BOM alone was written as a title or an insight
        raise InvalidReply(f"{key!r} is empty")
    if limit is not None and len(value) > limit:
        raise InvalidReply(f"{key!r} is longer than {limit} characters")
    return _no_control(value, repr(key), shown)


def list_field(obj: Mapping[str, Any], key: str) -> list[Any]:
    value = obj.get(key)
    if not isinstance(value, list):
        raise InvalidReply(f"{key!r} must be a list, got {got(obj, key)}")
    return value


def strings(obj: Mapping[str, Any], key: str, *, limit: int | None = MAX_ITEM_CHARS,
            shown: str | None = "") -> list[str]:
    """A list of non-empty strings, stripped, duplicates dropped (order kept); each as
    :func:`_no_control` allows it (``shown``), at most ``limit`` characters (None: the
    caller refuses a longer one alone)."""
    items = obj.get(key)
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise InvalidReply(f"{key!r} must be a list of strings" + (
            "" if key in obj else f", got {got(obj, key)}"))
    kept: dict[str, None] = {}  # a dict keeps order and finds a repeat in O(1): a reply may
    # hold many thousands of items, and a list look-up per item would be quadratic
    for item in (i.strip() for i in items):
        if limit is not None and len(item) > limit:
            raise InvalidReply(f"an item of {key!r} is longer than {limit} characters")
        item = _no_control(item, f"an item of {key!r}", shown)
        if not blank(item):  # dropped as an empty one is: a U+200B alone was a fact
            kept.setdefault(item)
    return list(kept)


def object_schema(properties: dict[str, Any]) -> dict[str, Any]:
    """A strict object schema: exactly these properties, all required, nothing else."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


STRING: dict[str, Any] = {"type": "string"}
NUMBERS: dict[str, Any] = {"type": "array", "items": {"type": "integer"}}


__all__ = [
    "MAX_ITEM_CHARS",
    "MAX_RECORDS_PER_CALL",
    "MAX_RECORDS_PROMPT_CHARS",
    "MAX_RECORD_PROMPT_CHARS",
    "MAX_VALUE_PROMPT_CHARS",
    "InvalidReply",
    "NeedsLLM",
    "Numbering",
    "Record",
    "TaskRequest",
    "TaskResult",
    "TaskSpec",
    "clip_records",
    "clip_text",
    "fit_request",
    "get_task",
    "known_tasks",
    "offline_task",
    "parse_reply",
    "record_line",
    "register_task",
    "render_messages",
    "run_offline",
    "task_template_problem",
]
