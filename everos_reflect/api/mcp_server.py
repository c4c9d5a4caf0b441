"""The MCP edge: memory tools for agents over stdio (``everos-reflect mcp``).

Each tool is one operation of :mod:`everos_reflect.api.ops` with the request model the HTTP API
uses, so a tool accepts exactly what the matching endpoint accepts and answers the same
``data`` document. Arguments the model refuses, and domain errors (a bad user id, an unknown
entry), come back as MCP errors naming the problem; anything unexpected becomes an internal
error for that call only — the server keeps serving.

Writes are indexed at once: an agent that adds an Episode and then searches should find it even
when no ``serve`` daemon is watching the root, and even when it sent the search without waiting
for the add's answer: a session's calls take effect in the order sent (:class:`CallOrder`).
"""

from __future__ import annotations

import functools
import json
import logging
import math
import re
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any, BinaryIO, cast

import anyio
from mcp import types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from pydantic import BaseModel, RootModel, ValidationError

from everos_reflect import errors
from everos_reflect.api import models, ops
from everos_reflect.model import SURROGATES, empty_id, json_got, json_type, quoted_value
from everos_reflect.problem_words import counted, did_you_mean, unknown_named

if TYPE_CHECKING:
    from everos_reflect.runtime import Runtime
    from everos_reflect.settings import Settings

log = logging.getLogger("everos_reflect.mcp")

SERVER_NAME = "everos-reflect"


@dataclass(frozen=True)
class Tool:
    """One MCP tool: its request model, the operation, and whether it writes an entry."""

    name: str
    description: str
    model: type[BaseModel]
    op: Callable[[Runtime, Any], dict[str, Any]]
    writes: bool = False
    #: reads the index: the logs changed since the last sync are indexed first
    reads_index: bool = False

    def schema(self) -> dict[str, Any]:
        return self.model.model_json_schema()


def tools() -> list[Tool]:
    """Every tool this build offers, in the order ``tools/list`` shows them."""
    return [
        Tool("add_episode", "Append an Episode (a summary of a conversation segment) to a "
             "user's memory; answers its id. Same body as POST /api/v1/memory/episodes.",
             models.EpisodeRequest, ops.add_episode, writes=True),
        Tool("search", "Search a user's memory; answers the matching live entries with their "
             "id, text and score. Same body as POST /api/v1/memory/search.",
             models.SearchRequest, ops.search, reads_index=True),
        Tool("briefing", "One bounded block of memory for a query, within max_tokens: "
             "convictions, lessons of the task type, insights and the Episodes that answer it, "
             "each with id, kind, date and citations. Same body as POST /api/v1/memory/briefing.",
             models.BriefingRequest, ops.briefing, reads_index=True),
        Tool("lessons", "The lessons learned for a task type, most confirmed first, each with "
             "the task records it rests on. Same as GET /api/v1/lessons.",
             models.LessonsQuery, ops.lessons),
        Tool("insights", "A user's insights (patterns across their records), newest first, each "
             "with the first 20 ids of its evidence (evidence_count: all; explain gives the "
             "tree). Same as GET /api/v1/memory/insights.",
             models.InsightsQuery, ops.insights),
        Tool("explain", "The citation tree of an insight, lesson or any record down to the "
             "Episodes, with dates. Same as GET /api/v1/memory/explain/{id}.",
             models.ExplainQuery, ops.explain),
        Tool("record_task", "Record a finished task (type, goal, steps, outcome, errors) so "
             "lessons are learned per task type. Same body as POST /api/v1/tasks.",
             models.TaskRecordRequest, ops.record_task, writes=True),
    ]


def _rebuild_index(runtime: Runtime) -> None:
    """The :attr:`Runtime.index_keeper` of a root no daemon watches: the index found deleted
    or replaced is rebuilt from the Markdown at once, by the call that noticed."""
    from everos_reflect.index.sync import Indexer

    log.warning("the index %s was deleted or replaced while in use: rebuilding it from the "
                "Markdown", runtime.index_dir)
    try:
        Indexer(runtime).reindex()
    finally:
        runtime.index_rebuilt()


def _sync_for_read(runtime: Runtime) -> dict[str, Any]:
    """Index the logs changed since the last sync before a read (``search``, ``briefing``), as
    the CLI's reads do: no ``serve`` may be watching the root, and an Episode a person added
    or edited by hand was not found (only what the tools wrote was indexed). A sync that
    cannot be done (the indexer held by a long scan or rebuild, the embedding server down)
    does not fail the read: it is answered from the index as it stands, and its ``note``
    says so. A read-only root is read as last built (:func:`ops.read_as_built`)."""
    from filelock import Timeout

    from everos_reflect.index.sync import Indexer

    if runtime.read_only:
        return {}
    try:
        Indexer(runtime).scan(timeout=ops.INDEX_WAIT_SECONDS)
    except Timeout:
        why = (f"the index is busy (a scan or rebuild held it over "
               f"{ops.INDEX_WAIT_SECONDS:g} s)")
    except Exception as exc:  # the read goes on; see above
        why = errors.brief(exc)
    else:
        return {}
    log.warning("the index could not be brought up to date before a read: %s", why)
    return {"note": f"the index could not be brought up to date with the logs ({why}): "
                    "answered as last indexed; changes since may not be seen"}


def call(runtime: Runtime, tool: Tool, arguments: dict[str, Any] | None) -> dict[str, Any]:
    """Validate ``arguments`` with the tool's model and run it (blocking; runs in a thread).

    Raises :class:`MCPError`: ``INVALID_PARAMS`` for anything the caller sent wrong, with the
    same message, and in its ``data`` the same ``code`` and ``status``, the HTTP API gives;
    ``INTERNAL_ERROR`` for provider failures. A write whose entry was appended but could not
    be indexed (the embedding server down) is answered as done, with ``indexed: false`` and
    the reason: the next write or ``reindex`` indexes it.
    """
    try:
        body = tool.model.model_validate(arguments or {})
    except ValidationError as exc:  # the HTTP API's 422: its code and status, as below
        problems = exc.errors()
        raise MCPError(types.INVALID_PARAMS, ops.validation_message(problems, tool.model),
                       {"code": ops.validation_code(problems), "status": 422}) from None
    try:
        # a root not there (moved, deleted, never created): a read would answer empty and
        # a write build a ghost tree at the path
        runtime.check_root()
        ops.index_present(runtime)  # an index deleted by hand: rebuilt by the call noticing
        if tool.reads_index:
            # a reindex under way (any process's) is waited for once, here: the sync waited
            # for the indexer it holds (10 s), then the read for the reindex (10 s more)
            ops.index_whole(runtime)
        behind = _sync_for_read(runtime) if tool.reads_index else {}
        data = {**tool.op(runtime, body), **behind}
    except errors.EverosError as exc:
        status, code = ops.error_code(exc)
        rpc = types.INTERNAL_ERROR if status >= 500 else types.INVALID_PARAMS
        raise MCPError(rpc, str(exc), {"code": code, "status": status}) from None
    except OSError as exc:  # the API's file error: the same message and code
        if not exc.filename:
            raise
        status, code = ops.file_error_code(exc)
        raise MCPError(types.INTERNAL_ERROR, ops.file_error_message(exc, runtime.root),
                       {"code": code, "status": status}) from None
    return data


