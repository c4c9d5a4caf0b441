"""A new record's timestamp with a fraction of a second (``...T10:00:00.123Z``, what a
JavaScript ``toISOString`` sends) is written as given, not silently cut to the second; a
fraction past the microsecond, which a record cannot keep, is refused naming it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.runtime import Runtime
from tests.api_client import ApiClient


@pytest.fixture
def call(root: Path) -> Iterator[ApiClient]:
    runtime = Runtime(root, embedder=HashEmbedder(64))
    yield ApiClient(runtime)
    runtime.close()


def log_text(root: Path, kind: str) -> str:
    (log,) = root.rglob(f"{kind}-2026-01-02.md")
    return log.read_text()


@pytest.mark.parametrize(("given", "written"), [
    ("2026-01-02T10:00:00.123Z", "2026-01-02T10:00:00.123+00:00"),
    ("2026-01-02T10:00:00.5+02:00", "2026-01-02T10:00:00.500+02:00"),
    ("2026-01-02T10:00:00.123456Z", "2026-01-02T10:00:00.123456+00:00"),
    ("2026-01-02T10:00:00,0001Z", "2026-01-02T10:00:00.000100+00:00"),
    ("2026-01-02T10:00:00.000Z", "2026-01-02T10:00:00+00:00"),
])
def test_an_episode_keeps_the_fraction_of_a_second_it_was_given(
        call: ApiClient, root: Path, given: str, written: str) -> None:
    resp = call("POST", "/api/v1/memory/episodes", json={
        "user_id": "u1", "subject": "lunch", "content": "Ate ramen.", "timestamp": given})
    assert resp.status_code == 201, resp.text
    assert resp.json()["data"]["timestamp"] == written
    assert f"\ntimestamp: {written}\n" in log_text(root, "episode")
    found = call("POST", "/api/v1/memory/search", json={"query": "ramen", "user_id": "u1"})
    assert [hit["timestamp"] for hit in found.json()["data"]["episodes"]][:1] == [written]


def test_a_task_record_keeps_the_fraction_of_a_second_it_was_given(
        call: ApiClient, root: Path) -> None:
    resp = call("POST", "/api/v1/tasks", json={
        "user_id": "u1", "task_type": "deploy", "goal": "ship", "steps": ["push"],
        "outcome": "success", "timestamp": "2026-01-02T10:00:00.250Z"})
    assert resp.status_code == 201, resp.text
    assert "\ntimestamp: 2026-01-02T10:00:00.250+00:00\n" in log_text(root, "task")


@pytest.mark.parametrize("given", ["2026-01-02T10:00:00.123456789Z",
                                   "2026-01-02T10:00:00,0000001+01:00"])
def test_a_fraction_past_the_microsecond_is_refused_and_nothing_written(
        call: ApiClient, root: Path, given: str) -> None:
    resp = call("POST", "/api/v1/memory/episodes", json={
        "user_id": "u1", "subject": "s", "content": "c", "timestamp": given})
    assert resp.status_code == 422, resp.text
    message = resp.json()["error"]["message"]
    assert message.startswith(f"timestamp: {given!r} has a fraction of a second of ")
    assert "6 at most" in message
    assert not [p for p in root.rglob("*.md") if "users" in p.parts]


def test_an_episode_stamped_now_is_written_to_the_second(call: ApiClient, root: Path) -> None:
    resp = call("POST", "/api/v1/memory/episodes", json={
        "user_id": "u1", "subject": "s", "content": "c"})
    assert resp.status_code == 201, resp.text
    stamp = resp.json()["data"]["timestamp"]
    assert len(stamp) == len("2026-01-02T10:00:00+00:00") and stamp.endswith("+00:00")


def test_a_merged_narrative_takes_its_latest_source_s_fraction_of_a_second(root: Path) -> None:
    # SPEC §3: a merged narrative's timestamp is the latest source's; cut to the second it
    # was earlier than that source
    from everos_reflect.llm import ScriptedLLM
    from everos_reflect.model import Kind
    from tests.reflect_fixtures import ANDREW, PETS, add_episode, make_runtime, run_reflection
    from tests.test_reflect_pipeline import SEED_FACTS, SEED_NARRATIVE, SEED_TITLE

    rt = make_runtime(root, ScriptedLLM([(SEED_TITLE, SEED_NARRATIVE)], [SEED_FACTS]))
    try:
        stamps = [ts for ts, _, _ in PETS]
        stamps[-1] = stamps[-1].replace("10:00:00-07:00", "10:00:00.750-07:00")
        sources = [add_episode(rt, ANDREW, ts, subject, content)
                   for ts, (_, subject, content) in zip(stamps, PETS, strict=True)]
        assert run_reflection(rt)["merged"] == 1
        [narrative] = [e for e in rt.store.entries(ANDREW, Kind.EPISODE)
                       if e.parent_type == "cluster"]
        assert narrative.timestamp == sources[-1].timestamp
        assert narrative.timestamp.microsecond == 750000
    finally:
        rt.close()
