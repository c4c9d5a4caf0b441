"""The memory operations every edge exposes: a validated request in, a JSON-ready answer out.

The HTTP API and the MCP server both call these, so the two can never drift apart in what they
accept or in the shape they answer with. Domain errors propagate; each edge turns them into its
own kind of error with :func:`error_code`.
"""

from __future__ import annotations

import errno
import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from everos_reflect import errors
from everos_reflect import problem_words as words
from everos_reflect.fileio import os_error_text
from everos_reflect.llm.importance import importance_on_write
from everos_reflect.markdown.parser import lookup_entry_id
from everos_reflect.model import (
    ENTRY_ID_RE,
    Kind,
    UserRef,
    json_got,
    malformed_relation_id,
    new_episode,
    shown_key,
    shown_path,
    validate_name,
)

log = logging.getLogger("everos_reflect.api")

#: How long a write waits for the indexer (a scan or rebuild may hold it) before it answers
#: ``indexed: false`` and leaves the entry to the watcher, the next write or ``reindex``.
INDEX_WAIT_SECONDS = 10.0

if TYPE_CHECKING:
    from everos_reflect.api.models import (
        BriefingRequest,
        EpisodeRequest,
        ExplainQuery,
        InsightsQuery,
        LessonsQuery,
        SearchRequest,
        TaskRecordRequest,
    )
    from everos_reflect.runtime import Runtime

#: Domain error → (HTTP status, machine-readable code). Checked in order: subclasses first.
ERROR_CODES: tuple[tuple[type[Exception], int, str], ...] = (
    (errors.UnknownStrategy, 404, "unknown_strategy"),
    (errors.UnknownEntry, 404, "unknown_entry"),
    (errors.InvalidId, 422, "invalid_id"),
    (errors.InvalidEpisode, 422, "invalid_request"),
    (errors.InvalidRequest, 422, "invalid_request"),
    (errors.TooLarge, 422, "too_large"),
    (errors.ConfigError, 400, "invalid_config"),
    (errors.StrategyBusy, 409, "busy"),
    (errors.UndoRefused, 409, "undo_refused"),
    (errors.ResolveRefused, 409, "resolve_refused"),
    (errors.MarkdownError, 409, "unparseable_file"),
    (errors.ProviderUnavailable, 503, "provider_unavailable"),
    (errors.IndexUnavailable, 503, "index_unavailable"),
    (errors.IndexRebuilding, 503, "index_rebuilding"),
    (errors.IndexReadOnly, 503, "index_read_only"),
    (errors.EmbedderMismatch, 503, "embedder_mismatch"),
    (errors.NeverIndexed, 503, "not_indexed"),
    (errors.IndexUnreadable, 503, "index_unreadable"),
    (errors.VectorIndexUnreadable, 503, "index_unreadable"),
    (errors.RootGone, 503, "root_gone"),
    (errors.EverosError, 400, "bad_request"),
)


#: A file of the root the work could not read or write (a file where a user's folder goes,
#: no permission): not the client's fault, yet no bare 500 either (SPEC §7),
#: but a 409 naming the file, as a log that cannot be written is.
FILE_ERROR = (409, "file_error")

#: A disk that fails the daemon is no conflict the client could resolve: a full disk (or
#: quota) is 507, an I/O error 500, a file system turned read-only while the daemon serves
#: (remounted after disk errors) 503, each still naming the file.
_DISK_ERRORS = {errno.ENOSPC: (507, "insufficient_storage"),
                errno.EDQUOT: (507, "insufficient_storage"), errno.EIO: (500, "io_error"),
                errno.EROFS: (503, "read_only_file_system")}


def file_error_code(exc: OSError) -> tuple[int, str]:
    """The HTTP status and code of a file that could not be read or written."""
    return _DISK_ERRORS.get(exc.errno or 0, FILE_ERROR)


def file_error_message(exc: OSError, root: Path) -> str:
    """What went wrong with which file, as the CLI says it (:func:`os_error_text`): its path
    in the root (as ``lint`` names files), a file standing where a folder goes named as
    such."""
    return os_error_text(exc, root)


