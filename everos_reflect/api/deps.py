"""What a route takes from the app serving it: the opened root, its engine, its scheduler.

The API's routes are built once per process and shared by every app :func:`create_app
<everos_reflect.api.app.create_app>` makes (:func:`everos_reflect.api.app.shared_routes`), so a
route never closes over a root: each request finds its own through the app it came in on
(``request.app.state``). Built per app, the routes cost 40-90 ms each time (FastAPI analyses
every parameter into pydantic adapters), paid by every test and tool that made an app.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, Request

if TYPE_CHECKING:
    from everos_reflect.engine.engine import Engine
    from everos_reflect.engine.scheduler import Scheduler
    from everos_reflect.runtime import Runtime


def runtime_of(request: Request) -> Runtime:
    """The root the app serving ``request`` was made for."""
    return request.app.state.runtime


def engine_of(request: Request) -> Engine:
    return request.app.state.engine


def scheduler_of(request: Request) -> Scheduler | None:
    """The scheduler when serving (it knows next-run times), else ``None``."""
    return request.app.state.scheduler


RuntimeDep = Annotated["Runtime", Depends(runtime_of)]
EngineDep = Annotated["Engine", Depends(engine_of)]
SchedulerDep = Annotated["Scheduler | None", Depends(scheduler_of)]
