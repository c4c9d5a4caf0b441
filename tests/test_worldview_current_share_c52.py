"""Every current conviction is shown to ``update_worldview``'s model, however many keys there
are: each was cut to 2,000 characters, and the list as a whole then to the 20,000 a prompt
value may hold, so with a dozen long convictions the keys past the cut (by name) were not
shown at all. Told the keys but not their convictions, the model could "shift" a slot it
had not seen, and the new version archived a conviction no model read. The convictions now
share the room, each cut to an equal part of it (and saying so)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.llm import ScriptedLLM
from everos_reflect.llm.tasks import MAX_VALUE_PROMPT_CHARS, TaskRequest
from everos_reflect.model import Kind
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from tests.test_belief_tiers import ADA, add_insights, ome, run

KEYS = [f"slot_{c}" for c in "abcdefghijklmnop"]


@pytest.fixture
def llm() -> ScriptedLLM:
    return ScriptedLLM()


@pytest.fixture
def rt(root: Path, llm: ScriptedLLM) -> Iterator[Runtime]:
    ome(root, update_worldview="keys = [" + ", ".join(f'"{k}"' for k in KEYS) + "]")
    runtime = Runtime(root, Settings(), embedder=HashEmbedder(32), llm=llm)
    yield runtime
    runtime.close()


def test_every_key_s_conviction_is_shown_within_the_value_cap(rt: Runtime,
                                                               llm: ScriptedLLM) -> None:
    for n, key in enumerate(KEYS):
        rt.store.append(ADA, Kind.CONVICTION, {
            "timestamp": f"2026-10-12T{n:02d}:00:00+00:00", "key": key, "evidence": [],
            "depth": 2, "status": "active"},
            {"Conviction": f"The {key} conviction: " + "word " * 380 + f"END-{key}"})
    add_insights(rt, "One.", "Two.", "Three.")
    seen: list[str] = []

    def reply(req: TaskRequest) -> dict[str, Any]:
        seen.append(req.values["current"])
        return {"convictions": []}

    llm.queue_task("worldview", reply)
    run(rt, "update_worldview")
    (current,) = seen
    assert len(current) <= MAX_VALUE_PROMPT_CHARS
    assert "(clipped from" in current  # each long one says it was cut
    for key in KEYS:
        assert f"- {key}: The {key} conviction" in current