def _version() -> str:
    try:
        return version("everos-reflect")
    except PackageNotFoundError:
        return "unknown"


def internal_error(tool: str, exc: Exception) -> MCPError:
    """The MCP error answering a call that failed unexpectedly (a bug, an I/O failure): the
    tool and the error's type and text, one line of bounded length (:func:`errors.brief`)."""
    return MCPError(types.INTERNAL_ERROR, f"{tool} failed: {errors.brief(exc)}")


@dataclass(eq=False)
class _Turn:
    """One tool call's place in its session's order."""

    writes: bool
    done: anyio.Event = field(default_factory=anyio.Event)


class CallOrder:
    """A session's tool calls take effect in the order the client sent them: a call that
    writes starts once every call sent before it is done, any other call once every write
    sent before it is done; calls that only read still run side by side. The SDK runs each
    request in a task of its own as it arrives, so an agent that piped ``add_episode`` and
    then ``search`` could get a search that did not see the new Episode.

    :meth:`note` gives each ``tools/call`` its turn in the order read (a call never noted,
    as over an in-memory transport, takes its turn when it starts); :meth:`middleware` holds
    the call back until then and ends the turn when it returns. A call that never reaches
    the middleware (answered before, cancelled) ends its turn at :meth:`forget`."""

    def __init__(self) -> None:
        self._writes = frozenset(t.name for t in tools() if t.writes)
        self._turns: list[_Turn] = []  # not done, in the order sent
        self._noted: dict[Any, _Turn] = {}  # request key → its turn, until the call starts

    def note(self, request: types.JSONRPCRequest) -> None:
        if request.method == "tools/call":
            self._noted[coerce_request_id(request.id)] = self._take(request.params)

    def forget(self, request_id: Any) -> None:
        """``request_id`` was answered or cancelled: its turn ends, unless its call runs."""
        turn = self._noted.pop(coerce_request_id(request_id), None)
        if turn is not None:
            self._end(turn)

    async def middleware(self, ctx: Any, call_next: Any) -> Any:
        """Server middleware: run a ``tools/call`` in its turn."""
        if ctx.method != "tools/call" or ctx.request_id is None:
            return await call_next(ctx)
        key = coerce_request_id(ctx.request_id)
        turn = self._noted.pop(key, None) or self._take(ctx.params)
        try:
            ahead = [t for t in self._turns[:self._turns.index(turn)]
                     if turn.writes or t.writes]
            if ahead:
                log.debug("tools/call %s waits for %s sent before it",
                          json.dumps(ctx.request_id), counted(len(ahead), "call"))
            for earlier in ahead:
                await earlier.done.wait()
            return await call_next(ctx)
        finally:
            self._end(turn)

    def _take(self, params: Any) -> _Turn:
        name = params.get("name") if isinstance(params, dict) else None
        turn = _Turn(writes=isinstance(name, str) and name in self._writes)
        self._turns.append(turn)
        return turn

    def _end(self, turn: _Turn) -> None:
        if turn in self._turns:
            self._turns.remove(turn)
        turn.done.set()


def build_server(runtime: Runtime, order: CallOrder | None = None) -> Server[Any]:
    """An MCP server whose tools work on ``runtime``'s memory root, each session's calls in
    the order sent (:class:`CallOrder`; ``order`` to note them as they are read)."""
    by_name = {t.name: t for t in tools()}
    order = order or CallOrder()
    if runtime.index_keeper is None:  # no daemon's watcher here to rebuild a deleted index
        runtime.index_keeper = functools.partial(_rebuild_index, runtime)

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None
                         ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[
            types.Tool(name=t.name, description=t.description, input_schema=t.schema())
            for t in by_name.values()
        ])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        tool = by_name.get(params.name)
        if tool is None:
            raise MCPError(types.INVALID_PARAMS, unknown_named("tool", params.name, by_name))
        try:
            data = await anyio.to_thread.run_sync(call, runtime, tool, params.arguments)
        except MCPError:
            raise
        except Exception as exc:  # a bug or an I/O failure: fail this call, keep serving
            log.exception("tool %s failed", tool.name)
            raise internal_error(tool.name, exc) from None
        text = json.dumps(data, ensure_ascii=False, default=str)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                    structured_content=json.loads(text))

    server: Server[Any] = Server(
        SERVER_NAME, version=_version(),
        instructions="Long-term memory of an agent: add Episodes and task records, "
                     "search them, get a bounded briefing before a task.",
        on_list_tools=list_tools, on_call_tool=call_tool)
    server.middleware.extend([name_refused_params, order.middleware])
    return server


#: What the SDK answers, as ``INVALID_PARAMS``, for any request but ``ping`` before
#: ``initialize`` (its "pinned compat" shape), and for a spec method's malformed params.
_SDK_BARE_REFUSAL = "Invalid request parameters"


async def name_refused_params(ctx: Any, call_next: Any) -> Any:
    """Server middleware: say why the SDK refused a request. It answered a ``tools/call``
    whose ``arguments`` is no object or that has no ``name``, and every request before
    ``initialize``, with the same bare "Invalid request parameters", so a client could not
    tell a wrong call from a missing handshake (the README promised errors naming the
    field). Same code (``-32602``), a message naming the problem."""
    try:
        return await call_next(ctx)
    except ValidationError as exc:  # the SDK's check of a spec method's params
        if ctx.request_id is None:
            raise
        problems = exc.errors()
        raise MCPError(types.INVALID_PARAMS,
                       f"{ctx.method}: {ops.validation_message(problems)}",
                       {"code": ops.validation_code(problems), "status": 422}) from None
    except MCPError as exc:
        if exc.error.code == types.METHOD_NOT_FOUND and exc.error.message == "Method not found":
            # the SDK's words named no method (only its ``data`` held it); "" is said empty
            raise MCPError(types.METHOD_NOT_FOUND, _no_method(ctx.method),
                           exc.error.data) from None
        if exc.error.message != _SDK_BARE_REFUSAL or exc.error.data != "":
            raise
        raise MCPError(types.INVALID_PARAMS,
                       f"{ctx.method}: not initialized: the session's first request must be "
                       "initialize", {"code": "not_initialized"}) from None


