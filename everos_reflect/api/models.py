"""Request models shared by every edge that takes memory requests (HTTP API, MCP server).

One pydantic model per operation, so an input the HTTP API refuses is refused by MCP too, with
the same message: a misspelt field is an error (``extra="forbid"``), types are strict (``"yes"``
is not a boolean, ``"5"`` not a number), ids carry their pattern (published in the OpenAPI
schema), sizes are bounded here.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo
from pydantic_core import PydanticCustomError

from everos_reflect.errors import InvalidEpisode, InvalidId
from everos_reflect.index.search import MAX_PASSAGES_PER_ENTRY, MAX_TOP_K, PASSAGES_PER_ENTRY
from everos_reflect.model import (
    CONTROL_CLASS,
    ENTRY_ID_RE,
    LINE_BREAK_RE,
    LIST_LIMIT,
    MAX_BRIEFING_QUERY_CHARS,
    MAX_BRIEFING_TOKENS,
    MAX_LIST_LIMIT,
    MAX_QUERY_CHARS,
    MAX_SUBJECT_CHARS,
    MAX_TRIGGER_WAIT,
    NAME_PATTERN,
    blank,
    control_problem,
    hidden_format,
    malformed_entry_id,
    new_record_time,
    not_an_episode_id,
    quoted_value,
    too_long,
    validate_name,
)
from everos_reflect.typed_numbers import (
    NumberProblem,
    out_of_range,
    seconds_words,
    whole_number,
    whole_value_problem,
)


def size_problem(problem: Mapping[str, Any]) -> str | None:
    """pydantic's error of a text or list of the wrong size in a person's words, else
    ``None``: "must not be empty" where one character or item is the least (``min_length=1``;
    ``"query": ""`` was "String should have at least 1 character" and ``"kinds": []`` "List
    should have at least 1 item after validation, not 0", where a blank ``"query": "  "`` was
    "must not be empty"), and for one too long the most and how long it is (``must be at most
    2,000 characters, got 3,000``: "String should have at most 2000 characters" did not say
    by how much). The API, MCP and the CLI (``briefing``, ``lessons``) say it alike."""
    kind, ctx, given = problem.get("type"), problem.get("ctx") or {}, problem.get("input")
    if kind in ("string_too_short", "too_short") and ctx.get("min_length") == 1:
        return "must not be empty"
    if kind == "string_too_long" and isinstance(given, str) and "max_length" in ctx:
        return too_long(ctx["max_length"], len(given))
    if kind == "too_long" and isinstance(given, list | tuple) and "max_length" in ctx:
        return f"must hold at most {ctx['max_length']:,} items, got {len(given):,}"
    return None


class Strict(BaseModel):
    # extra: a misspelt field is an error, not ignored; strict: {"force": "yes"} is refused
    # rather than read as true (it once ran a real merge).
    model_config = ConfigDict(extra="forbid", strict=True)


def _name(value: str, info: ValidationInfo) -> str:
    what = info.field_name or "id"
    lone = next((c for c in value if 0xD800 <= ord(c) <= 0xDFFF), None)
    if lone is not None:
        # a client's "\udcff" was quoted back as 'u1\xff' (the escape a folder's byte that
        # is not UTF-8 is shown with), a byte it never sent: named as a text field's is
        raise InvalidId(f"holds U+{ord(lone):04X}, a lone UTF-16 surrogate (half of a "
                        "character): not text")
    return validate_name(value, what)  # InvalidId says what is allowed


#: A merged narrative is an episode: ``ep_<YYYYMMDD>_<NNNN>``.
EPISODE_ID_PATTERN = r"^ep_[0-9]{8}_[0-9]{4,18}$"


def _episode_id(value: str) -> str:
    """A merged narrative's id (``undo``), refused as the CLI's ``undo`` refuses it: ``""``
    and an id of no entry's form as ``explain`` says them (:func:`entry_id_form`; ``""`` was
    "entry_id: must not be empty"), another kind's id (``in_…``) as not an episode's (it was
    "invalid episode id 'in_…': expected e.g. ep_…", the CLI "in_… is not an episode id")."""
    entry_id_form(value)
    if not re.fullmatch(EPISODE_ID_PATTERN, value):  # the form; an impossible day is a 404
        raise InvalidId(not_an_episode_id(value))
    return value


def _whole(value: object) -> object:
    """JSON Schema's integer: ``5`` and ``5.0`` (a number with no fraction), never ``"5"`` or
    ``true``. Strict mode alone would refuse ``5.0``, which the schema allows."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


