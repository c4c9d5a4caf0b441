"""HTTP routes of the procedural tier and the briefing (``/api/v1/tasks``, ``/api/v1/lessons``,
``/api/v1/memory/briefing``), kept apart from ``app.py`` and included by it.

Each route is one call into :mod:`everos_reflect.api.ops` with the model the MCP tool uses too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Query

from everos_reflect.api import ops
from everos_reflect.api.deps import RuntimeDep
from everos_reflect.api.json_body import StrictJSONRoute
from everos_reflect.api.models import BriefingRequest, LessonsParams, TaskRecordRequest


def memory_router(dependencies: Sequence[Any], prefix: str) -> APIRouter:
    """The routes, built once per process (``app.shared_routes``): each request reads its root
    from the app it came in on (``RuntimeDep``); ``dependencies`` carry the API's bearer-token
    check."""
    router = APIRouter(prefix=prefix, dependencies=list(dependencies),
                       route_class=StrictJSONRoute)

    @router.post("/tasks", status_code=201)
    def record_task(body: TaskRecordRequest, runtime: RuntimeDep) -> dict[str, Any]:
        """Append a task record to the user's ``tasks/`` log."""
        return {"data": ops.record_task(runtime, body)}

    @router.get("/lessons")
    def lessons(query: Annotated[LessonsParams, Query()], runtime: RuntimeDep) -> dict[str, Any]:
        """The live lessons of a task type (of one user, or every user), most confirmed
        first; contested ones are included and marked."""
        return {"data": ops.lessons(runtime, query)}

    @router.post("/memory/briefing")
    def briefing(body: BriefingRequest, runtime: RuntimeDep) -> dict[str, Any]:
        """One block of memory for ``query`` that fits ``max_tokens``: convictions, lessons of
        the task type, insights and the records that answer it, each with id, kind, date and
        citations; says what it left out."""
        return {"data": ops.briefing(runtime, body)}

    return router