def error_code(exc: BaseException) -> tuple[int, str]:
    """The HTTP status and code of a domain error (``(400, "bad_request")`` by default)."""
    for kind, status, code in ERROR_CODES:
        if isinstance(exc, kind):
            return status, code
    return 400, "bad_request"


def _id_problem(value: Any, what: str) -> errors.InvalidId | None:
    """The message the core gives for a bad id (for pattern-checked parameters): an entry
    id's form for ``entry_id``, as MCP's model words it (the API quoted the raw pattern), a
    relation id's for ``rel_id``, else :func:`validate_name`'s."""
    from everos_reflect.api.models import entry_id_form
    from everos_reflect.api.params import RELATION_ID_PATTERN

    try:
        if what == "entry_id":
            entry_id_form(value)
        elif what == "rel_id":
            from everos_reflect.strategies.belief_views import other_kind_problem

            # another kind's id as `resolve` says it ("ep_… is an episode id, not a relation
            # id: …"), the kind read from its prefix (an impossible day is the look-up's)
            form = ENTRY_ID_RE.fullmatch(str(value))
            said = other_kind_problem(str(value), Kind.from_prefix(form.group(1))) \
                if form else None
            if said is not None:
                raise errors.InvalidId(said)
            # an insight id quoted the raw pattern; "rel_…\x00" was told to use the
            # characters of a user id, which it did not fail for
            if not re.fullmatch(RELATION_ID_PATTERN, str(value)):
                raise errors.InvalidId(malformed_relation_id(value))
        else:
            validate_name(value, what)
    except errors.InvalidId as exc:
        return exc
    return None


def is_id_problem(problems: Sequence[Any]) -> bool:
    """Whether pydantic's errors are about an id (answered with code ``invalid_id``)."""
    return any(isinstance((err.get("ctx") or {}).get("error"), errors.InvalidId)
               or (err.get("type") == "string_pattern_mismatch"
                   and str(err.get("loc", ("",))[-1]).endswith("_id"))
               for err in problems)


def validation_code(problems: Sequence[Any]) -> str:
    """The code of a request the schema refuses, the same at every edge: ``invalid_id`` when
    an id is refused (as :class:`~everos_reflect.errors.InvalidId` raised by the core is),
    else ``invalid_request``. MCP answered ``invalid_request`` for the very id the HTTP API
    answered ``invalid_id`` for."""
    return "invalid_id" if is_id_problem(problems) else "invalid_request"


#: The most of pydantic's problems one message lists (the rest are counted).
PROBLEMS_MAX = 10

#: What a field of the wrong JSON type takes, by pydantic's error type: its own words named
#: Python's types ("Input should be a valid dictionary", "a valid list") and never the value.
JSON_TAKES = {
    "string_type": "a string", "bool_type": "true or false", "bool_parsing": "true or false",
    "int_type": "an integer", "int_parsing": "an integer", "int_from_float": "an integer",
    "float_type": "a number", "float_parsing": "a number", "list_type": "an array",
    "dict_type": "an object", "model_type": "an object", "model_attributes_type": "an object",
}


def _in_json(err: Mapping[str, Any]) -> bool:
    """Whether a problem is of a JSON value (a body field, an MCP argument), not of a query,
    path or header value, which is text whatever it holds (those have their own words). A
    parameter's location is its place and its name: an MCP argument's is its name alone, and
    one named ``query`` (search's, the briefing's) was taken for the query string, so MCP
    said "query: must be a valid string" of ``["dog"]`` where the API said what it got."""
    loc = err.get("loc") or ()
    return not (len(loc) > 1 and str(loc[0]) in _PARAMETER_PLACES)


#: Where pydantic puts a value that is a parameter of the request, not a key of its body.
_PARAMETER_PLACES = {"query", "path", "header", "cookie"}
#: A choice in pydantic's ``expected`` of a literal or an enum: ``'active', 'stale' or …``.
_CHOICE = re.compile(r"'((?:[^'\\]|\\.)*)'")


