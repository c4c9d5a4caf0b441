"""A run record left ``running`` by a process that is gone (killed, crashed: nothing could end
it) reads as such in ``runs`` and the API until the next engine start records it
``abandoned``. It read as a run in progress, indefinitely when no daemon was started."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner
from filelock import FileLock

from everos_reflect.cli.main import cli
from everos_reflect.engine.engine import Engine, list_runs, lock_path
from everos_reflect.index import runs
from everos_reflect.runtime import Runtime


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_running_record_of_a_gone_process_says_so_until_the_next_start(root: Path) -> None:
    rt = Runtime(root)
    conn = rt.db()
    runs.start(conn, "run_gone", "reflect_episodes", "cron")
    runs.start(conn, "run_alive", "reflect_insights", "cron")  # this process: alive
    with conn:
        conn.execute("UPDATE runs SET pid = ? WHERE id = 'run_gone'", (_dead_pid(),))

    alive = FileLock(str(lock_path(root, "reflect_insights")))
    lock_path(root, "reflect_insights").parent.mkdir(parents=True, exist_ok=True)
    alive.acquire()  # as the live run holds its strategy's lock
    rows = {r["id"]: r for r in list_runs(rt)}
    assert rows["run_gone"]["status"] == "running" and rows["run_gone"]["process_gone"]
    assert "process_gone" not in rows["run_alive"]
    shown = CliRunner().invoke(cli, ["runs", "--root", str(root)])
    assert shown.exit_code == 0
    line = next(x for x in shown.output.splitlines() if "run_gone" in x)
    assert "is gone: recorded abandoned at the next start" in line

    Engine(rt)  # the next start
    gone = next(r for r in list_runs(rt) if r["id"] == "run_gone")
    assert gone["status"] == "abandoned" and "process_gone" not in gone
    alive.release()
    rt.close()


def test_a_running_record_whose_pid_was_reused_is_gone(root: Path) -> None:
    # a run killed with kill -9 leaves its record "running"; once the OS gives its pid to
    # another process (here: a sleeping child), that pid is alive, and the record read as a
    # run in progress for ever: never abandoned, not even by the next start. No run holds
    # the strategy's lock, which every run holds from before its record starts to after it
    # ends.
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        rt = Runtime(root)
        conn = rt.db()
        runs.start(conn, "run_reused", "reflect_episodes", "cron")
        with conn:
            conn.execute("UPDATE runs SET pid = ? WHERE id = 'run_reused'", (other.pid,))
        row = next(r for r in list_runs(rt) if r["id"] == "run_reused")
        assert row["status"] == "running" and row["process_gone"]

        Engine(rt)  # the next start
        row = next(r for r in list_runs(rt) if r["id"] == "run_reused")
        assert row["status"] == "abandoned" and "process_gone" not in row
        rt.close()
    finally:
        other.kill()
        other.wait()


def test_a_running_record_whose_run_holds_its_lock_is_alive(root: Path) -> None:
    rt = Runtime(root)
    conn = rt.db()
    runs.start(conn, "run_held", "reflect_episodes", "cron")
    with conn:
        conn.execute("UPDATE runs SET pid = 1 WHERE id = 'run_held'")  # alive, not us
    path = lock_path(root, "reflect_episodes")
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path)):  # as the run's own process holds it
        assert "process_gone" not in next(r for r in list_runs(rt) if r["id"] == "run_held")
        Engine(rt)
        assert next(r for r in list_runs(rt) if r["id"] == "run_held")["status"] == "running"
    rt.close()
