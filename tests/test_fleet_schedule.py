"""The fleet scheduler: per-root cron with the daemon's semantics, against an in-process
submitter (the Ray submitter is exercised in test_fleet_ray.py)."""

from __future__ import annotations

import os
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.engine.registry import RunContext, Strategy, register, unregister
from everos_reflect.engine.triggers import CountTrigger
from everos_reflect.fleet.config import parse_fleet
from everos_reflect.fleet.schedule import FleetScheduler, Slot, due_slots, plan_due
from everos_reflect.fleet.work import RootResult, run_root
from tests.fleet_support import build_root, open_test_root

#: roots built, then opened again: nothing else writes their logs meanwhile (conftest.py)
pytestmark = pytest.mark.usefixtures("settle_at_once")

MONDAY_2AM = datetime(2026, 12, 7, 2, 0, tzinfo=UTC)  # a Monday


class InlineSubmitter:
    """Runs each submitted root at once, in this process; ``finished`` hands the results on."""

    def __init__(self, defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        self.calls: list[tuple[str, str, str]] = []
        self._done: list[tuple[Any, RootResult]] = []

    def submit(self, key: Any, root: str, name: str, *, force: bool = False,
               trigger: str = "fleet", **kwargs: Any) -> None:
        self.calls.append((root, name, trigger))
        self._done.append((key, run_root(root, name, force=force, defaults=self.defaults,
                                         opener=open_test_root, trigger=trigger, **kwargs)))

    def finished(self, timeout: float | None = None) -> list[tuple[Any, RootResult]]:
        out, self._done = self._done, []
        return out

    @property
    def in_flight(self) -> int:
        return len(self._done)


def _fleet(tmp_path: Path, text: str = "") -> tuple[Any, list[Path]]:
    roots = [tmp_path / "a", tmp_path / "b"]
    build_root(roots[0])
    build_root(roots[1], ome="[strategies.reflect_episodes]\nenabled = false\n")
    config = parse_fleet('roots = ["a", "b"]\n[strategies.reflect_episodes]\nenabled = true\n'
                         + text, str(tmp_path / "fleet.toml"))
    return config, roots


def test_plan_due_catches_up_a_missed_run_once_within_the_grace() -> None:
    last = MONDAY_2AM - timedelta(days=7, minutes=-5)  # ran a week ago, just after 02:00
    now = MONDAY_2AM + timedelta(hours=1)
    assert plan_due("0 2 * * 1", "UTC", now=now, last_started=last, grace=timedelta(hours=6),
                    catch_up=True) == (now, "startup-catchup")
    assert plan_due("0 2 * * 1", "UTC", now=now, last_started=last, grace=timedelta(minutes=30),
                    catch_up=True) == (MONDAY_2AM + timedelta(days=7), "cron")
    assert plan_due(None, "UTC", now=now, last_started=None, grace=timedelta(hours=6),
                    catch_up=True) == (None, "")


def test_a_due_slot_whose_previous_run_is_in_flight_is_skipped_not_queued() -> None:
    slots = [Slot("a", "s", "* * * * *", "UTC", MONDAY_2AM), Slot("b", "s", "* * * * *", "UTC",
             MONDAY_2AM), Slot("c", "s", "* * * * *", "UTC", MONDAY_2AM + timedelta(hours=1))]
    run, skip = due_slots(slots, MONDAY_2AM, {("b", "s")})
    assert [s.root for s in run] == ["a"] and [s.root for s in skip] == ["b"]


def test_the_root_ome_toml_wins_so_only_enabled_roots_are_scheduled(tmp_path: Path) -> None:
    config, roots = _fleet(tmp_path)
    sched = FleetScheduler(config, roots, InlineSubmitter(config.strategies),
                           opener=open_test_root)
    sched.start(now=MONDAY_2AM - timedelta(hours=1))
    a, b = (sched.slots[(str(r), "reflect_episodes")] for r in roots)
    assert (a.cron, a.due) == ("0 2 * * 1", MONDAY_2AM)
    assert (b.cron, b.due) == (None, None)


def test_a_due_run_is_submitted_once_and_the_next_one_planned(tmp_path: Path) -> None:
    config, roots = _fleet(tmp_path)
    submitter = InlineSubmitter(config.strategies)
    sched = FleetScheduler(config, roots, submitter, opener=open_test_root)
    sched.start(now=MONDAY_2AM - timedelta(hours=1))
    assert sched.tick(now=MONDAY_2AM - timedelta(minutes=1)) == []
    assert sched.tick(now=MONDAY_2AM) == [(str(roots[0]), "reflect_episodes")]
    assert submitter.calls == [(str(roots[0]), "reflect_episodes", "cron")]
    results = sched.collect()
    assert [r.status for r in results] == ["ok"] and results[0].merges >= 2
    assert sched.slots[(str(roots[0]), "reflect_episodes")].due == \
        MONDAY_2AM + timedelta(days=7)
    assert sched.tick(now=MONDAY_2AM + timedelta(minutes=1)) == []


def test_a_root_listed_twice_under_other_spellings_is_scheduled_once(tmp_path: Path) -> None:
    """The same folder given as `a`, `a/` and through a symlink made three slots: three runs
    at once at each fire time, two of them `busy` against the first."""
    config, roots = _fleet(tmp_path)
    (tmp_path / "link").symlink_to(roots[0])
    spellings = [roots[0], f"{roots[0]}/", tmp_path / "b" / ".." / "a", tmp_path / "link"]
    submitter = InlineSubmitter(config.strategies)
    # before the first rescan, which lists the fleet file's own roots
    sched = FleetScheduler(config, spellings, submitter, opener=open_test_root,
                           rescan_seconds=86_400)
    sched.start(now=MONDAY_2AM - timedelta(hours=1))
    assert sched.tick(now=MONDAY_2AM) == [(str(roots[0]), "reflect_episodes")]
    assert [r.status for r in sched.collect()] == ["ok"]


def test_an_edited_ome_toml_is_picked_up_at_the_next_tick(tmp_path: Path) -> None:
    config, roots = _fleet(tmp_path)
    sched = FleetScheduler(config, roots, InlineSubmitter(config.strategies),
                           opener=open_test_root)
    sched.start(now=MONDAY_2AM - timedelta(hours=1))
    ome = roots[1] / "ome.toml"
    ome.write_text('[strategies.reflect_episodes]\nenabled = true\ncron = "30 2 * * *"\n')
    os.utime(ome, ns=(1, 1))  # a different mtime even on a coarse-grained file system
    sched.tick(now=MONDAY_2AM - timedelta(minutes=30))
    assert sched.slots[(str(roots[1]), "reflect_episodes")].due == \
        MONDAY_2AM + timedelta(minutes=30)
    ome.write_text("[strategies.reflect_episodes]\nenabled = = true\n")  # invalid: kept
    os.utime(ome, ns=(2, 2))
    sched.tick(now=MONDAY_2AM - timedelta(minutes=29))
    assert sched.slots[(str(roots[1]), "reflect_episodes")].cron == "30 2 * * *"


def test_an_ome_toml_edited_invalid_keeps_running_on_the_last_good_config(
        tmp_path: Path) -> None:
    """``fleet serve`` kept the root's last good schedule, then ran it on the broken file: the
    run failed with a ConfigError, not in the root's run history, fire after fire, where
    ``serve`` runs on its last good configuration. Data polls raised at every poll too."""
    register(_Counting)
    try:
        config, roots = _fleet(tmp_path, "[strategies.fleet_test_counting]\nenabled = true\n")
        submitter = InlineSubmitter(config.strategies)
        sched = FleetScheduler(config, roots, submitter, opener=open_test_root,
                               data_poll_seconds=10)
        sched.start(now=MONDAY_2AM - timedelta(hours=1))
        ome = roots[0] / "ome.toml"
        ome.write_text("[strategies.reflect_episodes]\nenabled = = true\n")
        os.utime(ome, ns=(1, 1))
        (roots[0] / "new.txt").write_text("1")
        assert sched.tick(now=MONDAY_2AM - timedelta(minutes=30)) == \
            [(str(roots[0]), "fleet_test_counting")]
        assert sched.tick(now=MONDAY_2AM) == [(str(roots[0]), "reflect_episodes")]

        sched.collect()
        assert [(r.root, r.status, r.error) for r in sched.results] == \
            [(str(roots[0]), "ok", None)] * 2
        assert sched.results[1].merges >= 2
        assert ome.read_text() == "[strategies.reflect_episodes]\nenabled = = true\n"
    finally:
        unregister(_Counting.name)


def test_a_missed_run_is_caught_up_at_start(tmp_path: Path) -> None:
    config, roots = _fleet(tmp_path)
    submitter = InlineSubmitter(config.strategies)
    # a run a week before the missed fire time, recorded in the root's own history
    run_root(str(roots[0]), "reflect_episodes", defaults=config.strategies,
             opener=open_test_root)
    rt = open_test_root(str(roots[0]))
    with rt.db():
        rt.db().execute("UPDATE runs SET started_at = ?",
                        ((MONDAY_2AM - timedelta(days=6)).isoformat(),))
    sched = FleetScheduler(config, roots, submitter, opener=open_test_root)
    now = MONDAY_2AM + timedelta(hours=2)
    sched.start(now=now)
    assert sched.tick(now=now) == [(str(roots[0]), "reflect_episodes")]
    assert submitter.calls[0][2] == "startup-catchup"


class _Counting(Strategy):
    """A data-triggered strategy: due when ``new.txt`` in the root holds a positive number."""

    name = "fleet_test_counting"
    data_trigger = CountTrigger(n=1)

    def observe(self, runtime: Any, since: datetime | None, settings: Any = None) -> float:
        path = runtime.root / "new.txt"
        return float(path.read_text()) if path.exists() else 0.0

    def run(self, ctx: RunContext) -> dict[str, int]:
        (ctx.runtime.root / "new.txt").write_text("0")
        return {"seen": 1}


def test_a_data_triggered_strategy_runs_when_its_observation_is_due(tmp_path: Path) -> None:
    register(_Counting)
    try:
        config, roots = _fleet(tmp_path, "[strategies.fleet_test_counting]\nenabled = true\n")
        submitter = InlineSubmitter(config.strategies)
        sched = FleetScheduler(config, roots, submitter, opener=open_test_root,
                               data_poll_seconds=10)
        now = MONDAY_2AM - timedelta(hours=1)
        sched.start(now=now)
        (roots[1] / "new.txt").write_text("3")
        assert sched.tick(now=now + timedelta(seconds=5)) == []  # not polled yet
        assert sched.tick(now=now + timedelta(seconds=10)) == \
            [(str(roots[1]), "fleet_test_counting")]
        assert [(r.status, r.counts) for r in sched.collect()] == [("ok", {"seen": 1})]
        assert sched.tick(now=now + timedelta(seconds=20)) == []  # observed 0 now
    finally:
        unregister(_Counting.name)


def test_a_wall_clock_set_back_at_shutdown_does_not_stretch_the_grace(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The grace for runs in flight was timed by the wall clock: set back an hour while it
    ran, ``fleet serve`` waited an hour longer to stop."""
    from everos_reflect.fleet import schedule

    config = parse_fleet('roots = ["a"]\n', str(tmp_path / "fleet.toml"))
    asked: list[float | None] = []
    set_back = [0]

    class Stuck:  # a run that never finishes
        in_flight = 1

        def submit(self, *args: Any, **kwargs: Any) -> None:
            raise AssertionError("nothing is due")

        def finished(self, timeout: float | None = None) -> list[Any]:
            asked.append(timeout)
            set_back[0] = set_back[0] or 1
            return []

    class Clock(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> datetime:  # frozen; once set back, 10 min a read
            if not set_back[0]:
                return MONDAY_2AM
            set_back[0] += 1
            return MONDAY_2AM - timedelta(hours=1) + timedelta(minutes=10 * set_back[0])

    monkeypatch.setattr(schedule, "datetime", Clock)
    sched = FleetScheduler(config, [], Stuck(), opener=open_test_root)
    sched.in_flight.add((str(tmp_path / "a"), "reflect_episodes"))
    stop = threading.Event()
    stop.set()
    sched.run(stop, grace=0.05)
    assert asked and max(a or 0.0 for a in asked) <= 0.05, max(a or 0.0 for a in asked)
    assert sched.in_flight  # still going: left to its journal


def test_the_data_poll_goes_on_after_the_wall_clock_is_set_back(tmp_path: Path) -> None:
    """The next poll waited for the wall clock to pass the last one again: set back an hour
    (an NTP step, a VM resumed), data-triggered strategies stopped for that hour. So did the
    trigger, measuring its cooldown from a last run after ``now``. The run's record takes the
    real clock, so ``now`` does too: against MONDAY_2AM this passed only until that day."""
    register(_Counting)
    try:
        config, roots = _fleet(tmp_path, "[strategies.fleet_test_counting]\nenabled = true\n")
        submitter = InlineSubmitter(config.strategies)
        sched = FleetScheduler(config, roots, submitter, opener=open_test_root,
                               data_poll_seconds=10)
        now = datetime.now(UTC)
        sched.start(now=now)
        (roots[1] / "new.txt").write_text("3")
        assert sched.tick(now=now - timedelta(hours=1)) == \
            [(str(roots[1]), "fleet_test_counting")]
        assert [r.status for r in sched.collect()] == ["ok"]
        (roots[1] / "new.txt").write_text("2")
        assert sched.tick(now=now - timedelta(hours=1) + timedelta(seconds=5)) == []
        assert sched.tick(now=now - timedelta(hours=1) + timedelta(seconds=10)) == \
            [(str(roots[1]), "fleet_test_counting")]
    finally:
        unregister(_Counting.name)


def test_fleet_serve_stops_on_sigterm_through_its_own_handler_not_rays(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """``ray.init`` sets a SIGTERM handler of its own (``sys.exit``) over the one ``fleet
    serve`` had set: a SIGTERM (systemd, Kubernetes) cut every run in flight off at once,
    without the grace it is promised, and the process exited 15."""
    import signal
    import sys
    from contextlib import contextmanager

    from everos_reflect.fleet import ray_backend
    from everos_reflect.fleet.schedule import serve_fleet

    caplog.set_level("INFO", "everos_reflect.fleet.schedule")
    config, roots = _fleet(tmp_path)
    before = signal.getsignal(signal.SIGTERM)

    @contextmanager
    def session(config: Any) -> Any:  # a local Ray started: its handler, as ray.init sets it
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(signum))
        yield None

    class Fleet(InlineSubmitter):
        def __init__(self, ray: Any, config: Any, opener: Any) -> None:
            super().__init__(config.strategies)
            # the scheduler is about to start: stop it as a service manager would
            threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM)).start()

        def close(self) -> None:
            pass

    monkeypatch.setattr(ray_backend, "ray_session", session)
    monkeypatch.setattr(ray_backend, "RayFleet", Fleet)
    try:
        serve_fleet(config, roots, opener=open_test_root)  # returns: stopped, not exited
    finally:
        signal.signal(signal.SIGTERM, before)
    assert "received SIGTERM: stopping" in caplog.text
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_folder_a_glob_matches_that_is_no_root_is_named_and_new_shards_still_join(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # a shard folder made before `init` ran in it failed the whole rescan: no new shard joined
    # the fleet until it was a root ("fleet roots: …; keeping the 1 known roots")
    build_root(tmp_path / "shard-a")
    config = parse_fleet('roots = ["shard-*"]\n', str(tmp_path / "fleet.toml"))
    sched = FleetScheduler(config, [tmp_path / "shard-a"], InlineSubmitter(config.strategies),
                           opener=open_test_root, rescan_seconds=60)
    sched.start(now=MONDAY_2AM)
    (tmp_path / "shard-b").mkdir()
    build_root(tmp_path / "shard-c")

    for minutes in (2, 4):
        sched.tick(now=MONDAY_2AM + timedelta(minutes=minutes))

    assert sched.roots == [str((tmp_path / name).resolve()) for name in ("shard-a", "shard-c")]
    warned = [r for r in caplog.records if "shard-b" in r.getMessage()]
    assert len(warned) == 1 and warned[0].levelname == "WARNING"  # once, not every rescan
    assert (f"roots[0]: '{tmp_path / 'shard-b'}' (matched by 'shard-*') is not a "
            "memory root") in warned[0].getMessage()
    assert not (tmp_path / "shard-b" / ".index").exists()  # nothing made in it
