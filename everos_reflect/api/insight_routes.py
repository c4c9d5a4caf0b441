"""HTTP routes for insights (SPEC §10): ``GET /api/v1/memory/insights`` and
``GET /api/v1/memory/explain/{id}``; the same functions as the CLI
(:mod:`everos_reflect.strategies.insight_views`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter

from everos_reflect.api.deps import RuntimeDep
from everos_reflect.api.json_body import StrictJSONRoute
from everos_reflect.api.models import LIST_LIMIT, ErrorBody
from everos_reflect.api.params import (
    BoolQuery,
    EntryIdPath,
    LimitQuery,
    NameQuery,
    OptionalNameQuery,
)
from everos_reflect.markdown.parser import lookup_entry_id
from everos_reflect.model import UserRef


def insight_router(dependencies: Sequence[Any], prefix: str) -> APIRouter:
    """The routes, built once per process (``app.shared_routes``): each request reads its root
    from the app it came in on (``RuntimeDep``); ``dependencies`` carry the API's bearer-token
    check."""
    from everos_reflect.strategies import insight_views

    router = APIRouter(prefix=prefix, dependencies=list(dependencies),
                       route_class=StrictJSONRoute)

    @router.get("/memory/insights")
    def insights(runtime: RuntimeDep, user_id: NameQuery, app_id: OptionalNameQuery = None,
                 project_id: OptionalNameQuery = None,
                 include_stale: BoolQuery = False,
                 limit: LimitQuery = LIST_LIMIT) -> dict[str, Any]:
        """The user's insights, newest first (stale and retired ones with ``include_stale``):
        the first ``limit``, ``total`` counting them all; each lists the first 20 ids of its
        evidence, ``evidence_count`` counting them all."""
        ref = UserRef.of(user_id, app_id, project_id)
        found = insight_views.list_insights(runtime, ref, include_stale=include_stale)
        return {"data": {"insights": found[:limit], "total": len(found)}}

    @router.get("/memory/explain/{entry_id}", responses={409: {
        "model": ErrorBody, "description": "The entry's daily log cannot be read now."}})
    def explain(runtime: RuntimeDep, entry_id: EntryIdPath, user_id: NameQuery,
                app_id: OptionalNameQuery = None,
                project_id: OptionalNameQuery = None) -> dict[str, Any]:
        """The citation tree of an insight (or any record) down to the Episodes."""
        ref = UserRef.of(user_id, app_id, project_id)
        entry_id = lookup_entry_id(entry_id, ref)
        return {"data": insight_views.explain(runtime, ref, entry_id)}

    return router
