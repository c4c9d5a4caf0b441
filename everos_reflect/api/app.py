"""The HTTP admin API (SPEC §7): trigger, search, append an Episode, health, status, audit.

A thin edge: requests are validated by pydantic models, the work is done by the engine, the
store and the search module, and domain errors become 4xx JSON ``{"error": {"code",
"message"}}`` here — never a 500 for something the client sent.
"""

from __future__ import annotations

import functools
import hmac
import re
import threading
from dataclasses import asdict, is_dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

import anyio
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute, Match

from everos_reflect import errors
from everos_reflect.api import ops
from everos_reflect.api.body_limit import BodyLimit
from everos_reflect.api.deps import EngineDep, RuntimeDep, SchedulerDep
from everos_reflect.api.escapes import Utf8Url
from everos_reflect.api.json_body import StrictJSONRoute
from everos_reflect.api.memory_routes import memory_router
from everos_reflect.api.models import (
    EpisodeRequest,
    ErrorBody,
    SearchRequest,
    TriggerRequest,
    UndoRequest,
)
from everos_reflect.api.params import LimitQuery
from everos_reflect.engine.engine import list_runs, strategies_status
from everos_reflect.markdown.parser import lookup_entry_id
from everos_reflect.model import UserRef, path_text, shown_key, shown_names

if TYPE_CHECKING:
    from everos_reflect.engine.engine import Engine
    from everos_reflect.engine.scheduler import Scheduler
    from everos_reflect.runtime import Runtime

API = "/api/v1"

#: The error answers every route may give, published in the OpenAPI schema.
_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "Bad request (e.g. invalid configuration)."},
    401: {"model": ErrorBody, "description": "Missing or wrong bearer token."},
    404: {"model": ErrorBody, "description": "No such strategy or entry."},
    413: {"model": ErrorBody, "description": "Request body over limits.max_request_bytes."},
    415: {"model": ErrorBody, "description": "Request body sent as another type than JSON."},
    422: {"model": ErrorBody, "description": "Invalid request: a field, an id or a size."},
}
_WRITE_ERRORS: dict[int | str, dict[str, Any]] = {
    **_ERRORS,
    409: {"model": ErrorBody, "description": "Busy, refused, or a file that cannot be written."},
    503: {"model": ErrorBody, "description": "The LLM or embedding provider, the index or "
          "the root's disk is unavailable (e.g. a read-only file system)."},
}

