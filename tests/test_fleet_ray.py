"""The fleet on a real local Ray (2 worker CPUs), started once for this whole module.

Ray start-up costs seconds on a loaded machine, so every test that needs Ray lives here and
shares the one session.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import ray  # in the test extra: these tests run everywhere the suite runs, never skipped
from click.testing import CliRunner
from filelock import FileLock

from everos_reflect.cli.main import cli
from everos_reflect.clustering.service import ClusterService
from everos_reflect.engine.engine import lock_path
from everos_reflect.fleet.config import parse_fleet, read_fleet
from everos_reflect.fleet.ray_backend import RayFleet, run_fleet
from everos_reflect.fleet.schedule import FleetScheduler
from everos_reflect.markdown.parser import parse_log
from everos_reflect.strategies.reflect import users_with_clusters
from tests.fleet_support import build_root, build_roots, open_test_root
from tests.reflect_fixtures import check_invariants

pytestmark = pytest.mark.slow

STRATEGY = "reflect_episodes"


@pytest.fixture(scope="module", autouse=True)
def ray_session() -> Any:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             logging_level="WARNING")
    yield
    ray.shutdown()


def _fleet_file(folder: Path, extra: str = "", top: str = "") -> Path:
    path = folder / "fleet.toml"
    path.write_text('roots = ["shard-*"]\n' + top + '[strategies.reflect_episodes]\n'
                    'enabled = true\n' + extra, "utf-8")
    return path


def _expected_merges(root: Path) -> int:
    rt = open_test_root(str(root))
    clusters = ClusterService(rt)
    n = sum(len(clusters.eligible_for_reflection(ref, 100)) for ref in users_with_clusters(rt))
    rt.close()
    return n


def _ok_reports(root: Path) -> list[dict[str, Any]]:
    rt = open_test_root(str(root))
    rows = [dict(r) for r in rt.db().execute(
        "SELECT app_id, project_id, owner_id, merged_entry_id, source_members "
        "FROM reflection_report WHERE status='ok'")]
    rt.close()
    return rows


def _assert_consistent(root: Path, episode_ids: list[str]) -> None:
    """The chaos invariants: every file parses; no live narrative beside a live source; no
    journal row left; no Episode lost; no merge done twice."""
    rt = open_test_root(str(root))
    check_invariants(rt)  # parses every file of every user, narratives vs their sources
    found: dict[tuple[str, str], Any] = {}  # entry ids are unique per user
    for ref in rt.store.iter_users():
        for path in rt.store.iter_files(ref):
            for entry in parse_log(path.read_text("utf-8"), str(path)).entries:
                found[(ref.user_id, entry.id)] = entry
    assert not set(episode_ids) - set(found), "Episodes lost"
    reports = _ok_reports(root)
    merged = [(r["owner_id"], r["merged_entry_id"]) for r in reports]
    sources = [(r["owner_id"], s) for r in reports for s in json.loads(r["source_members"])]
    assert len(merged) == len(set(merged)) and len(sources) == len(set(sources)), \
        "a merge was done twice"
    live_narratives = {key for key, e in found.items()
                       if e.parent_type == "cluster" and e.deprecated_by is None}
    assert live_narratives == set(merged)
    rt.close()


def test_twenty_roots_all_merged_and_a_locked_root_reported_busy(tmp_path: Path) -> None:
    built = build_roots([tmp_path / f"shard-{i:02d}" for i in range(20)])
    ids = dict(enumerate(built.values()))
    expected = {i: _expected_merges(tmp_path / f"shard-{i:02d}") for i in range(20)}
    assert all(n >= 2 for n in expected.values())
    config, roots = read_fleet(_fleet_file(tmp_path))
    assert len(roots) == 20

    locked = lock_path(roots[3], STRATEGY)
    locked.parent.mkdir(parents=True, exist_ok=True)
    seen: list[tuple[str, int, int]] = []
    with FileLock(str(locked)):  # a run of root 3 going on elsewhere
        report = run_fleet(config, roots, STRATEGY, opener=open_test_root,
                           on_result=lambda r, done, total: seen.append((r.root, done, total)))
    by_root = {Path(r.root): r for r in report.results}
    assert [r.root for r in report.results] == [str(r) for r in roots]
    assert [(d, t) for _, d, t in seen] == [(n, 20) for n in range(1, 21)]
    assert by_root[roots[3]].status == "busy" and not report.ok
    assert report.submitted == 20 and report.counts == {"ok": 19, "busy": 1}
    for i, root in enumerate(roots):
        if i == 3:
            assert _ok_reports(root) == []
            continue
        assert by_root[root].merges == expected[i] == len(_ok_reports(root))
        _assert_consistent(root, ids[i])

    again = run_fleet(config, roots, STRATEGY, opener=open_test_root)
    assert again.ok and again.submitted == 1 and again.counts == {"idle": 19, "ok": 1}
    assert len(_ok_reports(roots[3])) == expected[3]
    _assert_consistent(roots[3], ids[3])


def test_a_root_listed_twice_under_other_spellings_runs_and_is_reported_once(
        tmp_path: Path) -> None:
    """`a`, `a/`, `b/../a` and a symlink to `a` ran four times at once: the report said
    busy, busy, busy, ok for one folder and the fleet failed against itself."""
    root = tmp_path / "shard-a"
    ids = build_root(root)
    expected = _expected_merges(root)
    (tmp_path / "link").symlink_to(root)
    config, _ = read_fleet(_fleet_file(tmp_path))
    spellings = [root, f"{root}/", tmp_path / "link" / ".." / "shard-a", tmp_path / "link"]
    seen: list[tuple[int, int]] = []
    report = run_fleet(config, spellings, STRATEGY, opener=open_test_root,
                       on_result=lambda r, done, total: seen.append((done, total)))
    assert report.ok and report.counts == {"ok": 1} and report.submitted == 1
    assert [(r.root, r.merges) for r in report.results] == [(str(root), expected)]
    assert seen == [(1, 1)]
    _assert_consistent(root, ids)


def _running_pid(root: Path, min_merges: int) -> int | None:
    db = root / ".index" / "sqlite" / "system.db"
    if not db.exists():
        return None
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        row = conn.execute("SELECT pid FROM runs WHERE status='running'").fetchone()
        done = conn.execute("SELECT COUNT(*) FROM reflection_report").fetchone()[0]
    except sqlite3.Error:
        return None
    finally:
        conn.close()
    return row[0] if row and done >= min_merges else None


def _slow_fleet_run(config: Any, roots: Any) -> tuple[threading.Thread, dict[str, Any]]:
    """``run_fleet`` started on a thread with merges slowed to 0.5 s each, so a test can find
    a worker mid-run and kill it; ``out["report"]`` holds the report once the thread ends."""
    slow = functools.partial(open_test_root, merge_delay=0.5)
    out: dict[str, Any] = {}
    runner = threading.Thread(target=lambda: out.setdefault(
        "report", run_fleet(config, roots, STRATEGY, opener=slow)))
    runner.start()
    return runner, out


def test_a_worker_killed_mid_run_is_retried_and_every_root_stays_consistent(
        tmp_path: Path) -> None:
    victim = tmp_path / "shard-0"
    # commits of at most 2 merges: a loaded machine may finish every draft before the first
    # commit, and one batch of all 12 would leave no mid-way moment to kill the worker in
    ids = {victim: build_root(victim, users=4, ome="[strategies.reflect_episodes]\n"
                              "enabled = true\nmax_commit_batch = 2\n")}
    ids.update(build_roots([tmp_path / f"shard-{i}" for i in range(1, 4)]))
    expected = {root: _expected_merges(root) for root in ids}
    config, roots = read_fleet(_fleet_file(tmp_path))
    runner, out = _slow_fleet_run(config, roots)
    deadline = time.monotonic() + 120
    pid = None
    while pid is None and time.monotonic() < deadline and runner.is_alive():
        pid = _running_pid(victim, min_merges=2)
        time.sleep(0.05)
    assert pid is not None, "the victim's run was never seen mid-way"
    os.kill(pid, signal.SIGKILL)
    runner.join(180)
    report = out["report"]
    assert report.ok, [r.as_dict() for r in report.results if r.status != "ok"]
    result = next(r for r in report.results if Path(r.root) == victim)
    assert result.pid != pid and len(result.recovered_runs) == 1  # a new worker, retried
    rt = open_test_root(str(victim))
    runs = {r["id"]: dict(r) for r in rt.db().execute("SELECT * FROM runs")}
    rt.close()
    assert runs[result.recovered_runs[0]]["status"] == "abandoned"
    assert runs[result.run_id]["status"] == "ok"
    for root, episode_ids in ids.items():
        assert len(_ok_reports(root)) == expected[root], root
        _assert_consistent(root, episode_ids)


def test_a_worker_killed_while_running_two_roots_reruns_both_and_each_stays_consistent(
        tmp_path: Path) -> None:
    """One worker (task_cpus = 2 of the 2) running two roots at once dies: Ray restarts it and
    re-runs both roots; each recovers its own interrupted run, no merge is done twice."""
    ome = "[strategies.reflect_episodes]\nenabled = true\nmax_commit_batch = 2\n"
    ids = build_roots([tmp_path / f"shard-{i}" for i in range(2)], users=4, ome=ome)
    expected = {root: _expected_merges(root) for root in ids}
    config, roots = read_fleet(_fleet_file(tmp_path, top="task_cpus = 2\n"))
    runner, out = _slow_fleet_run(config, roots)
    deadline = time.monotonic() + 120
    pids: list[int | None] = [None, None]
    while None in pids and time.monotonic() < deadline and runner.is_alive():
        pids = [_running_pid(root, min_merges=1) for root in roots]
        time.sleep(0.05)
    assert None not in pids, "the two runs were never seen going at once"
    assert pids[0] == pids[1]  # one worker process holds both
    os.kill(pids[0], signal.SIGKILL)
    runner.join(180)
    report = out["report"]
    assert report.ok, [r.as_dict() for r in report.results if r.status != "ok"]
    for result in report.results:
        assert result.pid != pids[0] and len(result.recovered_runs) == 1, result
    for root, episode_ids in ids.items():
        assert len(_ok_reports(root)) == expected[root], root
        _assert_consistent(root, episode_ids)


def test_roots_go_out_largest_first_after_one_per_worker(tmp_path: Path,
                                                         monkeypatch) -> None:
    """The first root per worker slot goes out as soon as it is judged (no worker waits for
    the driver); the rest largest first, so the run does not end on one long root."""
    users = [1, 1, 2, 4, 1, 3]  # fleet order (shard-0..5); work grows with the users
    for i, n in enumerate(users):
        build_root(tmp_path / f"shard-{i}", users=n)
    expected = {f"shard-{i}": _expected_merges(tmp_path / f"shard-{i}")
                for i in range(len(users))}
    config, roots = read_fleet(_fleet_file(tmp_path, top="roots_per_worker = 1\n"))
    sent: list[str] = []
    submit = RayFleet.submit

    def recording(self: RayFleet, key: Any, root: str, *args: Any, **kwargs: Any) -> None:
        sent.append(Path(root).name)
        submit(self, key, root, *args, **kwargs)

    monkeypatch.setattr(RayFleet, "submit", recording)
    report = run_fleet(config, roots, STRATEGY, opener=open_test_root)
    assert report.ok and report.submitted == 6
    # 2 CPUs, 1 per task: shard-0 and shard-1 at once, then 4, 3, 2 users, then 1 user
    assert sent == ["shard-0", "shard-1", "shard-3", "shard-5", "shard-2", "shard-4"]
    assert {Path(r.root).name: r.merges for r in report.results} == expected


def _run_span(root: Path) -> tuple[datetime, datetime, int]:
    rt = open_test_root(str(root))
    row = rt.db().execute("SELECT started_at, finished_at, pid FROM runs "
                          "WHERE status='ok'").fetchone()
    rt.close()
    return (datetime.fromisoformat(row["started_at"]), datetime.fromisoformat(row["finished_at"]),
            row["pid"])


def test_a_worker_runs_two_roots_at_once_and_never_more(tmp_path: Path) -> None:
    """roots_per_worker = 2 on one worker (task_cpus = 2 of the 2): one process, its runs
    overlapping two at a time (one root's LLM waits filled by the other's work), every root
    merged."""
    ids = build_roots([tmp_path / f"shard-{i}" for i in range(5)])
    expected = {root: _expected_merges(root) for root in ids}
    config, roots = read_fleet(_fleet_file(tmp_path, top="task_cpus = 2\n"))
    assert config.roots_per_worker == 2
    report = run_fleet(config, roots, STRATEGY,
                       opener=functools.partial(open_test_root, merge_delay=0.2))
    assert report.ok and report.submitted == 5
    assert len({r.pid for r in report.results}) == 1  # one worker process ran them all
    spans = [_run_span(root) for root in roots]
    assert {pid for _, _, pid in spans} == {report.results[0].pid}
    edges = sorted([(start, 1) for start, _, _ in spans] + [(end, -1) for _, end, _ in spans],
                   key=lambda e: (e[0], e[1]))  # an end before a start at the same instant
    running = most = 0
    for _, step in edges:
        running += step
        most = max(most, running)
    assert most == 2
    for root, episode_ids in ids.items():
        assert len(_ok_reports(root)) == expected[root], root
        _assert_consistent(root, episode_ids)
    # the worker was stopped: its CPUs are the cluster's again
    deadline = time.monotonic() + 30
    while ray.available_resources().get("CPU", 0) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ray.available_resources().get("CPU", 0) == 2


def test_fleet_serve_submits_a_due_run_to_ray(tmp_path: Path) -> None:
    build_root(tmp_path / "shard-0")
    config, roots = read_fleet(_fleet_file(tmp_path, 'cron = "0 2 * * *"\n'))
    sched = FleetScheduler(config, roots, RayFleet(ray, config, opener=open_test_root),
                           opener=open_test_root)
    start = datetime(2026, 12, 7, 1, 0, tzinfo=UTC)
    sched.start(now=start)
    assert sched.tick(now=start + timedelta(hours=1)) == [(str(roots[0]), STRATEGY)]
    results = []
    deadline = time.monotonic() + 120
    while not results and time.monotonic() < deadline:
        results = sched.collect(timeout=5)
    assert [(r.status, r.merges >= 2) for r in results] == [("ok", True)]
    assert not sched.in_flight


def test_cli_fleet_run_prints_one_json_document_and_fails_on_a_busy_root(
        tmp_path: Path) -> None:
    # The real opener: each root's own everos.toml (here: no index yet, nothing to merge).
    for i in range(2):
        (tmp_path / f"shard-{i}").mkdir()
        (tmp_path / f"shard-{i}" / "everos.toml").write_text('[llm]\nprovider = "extractive"\n')
    fleet = _fleet_file(tmp_path)
    result = CliRunner().invoke(cli, ["fleet", "run", STRATEGY, "--fleet", str(fleet), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["ok"] is True and doc["tasks"] == 2 and doc["counts"] == {"ok": 2}
    assert {r["status"] for r in doc["results"]} == {"ok"}

    # new Markdown gives shard-1 work again (shard-0 has none: idle, no task)
    added = CliRunner().invoke(cli, ["add", "--root", str(tmp_path / "shard-1"), "--user", "u1",
                                     "--subject", "Pets", "--content", "u1 adopted a dog."])
    assert added.exit_code == 0, added.output
    locked = lock_path(tmp_path / "shard-1", STRATEGY)
    with FileLock(str(locked)):
        result = CliRunner().invoke(cli, ["fleet", "run", STRATEGY, "--fleet", str(fleet),
                                          "--force"])
    assert result.exit_code == 1
    assert "busy" in result.stdout and "already running in another process" in result.stdout
    assert "idle" in result.stdout and "1 Ray tasks" in result.stdout
    assert parse_fleet(fleet.read_text()).strategies  # the file itself was fine


def test_cli_fleet_run_on_a_local_ray_prints_no_token_authentication_warning(
        tmp_path: Path) -> None:
    """Ray 2.59+ enables token authentication on a local ray.init() when RAY_AUTH_MODE is
    unset and logs a WARNING saying so: every fleet run printed it. A process of its own,
    as a user runs it (this module's Ray is already imported and started)."""
    (tmp_path / "shard-0").mkdir()
    (tmp_path / "shard-0" / "everos.toml").write_text('[llm]\nprovider = "extractive"\n')
    fleet = _fleet_file(tmp_path, top="num_cpus = 1\nprobe_work = false\n")
    (tmp_path / "home").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env["HOME"] = str(tmp_path / "home")
    done = subprocess.run(
        [sys.executable, "-c", "from everos_reflect.cli.main import cli; cli()",
         "fleet", "run", STRATEGY, "--fleet", str(fleet), "--json"],
        env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["counts"] == {"ok": 1}  # a task ran on a worker
    assert "Token authentication" not in done.stderr
    assert "WARNING" not in done.stderr, done.stderr


def _threads_seen(root: str) -> tuple[int | None, int]:
    from everos_reflect.embedding import CachingEmbedder
    from everos_reflect.fleet import work

    rt = work.open_root(root)
    embedder = rt.embedder
    inner = embedder.inner if isinstance(embedder, CachingEmbedder) else embedder
    seen = (work.task_cpus(), inner.threads)
    rt.close()
    return seen


def test_a_task_embeds_with_the_cpus_ray_gave_it_not_every_core(tmp_path: Path) -> None:
    """onnxruntime's automatic thread count is every core; a one-CPU task must use one."""
    from everos_reflect.fleet import work

    root = tmp_path / "root"
    root.mkdir()
    (root / "everos.toml").write_text('[embedding]\nprovider = "local"\n', "utf-8")
    assert work.task_cpus() is None  # the driver: no allotment

    remote = ray.remote(_threads_seen)
    assert ray.get(remote.options(num_cpus=1).remote(str(root))) == (1, 1)
    assert ray.get(remote.options(num_cpus=2).remote(str(root))) == (2, 2)
    (root / "everos.toml").write_text('[embedding]\nprovider = "local"\nthreads = 3\n', "utf-8")
    assert ray.get(remote.options(num_cpus=1).remote(str(root))) == (1, 3)  # set by hand: kept


def _poisoned_opener(root: str, *, poison: str, driver: int, delay: float) -> Any:
    """Opens roots as the tests do, except that ``poison`` kills the worker process opening it
    (never the driver, which opens every root to judge it): a root that crashes its worker
    every time."""
    if Path(root).name == poison and os.getpid() != driver:
        time.sleep(0.5)  # its worker companion is mid-run by now
        os._exit(1)
    return open_test_root(root, merge_delay=delay)


def test_a_root_that_kills_its_worker_every_time_fails_alone_not_its_worker_companion(
        tmp_path: Path) -> None:
    """Two roots on one worker (task_cpus = 2 of the 2); one kills the worker process every
    time it runs. Ray re-runs the tasks a dead worker held, on the same restarted worker, so
    the companion died with it as often and ran out of retries too: a healthy root ended
    ``failed`` because of its neighbour. The fleet gives a root whose worker died under it a
    run of its own: the poisoned root fails, the other merges everything."""
    ome = "[strategies.reflect_episodes]\nenabled = true\nmax_commit_batch = 2\n"
    # one user: three merges of 1 s each keep the companion mid-run when the poisoned root
    # kills the worker 0.5 s in (three users only made each of its three runs 3x longer)
    ids = build_roots([tmp_path / f"shard-{i}" for i in range(2)], users=1, ome=ome)
    healthy = tmp_path / "shard-1"
    expected = _expected_merges(healthy)
    config, roots = read_fleet(_fleet_file(tmp_path, top="task_cpus = 2\nmax_retries = 1\n"))
    opener = functools.partial(_poisoned_opener, poison="shard-0", driver=os.getpid(),
                               delay=1.0)
    report = run_fleet(config, roots, STRATEGY, opener=opener)
    status = {Path(r.root).name: r.status for r in report.results}
    assert status == {"shard-0": "failed", "shard-1": "ok"}, \
        [r.as_dict() for r in report.results]
    # in Ray's words, not its class name first ("Ray: ActorDiedError: The actor died …")
    (error,) = [r.error or "" for r in report.results if r.status == "failed"]
    assert error.startswith("Ray: The actor "), error
    assert len(_ok_reports(healthy)) == expected
    _assert_consistent(healthy, ids[healthy])


def test_cli_fleet_run_exits_4_when_every_root_has_the_strategy_disabled(
        tmp_path: Path) -> None:
    """Nothing ran, and it exited 0: a cron job read a fleet that did nothing as done."""
    for i in range(2):
        (tmp_path / f"shard-{i}").mkdir()
        (tmp_path / f"shard-{i}" / "everos.toml").write_text('[llm]\nprovider = "extractive"\n')
        (tmp_path / f"shard-{i}" / "ome.toml").write_text(
            "[strategies.reflect_episodes]\nenabled = false\n")
    fleet = _fleet_file(tmp_path)
    result = CliRunner().invoke(cli, ["fleet", "run", STRATEGY, "--fleet", str(fleet)])
    assert result.exit_code == 4, result.output
    assert result.stdout.count("disabled") >= 2  # the table: one row per root
    assert result.stderr.strip() == (
        "error: reflect_episodes is disabled in every root of the fleet: nothing ran (set "
        "enabled = true under [strategies.reflect_episodes] in the fleet file or the roots' "
        "ome.toml, or use --force)")
    result = CliRunner().invoke(cli, ["fleet", "run", STRATEGY, "--fleet", str(fleet), "--json"])
    assert result.exit_code == 4
    doc = json.loads(result.stdout)
    assert doc["ok"] is False and doc["counts"] == {"disabled": 2} and doc["tasks"] == 0
    assert doc["error"].startswith("reflect_episodes is disabled in every root")

    # one root enabled: the other's `disabled` is a choice, and the run did its work
    (tmp_path / "shard-1" / "ome.toml").unlink()
    result = CliRunner().invoke(cli, ["fleet", "run", STRATEGY, "--fleet", str(fleet), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["ok"] is True and doc["error"] is None
    assert doc["counts"] == {"disabled": 1, "ok": 1}


def test_task_cpus_no_node_has_is_refused_instead_of_waiting_for_ever(tmp_path: Path) -> None:
    """A worker needs task_cpus on one node; the 2-CPU Ray here has no node for 4, and Ray
    held the tasks without a word: fleet run never returned, fleet serve never ran a root."""
    from everos_reflect.fleet.ray_backend import RayUnavailable

    (tmp_path / "shard-0").mkdir()
    (tmp_path / "shard-0" / "everos.toml").write_text('[llm]\nprovider = "extractive"\n')
    fleet = _fleet_file(tmp_path, top="task_cpus = 4\n")
    config, _ = read_fleet(fleet)
    with pytest.raises(RayUnavailable) as info:
        RayFleet(ray, config, opener=open_test_root)
    assert str(info.value) == (
        "task_cpus = 4 but the largest node of the local Ray has 2 CPUs: no fleet worker "
        "could start (lower task_cpus in the fleet file)")
    assert RayFleet(ray, parse_fleet('roots = ["a"]\ntask_cpus = 2')).workers() == 1

    result = CliRunner().invoke(cli, ["fleet", "run", STRATEGY, "--fleet", str(fleet), "--force"])
    assert result.exit_code == 1
    assert result.stderr.strip() == f"error: {info.value}"
