"""The engine: enable/force, run records, timeouts, locks across processes, retries, recovery."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from everos_reflect.clustering.service import ClusterService
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.engine import engine as engine_module
from everos_reflect.engine import registry
from everos_reflect.engine.engine import Engine, lock_path
from everos_reflect.engine.registry import RunContext, SettingSpec, Strategy
from everos_reflect.errors import ConfigError, UnknownStrategy
from everos_reflect.index.db import utcnow_iso
from everos_reflect.index.rebuild import REBUILDING
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.llm.base import MergeRequest, MergeResult
from everos_reflect.model import Kind, UserRef, new_episode
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings


class Fake(Strategy):
    """A strategy whose runs the test steers: gate, failures, counts."""

    name = "fake_test"
    description = "test double"
    default_cron = "0 2 * * 1"
    settings = (SettingSpec("batch", int, 10, "items per run", lambda v: None if v > 0 else
                            "must be > 0"),)

    def __init__(self) -> None:
        self.calls: list[RunContext] = []
        self.gate = threading.Event()
        self.gate.set()
        self.started = threading.Event()
        self.failures = 0

    def run(self, ctx: RunContext) -> dict[str, int]:
        self.calls.append(ctx)
        self.started.set()
        self.gate.wait(10)
        if self.failures:
            self.failures -= 1
            raise RuntimeError("provider down")
        return {"merged": 2, "batch": ctx.settings["batch"]}


@pytest.fixture
def fake() -> Iterator[Fake]:
    strategy = Fake()
    registry.register(strategy)
    yield strategy
    strategy.gate.set()
    registry.unregister(strategy.name)


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[Runtime]:
    rt = Runtime(tmp_path, Settings(), embedder=HashEmbedder())
    yield rt
    rt.close()


def write_ome(root: Path, body: str) -> None:
    (root / "ome.toml").write_text(body, "utf-8")


def enable(root: Path, extra: str = "") -> None:
    write_ome(root, f"[strategies.fake_test]\nenabled = true\n{extra}")


def wait_for(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def run_row(runtime: Runtime, run_id: str) -> dict:
    return dict(runtime.db().execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone())


def test_disabled_strategy_does_not_run_unless_forced(runtime: Runtime, fake: Fake) -> None:
    engine = Engine(runtime)
    out = engine.trigger("fake_test")
    assert (out.status, out.run_id) == ("disabled", None)
    assert "enabled = true" in (out.error or "")
    assert fake.calls == []
    forced = engine.trigger("fake_test", force=True)
    assert forced.status == "ok"
    assert fake.calls[0].force is True


def test_a_run_is_recorded_with_counts_trigger_and_pid(runtime: Runtime, fake: Fake) -> None:
    enable(runtime.root, "batch = 3\n")
    out = Engine(runtime).trigger("fake_test", trigger="api")
    assert out.status == "ok"
    assert out.counts == {"merged": 2, "batch": 3}
    row = run_row(runtime, out.run_id)
    assert row["strategy"] == "fake_test"
    assert row["trigger"] == "api"
    assert row["status"] == "ok"
    assert row["pid"] == os.getpid()
    assert row["finished_at"] >= row["started_at"]
    assert row["attempt"] == 1


def test_unknown_strategy_raises(runtime: Runtime, fake: Fake) -> None:
    with pytest.raises(UnknownStrategy, match="fake_test"):
        Engine(runtime).trigger("nope")


def test_timeout_answers_timeout_and_the_run_goes_on(runtime: Runtime, fake: Fake) -> None:
    enable(runtime.root)
    fake.gate.clear()
    engine = Engine(runtime)
    out = engine.trigger("fake_test", timeout=0.05)
    assert out.status == "timeout"
    assert run_row(runtime, out.run_id)["status"] == "running"
    fake.gate.set()
    wait_for(lambda: run_row(runtime, out.run_id)["status"] == "ok")
    assert not engine.is_running("fake_test")


def test_cron_and_manual_trigger_at_the_same_moment_make_one_run(
    runtime: Runtime, fake: Fake
) -> None:
    enable(runtime.root)
    fake.gate.clear()
    engine = Engine(runtime)
    outcomes = {}
    cron = threading.Thread(
        target=lambda: outcomes.setdefault("cron", engine.trigger("fake_test", trigger="cron"))
    )
    cron.start()
    assert fake.started.wait(5)
    manual = engine.trigger("fake_test", timeout=0)  # joins the cron run, does not start one
    fake.gate.set()
    cron.join(5)
    assert len(fake.calls) == 1
    assert manual.status == "timeout" and manual.joined
    assert outcomes["cron"].status == "ok" and not outcomes["cron"].joined
    assert outcomes["cron"].run_id == manual.run_id
    assert runtime.db().execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1


def test_a_run_in_another_process_makes_a_trigger_busy(runtime: Runtime, fake: Fake) -> None:
    enable(runtime.root)
    path = lock_path(runtime.root, "fake_test")
    path.parent.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, filelock\n"
         f"lock = filelock.FileLock({str(path)!r}); lock.acquire()\n"
         "print('held', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        out = Engine(runtime).trigger("fake_test")
        assert out.status == "busy"
        assert "another process" in (out.error or "")
        assert fake.calls == []
    finally:
        holder.stdin.close()
        holder.wait(10)
    assert Engine(runtime).trigger("fake_test").status == "ok"


def test_failed_run_is_retried_per_settings(runtime: Runtime, fake: Fake) -> None:
    enable(runtime.root, "max_retries = 2\nretry_backoff_seconds = 0\n")
    fake.failures = 2
    out = Engine(runtime).trigger("fake_test")
    assert out.status == "ok"
    assert len(fake.calls) == 3
    row = run_row(runtime, out.run_id)
    assert (row["status"], row["attempt"]) == ("ok", 3)


def test_retries_exhausted_record_the_failure(runtime: Runtime, fake: Fake) -> None:
    enable(runtime.root, "max_retries = 1\nretry_backoff_seconds = 0\n")
    fake.failures = 5
    out = Engine(runtime).trigger("fake_test")
    assert out.status == "failed"
    assert out.error == "provider down"
    row = run_row(runtime, out.run_id)
    assert (row["status"], row["attempt"], row["error"]) == (
        "failed", 2, "provider down")
    assert len(fake.calls) == 2


def test_the_most_retries_without_backoff_end_in_a_recorded_failure(
        runtime: Runtime, fake: Fake) -> None:
    enable(runtime.root, "max_retries = 100\nretry_backoff_seconds = 0\n")
    fake.failures = 2000
    out = Engine(runtime).trigger("fake_test", timeout=120)
    assert (out.status, out.error) == ("failed", "provider down")
    row = run_row(runtime, out.run_id)
    assert (row["status"], row["attempt"]) == ("failed", 101)


def test_the_wait_before_a_late_retry_is_a_day_at_most_and_never_overflows() -> None:
    # The wait before retry n was backoff * 2 ** (n - 1): from the 1,025th attempt that number
    # is past a float (OverflowError, even times 0), which escaped the retry loop: the run
    # record stayed "running" for good, the answer said "int too large to convert to float".
    from everos_reflect.engine.engine import retry_wait

    assert [retry_wait(0.0, n) for n in (1, 1025, 1101)] == [0.0, 0.0, 0.0]
    assert [retry_wait(60.0, n) for n in (1, 2, 1101)] == [60.0, 120.0, 86_400.0]


@pytest.mark.parametrize("value", ["101", "1100", "-1"])
def test_max_retries_past_its_range_is_a_config_error_naming_key_and_range(
        runtime: Runtime, fake: Fake, value: str) -> None:
    # 1,100 (or 10**9) was taken: a run failing each attempt held the strategy's lock through
    # waits of up to a day each, for years
    enable(runtime.root)
    engine = Engine(runtime)
    enable(runtime.root, f"max_retries = {value}\n")
    assert engine.reload_config() is False
    assert (f"strategies.fake_test.max_retries: must be 0 to 100, got {value}"
            in engine.config_error)


def test_a_run_whose_bookkeeping_fails_is_recorded_failed_not_left_running(
        runtime: Runtime, fake: Fake, monkeypatch: pytest.MonkeyPatch) -> None:
    # An error in the engine's own bookkeeping between attempts (here noting the next attempt
    # in a locked database) was logged and answered "failed", but the run record stayed
    # "running" until a restart abandoned it.
    import sqlite3

    def locked(*args: object) -> None:
        raise sqlite3.OperationalError("database is locked")

    enable(runtime.root, "max_retries = 1\nretry_backoff_seconds = 0\n")
    fake.failures = 5
    engine = Engine(runtime)
    monkeypatch.setattr(engine, "_update_attempt", locked)
    out = engine.trigger("fake_test")
    assert out.status == "failed" and "database is locked" in (out.error or "")
    row = run_row(runtime, out.run_id)
    assert row["status"] == "failed" and "database is locked" in row["error"]


def test_runs_left_running_by_a_dead_process_are_abandoned(runtime: Runtime, fake: Fake) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    conn = runtime.db()
    conn.execute(
        "INSERT INTO runs(id, strategy, trigger, started_at, status, pid) "
        "VALUES ('run_dead', 'fake_test', 'cron', ?, 'running', ?)", (utcnow_iso(), dead.pid))
    conn.execute(
        "INSERT INTO runs(id, strategy, trigger, started_at, status, pid) "
        "VALUES ('run_alive', 'fake_test', 'cron', ?, 'running', 1)", (utcnow_iso(),))
    conn.commit()
    path = lock_path(runtime.root, "fake_test")
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path)):  # the live run's process holds its strategy's lock
        Engine(runtime)
    assert run_row(runtime, "run_dead")["status"] == "abandoned"
    assert str(dead.pid) in run_row(runtime, "run_dead")["error"]
    assert run_row(runtime, "run_alive")["status"] == "running"  # pid 1 is alive


def test_should_stop_turns_true_on_shutdown(runtime: Runtime, fake: Fake) -> None:
    enable(runtime.root)
    fake.gate.clear()
    engine = Engine(runtime)
    out = engine.trigger("fake_test", timeout=0)
    assert fake.started.wait(5)
    assert fake.calls[0].should_stop() is False
    engine.request_stop()
    assert fake.calls[0].should_stop() is True
    fake.gate.set()
    engine.shutdown(timeout=5)
    # the strategy saw the stop (it returns early at it): its work is not all done
    row = run_row(runtime, out.run_id)
    assert row["status"] == "partial" and "stopped early" in row["error"], row
    assert engine.trigger("fake_test").status == "busy"  # no new runs while stopping


def test_a_run_that_finishes_its_work_during_shutdown_is_ok(runtime: Runtime,
                                                           fake: Fake) -> None:
    # SPEC §4: a run in progress finishes; one that never had to stop early did all its work
    enable(runtime.root)
    fake.gate.clear()
    engine = Engine(runtime)
    out = engine.trigger("fake_test", timeout=0)
    assert fake.started.wait(5)
    engine.request_stop()
    fake.gate.set()
    engine.shutdown(timeout=5)
    row = run_row(runtime, out.run_id)
    assert (row["status"], row["error"]) == ("ok", None), row


def test_a_reflection_run_cut_short_by_shutdown_is_recorded_partial_not_ok(
        tmp_path: Path) -> None:
    # SIGTERM to serve during a Reflection run: the run stopped at its next cluster and its
    # record said "ok", with every cluster still unmerged
    from tests.fleet_support import build_root
    from tests.reflect_fixtures import make_runtime

    class Held(ExtractiveLLM):
        def __init__(self) -> None:
            super().__init__()
            self.started, self.gate = threading.Event(), threading.Event()

        def merge(self, req: MergeRequest) -> MergeResult:
            self.started.set()
            assert self.gate.wait(30)
            return super().merge(req)

    build_root(tmp_path / "r", users=2,
               ome="[strategies.reflect_episodes]\nenabled = true\n")
    llm = Held()
    rt = make_runtime(tmp_path / "r", llm, max_concurrency=1)
    try:
        engine = Engine(rt)
        out = engine.trigger("reflect_episodes", timeout=0)
        assert llm.started.wait(30)
        engine.request_stop()  # what serve does on SIGTERM/SIGINT
        llm.gate.set()
        engine.shutdown(timeout=30)
        row = run_row(rt, out.run_id)
        assert row["status"] == "partial", row
        assert "stopped early" in row["error"] and "next run" in row["error"], row
    finally:
        llm.gate.set()
        rt.close()


def test_a_wall_clock_set_back_an_hour_during_shutdown_does_not_stretch_its_wait(
    runtime: Runtime, fake: Fake, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The deadline was local wall time: the night the clocks go back it moved an hour away,
    # and shutdown waited for a run it should have recorded abandoned
    enable(runtime.root)
    fake.gate.clear()
    engine = Engine(runtime)
    out = engine.trigger("fake_test", timeout=0)
    assert fake.started.wait(5)
    reads = iter([datetime(2026, 11, 1, 1, 59, 59)])

    class FallBack(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> datetime:  # 01:59:59, then 01:00:00 again
            return next(reads, datetime(2026, 11, 1, 1, 0, 0))

    monkeypatch.setattr(engine_module, "datetime", FallBack)
    engine.shutdown(timeout=0.05)
    monkeypatch.undo()
    assert run_row(runtime, out.run_id)["status"] == "abandoned"
    fake.gate.set()


def test_a_run_id_names_the_utc_time_its_record_says_it_started(
    runtime: Runtime, fake: Fake, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The id took the host's local time, started_at UTC: 14 h apart on Kiritimati
    monkeypatch.setenv("TZ", "Pacific/Kiritimati")
    time.tzset()
    try:
        out = Engine(runtime).trigger("fake_test", force=True)
    finally:
        monkeypatch.undo()
        time.tzset()
    named = datetime.strptime(out.run_id.split("_")[1], "%Y%m%d%H%M%S").replace(tzinfo=UTC)
    started = datetime.fromisoformat(run_row(runtime, out.run_id)["started_at"])
    assert timedelta(0) <= started - named < timedelta(minutes=1), (out.run_id, started)


def test_invalid_ome_keeps_last_good_config_and_says_why(runtime: Runtime, fake: Fake) -> None:
    enable(runtime.root, "batch = 4\n")
    engine = Engine(runtime)
    assert engine.settings_for("fake_test")["batch"] == 4
    enable(runtime.root, "batch = 0\nmax_retries = 'x'\n")
    assert engine.reload_config() is False
    assert "strategies.fake_test.batch: must be > 0" in engine.config_error
    assert "strategies.fake_test.max_retries: must be an integer" in engine.config_error
    assert engine.settings_for("fake_test")["batch"] == 4
    assert engine.trigger("fake_test").counts["batch"] == 4


def test_invalid_ome_with_no_good_config_fails_clearly(runtime: Runtime, fake: Fake) -> None:
    write_ome(runtime.root, "[strategies.fake_test]\nenabeld = true\n")
    with pytest.raises(ConfigError, match="enabeld"):
        Engine(runtime).trigger("fake_test")


def test_runs_lists_newest_first(runtime: Runtime, fake: Fake) -> None:
    engine = Engine(runtime)
    first = engine.trigger("fake_test", force=True)
    second = engine.trigger("fake_test", force=True)
    assert [r["id"] for r in engine.runs(limit=5)] == [second.run_id, first.run_id]
    assert engine.runs(limit=1)[0]["counts"] == {"merged": 2, "batch": 10}


@pytest.mark.parametrize(("table", "line", "key"), [
    ("fake_test", "misfire_grace_hours = 1e300", "misfire_grace_hours"),
    ("fake_test", "retry_backoff_seconds = inf", "retry_backoff_seconds"),
    ("update_worldview", "cooldown_seconds = 1e300", "cooldown_seconds"),
    ("reflect_episodes", "commit_wait_seconds = 1e300", "commit_wait_seconds"),
])
def test_a_wait_too_long_for_the_clock_is_an_invalid_ome(runtime: Runtime, fake: Fake,
                                                          table: str, line: str,
                                                          key: str) -> None:
    # Accepted by ">= 0" before; then timedelta(hours=1e300) killed `serve` at start-up
    # (OverflowError in the misfire catch-up) and the others overflowed where they waited.
    enable(runtime.root)
    engine = Engine(runtime)
    body = f"[strategies.{table}]\n{line}\n"
    if table != "fake_test":
        body = f"[strategies.fake_test]\nenabled = true\n{body}"
    write_ome(runtime.root, body)
    assert engine.reload_config() is False
    assert f"strategies.{table}.{key}: must be between 0 and" in engine.config_error


def seed_episodes(runtime: Runtime, n: int = 4) -> None:
    ref = UserRef.of("u1")
    for i in range(n):
        episode = new_episode(ref, subject=f"day {i}", content=f"What happened on day {i}.",
                              timestamp=f"2026-10-1{i}T09:00:00+00:00")
        runtime.store.append(ref, Kind.EPISODE, episode.meta, episode.sections, day=episode.day)


def entry_count(runtime: Runtime) -> int:
    return int(runtime.db().execute("SELECT count(*) FROM entries").fetchone()[0])


def test_a_run_that_meets_a_reindex_is_skipped_as_busy_not_ok(
    runtime: Runtime, fake: Fake
) -> None:
    # A Reflection run that started while reindex was refilling the index saw part of the
    # clusters (merged 1 of 6) and answered ok. It is now skipped and recorded busy, saying why.
    enable(runtime.root)
    seed_episodes(runtime)
    held, release = threading.Event(), threading.Event()

    def hold(_files: int) -> None:  # the rebuild stops after its first file, rows dropped
        if not held.is_set():
            held.set()
            release.wait(10)

    rebuilding = threading.Thread(target=lambda: Indexer(runtime).reindex(progress=hold))
    rebuilding.start()
    try:
        assert held.wait(10)
        out = Engine(runtime).trigger("fake_test")
        half_built = entry_count(runtime)
    finally:
        release.set()
        rebuilding.join(10)
    assert half_built < 4  # the state the run would have worked on
    assert (out.status, out.error) == ("busy", REBUILDING)
    assert fake.calls == []
    row = run_row(runtime, out.run_id)
    assert (row["status"], row["error"]) == ("busy", REBUILDING)
    assert row["finished_at"] is not None
    assert entry_count(runtime) == 4
    assert Engine(runtime).trigger("fake_test").status == "ok"  # once rebuilt, runs run


@contextmanager
def a_rebuild_waiting_on_a_run(
    engine: Engine, fake: Fake, rebuild: Callable[..., Any]
) -> Iterator[tuple[threading.Event, list[Any]]]:
    """Hold a ``fake_test`` run open, start ``rebuild(on_wait=...)`` beside it and yield (its done
    event, its results) once it waits for the run; on leaving, let the run end and check that
    the run succeeded and the rebuild then finished."""
    fake.gate.clear()
    answers: list[Any] = []
    run = threading.Thread(target=lambda: answers.append(engine.trigger("fake_test")))
    run.start()
    assert fake.started.wait(10)
    waiting, done = threading.Event(), threading.Event()
    results: list[Any] = []

    def rebuild_then_done() -> None:
        results.append(rebuild(on_wait=waiting.set))
        done.set()

    rebuilding = threading.Thread(target=rebuild_then_done)
    rebuilding.start()
    try:
        assert waiting.wait(10)
        yield done, results
    finally:
        fake.gate.set()
        run.join(10)
        rebuilding.join(10)
    assert done.is_set()
    assert [a.status for a in answers] == ["ok"]


def test_a_reindex_waits_for_the_runs_in_flight(runtime: Runtime, fake: Fake) -> None:
    enable(runtime.root)
    seed_episodes(runtime)
    Indexer(runtime).scan()
    reindex = Indexer(runtime).reindex
    with a_rebuild_waiting_on_a_run(Engine(runtime), fake, reindex) as (done, _):
        assert not done.is_set()
        assert entry_count(runtime) == 4  # nothing dropped under the run
    assert entry_count(runtime) == 4


def test_a_recluster_waits_for_the_runs_in_flight(runtime: Runtime, fake: Fake) -> None:
    # recluster rewrites the clusters a Reflection run selects from and archives into; it ran
    # under a run in flight, which then merged against clusters that no longer existed.
    enable(runtime.root)
    seed_episodes(runtime)
    Indexer(runtime).scan()
    recluster = ClusterService(runtime).recluster_exclusive
    with a_rebuild_waiting_on_a_run(Engine(runtime), fake, recluster) as (done, counts):
        time.sleep(0.2)
        assert not done.is_set()
    assert counts[0]["users"] == 1 and counts[0]["members"] == 4


def test_a_run_that_meets_a_recluster_is_skipped_as_busy(
    runtime: Runtime, fake: Fake, monkeypatch: pytest.MonkeyPatch
) -> None:
    enable(runtime.root)
    seed_episodes(runtime)
    Indexer(runtime).scan()
    held, release = threading.Event(), threading.Event()
    real = ClusterService._recluster_user

    def slow(self: ClusterService, *args: Any, **kwargs: Any) -> dict[str, int]:
        held.set()
        release.wait(10)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(ClusterService, "_recluster_user", slow)
    reclustering = threading.Thread(
        target=lambda: ClusterService(runtime).recluster_exclusive())
    reclustering.start()
    try:
        assert held.wait(10)
        out = Engine(runtime).trigger("fake_test")
    finally:
        release.set()
        reclustering.join(10)
    assert (out.status, out.error) == ("busy", REBUILDING)
    assert "recluster" in REBUILDING
    assert fake.calls == []
    assert Engine(runtime).trigger("fake_test").status == "ok"


class OtherFake(Fake):
    name = "fake_other"


def test_a_run_triggered_while_a_reindex_waits_is_busy_and_the_reindex_then_runs(
    runtime: Runtime, fake: Fake
) -> None:
    # Runs of different strategies that kept overlapping held the shared lock for good, and a
    # reindex waiting for it never started. Once a rebuild waits, a new run is busy.
    other = OtherFake()
    registry.register(other)
    try:
        write_ome(runtime.root, "[strategies.fake_test]\nenabled = true\n"
                                "[strategies.fake_other]\nenabled = true\n")
        seed_episodes(runtime)
        Indexer(runtime).scan()
        engine = Engine(runtime)
        with a_rebuild_waiting_on_a_run(engine, fake, Indexer(runtime).reindex) as (done, _):
            later = engine.trigger("fake_other")
            still_waiting = not done.is_set()
        assert (later.status, later.error) == ("busy", REBUILDING)
        assert other.calls == []
        assert still_waiting
        assert engine.trigger("fake_other").status == "ok"
    finally:
        registry.unregister(other.name)


def test_a_run_record_names_each_failed_unit_on_one_line_and_cut() -> None:
    """An exception's message may span lines (a YAML error quotes the record it tripped on):
    named as it was, the run record's ``error`` ran over several lines (``runs`` printed its
    continuation unindented). Each failure is one line, at most FAILURE_CHARS characters, and
    at most FAILURES_NAMED of them are named."""
    from everos_reflect.engine.registry import FAILURE_CHARS, FAILURES_NAMED, name_failures

    yaml_error = ("u/a/b: ScannerError: mapping values are not allowed here\n"
                  '  in "<unicode string>", line 3, column 9:\n      status: stale: x\n'
                  "            ^")
    text = name_failures([yaml_error, "u/a/c: OSError: " + "x" * 500])
    assert "\n" not in text
    assert text.startswith("failed: u/a/b: ScannerError: mapping values are not allowed here "
                           'in "<unicode string>", line 3, column 9: status: stale: x ^; ')
    assert max(len(part) for part in text.removeprefix("failed: ").split("; ")) == FAILURE_CHARS
    many = name_failures([f"u/a/{i}: boom" for i in range(FAILURES_NAMED + 2)])
    assert many.endswith("; and 2 more") and many.count("boom") == FAILURES_NAMED


def test_concurrent_first_config_calls_all_get_the_config(
        runtime: Runtime, fake: Fake, monkeypatch: pytest.MonkeyPatch) -> None:
    # Two threads asking for the configuration at once, before any was loaded (an API
    # server's first requests): the second must wait for the first's load, not find the
    # file "already read" with nothing stored and fail on an internal assertion.
    enable(runtime.root, "batch = 4\n")
    engine = Engine(runtime, recover=False)
    parsing, second_done = threading.Event(), threading.Event()
    real_parse = engine_module.parse_ome

    def slow_parse(*args: Any, **kwargs: Any) -> Any:
        if not parsing.is_set():
            parsing.set()
            second_done.wait(1)  # with the fix the second caller waits on us: time out
        return real_parse(*args, **kwargs)

    monkeypatch.setattr(engine_module, "parse_ome", slow_parse)
    results: dict[str, Any] = {}

    def first() -> None:
        try:
            results["first"] = engine.settings_for("fake_test")["batch"]
        except BaseException as exc:  # reported by the assert below
            results["first"] = exc

    thread = threading.Thread(target=first)
    thread.start()
    assert parsing.wait(10)
    try:
        results["second"] = engine.settings_for("fake_test")["batch"]
    except BaseException as exc:  # reported by the assert below
        results["second"] = exc
    second_done.set()
    thread.join(10)
    assert results == {"first": 4, "second": 4}
