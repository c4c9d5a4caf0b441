"""One user's unexpected error in Reflection (an OSError writing the user's log, a bug a
hand-edited record trips) fails that user alone: the users after it are still reflected, the
failed cluster stays unmerged (a commit that failed halfway keeps its journal row, which the
next run's recovery settles as after a crash), the run is ``partial`` (``failed`` when nothing
merged) and its record names the user; ``trigger`` exits 3 (1)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from everos_reflect.cli import engine_cmds
from everos_reflect.cli.main import cli
from everos_reflect.engine.engine import Engine
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.markdown import store as store_module
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.strategies import journal, reflect
from tests.reflect_fixtures import (
    check_invariants,
    make_runtime,
    reports,
    seed_pets,
)
from tests.test_reflect_pipeline import topic

ADA, BOB, CY = (UserRef.of(u) for u in ("ada", "bob", "cy"))
NAME = reflect.NAME


@pytest.fixture
def rt(root: Path) -> Runtime:
    """Three users with one cluster each (the seed's pet story), Reflection enabled."""
    (root / "ome.toml").write_text(f"[strategies.{NAME}]\nenabled = true\n")
    runtime = make_runtime(root, ExtractiveLLM())
    for ref in (ADA, BOB, CY):
        seed_pets(runtime, ref)
    return runtime


def narratives(rt: Runtime, ref: UserRef) -> list[str]:
    return [e.id for e in rt.store.entries(ref, Kind.EPISODE)
            if e.parent_type == "cluster" and e.deprecated_by is None]


def trigger(monkeypatch: pytest.MonkeyPatch, rt: Runtime) -> tuple[int, dict[str, Any]]:
    monkeypatch.setattr(engine_cmds, "open_runtime", lambda _root: rt)
    result = CliRunner().invoke(cli, ["trigger", NAME, "--json", "--root", str(rt.root)])
    return result.exit_code, json.loads(result.stdout)


def test_an_oserror_writing_one_users_log_fails_that_user_alone(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    real = store_module._atomic_write
    broken = {"/users/bob/"}

    def atomic_write(path: Path, data: bytes) -> None:
        if any(b in str(path) for b in broken):
            raise OSError(28, "No space left on device", str(path))
        real(path, data)

    monkeypatch.setattr(store_module, "_atomic_write", atomic_write)

    code, answer = trigger(monkeypatch, rt)

    assert code == 3, answer  # partial
    assert answer["status"] == "partial"
    assert answer["counts"]["merged"] == 2 and answer["counts"]["interrupted"] == 1, answer
    assert "default_app/default_project/bob: cluster cl_" in answer["error"]
    assert "No space left on device: " in answer["error"]
    assert "OSError" not in answer["error"] and "Errno" not in answer["error"]
    assert Engine(rt).last_run(NAME)["error"] == answer["error"]
    assert len(narratives(rt, ADA)) == len(narratives(rt, CY)) == 1
    assert narratives(rt, BOB) == []  # unmerged, nothing of it written
    assert [p.user_id for p, _ in journal.pending(rt.db())] == ["bob"]

    # still broken: the recovery of bob's merge fails bob alone, cy's new cluster is merged
    topic(rt, CY, 1, "garden", 2)
    code, answer = trigger(monkeypatch, rt)
    assert code == 3, answer
    assert answer["counts"]["recovered_unrecovered"] == 1 and answer["counts"]["merged"] == 1
    assert [r["status"] for r in reports(rt) if r["owner_id"] == "cy"] == ["ok", "ok"]
    assert narratives(rt, BOB) == []

    broken.clear()  # the disk has room again: the next run settles bob's merge, once
    outcome = Engine(rt).trigger(NAME, timeout=60)
    assert outcome.status == "ok", outcome
    assert outcome.counts.get("recovered_ok") == 1, outcome
    assert len(narratives(rt, BOB)) == 1
    check_invariants(rt, BOB)
    assert [r["status"] for r in reports(rt) if r["owner_id"] == "bob"] == ["ok"]


@pytest.mark.parametrize("where", ["select", "draft"])
def test_a_bug_one_users_record_trips_fails_that_user_alone_and_all_failing_exits_1(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """A hand-edited record of bob's trips a bug while his cluster is selected, or while it
    is drafted on a worker thread: ada and cy are merged, bob's cluster is left as it is
    with a failed report row; when no cluster merges the run failed."""
    bug = TypeError("'<' not supported between instances of 'str' and 'int'")
    real = getattr(reflect, where)

    def tripped(*args: Any, **kwargs: Any) -> Any:
        info = args[2] if where == "select" else args[0]  # a ClusterInfo or a Selection
        if info.ref == BOB:
            raise bug
        return real(*args, **kwargs)

    monkeypatch.setattr(reflect, where, tripped)
    code, answer = trigger(monkeypatch, rt)

    assert code == 3, answer
    assert answer["counts"]["merged"] == 2 and answer["counts"]["failed"] == 1, answer
    assert "default_app/default_project/bob: cluster cl_" in answer["error"]
    assert "TypeError: '<' not supported" in answer["error"]
    assert narratives(rt, BOB) == [] and not journal.pending(rt.db())
    (row,) = [r for r in reports(rt) if r["owner_id"] == "bob"]
    assert row["status"] == "failed" and "TypeError" in row["error"]

    code, answer = trigger(monkeypatch, rt)  # bob's cluster alone is left: every unit failed
    assert code == 1, answer
    assert answer["status"] == "failed" and answer["counts"]["failed"] == 1, answer
    assert not answer["counts"].get("merged")