#: An integer field: strict (no strings, no booleans) but accepting a whole float.
Whole = Annotated[int, BeforeValidator(_whole)]


def _whole_between(low: int, high: int) -> Any:
    def check(given: object) -> object:
        value = _whole(given)
        # any other type is pydantic's strict int's to refuse, in the same words
        if isinstance(value, int) and not isinstance(value, bool) and \
                whole_value_problem(value, low, high) is not None:
            raise PydanticCustomError("whole_range", out_of_range(given, low, high))
        return value

    return check


def whole_between(low: int, high: int) -> Any:
    """:data:`Whole` from ``low`` to ``high`` (published as the schema's bounds), refused in the
    words of the CLI option of the same name (``must be a whole number from 1 to 100, got
    0``): pydantic's "Input should be greater than or equal to 1" said half of it, and not
    as ``--top-k`` said it."""
    # the bounds first: wrapped in the validator they were published as "ge"/"le", not as
    # JSON Schema's minimum/maximum (the validator runs first all the same)
    return Annotated[int, Field(ge=low, le=high), BeforeValidator(_whole_between(low, high))]


def _seconds_between(low: float, high: float) -> Any:
    def check(value: object) -> object:
        if isinstance(value, int | float) and not isinstance(value, bool) and \
                not low <= value <= high:  # NaN too: it compares false with both
            raise PydanticCustomError("seconds_range", f"{seconds_words(low, high)}, got "
                                                       f"{quoted_value(value)}")
        return value

    return check


TopK = whole_between(1, MAX_TOP_K)
PassagesPerEntry = whole_between(1, MAX_PASSAGES_PER_ENTRY)
MaxTokens = whole_between(1, MAX_BRIEFING_TOKENS)
Importance = whole_between(1, 10)
ListLimit = whole_between(1, MAX_LIST_LIMIT)
#: ``trigger``'s wait, as ``--timeout`` bounds it.
TriggerSeconds = Annotated[float, Field(ge=0, le=MAX_TRIGGER_WAIT),
                           BeforeValidator(_seconds_between(0, MAX_TRIGGER_WAIT))]

#: "Has a character that shows": not white space in Python's sense (``str.strip``/``split``)
#: and not an invisible format character (Unicode ``Cf``: U+200B, BOM, joiners), what
#: :func:`everos_reflect.model.blank` refuses. Spelled out char by char: regex engines disagree
#: on ``\s`` (Python counts U+001C-U+001F as white space, Unicode does not), and the schema
#: allowed a BOM-only text that the write then refused (a 422 to a request it called valid).
#: A character past U+FFFF is written as itself: a ``\\u`` escape has four hex digits.
#: :func:`blank` of one character, tested inline: calling it for each of the 1,114,112 code
#: points cost ~0.5 s of CPU at every start of a process that loads the API (``serve``,
#: ``mcp``, the CLI's ``search`` and ``briefing``); this is ~0.1 s (a test pins them equal).
_BLANK = [c for c in range(0x110000)
          if (char := chr(c)).isspace() or unicodedata.category(char) == "Cf"]
NOT_BLANK = "[^" + "".join(f"\\u{c:04x}" if c <= 0xFFFF else chr(c) for c in _BLANK) + "]"


#: What no text written into a daily log may hold, inside a JSON Schema class: the control
#: characters but tab and line breaks, and the invisible formatting characters
#: (:func:`~everos_reflect.model.hidden_format`: bidi overrides, zero-width space, ...), as
#: :func:`_no_control` refuses them. Without the second half the schema called valid a
#: request the write then refused.
REFUSED_CLASS = CONTROL_CLASS + "".join(
    f"\\u{c:04x}" if c <= 0xFFFF else chr(c)
    for c in _BLANK if hidden_format(chr(c)))  # every one is blank: invisible