def _model_in(annotation: Any) -> Any:
    """The pydantic model ``annotation`` holds (``Item``, ``list[Item]``, ``Item | None``)."""
    from typing import get_args

    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((m for m in map(_model_in, get_args(annotation)) if m is not None), None)


def keys_at(model: Any, loc: Sequence[Any]) -> list[str]:
    """The keys the object at ``loc`` (pydantic's path to a key it refused) takes in
    ``model``, to say which one was meant; ``[]`` when that is not known."""
    current = _model_in(model)
    for part in loc[1:-1] if loc and loc[0] == "body" else loc[:-1]:
        if current is None:
            return []
        if isinstance(part, int):
            continue
        field = next((f for name, f in current.model_fields.items()
                      if (f.alias or name) == part), None)
        current = None if field is None else _model_in(field.annotation)
    return [] if current is None else [f.alias or name
                                       for name, f in current.model_fields.items()]


def _in_words(err: Mapping[str, Any], model: Any) -> str:
    """pydantic's reason for one problem in the words every edge uses
    (:mod:`~everos_reflect.problem_words`): it said "Field required", "Extra inputs are not
    permitted" and "Input should be 'active' or 'stale'"."""
    kind, loc = err.get("type"), tuple(err.get("loc") or ())
    if kind == "missing" and loc == ("body",):  # it was "body: missing required key"
        return "missing: the request sent none; send a JSON object"
    if kind == "missing":
        return words.missing("parameter" if loc and str(loc[0]) in _PARAMETER_PLACES
                             else "key")
    if kind == "extra_forbidden":
        return words.unknown("key", str(loc[-1]) if loc else "", keys_at(model, loc))
    if kind in {"literal_error", "enum"}:
        expected = str((err.get("ctx") or {}).get("expected", ""))
        return words.one_of(_CHOICE.findall(expected) or [expected], err.get("input"))
    if kind == "string_unicode":
        value = err.get("input")
        lone = next((c for c in value if 0xD800 <= ord(c) <= 0xDFFF), None) \
            if isinstance(value, str) else None
        return (f"holds U+{ord(lone):04X}, a lone UTF-16 surrogate (half of a character): "
                "not text") if lone else "must be text"
    message = str(err.get("msg") or "invalid")
    return f"must be {message[16:]}" if message.startswith("Input should be ") else message


def _at(where: str, message: str) -> str:
    """``where: message``; when the message names the field already, only what ``where``
    adds to it (``filters: invalid user_id …``, or nothing): a validator's "invalid
    task_type '': use …" was said as "task_type: invalid task_type '': use …" (``lessons
    --task-type ''``), the field named twice."""
    place, _, field = where.rpartition(".")
    if message.startswith(f"invalid {field} "):
        return f"{place}: {message}" if place else message
    return f"{where}: {message}"


def _field_path(err: Mapping[str, Any]) -> list[Any]:
    """The path of the field a problem is of, as every edge names it: without ``body``, and
    without the place of a parameter (``query``, ``path``), which MCP's arguments, one
    object, do not have. The API said "path.entry_id: invalid entry id ''" and "query:
    invalid user_id ''" where MCP said "entry_id: invalid entry id ''" and "invalid user_id
    ''" of the same value; the route and its method say where the parameter was."""
    loc = [p for p in err.get("loc", ()) if p != "body"]
    if len(loc) > 1 and str(loc[0]) in _PARAMETER_PLACES:
        loc = loc[1:]
    return loc