def _no_method(method: object) -> str:
    """Why a request's ``method`` is not served: ``unknown method 'tools/cal'`` (with the
    method meant when one is close), ``invalid method name '': must not be empty``."""
    if method == "":
        return empty_id("method name")
    return (f"unknown method {quoted_value(method)}"
            + did_you_mean(str(method), _SPEC_METHODS))


#: The requests this server answers (MCP's own and the tools'), for "did you mean".
_SPEC_METHODS = ("initialize", "ping", "tools/list", "tools/call")


#: A line standing in for a message over the limit: a notification of a method of ours,
#: so the transport passes it on in order and :func:`_answer_refused` can answer it.
_REFUSED_METHOD = "everos-reflect/message-too-large"
#: Where the id of a refused request is looked for: the start of its line (the official
#: clients write ``jsonrpc``, ``id`` and ``method`` before ``params``).
_ID_HEAD_BYTES = 512
_ID_RE = re.compile(rb'"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,200}")')
_SKIP_CHUNK = 1 << 16
#: A UTF-8 byte order mark, read past at the start of a line (:meth:`BoundedLines.readline`).
_BOM = b"\xef\xbb\xbf"
#: A line standing in for a request whose ``id`` is neither a string nor an integer (MCP
#: allows only those): the SDK read such a request as a notification, the id dropped, and
#: answered nothing, so the client waited for ever. :func:`_answer_refused` answers it.
_BAD_ID_METHOD = "everos-reflect/request-id-invalid"
#: A line standing in for a JSON-RPC batch (a JSON array of messages, which MCP 2025-03-26
#: servers must accept): the SDK's transport reads one message a line and answered the
#: whole array with one Invalid Request, id null, so none of its requests was ever answered.
#: :func:`_answer_batch` passes each message on and answers the batch with one array.
_BATCH_METHOD = "everos-reflect/batch"
#: A line standing in for a message holding a lone UTF-16 surrogate escape (``"\\ud83d"``:
#: what JavaScript's ``JSON.stringify`` writes for an emoji cut in two). The SDK's transport
#: refused the line as no JSON and answered a Parse error with id null, so the client never
#: heard back about its request, where the same message in a batch, or over HTTP, got its
#: tool's error. :func:`_answer_one` handles it as a batch's element. So is a message in which
#: an object gives a key twice (:func:`_key_twice`), which the SDK read keeping the last value.
_LONE_SURROGATE_METHOD = "everos-reflect/lone-surrogate"
#: A line standing in for one that is not UTF-8 (a Latin-1 ``é``, byte 0xe9): it was read with
#: each such byte replaced by U+FFFD, so ``add_episode`` stored "caf\ufffd" for "café" without
#: a word, and an invalid id was quoted back as "u\ufffd1". :func:`_answer_refused` answers it
#: with a parse error naming the byte, as the HTTP API refuses such a body.
_NOT_UTF8_METHOD = "everos-reflect/not-utf8"
#: A JSON escape of a UTF-16 surrogate: the lines to read again with Python's ``json``.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


class BoundedLines:
    """stdin's lines for the MCP transport, each at most ``limit`` bytes.

    The SDK's transport reads a line whole, however long: one endless line held the whole
    message in memory and an agent's 1 GB argument took the server down. A longer line is read
    past in chunks and never held; its place is taken by a notification of
    :data:`_REFUSED_METHOD`, answered by :func:`_answer_refused` with a JSON-RPC error for the
    request's id, and the server goes on with the next line.
    """

    def __init__(self, raw: BinaryIO, limit: int) -> None:
        self._raw = raw
        self.limit = limit
        #: refused line number → (its size in bytes, the request id found at its start)
        self.refused: dict[int, tuple[int, int | str | None]] = {}
        #: stand-in number → why the request's id is refused (:data:`_BAD_ID_METHOD`)
        self.bad_ids: dict[int, str] = {}
        #: stand-in number → the messages of a batch (:data:`_BATCH_METHOD`), as parsed
        self.batches: dict[int, list[Any]] = {}
        #: stand-in number → a message with a lone surrogate (:data:`_LONE_SURROGATE_METHOD`)
        self.lone: dict[int, dict[str, Any]] = {}
        #: stand-in number → (why the line is no UTF-8, the request id found at its start)
        self.not_utf8: dict[int, tuple[str, int | str | None]] = {}
        self._count = 0

    def take_stand_in(self, message: Any) -> tuple[str, Any] | None:
        """``(method, what the line held)`` when ``message`` is one of this reader's stand-in
        notifications, the held part taken out of its store (None once taken, or for a
        stand-in the client sent itself); None for any other message."""
        if not isinstance(message, types.JSONRPCNotification):
            return None
        store: dict[int, Any] | None = {_REFUSED_METHOD: self.refused,
                                        _BAD_ID_METHOD: self.bad_ids,
                                        _BATCH_METHOD: self.batches,
                                        _LONE_SURROGATE_METHOD: self.lone,
                                        _NOT_UTF8_METHOD: self.not_utf8}.get(message.method)
        if store is None:
            return None
        number = (message.params or {}).get("line")
        return message.method, store.pop(number, None) if isinstance(number, int) else None

    def readline(self) -> str:
        # a limit of 2**63 - 1 or more ("no limit") is past what a read may ask for: the
        # OverflowError took the server down at its first message
        line = self._raw.readline(min(self.limit + 1, sys.maxsize))
        if len(line) <= self.limit or line.endswith(b"\n"):
            if line.startswith(_BOM):
                # what some Windows shells and editors write first: the line was "not JSON"
                # (id null), so the client's initialize was never answered. RFC 8259 §8.1
                # lets a parser ignore it. (Past the size check: a line cut at the limit
                # must not pass for a whole one.)
                line = line[len(_BOM):]
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError as exc:
                self._count += 1
                self.not_utf8[self._count] = (
                    f"parse error: the line is not UTF-8 (byte 0x{line[exc.start]:02x} at "
                    f"offset {exc.start:,}): nothing of it was read; send it as UTF-8",
                    _request_id(line[:_ID_HEAD_BYTES]))
                return json.dumps({"jsonrpc": "2.0", "method": _NOT_UTF8_METHOD,
                                   "params": {"line": self._count}}) + "\n"
            batch = _batch(text) if line.lstrip()[:1] == b"[" else None
            if batch is not None:
                self._count += 1
                self.batches[self._count] = batch
                return json.dumps({"jsonrpc": "2.0", "method": _BATCH_METHOD,
                                   "params": {"line": self._count}}) + "\n"
            problem = _id_problem(text) if b'"id"' in line else None
            if problem is None:
                held = _with_lone_surrogate(text) if _SURROGATE_ESCAPE.search(line) else None
                if held is None:
                    held = _with_key_twice(text)
                if held is None and _ODD_NUMBER.search(line):
                    held = _with_unread_number(text)
                if held is None and (_NEGATIVE_ZERO.search(line)
                                     or _WRITTEN_FLOAT.search(line)):
                    held = _with_numbers_as_written(text)
                if held is None:
                    return text
                self._count += 1
                self.lone[self._count] = held
                return json.dumps({"jsonrpc": "2.0", "method": _LONE_SURROGATE_METHOD,
                                   "params": {"line": self._count}}) + "\n"
            self._count += 1
            self.bad_ids[self._count] = problem
            return json.dumps({"jsonrpc": "2.0", "method": _BAD_ID_METHOD,
                               "params": {"line": self._count}}) + "\n"
        size, head = len(line), line[:_ID_HEAD_BYTES]
        while not line.endswith(b"\n"):
            line = self._raw.readline(_SKIP_CHUNK)
            if not line:
                break
            size += len(line)
        self._count += 1
        self.refused[self._count] = (size, _request_id(head))
        return json.dumps({"jsonrpc": "2.0", "method": _REFUSED_METHOD,
                           "params": {"line": self._count}}) + "\n"


