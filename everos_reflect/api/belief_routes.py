"""HTTP routes of the belief tiers (SPEC §10): ``GET /api/v1/memory/worldview``,
``GET /api/v1/memory/relations``, ``POST /api/v1/memory/relations/{id}/resolve``.

Kept apart from ``app.py`` and included by it; each route is one call into
:mod:`everos_reflect.strategies.belief_views`, the same functions the CLI uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from fastapi import APIRouter
from pydantic import Field

from everos_reflect.api.deps import RuntimeDep
from everos_reflect.api.json_body import StrictJSONRoute
from everos_reflect.api.models import TEXT, LogText, Name, Strict
from everos_reflect.api.params import BoolQuery, NameQuery, OptionalNameQuery, RelationIdPath
from everos_reflect.markdown.parser import lookup_entry_id
from everos_reflect.model import UserRef


class ResolveRequest(Strict):
    user_id: Name
    app_id: Name | None = None
    project_id: Name | None = None
    note: LogText = Field(min_length=1, max_length=2000,
                          json_schema_extra={"pattern": TEXT})


def belief_router(dependencies: Sequence[Any], prefix: str) -> APIRouter:
    """The routes, built once per process (``app.shared_routes``): each request reads its root
    from the app it came in on (``RuntimeDep``); ``dependencies`` carry the API's bearer-token
    check."""
    from everos_reflect.strategies import belief_views

    router = APIRouter(prefix=prefix, dependencies=list(dependencies),
                       route_class=StrictJSONRoute)

    @router.get("/memory/worldview")
    def worldview(runtime: RuntimeDep, user_id: NameQuery, app_id: OptionalNameQuery = None,
                  project_id: OptionalNameQuery = None,
                  history: BoolQuery = False) -> dict[str, Any]:
        """The user's current convictions, one per key (every version with ``history``)."""
        ref = UserRef.of(user_id, app_id, project_id)
        return {"data": {"convictions": belief_views.worldview(runtime, ref, history=history)}}

    @router.get("/memory/relations")
    def relations(runtime: RuntimeDep, user_id: NameQuery, app_id: OptionalNameQuery = None,
                  project_id: OptionalNameQuery = None,
                  status: Literal["active", "resolved", "stale", "retired"] | None = None,
                  ) -> dict[str, Any]:
        """The user's self-contradiction edges, newest first (``status`` filters)."""
        ref = UserRef.of(user_id, app_id, project_id)
        return {"data": {"relations": belief_views.relations(runtime, ref, status=status)}}

    @router.post("/memory/relations/{rel_id}/resolve")
    def resolve(body: ResolveRequest, rel_id: RelationIdPath,
                runtime: RuntimeDep) -> dict[str, Any]:
        """Mark an active edge resolved with a note; the convictions are not touched."""
        ref = UserRef.of(body.user_id, body.app_id, body.project_id)
        rel_id = lookup_entry_id(rel_id, ref)
        return {"data": belief_views.resolve_relation(runtime, ref, rel_id, body.note)}

    return router
