"""A run record left ``running`` by a process that is gone (killed, crashed: nothing could end
it) reads as such in ``runs`` and the API until the next engine start records it
``abandoned``. It read as a run in progress, indefinitely when no daemon was started."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.engine.engine import Engine, list_runs
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
    rt.close()