class _Twice(dict[str, Any]):
    """An object of a message that gives a key twice (the last value kept, as the SDK's
    parser keeps it); ``key`` is the first key given twice."""

    key = ""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    twice = None
    for key, value in pairs:
        if key in out and twice is None:
            twice = key
        out[key] = value
    if twice is None:
        return out
    marked = _Twice(out)
    marked.key = twice
    return marked


def _loads(line: str) -> Any:
    """``line`` as JSON, an object giving a key twice marked (:class:`_Twice`)."""
    return json.loads(line, object_pairs_hook=_pairs)


def _key_twice(data: Any) -> tuple[str, str] | None:
    """``(where, key)`` for the first object of a parsed message that gives a key twice,
    or ``None``. JSON leaves such an object undefined and the SDK kept the last value, so
    ``{"user_id": "alice", ..., "user_id": "bob"}`` wrote to bob where the HTTP API refuses
    the same body (``json_body``)."""
    stack: list[tuple[Any, str]] = [(data, "")]
    while stack:
        value, where = stack.pop()
        if isinstance(value, _Twice):
            return where or "(message)", value.key
        if isinstance(value, dict):
            for key, item in reversed(list(value.items())):
                shown = key if _PLAIN_SEGMENT.match(key) else quoted_value(key)
                stack.append((item, f"{where}.{shown}" if where else shown))
        elif isinstance(value, list):
            stack.extend((item, f"{where}[{i}]") for i, item in reversed(list(enumerate(value))))
    return None


#: What a number JSON has no words for looks like on a line (``NaN``, ``Infinity``, an
#: exponent of three digits, 309 digits in a row): only such a line is read again.
_ODD_NUMBER = re.compile(rb"NaN|Infinity|[0-9][eE][+-]?[0-9]{3}|[0-9]{309}")


class _Unread(dict[str, Any]):
    """A message holding a number JSON has no words for (``NaN``, ``Infinity``) or one past
    what a float holds (``1e400``); ``problem`` names it as the HTTP API does. The SDK's
    parser read them, and a tool said "top_k: must be an integer, got a number: Infinity"
    of a ``1e400`` nobody sent as that."""

    problem = ""


def _with_unread_number(line: str) -> dict[str, Any] | None:
    """The message on ``line`` marked with its problem (:class:`_Unread`) when it is a JSON
    object holding such a number (:func:`~everos_reflect.api.json_body.number_problem`),
    else ``None``."""
    from everos_reflect.api.json_body import number_problem

    problem = number_problem(line)
    data = None if problem is None else _object_on(line)
    if data is None:
        return None
    marked = _Unread(data)
    marked.problem = problem
    return marked


#: A ``-0`` token as a line may hold one (or a string may: then nothing is held).
_NEGATIVE_ZERO = re.compile(rb"-0(?![0-9.eE])")
#: What a number Python writes otherwise may look like on a line (an exponent, a fraction
#: ending in 0: ``1e3``, ``10.50``); only such a line is read again.
_WRITTEN_FLOAT = re.compile(rb"[0-9][eE]|\.[0-9]*0(?![0-9])")


def _with_numbers_as_written(line: str) -> dict[str, Any] | None:
    """The message on ``line`` read keeping a ``-0`` (:class:`~everos_reflect.api.json_body.
    NegativeZero`) and a number Python writes otherwise (``1e3``, ``10.50``:
    :class:`~everos_reflect.api.json_body.WrittenJSONFloat`) as written, when it is a JSON
    object that holds one, else ``None``. The SDK's parser reads ``-0`` as ``0`` and ``1e3``
    as ``1000.0``: ``"top_k": -0`` was refused "got 0" and ``"top_k": 1e3`` "got 1000.0",
    where the HTTP API quotes what was sent."""
    from everos_reflect.api.json_body import WrittenJSONFloat, json_float, json_int

    found = []

    def as_int(text: str) -> int:
        value = json_int(text)
        if text == "-0":
            found.append(value)
        return value

    def as_float(text: str) -> float:
        value = json_float(text)
        if isinstance(value, WrittenJSONFloat):
            found.append(value)
        return value

    try:
        data = json.loads(line, object_pairs_hook=_pairs, parse_int=as_int,
                          parse_float=as_float)
    except (ValueError, RecursionError):
        return None
    return data if found and isinstance(data, dict) else None


def _with_key_twice(line: str) -> dict[str, Any] | None:
    """The message on ``line`` when it is a JSON object in which some object gives a key
    twice (:func:`_key_twice`), else ``None``."""
    try:
        data = _loads(line)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) and _key_twice(data) is not None else None


class _OddNumber(float):
    """A number of a batch's line JSON has no words for (``NaN``, ``Infinity``) or one past
    what a float holds (``1e400``), read as the float the SDK's parser makes of it;
    ``problem`` names it as written, in the HTTP API's words."""

    problem = ""