#: Text with no control character but tab and line breaks, and no invisible formatting
#: character (what :func:`_no_control` checks).
NO_CONTROL = f"^[^{REFUSED_CLASS}]*$"

#: Not blank (:data:`NOT_BLANK`) and no control character: the pattern of user text that ends in
#: a daily log. A class of "not white space and not control" between runs of "not control".
TEXT = f"^[^{REFUSED_CLASS}]*{NOT_BLANK[:-1]}{REFUSED_CLASS}][^{REFUSED_CLASS}]*$"


def _no_control(value: str) -> str:
    """Refuse a NUL, ESC, ... (not tab, LF, CR) in text that is written into a daily log: a NUL
    made the Markdown a "binary file" to grep and git. The published ``pattern`` says the same;
    this gives the message, naming the character (the field is named by the edge)."""
    problem = control_problem(value)
    if problem is not None:
        raise PydanticCustomError("control_character", problem)
    return value


#: User text that is written into a daily log.
LogText = Annotated[str, AfterValidator(_no_control)]


def _not_blank(value: str) -> str:
    """Refuse a query that shows nothing (``"  "``, a U+200B alone) in the words an empty one
    gets (``query: must not be empty``): a blank one was "query must not be empty", a second
    wording of the same refusal, at the API, MCP and ``briefing``."""
    if blank(value):
        raise PydanticCustomError("blank", "must not be empty")
    return value


def _new_timestamp(value: str) -> str:
    """Refuse a new record's timestamp the writer would refuse, in its words
    (:func:`~everos_reflect.model.new_record_time`), with the request's other problems: the
    writer checked it only once the model had passed, so ``{"task_type": "", "timestamp":
    ""}`` named the task type alone, and the timestamp was refused on the next try."""
    try:
        new_record_time(value, None)
    except InvalidEpisode as exc:
        raise PydanticCustomError("timestamp", exc.reason) from None
    return value


#: A new Episode's or task record's timestamp; left out, the time now.
NewTimestamp = Annotated[str, AfterValidator(_new_timestamp)]


#: A search or briefing query: text that shows something.
QueryText = Annotated[str, AfterValidator(_not_blank)]

#: A query's pattern: not blank (:data:`NOT_BLANK`) and no control character but tab and line
#: breaks, as ``search`` and ``briefing`` refuse one
#: (:func:`~everos_reflect.model.query_control_problem`; an invisible formatting character is
#: allowed). Without the second half the schema called valid a query the search then refused.
QUERY = f"^[^{CONTROL_CLASS}]*{NOT_BLANK[:-1]}{CONTROL_CLASS}][^{CONTROL_CLASS}]*$"


#: :data:`~everos_reflect.model.LINE_BREAK_RE`'s characters inside a JSON Schema class.
ONE_LINE = "\\n\\r\\u2028\\u2029"


def _one_line(value: str) -> str:
    if LINE_BREAK_RE.search(value):
        raise ValueError("must be one line")
    return value


# The pattern is published in the schema; the validators give the message a person can act on.
Name = Annotated[str, AfterValidator(_name), Field(
    json_schema_extra={"pattern": NAME_PATTERN}, description="1-128 of A-Z a-z 0-9 _ . -")]
EpisodeIdText = Annotated[str, AfterValidator(_episode_id), Field(
    json_schema_extra={"pattern": EPISODE_ID_PATTERN}, description="e.g. ep_20261012_0001")]


class SearchRequest(Strict):
    query: QueryText = Field(min_length=1, max_length=MAX_QUERY_CHARS,
                             json_schema_extra={"pattern": QUERY})
    top_k: TopK = 5
    user_id: Name | None = None
    app_id: Name | None = None
    project_id: Name | None = None
    mode: Literal["hybrid", "vector", "keyword"] | None = Field(
        None, description="Ranking (default: settings).")
    include_deprecated: bool = False
    kinds: list[Literal["episode", "atomic_fact", "insight", "conviction", "relation", "task",
                        "lesson"]] | None = Field(
        None, min_length=1, max_length=7,
        description="Entry kinds to search (episode, atomic_fact, insight, ...); default "
                    "episode. Not empty: an empty list searched nothing and found nothing.")
    include_stale: bool = False
    passages_per_entry: PassagesPerEntry = Field(
        PASSAGES_PER_ENTRY,
        description="Items one entry may fill (its best passage and further ones, same id); "
                    "1 = one item per entry. Hybrid search of Episodes only; top_k counts "
                    "items.")