def validation_message(problems: Sequence[Any], model: Any = None) -> str:
    """One line from pydantic's errors, the same for every edge: ``field: reason; ...``. An
    error raised by a validator (an invalid id, "must be one line") keeps its own message;
    pydantic's own are said in the config files' words (:func:`_in_words`), a key not taken
    naming the key of ``model`` meant, as ``everos.toml``'s does.

    A field's path holds the client's own keys (an unknown body field or MCP argument is
    named by its key), so each is shown as :func:`~everos_reflect.model.shown_key` writes
    it, and only the first :data:`PROBLEMS_MAX` problems are listed: a 5,000-character key
    was echoed whole, and 3,000 unknown keys made a 116 kB message."""
    from everos_reflect.api.models import size_problem

    parts = []
    for err in problems[:PROBLEMS_MAX]:
        where = ".".join(shown_key(str(p)) for p in _field_path(err)) or "body"
        cause = (err.get("ctx") or {}).get("error")
        if err.get("type") == "string_pattern_mismatch" and str(where).endswith("_id"):
            cause = _id_problem(err.get("input"), str(where).rsplit(".", 1)[-1]) or cause
        # a validator's own exception as it is: pydantic's msg prefixes a ValueError with
        # "Value error, " ("subject: Value error, must be one line")
        message = str(cause) if isinstance(cause, Exception) else _in_words(err, model)
        if err.get("type") in JSON_TAKES and "input" in err and _in_json(err):
            message = f"must be {JSON_TAKES[err['type']]}, got {json_got(err['input'])}"
        message = size_problem(err) or message
        parts.append(_at(where, message or "invalid"))
    if len(problems) > PROBLEMS_MAX:
        parts.append(f"and {len(problems) - PROBLEMS_MAX:,} more problems")
    return "; ".join(parts) or "invalid request"


def _ref(user_id: str, app_id: str | None, project_id: str | None) -> UserRef:
    return UserRef.of(user_id, app_id, project_id)


#: How long a search waits for a reindex under way (any process's) before it is told so.
REINDEX_WAIT_SECONDS = 10.0
#: How long a call of the API or MCP waits for an index found deleted to be rebuilt before it
#: is told so (one constant for both edges: each had its own).
INDEX_REBUILD_WAIT_SECONDS = 10.0


def index_present(runtime: Runtime) -> None:
    """An index deleted by hand (``rm -rf .index``; one stat) is let go of and rebuilt (the
    daemon's watcher, or MCP's call that noticed), and a call meanwhile waits for that a
    little, then is told (:class:`~everos_reflect.errors.IndexRebuilding`), never answered
    from the half-built one: its handles went on writing into the deleted files, and
    LanceDB failed every search and write until a restart."""
    runtime.check_index()
    if runtime.index_rebuilding and not runtime.wait_index(INDEX_REBUILD_WAIT_SECONDS):
        raise errors.IndexRebuilding(runtime.index_dir)


def index_whole(runtime: Runtime) -> None:
    """A reindex (the CLI's, beside the daemon) empties the index and fills it again file by
    file: a search meanwhile waits a little, then is told, never answered from the half-built
    index (it answered a few of the hits, as if the rest did not exist). A read-only root
    never indexed is told so as the CLI tells it (:meth:`Runtime.index_to_read`), not with
    the 409 "Read-only file system: .index/lancedb" of a folder it could not create."""
    from everos_reflect.index import rebuild

    runtime.index_to_read()
    if not rebuild.wait_refilled(runtime.index_dir, REINDEX_WAIT_SECONDS):
        raise errors.IndexRebuilding(runtime.index_dir, reindex=True)


def read_as_built(runtime: Runtime) -> dict[str, Any]:
    """What a read of a read-only root answers besides its results: ``index`` (``read_only``,
    ``files_behind``: the logs changed or deleted since it was last built, which the read
    does not see) and the ``note`` the CLI prints on stderr. MCP's and the API's ``search``
    and ``briefing`` answered a stale index's hits with no word of it; nothing on a root that
    can be written (it is synced before the read, or watched by ``serve``)."""
    from everos_reflect.index.sync import Indexer
    from everos_reflect.index.sync import read_as_built as note

    if not runtime.read_only:
        return {}
    behind = Indexer(runtime).scan().files_behind
    return {"index": {"read_only": True, "files_behind": behind},
            "note": note(shown_path(runtime.root), behind)}