def _odd(text: str) -> float:
    """``text``, a number token of a batch's line, as the float it reads as: an
    :class:`_OddNumber` naming its problem when JSON has no words for it."""
    from everos_reflect.api.json_body import json_float, number_problem

    value = float(text)
    problem = number_problem(text) if math.isinf(value) or math.isnan(value) else None
    if problem is None:  # kept as written when Python writes it otherwise (1e3), as alone
        return json_float(text)
    odd = _OddNumber(value)
    odd.problem = problem
    return odd


def _odd_number(data: Any) -> str | None:
    """The problem of the first :class:`_OddNumber` a parsed batch element holds, or
    ``None``."""
    stack = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, _OddNumber):
            return value.problem
        if isinstance(value, dict):
            stack.extend(reversed(list(value.values())))
        elif isinstance(value, list):
            stack.extend(reversed(value))
    return None


def _batch(line: str) -> list[Any] | None:
    """The messages of a JSON-RPC batch on ``line``; ``None`` when it holds no non-empty
    JSON array (an empty one is left to the transport: one Invalid Request, as JSON-RPC
    2.0 says). A number JSON has no words for is read as an :class:`_OddNumber`, so that
    its element is refused as the same message on a line of its own is (:func:`_element`)."""
    from everos_reflect.api.json_body import int_hook

    try:  # a -0 kept as written (json_body.NegativeZero), as on a line of its own
        data = json.loads(line, object_pairs_hook=_pairs, parse_constant=_odd, parse_float=_odd,
                          parse_int=int_hook(line))
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, list) and data else None


def _with_lone_surrogate(line: str) -> dict[str, Any] | None:
    """The message on ``line`` when it is a JSON object holding a lone surrogate anywhere
    (Python's ``json`` reads it; the transport's parser does not), else ``None``."""
    data = _object_on(line)
    if data is None:
        return None
    return data if SURROGATES.search(json.dumps(data, ensure_ascii=False)) else None


def _object_on(line: str) -> dict[str, Any] | None:
    """The JSON object on ``line`` as Python's ``json`` reads it (which the checks above
    ask of what the transport's own parser refused), else ``None``."""
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _id_problem(line: str) -> str | None:
    """Why the request on ``line`` has an unusable ``id`` (not a string or an integer:
    ``1.5``, ``null``, ``true``, an object), or ``None``. A line that is not a JSON object
    with a ``method`` is left to the transport, which answers what it cannot read."""
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return _id_problem_of(data)


def _id_problem_of(data: Any) -> str | None:
    """:func:`_id_problem` of a message already parsed."""
    if not isinstance(data, dict) or "method" not in data or "id" not in data:
        return None
    ident = data["id"]
    if isinstance(ident, str) or (isinstance(ident, int) and not isinstance(ident, bool)):
        return None
    got = "null" if ident is None else {bool: "a boolean", float: "a number with a fraction",
                                        dict: "an object", list: "an array"}[type(ident)]
    return f"invalid request: the id must be a string or an integer, got {got}"


def _request_id(head: bytes) -> int | str | None:
    """The ``id`` a refused request names at its start, ``None`` when none is found there."""
    match = _ID_RE.search(head)
    if match is None:
        return None
    try:
        value = json.loads(match.group(1))
    except ValueError:
        return None
    if isinstance(value, str) and SURROGATES.search(value):
        return None  # an id no answer could carry: its JSON would not be UTF-8
    return value if isinstance(value, int | str) else None


def _unreadable(exc: Exception) -> types.JSONRPCError | None:
    """The JSON-RPC 2.0 answer to a line the transport could not read as a message (it hands
    the server the exception, which only logs it, so the client waited for ever): Parse
    error for a line that is not JSON, Invalid Request for JSON that is no JSON-RPC message,
    with the request's ``id`` when it has a usable one. ``None`` for a blank line (not a
    message) and for anything but a validation failure."""
    if not isinstance(exc, ValidationError):
        return None
    problems = exc.errors()
    first = problems[0] if problems else {}
    if first.get("type") == "json_invalid":
        line = first.get("input")
        if isinstance(line, str) and not line.strip():
            return None
        reason = str(first.get("msg", "invalid JSON"))[:200]
        return types.JSONRPCError(jsonrpc="2.0", id=None, error=types.ErrorData(
            code=types.PARSE_ERROR, message=f"parse error: the line is not JSON ({reason})"))
    data = next((p["input"] for p in problems if isinstance(p.get("input"), dict)), None)
    ident = data.get("id") if data is not None else None
    if isinstance(ident, bool) or not isinstance(ident, int | str):
        ident = None
    problem = _message_problem(data)
    if data is None and first.get("type") == "model_type" and len(first.get("loc", ())) == 1:
        # the message itself is no object (null, a number, a string, an array in a batch):
        # its type, not its value (a 1e400 is read as infinity, a value nobody sent)
        problem += f": a message must be a JSON object, got {json_type(first.get('input'))}"
    return types.JSONRPCError(jsonrpc="2.0", id=ident, error=types.ErrorData(
        code=types.INVALID_REQUEST, message=f"invalid request: {problem}"))


def _message_problem(data: dict[str, Any] | None) -> str:
    """What makes ``data`` no JSON-RPC 2.0 message, named: ``jsonrpc must be "2.0", got
    "1.0"``, ``params must be an object, got an array: []``. Every such message was "not a
    JSON-RPC 2.0 request, notification or response", naming nothing to fix (the SDK's
    validation lists a problem for each kind of message it might have been)."""
    what = "not a JSON-RPC 2.0 request, notification or response"
    if data is None:
        return what
    if data.get("jsonrpc") != "2.0":
        got = json_got(data["jsonrpc"]) if "jsonrpc" in data else "none"
        return f'{what}: jsonrpc must be "2.0", got {got}'
    if "method" in data:
        if not isinstance(data["method"], str):
            return f"{what}: method must be a string, got {json_got(data['method'])}"
        params = data.get("params")
        if "params" in data and params is not None and not isinstance(params, dict):
            # JSON-RPC allows an array; MCP's requests take their params by name
            return f"{what}: params must be an object, got {json_got(params)}"
        return what
    if "result" in data or "error" in data:
        return what  # a response of the client's, malformed: the SDK's words would list all
    return f"{what}: it has no method (a request or notification), nor a result or error"