class ApiError(Exception):
    """An error this edge raises itself (auth, a body value pydantic cannot judge)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _error(status: int, code: str, message: str, **headers: str) -> JSONResponse:
    """The JSON error answer. A byte of a path that is not UTF-8 is written ``\\xff``
    (:func:`~everos_reflect.model.path_text`): an error naming such a root failed to encode,
    and the client got a 500 instead of the error."""
    return JSONResponse({"error": {"code": code, "message": path_text(message)}},
                        status_code=status, headers=headers or None)


def _jsonable(value: Any) -> Any:
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    return value


def _package_version() -> str:
    try:
        return version("everos-reflect")
    except PackageNotFoundError:
        return "unknown"


def create_app(runtime: Runtime, engine: Engine, scheduler: Scheduler | None = None) -> FastAPI:
    """The API for one opened root. ``scheduler`` (when serving) supplies next-run times.

    The routes are :func:`shared_routes`, built once per process; each request reads the root,
    engine and scheduler of the app it came in on (``app.state``, :mod:`~everos_reflect.api.deps`),
    so two apps of two roots never see each other's. Building the routes per app cost 40-90 ms
    a call. ``app.dependency_overrides`` does not reach shared routes (nothing here uses it).
    """
    limits = runtime.settings.limits
    app = FastAPI(
        title="everos-reflect",
        version=_package_version(),
        description="Admin API of the offline memory-consolidation daemon.",
        responses=_ERRORS,
        # the schema is served by a guarded route of our own (shared_routes); Swagger UI and
        # ReDoc pages load their scripts from a CDN, which an offline daemon cannot reach
        openapi_url=None, docs_url=None, redoc_url=None,
        # a route's path with "/" added is an unknown route naming the one meant
        # (_slash_meant), not a 307 with an empty body
        redirect_slashes=False,
    )
    app.router.route_class = StrictJSONRoute  # before any route: every body read strictly
    app.add_middleware(BodyLimit, max_bytes=limits.max_request_bytes)
    app.add_middleware(Utf8Url)  # %ff was quoted back as U+FFFD, not as sent
    app.state.runtime, app.state.engine, app.state.scheduler = runtime, engine, scheduler
    app.state.token = runtime.settings.server.token

    @app.exception_handler(RequestValidationError)
    async def _on_validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = exc.errors()
        # the route's body model, so a key it does not take is told the one meant
        body = getattr(request.scope.get("route"), "body_field", None)
        model = getattr(getattr(body, "field_info", None), "annotation", None)
        return _error(422, ops.validation_code(problems),
                      ops.validation_message(problems, model))

    @app.exception_handler(StarletteHTTPException)
    async def _on_http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed", 413: "too_large",
                415: "unsupported_media_type",
                422: "invalid_request"}.get(exc.status_code, "http_error")
        message = str(exc.detail)
        meant = _slash_meant(request) if exc.status_code == 404 and \
            request.scope.get("route") is None else None
        if meant is not None:  # the route's path with a "/" added: a 307 with no body was
            route, what = meant  # all a client not resending a POST to it had to read
            if _guarded(route):  # behind the token as the route meant is
                try:
                    _authorize(request)
                except ApiError as refused:
                    return await _on_api(request, refused)
            message = (f"no route {request.method} {shown_key(request.url.path)}: no route's "
                       f"path ends in '/' (the {what}); the routes are listed by GET "
                       "/openapi.json")
        elif exc.status_code == 404 and request.scope.get("route") is None:  # none matched
            problem = _path_parameter_problem(request)
            if problem is not None:
                try:  # the route it was meant for is behind the token: so is its answer
                    _authorize(request)
                except ApiError as refused:
                    return await _on_api(request, refused)
                return _error(422, ops.validation_code(problem),
                              ops.validation_message(problem))
            message = (f"no route {request.method} {shown_key(request.url.path)}: the routes "
                       "are listed by GET /openapi.json")
        elif exc.status_code == 405 and (exc.headers or {}).get("Allow"):
            message = (f"{request.method} is not allowed on {shown_key(request.url.path)}: it "
                       f"takes {exc.headers['Allow']}")  # "Method Not Allowed" named neither
        return _error(exc.status_code, code, message, **(exc.headers or {}))  # e.g. Allow

    @app.exception_handler(ApiError)
    async def _on_api(request: Request, exc: ApiError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else {}
        return _error(exc.status, exc.code, exc.message, **headers)

    @app.exception_handler(errors.EverosError)
    async def _on_domain(request: Request, exc: errors.EverosError) -> JSONResponse:
        status, code = ops.error_code(exc)
        return _error(status, code, str(exc))

    @app.exception_handler(OSError)
    async def _on_file(request: Request, exc: OSError) -> JSONResponse:
        # a file where a user's folder goes, a log it may not write: a traceback and a
        # plain-text 500 before. One without a file (a socket) is no file's problem.
        if not exc.filename:
            raise exc
        status, code = ops.file_error_code(exc)
        return _error(status, code, ops.file_error_message(exc, request.app.state.runtime.root))

    @app.exception_handler(Exception)
    async def _on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        # a bug, or a failure none of the handlers above names: Starlette's plain-text
        # "Internal Server Error" said nothing a client reading error.message could read.
        # Starlette raises the error again once answered: uvicorn logs its traceback.
        return _error(500, "internal_error", f"{request.method} {request.url.path} failed: "
                      f"{errors.brief(exc)}; the daemon's log has the details")

    app.router.routes.extend(shared_routes())
    # built now, before any request: first builds racing each other in the request threads
    # could each fill FastAPI's cache of a query model's fields (LessonsQuery), one looking
    # up fields the other had just replaced (a KeyError, a 500 to the requests that raced)
    _query_names()
    return app


def _slash_meant(request: Request) -> tuple[BaseRoute, str] | None:
    """``(route, what was meant)`` when ``request``'s path is a route's with one ``/`` added
    at the end (``POST /api/v1/memory/search/``), else ``None``. Starlette answered such a
    request 307 with an empty body and a ``Location``: a client that does not follow a
    redirect for a POST (httpx by default) had nothing to read, and one that does sent the
    body twice. It is answered as an unknown route, naming the one meant."""
    path = request.scope.get("path", "")
    if not path.endswith("/") or path.endswith("//") or path == "/":
        return None
    scope = {**request.scope, "path": path[:-1]}
    partial = None
    for route in request.app.router.routes:
        match, _ = route.matches(scope)
        if match is Match.FULL:
            return route, f"route meant is {request.method} {shown_key(path[:-1])}"
        if match is Match.PARTIAL and partial is None:
            partial = route
    if partial is None:
        return None
    return partial, f"path meant is {shown_key(path[:-1])}"


def _guarded(route: BaseRoute) -> bool:
    """Whether ``route`` answers only with the bearer token (:func:`_authorize`). A router
    included whole (the memory, belief and insight routes: FastAPI matches it as one entry,
    with no ``dependant`` of its own) is taken as guarded, as every route in it is: read as
    open, ``GET /memory/explain/<id>/`` named its route to a client without the token."""
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return True
    return any(d.call is _authorize for d in dependant.dependencies)


def _path_parameter_problem(request: Request) -> list[dict[str, Any]] | None:
    """The problem of a path parameter that made no route match, as the schema states one
    (``entry_id: invalid entry id '../..'``), else ``None``. A parameter holding a
    ``/`` (``/memory/explain/..%2F..``, decoded before routing) or none at all
    (``/memory/explain/``) matched no route and was answered "Not Found", naming nothing,
    where ``/memory/explain/..`` was told what an entry id is."""
    path = request.scope.get("path", "")
    for method, template in _query_names():  # every route, as the OpenAPI document has it
        if method != request.method or "{" not in template:
            continue
        pattern = "".join(f"(?P<{part[1:-1]}>.*)" if part.startswith("{") else re.escape(part)
                          for part in re.split(r"(\{\w+\})", template))
        found = re.fullmatch(pattern, path, re.DOTALL)
        if found is None:
            continue
        return [{"type": "string_pattern_mismatch", "loc": ("path", name), "input": value}
                for name, value in found.groupdict().items()]
    return None


def _authorize(request: Request) -> None:
    """The bearer token of the app ``request`` came in on, when it has one (SPEC §4)."""
    token = request.app.state.token
    if not token:
        return
    sent = request.headers.getlist("authorization")
    if len(sent) > 1:
        # which one counts is not said anywhere (HTTP gives the header no list form): the
        # first was checked, and a proxy that reads the last one saw another credential
        raise ApiError(400, "invalid_request", f"the Authorization header is sent "
                       f"{len(sent):,} times; send it once")
    scheme, _, given = (sent[0] if sent else "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        given.strip().encode(), token.encode()
    ):
        raise ApiError(401, "unauthorized", "missing or wrong bearer token")


_QUERY_NAMES_LOCK = threading.Lock()


def _query_names() -> dict[tuple[str, str], tuple[frozenset[str], frozenset[str]]]:
    """(method, route path) -> (the query parameters it takes, those of them that take a
    list), from the OpenAPI document of the shared routes (every app publishes the same
    paths). Built whole, once, by :func:`create_app`, and never by two threads at once:
    FastAPI's OpenAPI builder is not safe to run so on routes it never described."""
    with _QUERY_NAMES_LOCK:
        return _query_table()