def search(runtime: Runtime, body: SearchRequest) -> dict[str, Any]:
    """``POST /api/v1/memory/search``: ``{"episodes": [hit, ...]}``, and on a read-only root
    how far its index is behind (:func:`read_as_built`)."""
    from everos_reflect.index.search import search as run_search

    for value, what in ((body.user_id, "user_id"), (body.app_id, "app_id"),
                        (body.project_id, "project_id")):
        if value is not None:
            validate_name(value, what)
    index_whole(runtime)
    hits = run_search(runtime, body.query, top_k=body.top_k, user_id=body.user_id,
                      app_id=body.app_id, project_id=body.project_id, mode=body.mode,
                      include_deprecated=body.include_deprecated, kinds=body.kinds,
                      include_stale=body.include_stale,
                      passages_per_entry=body.passages_per_entry)
    return {"episodes": [h.to_dict() for h in hits], **read_as_built(runtime)}


def add_episode(runtime: Runtime, body: EpisodeRequest) -> dict[str, Any]:
    """``POST /api/v1/memory/episodes``: append an Episode and index it; answers its id and
    timestamp."""
    ref = _ref(body.user_id, body.app_id, body.project_id)
    runtime.writable()
    importance, note = body.importance, None
    if importance is None and body.subject.strip() and body.content.strip():
        importance, _, note = importance_on_write(runtime.llm, body.subject, body.content)
    episode = new_episode(ref, subject=body.subject, content=body.content,
                          timestamp=body.timestamp, session_id=body.session_id,
                          importance=importance)
    entry = runtime.store.append(ref, Kind.EPISODE, episode.meta, episode.sections,
                                 day=episode.day)
    answer = {"id": entry.id, "user_id": ref.user_id, "app_id": ref.app,
              "project_id": ref.project, "timestamp": episode.meta["timestamp"]}
    if note is not None:  # the LLM was not reached: the Episode is written, scored offline
        answer["importance_note"] = note
    return index_written(runtime, ref, answer, "add_episode")


def index_written(runtime: Runtime, ref: UserRef, answer: dict[str, Any],
                  what: str) -> dict[str, Any]:
    """Index the log an edge just appended ``answer["id"]`` to, so a search sent right after
    the write finds the entry (an agent adds, then searches; the watcher alone took ~0.7 s).

    A write that landed but could not be indexed (the embedding server down, the indexer held
    by a long scan) is answered as done, with ``indexed: false`` and the reason: answering an
    error made an agent write it again, once per retry. The watcher, the next write or
    ``reindex`` indexes it.
    """
    from filelock import Timeout

    from everos_reflect.embedding.base import answer_waiting
    from everos_reflect.index.sync import Indexer

    try:
        with answer_waiting():  # one embedding attempt: the caller waits for this answer
            result = Indexer(runtime).sync_path(runtime.store.path_for_id(ref, answer["id"]),
                                                timeout=INDEX_WAIT_SECONDS,
                                                wanted=[answer["id"]])
    except Timeout:
        log.warning("%s: %s written, not indexed yet: the indexer is busy", what, answer["id"])
        return {**answer, "indexed": False,
                "index_error": f"the index is busy (a scan or rebuild held it over "
                               f"{INDEX_WAIT_SECONDS:g} s); the entry is indexed when it is done"}
    except Exception as exc:  # the entry is written; see above
        log.warning("%s: %s written, not indexed yet: %s", what, answer["id"], exc)
        return {**answer, "indexed": False, "index_error": errors.brief(exc)}
    if result.not_read:  # another program kept writing the log while it was read
        log.warning("%s: %s written, not indexed yet: %s could not be read: %s", what,
                    answer["id"], result.path, result.not_read)
        return {**answer, "indexed": False,
                "index_error": f"{result.path} could not be read: {result.not_read}; the "
                               "entry is indexed once it can be"}
    return answer


def record_task(runtime: Runtime, body: TaskRecordRequest) -> dict[str, Any]:
    """``POST /api/v1/tasks``: append a task record and index it; answers its id."""
    from everos_reflect.procedural.tasks import new_task

    ref = _ref(body.user_id, body.app_id, body.project_id)
    runtime.writable()
    task = new_task(ref, task_type=body.task_type, goal=body.goal, steps=body.steps,
                    outcome=body.outcome, errors=body.errors, outcome_note=body.outcome_note,
                    timestamp=body.timestamp)
    entry = runtime.store.append(ref, Kind.TASK, task.meta, task.sections, day=task.day)
    return index_written(runtime, ref, {
        "id": entry.id, "user_id": ref.user_id, "app_id": ref.app, "project_id": ref.project,
        "timestamp": task.meta["timestamp"], "task_type": body.task_type,
        "outcome": body.outcome}, "record_task")