def drain_seconds(settings: Settings) -> float:
    """How long the server goes on after stdin closed with no answer written before it gives
    up on the calls still running: the longest one call may take — an LLM request and an
    embedding request, each with its retries (330 s with the shipped defaults). A call that
    needs longer is stuck, and stdin closed means nobody can cancel it."""
    llm, embedding = settings.llm, settings.embedding
    return (llm.timeout_seconds * (llm.max_retries + 1)
            + embedding.timeout_seconds * (embedding.max_retries + 1))


class Unanswered:
    """The requests passed to the server and not answered yet, so that the end of stdin
    does not end them: the SDK's loop cancels every request in flight when its input ends,
    and a call already running in a thread then lost its answer (an ``add_episode`` wrote its
    Episode and never said its id), so a client that piped a batch of requests and closed
    stdin got no answer to any it had not waited for. Ids are kept under the SDK's
    correlation key (``"7"`` and ``7`` are one id); one is in flight at most once
    (:meth:`in_flight`), and free again once answered. ``order`` is told of each request
    read and of each answer or cancel (:class:`CallOrder`)."""

    def __init__(self, order: CallOrder | None = None) -> None:
        self.order = order
        self.pending: Counter[Any] = Counter()
        #: answered by :meth:`abandon`: the server's late answer is dropped, not sent twice
        self.abandoned: Counter[Any] = Counter()
        self._changed = anyio.Event()

    def asked(self, request: types.JSONRPCRequest) -> None:
        self.pending[coerce_request_id(request.id)] += 1
        if self.order is not None:
            self.order.note(request)

    def in_flight(self, request_id: Any) -> bool:
        """Whether a request with this id was passed on and is not answered yet."""
        return self.pending[coerce_request_id(request_id)] > 0

    def settled(self, request_id: Any) -> bool:
        """Note the server's answer for ``request_id`` (or the client's cancel of it, which
        the server never answers); False when that answer must not be sent: :meth:`abandon`
        already answered the request."""
        key = coerce_request_id(request_id)
        if self.order is not None:
            self.order.forget(request_id)
        if self.abandoned[key] > 0:
            self.abandoned[key] -= 1
            return False
        if self.pending[key] > 0:
            self.pending[key] -= 1
            self._changed.set()
        return True

    async def drain(self, quiet_seconds: float) -> list[Any]:
        """Wait until every request is answered, or until no answer came for
        ``quiet_seconds``; then the ids still unanswered, each as often as it was asked."""
        while +self.pending:
            self._changed = anyio.Event()
            with anyio.move_on_after(quiet_seconds) as waited:
                await self._changed.wait()
            if waited.cancelled_caught:
                break
        return list((+self.pending).elements())

    def abandon(self, request_id: Any) -> None:
        key = coerce_request_id(request_id)
        self.pending[key] -= 1
        self.abandoned[key] += 1


_Answer = types.JSONRPCResponse | types.JSONRPCError


class _BatchAnswer(RootModel[list[_Answer]]):
    """The answers to one batch, written as one JSON array (JSON-RPC 2.0 §6)."""


@dataclass
class _Batch:
    waiting: Counter[Any]  # the ids of its requests not answered yet
    answers: list[_Answer]


class Batches:
    """The batches whose answers are being gathered: the server answers each request on its
    own, and a batch is answered with one array once its last request is answered."""

    def __init__(self) -> None:
        self._open: list[_Batch] = []

    async def open(self, batch: _Batch, write_stream: Any) -> None:
        """Gather ``batch``'s answers from now on (before any of its requests is passed on);
        with no request to wait for, its answers (errors for what it held that was not a
        message) go out now, and a batch of notifications only is answered nothing."""
        self._open.append(batch)
        await self._close_if_done(batch, write_stream)

    async def deliver(self, answer: _Answer, write_stream: Any) -> None:
        """Write ``answer``, or keep it for the batch waiting for its id."""
        key = None if answer.id is None else coerce_request_id(answer.id)
        batch = next((b for b in self._open if b.waiting[key] > 0), None)
        if batch is None:
            await write_stream.send(SessionMessage(answer))
            return
        batch.waiting[key] -= 1
        batch.answers.append(answer)
        await self._close_if_done(batch, write_stream)

    async def cancelled(self, request_id: Any, write_stream: Any) -> None:
        """The client cancelled ``request_id``: the server will not answer it."""
        key = coerce_request_id(request_id)
        batch = next((b for b in self._open if b.waiting[key] > 0), None)
        if batch is not None:
            batch.waiting[key] -= 1
            await self._close_if_done(batch, write_stream)

    async def _close_if_done(self, batch: _Batch, write_stream: Any) -> None:
        if +batch.waiting:
            return
        self._open.remove(batch)
        if batch.answers:
            await write_stream.send(SessionMessage(cast(Any, _BatchAnswer(batch.answers))))


def _duplicate_id(request_id: Any) -> types.JSONRPCError:
    """The answer to a request whose id a request in flight has: the SDK ran both and answered
    both with that id, so the client could not tell the answers apart."""
    log.warning("refused an MCP request: its id %s is in flight", json.dumps(request_id))
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(
        code=types.INVALID_REQUEST,
        message=f"id {json.dumps(request_id)} is already in use by a request in flight",
        data={"code": "duplicate_id"}))


async def _pass_on(message: Any, item: Any, forward: Any, write_stream: Any,
                   unanswered: Unanswered, batches: Batches) -> None:
    """Forward one message to the server, noting a request (so the end of stdin waits for
    its answer) and a client's cancel (which the server never answers). A request whose id
    is in flight is answered an error and not passed on (:func:`_duplicate_id`)."""
    if isinstance(message, types.JSONRPCRequest):
        if unanswered.in_flight(message.id):
            await write_stream.send(SessionMessage(_duplicate_id(message.id)))
            return
        unanswered.asked(message)
    elif isinstance(message, types.JSONRPCNotification) and \
            message.method == "notifications/cancelled":
        cancelled = (message.params or {}).get("requestId")
        if isinstance(cancelled, int | str) and not isinstance(cancelled, bool):
            unanswered.settled(cancelled)
            await batches.cancelled(cancelled, write_stream)
    await forward.send(item)


#: A message's path segment shown as it is; any other is quoted (:func:`quoted_value`).
_PLAIN_SEGMENT = re.compile(r"^[A-Za-z0-9_.$/-]{1,64}$")


