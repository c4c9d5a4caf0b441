"""Scheduling: jobs follow ome.toml (hot reload), invalid files keep the last good config,
cron jobs run through the engine, and a run missed while down is caught up once."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.engine import registry
from everos_reflect.engine.engine import Engine
from everos_reflect.engine.registry import RunContext, SettingSpec, Strategy
from everos_reflect.engine.scheduler import Scheduler
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings


class Counting(Strategy):
    name = "sched_test"
    default_cron = "0 2 * * 1"
    settings = (SettingSpec("limit", int, 10),)

    def __init__(self) -> None:
        self.runs: list[RunContext] = []

    def run(self, ctx: RunContext) -> dict[str, int]:
        self.runs.append(ctx)
        return {"limit": ctx.settings["limit"]}


@pytest.fixture
def strategy() -> Iterator[Counting]:
    s = Counting()
    registry.register(s)
    yield s
    registry.unregister(s.name)


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[Runtime]:
    rt = Runtime(tmp_path, Settings(), embedder=HashEmbedder())
    yield rt
    rt.close()


@pytest.fixture
def make_scheduler(runtime: Runtime) -> Iterator[Callable[..., Scheduler]]:
    started: list[tuple[Scheduler, Engine]] = []

    def make(**kwargs: object) -> Scheduler:
        engine = Engine(runtime)
        sched = Scheduler(engine, debounce_seconds=0.1, **kwargs)
        started.append((sched, engine))
        return sched

    yield make
    for sched, engine in started:
        sched.shutdown()
        engine.shutdown(timeout=5)


def test_a_time_zone_that_cannot_be_looked_up_is_a_value_error_naming_it(tmp_path: Path) -> None:
    # the scheduler made its ZoneInfo itself: OSError "File name too long" for a long name
    from everos_reflect.settings import SchedulerSettings

    rt = Runtime(tmp_path, Settings(scheduler=SchedulerSettings(timezone="Z" * 5000)),
                 embedder=HashEmbedder())
    engine = Engine(rt)
    try:
        with pytest.raises(ValueError, match="unknown timezone 'ZZZ") as info:
            Scheduler(engine)
        assert len(str(info.value)) < 200
    finally:
        engine.shutdown(timeout=5)
        rt.close()


def write_ome(root: Path, body: str) -> None:
    # Write then rename, like an editor, so the watcher never sees half a file.
    tmp = root / ".ome.toml.tmp"
    tmp.write_text(body, "utf-8")
    tmp.replace(root / "ome.toml")


def row(sched: Scheduler, name: str = "sched_test") -> dict:
    return next(r for r in sched.status() if r["name"] == name)


def wait_for(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def test_enabled_strategy_gets_a_job_at_its_cron(
    runtime: Runtime, strategy: Counting, make_scheduler: Callable[..., Scheduler]
) -> None:
    write_ome(runtime.root, "[strategies.sched_test]\nenabled = true\n")
    sched = make_scheduler()
    sched.start(watch=False)
    status = row(sched)
    assert status["enabled"] is True
    assert status["cron"] == "0 2 * * 1"
    nxt = datetime.fromisoformat(status["next_run"])
    assert (nxt.strftime("%A"), nxt.hour, nxt.minute) == ("Monday", 2, 0)
    assert status["config_error"] is None
    assert status["last_run"] is None


def test_hot_reload_enable_cron_limits_disable_and_invalid_file(
    runtime: Runtime, strategy: Counting, make_scheduler: Callable[..., Scheduler]
) -> None:
    sched = make_scheduler(poll_seconds=60)  # the watcher alone must see the edits
    sched.start()
    assert row(sched)["enabled"] is False
    assert row(sched)["next_run"] is None

    write_ome(runtime.root, "[strategies.sched_test]\nenabled = true\n")
    wait_for(lambda: row(sched)["next_run"] is not None)

    write_ome(runtime.root, '[strategies.sched_test]\nenabled = true\ncron = "0 3 * * 0"\n')
    wait_for(lambda: row(sched)["cron"] == "0 3 * * 0")
    nxt = datetime.fromisoformat(row(sched)["next_run"])
    assert (nxt.strftime("%A"), nxt.hour) == ("Sunday", 3)

    write_ome(runtime.root,
              '[strategies.sched_test]\nenabled = true\ncron = "0 3 * * 0"\nlimit = 3\n')
    wait_for(lambda: sched.engine.settings_for("sched_test")["limit"] == 3)

    write_ome(runtime.root, '[strategies.sched_test]\nenabled = true\ncron = "0 3 * * 9"\n')
    wait_for(lambda: row(sched)["config_error"] is not None)
    assert "strategies.sched_test.cron" in row(sched)["config_error"]
    assert "ome.toml" in row(sched)["config_error"]
    assert row(sched)["cron"] == "0 3 * * 0"  # the last good config stays in force
    assert sched.engine.settings_for("sched_test")["limit"] == 3

    write_ome(runtime.root, "[strategies.sched_test]\nenabled = false\n")
    wait_for(lambda: row(sched)["enabled"] is False)
    assert row(sched)["next_run"] is None
    assert row(sched)["config_error"] is None


def test_a_cron_job_runs_through_the_engine_and_disabling_stops_the_next(
    runtime: Runtime, strategy: Counting, make_scheduler: Callable[..., Scheduler]
) -> None:
    write_ome(runtime.root, "[strategies.sched_test]\nenabled = true\nlimit = 4\n")
    sched = make_scheduler()
    sched.start(watch=False)
    sched._aps.get_job("sched_test").modify(next_run_time=datetime.now(UTC))
    wait_for(lambda: (row(sched)["last_run"] or {}).get("status") == "ok")
    assert row(sched)["last_run"]["trigger"] == "cron"
    assert row(sched)["last_run"]["counts"] == {"limit": 4}

    write_ome(runtime.root, "[strategies.sched_test]\nenabled = false\n")
    assert sched.reload() is True
    assert sched._aps.get_job("sched_test") is None
    sched._fire("sched_test")  # a firing already under way when the edit landed
    assert len(strategy.runs) == 1


def _insert_run(runtime: Runtime, started_at: datetime) -> None:
    conn = runtime.db()
    conn.execute(
        "INSERT INTO runs(id, strategy, trigger, started_at, finished_at, status) "
        "VALUES ('run_old', 'sched_test', 'cron', ?, ?, 'ok')",
        (started_at.isoformat(), started_at.isoformat()))
    conn.commit()


def test_a_run_missed_while_down_is_caught_up_once(
    runtime: Runtime, strategy: Counting, make_scheduler: Callable[..., Scheduler]
) -> None:
    write_ome(runtime.root, '[strategies.sched_test]\nenabled = true\ncron = "*/5 * * * *"\n')
    _insert_run(runtime, datetime.now(UTC) - timedelta(hours=2))  # ~24 fire times missed
    sched = make_scheduler()
    sched.start(watch=False)
    wait_for(lambda: len(strategy.runs) == 1)
    assert strategy.runs[0].trigger == "startup-catchup"
    wait_for(lambda: not sched.engine.is_running("sched_test"))
    assert len(strategy.runs) == 1


def test_no_catch_up_outside_the_grace_period(
    runtime: Runtime, strategy: Counting, make_scheduler: Callable[..., Scheduler]
) -> None:
    write_ome(runtime.root, "[strategies.sched_test]\nenabled = true\n"
                            'cron = "0 2 * * 1"\nmisfire_grace_hours = 1\n')
    now = datetime(2026, 10, 12, 5, 0, tzinfo=UTC)  # three hours after Monday 02:00
    _insert_run(runtime, now - timedelta(days=8))
    sched = make_scheduler()
    sched.start(now=now, watch=False)
    assert sched._aps.get_job("_catchup_sched_test") is None
    assert strategy.runs == []


def _counting_reloads(sched: Scheduler, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    seen: list[bool] = []
    real = sched.reload

    def counted() -> bool:
        ok = real()
        seen.append(ok)
        return ok

    monkeypatch.setattr(sched, "reload", counted)
    return seen


def test_reading_ome_toml_never_reloads_it(
    runtime: Runtime, strategy: Counting, make_scheduler: Callable[..., Scheduler],
    monkeypatch: pytest.MonkeyPatch
) -> None:
    write_ome(runtime.root, "[strategies.sched_test]\nenabled = true\n")
    sched = make_scheduler(poll_seconds=0.2)
    sched.start()
    reloads = _counting_reloads(sched, monkeypatch)
    path = runtime.root / "ome.toml"

    for _ in range(10):  # what `cat`, an editor opening it, or a backup tool does
        path.read_bytes()
        time.sleep(0.05)
    path.touch()  # a new mtime, the same bytes
    time.sleep(1.0)  # several debounce periods and polls

    assert reloads == []
    write_ome(runtime.root, "[strategies.sched_test]\nenabled = true\nlimit = 5\n")
    wait_for(lambda: sched.engine.settings_for("sched_test")["limit"] == 5)
    time.sleep(0.6)
    assert reloads == [True]  # one real change, one reload (its own read does not loop)


def test_an_invalid_ome_toml_logs_its_error_once(
    runtime: Runtime, strategy: Counting, make_scheduler: Callable[..., Scheduler],
    caplog: pytest.LogCaptureFixture
) -> None:
    sched = make_scheduler(poll_seconds=0.2, data_poll_seconds=0.2)
    sched.start()
    write_ome(runtime.root, "[strategies.sched_test]\nenabled = 'maybe'\n")
    wait_for(lambda: row(sched)["config_error"] is not None)
    path = runtime.root / "ome.toml"
    for _ in range(10):
        path.read_bytes()
        row(sched)  # status reads the config too
        time.sleep(0.1)

    errors = [r for r in caplog.records
              if r.levelname == "ERROR" and "strategies.sched_test.enabled" in r.getMessage()]
    assert len(errors) == 1, [r.getMessage() for r in errors]


def test_an_ome_toml_invalid_from_the_start_is_logged_without_a_last_good_config(
    runtime: Runtime, strategy: Counting, make_scheduler: Callable[..., Scheduler],
    caplog: pytest.LogCaptureFixture
) -> None:
    # The engine said "(keeping the last good strategy configuration)" when there was none:
    # nothing is scheduled until the file is fixed, and that is what the log must say.
    write_ome(runtime.root, "[strategies.sched_test]\nenabled = 'maybe'\n")
    sched = make_scheduler()
    sched.start(watch=False)
    write_ome(runtime.root, "[strategies.sched_test]\nenabled = 'perhaps'\n")
    assert sched.reload() is False

    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 2, errors
    assert all("strategies.sched_test.enabled" in e and
               e.endswith("(no strategy is scheduled until it is fixed)") for e in errors)
    assert not any("last good" in e for e in errors)


def test_an_ome_toml_that_is_a_symlink_loop_is_a_config_error_not_a_crash(
    runtime: Runtime, strategy: Counting, make_scheduler: Callable[..., Scheduler],
    caplog: pytest.LogCaptureFixture
) -> None:
    # stat() raised ELOOP: `serve` did not start on such a root, and a daemon already up
    # logged "ome-poll failed" with a traceback every few seconds, never naming the problem.
    (runtime.root / "ome.toml").symlink_to("ome.toml")
    sched = make_scheduler(poll_seconds=0.1)
    sched.start(watch=False)
    assert "Too many levels of symbolic links" in row(sched)["config_error"]
    (runtime.root / "ome.toml").unlink()
    write_ome(runtime.root, "[strategies.sched_test]\nenabled = true\n")
    assert sched.reload() is True
    (runtime.root / "ome.toml").unlink()
    (runtime.root / "ome.toml").symlink_to("ome.toml")
    wait_for(lambda: "symbolic links" in (row(sched)["config_error"] or ""))
    time.sleep(0.5)  # several polls
    assert row(sched)["enabled"] is True  # the last good configuration stays in force
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"


def test_a_fire_time_slept_through_within_the_grace_still_runs_once(
    runtime: Runtime, strategy: Counting, make_scheduler: Callable[..., Scheduler]
) -> None:
    """The host asleep (or the clock set forward) over a fire time while the daemon runs:
    APScheduler's fixed five-minute grace dropped the run ("missed by 1:00:00") where a daemon
    that was down would catch it up at start-up."""
    write_ome(runtime.root, "[strategies.sched_test]\nenabled = true\n")
    sched = make_scheduler()
    sched.start(watch=False)
    # what the job looks like on waking an hour after its fire time (grace: 6 h by default)
    sched._aps.get_job("sched_test").modify(next_run_time=datetime.now(UTC) - timedelta(hours=1))
    wait_for(lambda: (row(sched)["last_run"] or {}).get("status") == "ok")
    assert len(strategy.runs) == 1 and strategy.runs[0].trigger == "cron"


def test_a_fire_time_slept_through_past_the_grace_is_skipped(
    runtime: Runtime, strategy: Counting, make_scheduler: Callable[..., Scheduler]
) -> None:
    # a fire day two weeks from today's: with the default cron (Mondays 02:00) the fire time
    # after the skipped one was today's 02:00 on a Monday between 02:00 and 03:00, inside the
    # grace, and it ran (the test failed one hour a week)
    day = (datetime.now(UTC).day + 13) % 28 + 1
    write_ome(runtime.root, "[strategies.sched_test]\nenabled = true\nmisfire_grace_hours = 1\n"
                            f'cron = "0 12 {day} * *"\n')
    sched = make_scheduler()
    sched.start(watch=False)
    assert sched._aps.get_job("sched_test").misfire_grace_time == 3600
    sched._aps.get_job("sched_test").modify(next_run_time=datetime.now(UTC) - timedelta(hours=2))
    wait_for(lambda: sched._aps.get_job("sched_test").next_run_time > datetime.now(UTC))
    time.sleep(0.5)
    assert strategy.runs == []
    write_ome(runtime.root, "[strategies.sched_test]\nenabled = true\nmisfire_grace_hours = 3\n"
                            f'cron = "0 12 {day} * *"\n')
    assert sched.reload() is True  # a changed grace alone re-plans the job
    assert sched._aps.get_job("sched_test").misfire_grace_time == 3 * 3600


def test_the_data_poll_goes_on_after_the_wall_clock_is_set_back(
    runtime: Runtime, strategy: Counting, make_scheduler: Callable[..., Scheduler],
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """An NTP step or a resumed VM sets the clock back an hour: APScheduler's interval jobs,
    timed by the wall clock it reads, planned the next data and ome.toml poll an hour ahead,
    so data-triggered strategies stopped for that hour. (Only APScheduler's clock is moved
    here: the machine's is everyone's.)"""
    import apscheduler.schedulers.base as aps_base

    offset = [timedelta(0)]

    class Clock(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> datetime:  # type: ignore[override]
            return datetime.now(tz) + offset[0]

    monkeypatch.setattr(aps_base, "datetime", Clock)
    sched = make_scheduler(poll_seconds=0.1, data_poll_seconds=0.1)
    polls: list[float] = []
    monkeypatch.setattr(sched, "_poll_data", lambda: polls.append(time.monotonic()))
    sched.start(watch=False)
    wait_for(lambda: len(polls) >= 2)
    offset[0] = timedelta(hours=-1)
    seen = len(polls)
    wait_for(lambda: len(polls) >= seen + 5)


@pytest.mark.parametrize("name", ["learn_lessons", "revalidate_insights"])
def test_data_triggers_keep_the_last_good_config_while_ome_toml_is_invalid(
    runtime: Runtime, make_scheduler: Callable[..., Scheduler], caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """``serve`` with ome.toml edited into something invalid: each data-triggered strategy read
    the file afresh at every data poll, raised, logged a traceback every 30 s and never ran
    until the file was fixed, while the daemon said it kept the last good configuration."""
    from everos_reflect.model import Kind, UserRef
    from everos_reflect.procedural.tasks import new_task

    write_ome(runtime.root, f"[strategies.{name}]\nenabled = true\ncooldown_seconds = 0\n")
    ref = UserRef.of("u1")  # a task written: learn_lessons is due (nothing is stale)
    task = new_task(ref, task_type="deploy", goal="Ship it", steps=["check logs"],
                    outcome="failure", errors=["registry timeout"],
                    timestamp="2026-10-12T09:00:00+00:00")
    runtime.store.append(ref, Kind.TASK, task.meta, task.sections, day=task.day)
    sched = make_scheduler()
    sched.start(watch=False)
    fired: list[tuple[str, str]] = []
    monkeypatch.setattr(sched, "_fire", lambda n, trigger="cron": fired.append((n, trigger)))
    write_ome(runtime.root, f"[strategies.{name}]\nenabled = 'yes'\ncooldown_seconds = 0\n")
    assert sched.reload() is False
    caplog.clear()

    sched._poll_data()

    assert fired == ([(name, "data")] if name == "learn_lessons" else [])
    assert not [r for r in caplog.records if r.levelname == "ERROR"], caplog.text