class EpisodeRequest(Strict):
    user_id: Name
    app_id: Name | None = None
    project_id: Name | None = None
    subject: Annotated[str, AfterValidator(_one_line), AfterValidator(_no_control)] = Field(
        min_length=1, max_length=MAX_SUBJECT_CHARS,
        description=f"One line of at most {MAX_SUBJECT_CHARS} characters, not blank, no control "
                    "character.",
        json_schema_extra={"pattern": rf"^[^{ONE_LINE}{REFUSED_CLASS}]*{NOT_BLANK[:-1]}"
                                      rf"{REFUSED_CLASS}][^{ONE_LINE}{REFUSED_CLASS}]*$"})
    content: LogText = Field(min_length=1,
                             description="Not blank; no control character but tab, CR, LF.",
                             json_schema_extra={"pattern": TEXT})
    timestamp: NewTimestamp | None = Field(None, description="ISO 8601; default now (UTC).",
                                           json_schema_extra={"format": "date-time"})
    session_id: Name | None = None
    importance: Importance | None = None


def _strategy_name(value: object) -> object:
    """``""`` refused as ``trigger ''`` and ``enable ''`` refuse it (an id given empty,
    :func:`~everos_reflect.problem_words.unknown_strategy`: code ``invalid_id``, the known
    names listed), where the API said "name: must not be empty" (``invalid_request``)."""
    if value == "":
        from everos_reflect.engine.registry import known_strategies
        from everos_reflect.problem_words import unknown_strategy

        raise InvalidId(unknown_strategy(value, known_strategies()))
    return value


class TriggerRequest(Strict):
    name: Annotated[str, BeforeValidator(_strategy_name)] = Field(
        min_length=1, max_length=200, description="Strategy name, e.g. reflect_episodes.")
    timeout: TriggerSeconds = Field(120.0, description="Seconds to wait for the run.")
    force: bool = Field(False, description="Run even when the strategy is disabled.")


class UndoRequest(Strict):
    entry_id: EpisodeIdText
    user_id: Name
    app_id: Name | None = None
    project_id: Name | None = None
    cascade: bool = False


#: One line of a task record (a step, an error): not blank, at most 2,000 characters. The
#: bounds come before the text's own check: after it they were checked as of a collection
#: ("Value should have at most 2000 items after validation") of one long step.
Line = Annotated[str, Field(min_length=1, max_length=2000, json_schema_extra={"pattern": TEXT}),
                 AfterValidator(_no_control)]
#: A task's outcome note, its bound before its text's check as :data:`Line`'s: after it, a
#: 4,001-character note was "Value should have at most 4000 items after validation".
OutcomeNote = Annotated[str, Field(min_length=1, max_length=4000), AfterValidator(_no_control)]


class TaskRecordRequest(Strict):
    """``POST /api/v1/tasks``: a task record (bounds are checked again by ``new_task``)."""

    user_id: Name
    app_id: Name | None = None
    project_id: Name | None = None
    task_type: Name = Field(description="e.g. deploy")
    goal: LogText = Field(min_length=1, max_length=4000, json_schema_extra={"pattern": TEXT})
    steps: list[Line] = Field(min_length=1, max_length=100, description="One entry per step.")
    outcome: Literal["success", "failure", "partial"]
    errors: list[Line] = Field(default_factory=list, max_length=50)
    outcome_note: OutcomeNote | None = Field(
        None, description="What happened; not blank; default (left out): the outcome word.",
        json_schema_extra={"pattern": TEXT})
    timestamp: NewTimestamp | None = Field(None, description="ISO 8601; default now (UTC).",
                                           json_schema_extra={"format": "date-time"})