def _lone_surrogate(data: Any) -> tuple[str, str] | None:
    """``(where, character)`` for the first string of a parsed message, key or value, that
    holds a lone UTF-16 surrogate (``"\\ud83d"``: what JavaScript's ``JSON.stringify`` writes for
    an emoji cut in two), or ``None``. Python's ``json`` reads one where the transport's
    parser refuses it, and no answer naming it could be written: its JSON is not UTF-8.
    Values inside a call's ``arguments`` are left to the tool's model, which refuses them
    naming the field, as the HTTP API does."""
    stack: list[tuple[Any, str]] = [(data, "")]
    while stack:
        value, where = stack.pop()
        if isinstance(value, str):
            if where.startswith(("params.arguments.", "params.arguments[")):
                continue
            found = SURROGATES.search(value)
            if found is not None:
                return where or "(message)", found.group()
        elif isinstance(value, dict):
            for key, item in reversed(list(value.items())):
                shown = key if _PLAIN_SEGMENT.match(key) else quoted_value(key)
                inner = f"{where}.{shown}" if where else shown
                in_key = SURROGATES.search(key)
                if in_key is not None:
                    return f"{where or '(message)'} key {shown}", in_key.group()
                stack.append((item, inner))
        elif isinstance(value, list):
            stack.extend((item, f"{where}[{i}]") for i, item in reversed(list(enumerate(value))))
    return None


def _surrogate_answer(element: dict[str, Any]) -> types.JSONRPCError | None:
    """The answer to a parsed message holding a lone surrogate (:func:`_lone_surrogate`) in
    its id, method, a key or other params: passed on, the server echoed it into an answer it
    could not write, and the whole session ended. ``None`` when it holds none."""
    found = _lone_surrogate(element)
    if found is None:
        return None
    where, char = found
    ident = element.get("id")
    if not isinstance(ident, int | str) or isinstance(ident, bool) or where == "id":
        ident = None
    return types.JSONRPCError(jsonrpc="2.0", id=ident, error=types.ErrorData(
        code=types.INVALID_REQUEST,
        message=f"invalid request: {where} holds U+{ord(char):04X}, a lone UTF-16 surrogate "
                "(half of a character): not text"))


def _twice_answer(element: dict[str, Any]) -> types.JSONRPCError | None:
    """The answer to a parsed message in which an object gives a key twice
    (:func:`_key_twice`), naming the key and where; ``None`` when none does."""
    found = _key_twice(element)
    if found is None:
        return None
    where, key = found
    ident = element.get("id")
    if not isinstance(ident, int | str) or isinstance(ident, bool) or (
            (where, key) == ("(message)", "id")):
        ident = None  # which of two ids to answer is not known
    return types.JSONRPCError(jsonrpc="2.0", id=ident, error=types.ErrorData(
        code=types.INVALID_REQUEST,
        message=f"invalid request: the key {quoted_value(key)} is given twice in one object "
                f"({where})", data={"code": "invalid_request"}))


def _number_answer(element: dict[str, Any], problem: str) -> types.JSONRPCError:
    """The answer to a message holding a number JSON has no words for (``problem``, in the
    HTTP API's words), with the request's id: alone on its line (:class:`_Unread`) or in a
    batch (:class:`_OddNumber`) alike."""
    ident = element.get("id")
    if not isinstance(ident, int | str) or isinstance(ident, bool):
        ident = None
    return types.JSONRPCError(jsonrpc="2.0", id=ident, error=types.ErrorData(
        code=types.INVALID_REQUEST,
        message=f"invalid request: the message is not valid JSON: {problem}",
        data={"code": "invalid_request"}))


def _element(element: Any) -> tuple[Any, types.JSONRPCError | None]:
    """A parsed element of a batch (or a line the transport refused) as ``(message, None)``
    to pass on, or ``(None, answer)``: the error for what is no usable message (``None``
    too for a notification, which is never answered)."""
    problem = _id_problem_of(element)
    if problem is not None:
        return None, types.JSONRPCError(jsonrpc="2.0", id=None, error=types.ErrorData(
            code=types.INVALID_REQUEST, message=problem))
    refused = _surrogate_answer(element) if isinstance(element, dict) else None
    if refused is None and isinstance(element, dict):
        refused = _twice_answer(element)
    if refused is None and isinstance(element, dict):
        problem = element.problem if isinstance(element, _Unread) else _odd_number(element)
        if problem:
            refused = _number_answer(element, problem)
    if refused is not None:  # a notification is never answered, only not passed on
        return None, refused if "id" in element else None
    try:
        return types.jsonrpc_message_adapter.validate_python(element, by_name=False), None
    except ValidationError as exc:
        return None, _unreadable(exc)


async def _answer_one(element: dict[str, Any], forward: Any, write_stream: Any,
                      unanswered: Unanswered, batches: Batches) -> None:
    """A message the transport refused for a lone surrogate, or read keeping the last of a
    key given twice (:data:`_LONE_SURROGATE_METHOD`), handled as a batch's element: passed
    on, or answered with its id."""
    message, answer = _element(element)
    if answer is not None:
        log.warning("answered an MCP message: %s", answer.error.message)
        await write_stream.send(SessionMessage(answer))
    elif message is not None:
        await _pass_on(message, SessionMessage(message), forward, write_stream, unanswered,
                       batches)


async def _answer_batch(elements: list[Any], forward: Any, write_stream: Any,
                        unanswered: Unanswered, batches: Batches) -> None:
    """Pass each message of a batch on to the server as if it came on its own line, and
    answer the batch with one array: the answers to its requests and an error for each
    element that is no usable message (JSON-RPC 2.0 §6), or a request whose id is in flight
    (an earlier request's, or one earlier in the batch)."""
    batch = _Batch(Counter(), [])
    messages: list[Any] = []
    for element in elements:
        message, answer = _element(element)
        if message is None:
            if answer is not None:
                batch.answers.append(answer)
            continue
        if isinstance(message, types.JSONRPCRequest):
            key = coerce_request_id(message.id)
            if batch.waiting[key] > 0 or unanswered.in_flight(message.id):
                batch.answers.append(_duplicate_id(message.id))
                continue
            batch.waiting[key] += 1
        messages.append(message)
    if batch.answers:
        log.warning("answered %s of an MCP batch with an error",
                    counted(len(batch.answers), "message"))
    await batches.open(batch, write_stream)
    for message in messages:
        await _pass_on(message, SessionMessage(message), forward, write_stream, unanswered,
                       batches)