def briefing(runtime: Runtime, body: BriefingRequest) -> dict[str, Any]:
    """``POST /api/v1/memory/briefing``: the block, its items (id, kind, timestamp, text,
    evidence), the tokens it uses and what was left out for budget; on a read-only root how
    far its index is behind (:func:`read_as_built`)."""
    from everos_reflect.briefing.build import build_briefing

    ref = _ref(body.user_id, body.app_id, body.project_id)
    if body.task_type is not None:
        validate_name(body.task_type, "task_type")
    index_whole(runtime)
    return {**build_briefing(runtime, ref, body.query, task_type=body.task_type,
                             max_tokens=body.max_tokens).to_dict(), **read_as_built(runtime)}


def lessons(runtime: Runtime, body: LessonsQuery) -> dict[str, Any]:
    """``GET /api/v1/lessons``: live lessons of ``task_type`` (active, or contested and marked
    so), most confirmed first, of one user or of every user: the first ``limit`` (``total``
    counts them all), each with the first ``MAX_LISTED_EVIDENCE`` ids of its evidence
    (``evidence_count``: all) and of its rivals (``contested_count``: all; 3,000 rivals by
    hand made a 60 KB answer of one lesson)."""
    from everos_reflect.model import MAX_LISTED_EVIDENCE
    from everos_reflect.procedural.lessons import ranked, read_lesson

    validate_name(body.task_type, "task_type")
    if body.user_id is not None:
        refs = [_ref(body.user_id, body.app_id, body.project_id)]
    else:
        for value, what in ((body.app_id, "app_id"), (body.project_id, "project_id")):
            if value is not None:
                validate_name(value, what)
        refs = [r for r in runtime.store.iter_users()
                if body.app_id in (None, r.app) and body.project_id in (None, r.project)]
    out = []
    for ref in refs:
        found = [read_lesson(e) for e in runtime.store.entries(ref, Kind.LESSON)]
        for x in ranked(found, body.task_type):
            out.append({"id": x.id, "kind": "lesson", "user_id": ref.user_id,
                        "app_id": ref.app, "project_id": ref.project,
                        "task_type": x.task_type, "lesson_type": x.lesson_type,
                        "text": x.text, "confirmations": x.confirmations,
                        "evidence": list(x.evidence[:MAX_LISTED_EVIDENCE]),
                        "evidence_count": len(x.evidence), "status": x.status,
                        "contested_with": list(x.contested_with[:MAX_LISTED_EVIDENCE]),
                        "contested_count": len(x.contested_with), "timestamp": x.stamp})
    out.sort(key=lambda d: (-d["confirmations"], d["user_id"], d["id"]))
    return {"lessons": out[:body.limit], "total": len(out)}


def insights(runtime: Runtime, body: InsightsQuery) -> dict[str, Any]:
    """``GET /api/v1/memory/insights``: the user's insights, newest first, the first
    ``limit`` (``total`` counts them all), each with the first ``MAX_LISTED_EVIDENCE`` ids
    of its evidence (``evidence_count``: all), as a lesson's."""
    from everos_reflect.strategies import insight_views

    ref = _ref(body.user_id, body.app_id, body.project_id)
    found = insight_views.list_insights(runtime, ref, include_stale=body.include_stale)
    return {"insights": found[:body.limit], "total": len(found)}


def explain(runtime: Runtime, body: ExplainQuery) -> dict[str, Any]:
    """``GET /api/v1/memory/explain/{id}``: a record's citation tree down to the Episodes."""
    from everos_reflect.strategies import insight_views

    ref = _ref(body.user_id, body.app_id, body.project_id)
    return insight_views.explain(runtime, ref, lookup_entry_id(body.entry_id, ref))