@functools.cache
def _query_table() -> dict[tuple[str, str], tuple[frozenset[str], frozenset[str]]]:
    table = {}
    paths = get_openapi(title="everos-reflect", version="", routes=list(shared_routes()))
    for path, methods in paths["paths"].items():
        for method, operation in methods.items():
            query = [p for p in operation.get("parameters", ()) if p["in"] == "query"]
            table[(method.upper(), path)] = (
                frozenset(p["name"] for p in query),
                frozenset(p["name"] for p in query
                          if p.get("schema", {}).get("type") == "array"))
    return table


def _parameters(names: list[str]) -> str:
    """``parameter`` for one name, ``parameters`` for more: "unknown query parameter(s)"."""
    return "parameter" if len(names) == 1 else "parameters"


def _known_query(request: Request) -> None:
    # bodies refuse a misspelt field (extra="forbid"); a query string is held to the same
    # rule, since an ignored ``usr=`` or ``limt=`` silently changes what a read returns.
    # So does a parameter given twice (``user_id=a&user_id=b`` read b alone).
    route = request.scope.get("route")
    allowed, lists = _query_names().get((request.method, getattr(route, "path", "")),
                                        (frozenset(), frozenset()))
    unknown = sorted(set(request.query_params) - allowed)
    if unknown:
        raise ApiError(422, "invalid_request",
                       f"unknown query {_parameters(unknown)}: {shown_names(unknown)}; "
                       f"this route takes {', '.join(sorted(allowed)) or 'none'}")
    repeated = sorted(name for name in set(request.query_params) - lists
                      if len(request.query_params.getlist(name)) > 1)
    if repeated:
        raise ApiError(422, "invalid_request",
                       f"query {_parameters(repeated)} given more than once: "
                       f"{shown_names(repeated)}; give each once")


