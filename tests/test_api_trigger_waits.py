"""Clients waiting on ``POST /ome/trigger`` for a long run each held one of the 40 threads
every other route runs on: 40 of them (agents polling a long Reflection with ``timeout``)
and the daemon answered nothing else, not even ``/health``, until the run ended. A trigger
now waits on threads of its own."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from everos_reflect.api.app import create_app
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.engine import registry
from everos_reflect.engine.engine import Engine
from everos_reflect.engine.registry import RunContext, Strategy
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings

#: As many waiting clients as the threads sync routes share (anyio's default limiter).
WAITERS = 40


class Held(Strategy):
    """Runs until the test lets it finish."""

    name = "held_test"
    description = "test double"
    unit_counts = ("done",)

    def __init__(self) -> None:
        self.release = threading.Event()

    def run(self, ctx: RunContext) -> dict[str, int]:
        self.release.wait(60)
        return {"done": 1}


@pytest.fixture
def held() -> Iterator[Held]:
    strategy = Held()
    registry.register(strategy)
    yield strategy
    strategy.release.set()
    registry.unregister(strategy.name)


def test_the_api_answers_while_many_clients_wait_on_a_trigger(root: Path, held: Held) -> None:
    runtime = Runtime(root, Settings(), embedder=HashEmbedder(16))
    engine = Engine(runtime)
    engine.reload_config()  # as serve's scheduler does before the API starts
    app = create_app(runtime, engine)

    async def go() -> tuple[int | None, list[str]]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test",
                                     timeout=90) as c:
            waiting = [asyncio.create_task(c.post("/api/v1/ome/trigger", json={
                "name": held.name, "force": True, "timeout": 60})) for _ in range(WAITERS)]
            await asyncio.sleep(0.5)  # every one of them waiting on the run
            try:
                health = await asyncio.wait_for(c.get("/api/v1/health"), 20)
                status: int | None = health.status_code
            except TimeoutError:
                status = None
            held.release.set()
            answers = await asyncio.gather(*waiting)
            return status, [a.json()["status"] for a in answers]

    try:
        status, outcomes = asyncio.run(go())
    finally:
        held.release.set()
        engine.shutdown(timeout=10)
        runtime.close()
    assert status == 200, "the API answered nothing while triggers waited"
    assert outcomes == ["ok"] * WAITERS