async def _answer_refused(lines: BoundedLines, read_stream: Any, forward: Any,
                          write_stream: Any, unanswered: Unanswered,
                          quiet_seconds: float, batches: Batches) -> None:
    """Pass the transport's messages on to the server, answering each stand-in for a refused
    line with ``INVALID_REQUEST`` naming the limit (``id`` null when none was found), and each
    line the transport could not read as a message as JSON-RPC 2.0 says (:func:`_unreadable`);
    a batch is unpacked (:func:`_answer_batch`).

    At the end of stdin the server's input stays open until every request passed on is
    answered (:class:`Unanswered`), or until no answer came for ``quiet_seconds``."""
    async with forward:
        async for item in read_stream:
            if isinstance(item, Exception):
                answer = _unreadable(item)
                if answer is not None:
                    log.warning("answered an unreadable MCP message: %s", answer.error.message)
                    await write_stream.send(SessionMessage(answer))
                if answer is not None or isinstance(item, ValidationError):
                    continue  # answered (or a blank line): nothing for the server
            message = getattr(item, "message", None)
            stand_in = lines.take_stand_in(message)
            if stand_in is None:
                await _pass_on(message, item, forward, write_stream, unanswered, batches)
                continue
            method, held = stand_in
            if held is None:
                continue  # a stand-in already answered, or one the client made up
            if method == _BATCH_METHOD:
                await _answer_batch(held, forward, write_stream, unanswered, batches)
                continue
            if method == _LONE_SURROGATE_METHOD:
                await _answer_one(held, forward, write_stream, unanswered, batches)
                continue
            code = types.INVALID_REQUEST
            if method == _BAD_ID_METHOD:
                log.warning("answered an MCP request with an unusable id: %s", held)
                request_id, problem, data = None, held, None
            elif method == _NOT_UTF8_METHOD:
                problem, request_id = held
                log.warning("answered an MCP message that is not UTF-8: %s", problem)
                code, data = types.PARSE_ERROR, None
            else:
                size, request_id = held
                log.warning("refused an MCP message of %d bytes", size)
                problem = (f"message too large: {size:,} bytes, over "
                           f"limits.max_request_bytes ({lines.limit:,})")
                data = {"code": "too_large"}
            await write_stream.send(SessionMessage(types.JSONRPCError(
                jsonrpc="2.0", id=request_id, error=types.ErrorData(
                    code=code, message=problem, data=data))))
        await _abandon_stuck(unanswered, write_stream, quiet_seconds, batches)


async def _abandon_stuck(unanswered: Unanswered, write_stream: Any,
                         quiet_seconds: float, batches: Batches) -> None:
    """Wait for the server to answer what it was asked, up to ``quiet_seconds`` with no
    answer; then answer each request still running ``CONNECTION_CLOSED`` saying it was
    abandoned (its late answer is dropped), and log the ids."""
    left = await unanswered.drain(quiet_seconds)
    if not left:
        return
    for request_id in left:  # before any await: a late answer is dropped from now on
        unanswered.abandon(request_id)
    log.warning("stdin closed; abandoned %s with no answer for %g s: ids %s",
                counted(len(left), "MCP request"), quiet_seconds,
                ", ".join(json.dumps(i) for i in left))
    for request_id in left:
        await batches.deliver(types.JSONRPCError(
            jsonrpc="2.0", id=request_id, error=types.ErrorData(
                code=types.CONNECTION_CLOSED,
                message=f"abandoned: stdin closed and no answer came for {quiet_seconds:g} "
                        "s; the call may still take effect")), write_stream)


async def _note_answers(from_server: Any, write_stream: Any, unanswered: Unanswered,
                        batches: Batches) -> None:
    """Pass the server's messages on to stdout, noting each answer in ``unanswered`` (and
    dropping one for a request already answered as abandoned) and gathering a batch's
    answers into one (:class:`Batches`); closes stdout's stream when the server is done."""
    async with from_server, write_stream:
        async for item in from_server:
            message = item.message
            if isinstance(message, _Answer) and message.id is not None:
                if unanswered.settled(message.id):
                    await batches.deliver(message, write_stream)
                continue
            await write_stream.send(item)


#: JSON's own escapes for the Unicode line and paragraph separators. JSON allows them raw in a
#: string, but a line-delimited reader that splits at them (JavaScript before ES2019,
#: ``str.splitlines``) reads a message holding one as two broken lines; JSON text outside a
#: string never holds them, so each raw one stands in a string and its escape means the same.
_LINE_SEPARATOR_ESCAPES = {0x2028: "\\u2028", 0x2029: "\\u2029"}


class _LineSafe(RootModel[Any]):
    """A message as the transport writes it (``model_dump_json``), with
    :data:`_LINE_SEPARATOR_ESCAPES` applied."""

    def model_dump_json(self, **kwargs: Any) -> str:  # type: ignore[override]
        return self.root.model_dump_json(**kwargs).translate(_LINE_SEPARATOR_ESCAPES)


class _LineSafeStream:
    """The transport's write stream, each message sent through it written as :class:`_LineSafe`
    (every answer, error and batch goes out through this one stream)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    async def send(self, item: SessionMessage) -> None:
        await self._stream.send(SessionMessage(cast(Any, _LineSafe(item.message)),
                                               item.metadata))

    async def __aenter__(self) -> _LineSafeStream:
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> bool | None:
        return await self._stream.__aexit__(*exc)


async def serve_stdio(runtime: Runtime, stdin: BinaryIO | None = None,
                      quiet_seconds: float | None = None) -> None:
    """Serve MCP on this process's stdin/stdout until the client closes stdin and every
    request read is answered. A message (one line) over ``limits.max_request_bytes``, the
    HTTP API's body limit, is refused with a JSON-RPC error and never held whole
    (:class:`BoundedLines`).

    A client may pipe its requests and close stdin at once: the calls still running then
    are finished and answered (:class:`Unanswered`). Should none answer for ``quiet_seconds``
    (default :func:`drain_seconds`), those left are answered as abandoned and the server
    ends; its process exits once their threads return (a thread cannot be interrupted)."""
    order = CallOrder()
    server = build_server(runtime, order)
    lines = BoundedLines(stdin or sys.stdin.buffer, runtime.settings.limits.max_request_bytes)
    if quiet_seconds is None:
        quiet_seconds = drain_seconds(runtime.settings)
    unanswered, batches = Unanswered(order), Batches()
    forward, receive = anyio.create_memory_object_stream[Any](0)
    to_client, from_server = anyio.create_memory_object_stream[Any](0)
    async with stdio_server(stdin=anyio.wrap_file(lines)) as (read_stream, wire), \
            anyio.create_task_group() as group:
        write_stream = _LineSafeStream(wire)
        group.start_soon(_answer_refused, lines, read_stream, forward, write_stream,
                         unanswered, quiet_seconds, batches)
        group.start_soon(_note_answers, from_server, write_stream, unanswered, batches)
        async with receive:
            await server.run(receive, to_client, server.create_initialization_options())