def _root_present(runtime: RuntimeDep) -> None:
    # every guarded route reads or writes the root: one that is not there (moved,
    # deleted, never created) is a 503 naming it, not an empty answer or a new folder
    runtime.check_root()
    ops.index_present(runtime)  # an index deleted by hand: the watcher rebuilds it


@functools.cache
def shared_routes() -> tuple[BaseRoute, ...]:
    """Every route of the API, built once per process and shared by every app
    :func:`create_app` makes: a route takes what it needs from the app a request came in on
    (:mod:`~everos_reflect.api.deps`), never from a closure over one root."""
    router = APIRouter(responses=_ERRORS, route_class=StrictJSONRoute)
    guarded = [Depends(_authorize), Depends(_known_query), Depends(_root_present)]

    @router.get(f"{API}/health")
    def health(request: Request) -> dict[str, Any]:
        """Liveness; open without a token so probes work (it reveals nothing)."""
        return {"status": "ok", "version": request.app.version}

    @router.get("/openapi.json", dependencies=[Depends(_authorize), Depends(_known_query)],
                include_in_schema=False)
    def openapi(request: Request) -> JSONResponse:
        """The OpenAPI document, behind the token like every route but health: it lists
        every route and field a client may try."""
        return JSONResponse(request.app.openapi())

    # ``curl -I`` and many load balancers' checks probe with HEAD, which got a 405; one
    # operation in the schema (a second would repeat its operation id)
    router.head(f"{API}/health", include_in_schema=False)(health)

    @router.post(f"{API}/ome/trigger", dependencies=guarded, responses=_WRITE_ERRORS)
    async def trigger(body: TriggerRequest, engine: EngineDep) -> dict[str, Any]:
        """Run a strategy now; waits up to ``timeout`` for that run only.

        The wait is on a thread of its own, not one of the 40 every other route shares:
        40 clients waiting on a long run (agents polling it with a ``timeout``) held them
        all, and the daemon answered nothing else, ``/health`` included, until it ended.
        How many wait at once is bounded by the daemon's connections (``MAX_CONNECTIONS``).
        """
        outcome = await anyio.to_thread.run_sync(
            functools.partial(engine.trigger, body.name, force=body.force,
                              timeout=body.timeout, trigger="api"),
            limiter=anyio.CapacityLimiter(1))
        return outcome.to_dict()

    @router.get(f"{API}/ome/strategies", dependencies=guarded)
    def strategies(runtime: RuntimeDep, engine: EngineDep,
                   scheduler: SchedulerDep) -> dict[str, Any]:
        """Each strategy: enabled, schedule, next and last run; an invalid ``ome.toml`` said
        once (``config.strategies_error``), each row saying ``config_invalid``."""
        from everos_reflect.status import strategies_document

        rows = scheduler.status() if scheduler else strategies_status(runtime, engine)
        return {"data": strategies_document(rows)}

    @router.get(f"{API}/status", dependencies=guarded)
    def status(runtime: RuntimeDep, engine: EngineDep,
               scheduler: SchedulerDep) -> dict[str, Any]:
        """What ``everos-reflect status --json`` prints (the same function): users and
        counts, files the parser cannot read, config problems, index lag, strategies."""
        from everos_reflect.status import status_document

        rows = scheduler.status() if scheduler else strategies_status(runtime, engine)
        return {"data": status_document(runtime, strategies=rows, engine=engine)}

    @router.get(f"{API}/lint", dependencies=guarded)
    def lint(runtime: RuntimeDep) -> dict[str, Any]:
        """What ``everos-reflect lint --json`` prints (the same function); ``ok`` is False on
        any problem. Reads every daily log: meant for an operator, not for polling."""
        from everos_reflect.lint import lint_report

        return {"data": lint_report(runtime.root)}

    @router.get(f"{API}/ome/runs", dependencies=guarded)
    def runs(runtime: RuntimeDep, limit: LimitQuery = 20) -> dict[str, Any]:
        return {"data": {"runs": list_runs(runtime, limit=limit)}}

    @router.get(f"{API}/ome/reports", dependencies=guarded)
    def reports(runtime: RuntimeDep, limit: LimitQuery = 20) -> dict[str, Any]:
        from everos_reflect.index.audit import reflection_report_rows

        # the rows `reports --json` prints (a damaged `source_members` said so, not raw)
        return {"data": {"reports": reflection_report_rows(runtime.db(), limit)}}

    @router.post(f"{API}/ome/undo", dependencies=guarded, responses=_WRITE_ERRORS)
    def undo(body: UndoRequest, runtime: RuntimeDep) -> dict[str, Any]:
        try:
            from everos_reflect.strategies.undo import undo_merge
        except ModuleNotFoundError as exc:
            raise ApiError(501, "not_available", "undo is not available in this build") from exc
        ref = UserRef.of(body.user_id, body.app_id, body.project_id)
        entry_id = lookup_entry_id(body.entry_id, ref)
        result = undo_merge(runtime, ref, entry_id, cascade=body.cascade)
        return {"data": _jsonable(result)}

    @router.post(f"{API}/memory/search", dependencies=guarded, responses=_WRITE_ERRORS)
    def memory_search(body: SearchRequest, runtime: RuntimeDep) -> dict[str, Any]:
        return {"data": ops.search(runtime, body)}

    @router.post(f"{API}/memory/episodes", dependencies=guarded, status_code=201,
                 responses=_WRITE_ERRORS)
    def add_episode(body: EpisodeRequest, runtime: RuntimeDep) -> dict[str, Any]:
        """Append an Episode to the user's daily log and index it: a search right after finds it."""
        return {"data": ops.add_episode(runtime, body)}

    router.include_router(memory_router(guarded, API))
    from everos_reflect.api.belief_routes import belief_router

    router.include_router(belief_router(guarded, API))
    from everos_reflect.api.insight_routes import insight_router

    router.include_router(insight_router(guarded, API))
    return tuple(router.routes)