class BriefingRequest(Strict):
    """``POST /api/v1/memory/briefing``: one bounded block of memory for a query."""

    user_id: Name
    app_id: Name | None = None
    project_id: Name | None = None
    query: QueryText = Field(min_length=1, max_length=MAX_BRIEFING_QUERY_CHARS,
                             json_schema_extra={"pattern": QUERY})
    task_type: Name | None = Field(None, description="Adds the lessons of this task type.")
    max_tokens: MaxTokens = Field(1000,
                            description="Budget of the whole block, in the bundled tokenizer's "
                                        "tokens.")


def whole_query(low: int, high: int) -> Callable[[object], object]:
    """The before-validator of a query string's whole number from ``low`` to ``high``, read
    as the CLI reads the same option (:func:`~everos_reflect.typed_numbers.whole_number`):
    pydantic read ``1_0`` as 10 and `` 10`` or ``10.0`` too, and said "Input should be greater
    than or equal to 1" where ``--limit`` said the bounds. A number (an MCP call's JSON)
    passes to the field's own checks."""

    def check(value: object) -> object:
        if not isinstance(value, str):
            return value
        try:
            return whole_number(value, low, high)
        except NumberProblem as exc:
            raise PydanticCustomError("int_parsing", str(exc)) from None

    return check


class LessonsQuery(Strict):
    """``GET /api/v1/lessons``: the live lessons of a task type, most confirmed first."""

    task_type: Name
    user_id: Name | None = Field(None, description="One user; default: every user.")
    app_id: Name | None = None
    project_id: Name | None = None
    limit: ListLimit = Field(LIST_LIMIT,
                             description="The most lessons answered, most confirmed first "
                                     "(`total` counts them all).")


class LessonsParams(LessonsQuery):
    """:class:`LessonsQuery` read from a query string, where ``limit`` is text."""

    limit: Annotated[int, BeforeValidator(whole_query(1, MAX_LIST_LIMIT))] = Field(
        LIST_LIMIT, ge=1, le=MAX_LIST_LIMIT,
        description="The most lessons answered, most confirmed first (`total` counts them "
                    "all).")


class ErrorDetail(BaseModel):
    code: str = Field(description="Machine-readable, e.g. invalid_request, too_large.")
    message: str = Field(description="What was wrong, naming the field or limit.")


class ErrorBody(BaseModel):
    """Every error answer: ``{"error": {"code", "message"}}``."""

    error: ErrorDetail


class InsightsQuery(Strict):
    """The query of ``GET /api/v1/memory/insights``."""

    user_id: Name
    app_id: Name | None = None
    project_id: Name | None = None
    include_stale: bool = False
    limit: ListLimit = Field(LIST_LIMIT,
                             description="The most insights answered, newest first (`total` "
                                     "counts them all).")


def entry_id_form(value: str) -> str:
    """``value`` if it has an entry id's form, else :class:`InvalidId` naming it; an id of the
    form with an impossible day is the look-up's 404 (``lookup_entry_id``). MCP's ``explain``
    and the API's ``{entry_id}`` path parameter both refuse with this message."""
    if not ENTRY_ID_RE.fullmatch(value):
        raise InvalidId(malformed_entry_id(value))
    return value


def _entry_id_text(value: object) -> object:
    """:func:`entry_id_form` of a text; any other type is the field's to refuse."""
    return entry_id_form(value) if isinstance(value, str) else value


class ExplainQuery(Strict):
    """``GET /api/v1/memory/explain/{entry_id}``: the path's id and the query's user."""

    # the form before the length: an empty or 100-character id was "must not be empty" or
    # "must be at most 64 characters" (invalid_request), where the API's path parameter
    # said "invalid entry id …" (invalid_id) for the same id
    entry_id: Annotated[str, BeforeValidator(_entry_id_text)] = Field(
        min_length=1, max_length=64, json_schema_extra={"pattern": ENTRY_ID_RE.pattern})
    user_id: Name
    app_id: Name | None = None
    project_id: Name | None = None
