"""A scheduler record of the index that cannot be read (edited by hand, cut short) is named in
a warning and read as absent, never the daemon's end: ``serve`` exited 1 at start with
"Invalid isoformat string: 'garbage'" (a run's ``started_at``, a strategy's ``armed_at``),
"Expecting property name enclosed in double quotes" (a ``strategy_state`` cell that is no
JSON) or an internal error (one that is JSON but no object), naming no record. A state read
as absent is armed afresh, so the next start finds it readable."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from everos_reflect.engine.scheduler import Scheduler
from everos_reflect.index import runs
from everos_reflect.runtime import Runtime
from tests.test_scheduler import (  # noqa: F401  (fixtures)
    Counting,
    make_scheduler,
    runtime,
    strategy,
    write_ome,
)

ENABLED = '[strategies.sched_test]\nenabled = true\ncron = "0 2 * * 1"\n'


@pytest.mark.parametrize("cell", ["{bad", "[1]", '"x"', "5", '{"armed_at": "garbage"}',
                                  '{"armed_at": 5}', '{"armed_at": "2026-13-01T00:00:00"}'])
def test_a_damaged_strategy_state_is_named_and_armed_afresh(
        runtime: Runtime, strategy: Counting,  # noqa: F811
        make_scheduler: Callable[..., Scheduler],  # noqa: F811
        caplog: pytest.LogCaptureFixture, cell: str) -> None:
    write_ome(runtime.root, ENABLED)
    conn = runtime.db()
    conn.execute("INSERT INTO strategy_state(strategy, state) VALUES ('sched_test', ?)", (cell,))
    conn.commit()
    caplog.set_level(logging.WARNING, logger="everos_reflect.engine.scheduler")

    sched = make_scheduler()
    sched.start(watch=False)  # raised, and serve exited 1

    assert sched._aps.get_job("sched_test") is not None
    [warned] = [r for r in caplog.records if "sched_test" in r.getMessage()]
    assert warned.levelno == logging.WARNING
    assert "cannot be read (edited or damaged: " in warned.getMessage()
    assert "strategy_state" in warned.getMessage()
    state = runs.load_state(runtime.db(), "sched_test")  # armed afresh: readable again
    assert isinstance(state, dict) and isinstance(state["armed_at"], str)


def test_a_last_run_whose_start_cannot_be_read_is_named_and_not_a_reference(
        runtime: Runtime, strategy: Counting,  # noqa: F811
        make_scheduler: Callable[..., Scheduler],  # noqa: F811
        caplog: pytest.LogCaptureFixture) -> None:
    write_ome(runtime.root, ENABLED)
    conn = runtime.db()
    conn.execute("INSERT INTO runs(id, strategy, trigger, started_at, finished_at, status) "
                 "VALUES ('run_x', 'sched_test', 'cron', 'garbage', NULL, 'ok')")
    conn.commit()
    caplog.set_level(logging.WARNING, logger="everos_reflect.engine.scheduler")

    sched = make_scheduler()
    sched.start(watch=False)

    assert sched._aps.get_job("sched_test") is not None
    assert sched._aps.get_job("_catchup_sched_test") is None  # no reference, no catch-up
    messages = [r.getMessage() for r in caplog.records]
    assert any("run run_x" in m and "'garbage'" in m and "cannot be read" in m
               for m in messages), messages
    assert strategy.runs == []


def test_a_readable_state_is_kept_as_it_is(
        runtime: Runtime, strategy: Counting,  # noqa: F811
        make_scheduler: Callable[..., Scheduler],  # noqa: F811
        caplog: pytest.LogCaptureFixture) -> None:
    write_ome(runtime.root, ENABLED)
    armed = {"armed_at": "2026-10-12T05:00:00+00:00"}
    runs.save_state(runtime.db(), "sched_test", armed)
    caplog.set_level(logging.WARNING, logger="everos_reflect.engine.scheduler")
    sched = make_scheduler()
    sched.start(watch=False)
    assert runs.load_state(runtime.db(), "sched_test") == armed
    assert not [r for r in caplog.records if "cannot be read" in r.getMessage()]


def test_a_data_trigger_is_not_judged_since_a_start_that_cannot_be_read(
        runtime: Runtime, make_scheduler: Callable[..., Scheduler],  # noqa: F811
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """The data poll raised at every poll (a traceback each 30 s); taken as "never run" it
    would fire the strategy at every poll instead. It is skipped, with one warning."""
    from everos_reflect.model import Kind, UserRef
    from everos_reflect.procedural.tasks import new_task

    write_ome(runtime.root, "[strategies.learn_lessons]\nenabled = true\ncooldown_seconds = 0\n")
    ref = UserRef.of("u1")  # a task written: learn_lessons would be due
    task = new_task(ref, task_type="deploy", goal="Ship it", steps=["check logs"],
                    outcome="failure", errors=["registry timeout"],
                    timestamp="2026-10-12T09:00:00+00:00")
    runtime.store.append(ref, Kind.TASK, task.meta, task.sections, day=task.day)
    conn = runtime.db()
    conn.execute("INSERT INTO runs(id, strategy, trigger, started_at, finished_at, status) "
                 "VALUES ('run_x', 'learn_lessons', 'data', 'garbage', NULL, 'ok')")
    conn.commit()
    sched = make_scheduler()
    sched.start(watch=False)
    fired: list[tuple[str, str]] = []
    monkeypatch.setattr(sched, "_fire", lambda n, trigger="cron": fired.append((n, trigger)))
    caplog.set_level(logging.WARNING, logger="everos_reflect.engine.scheduler")

    sched._poll_data()
    sched._poll_data()

    assert fired == []
    warned = [r for r in caplog.records if "run_x" in r.getMessage()]
    assert len(warned) == 1 and "no data trigger fires" in warned[0].getMessage()
