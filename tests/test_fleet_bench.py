"""bench/fleet_cpu.py's phase clocks: they time a root's run in the process that runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.fleet_support import build_root

REPO = Path(__file__).resolve().parents[1]

#: Runs in a child process: the clocks wrap module functions for the rest of a process's life.
SCRIPT = """
import functools, json, sys
sys.path.insert(0, {bench!r}); sys.path.insert(0, {repo!r})
from fleet_cpu import phase_opener, phase_summary
from everos_reflect.fleet.work import run_root
from tests.fleet_support import open_test_root
opener = functools.partial(phase_opener, {out!r}, inner=open_test_root)
for root in {roots!r}:
    result = run_root(root, "reflect_episodes", force=True, opener=opener)
    assert result.status == "ok" and result.merges, result
print(json.dumps(phase_summary({out!r})))
"""


def test_phase_clocks_time_each_root_and_keep_a_process_first_root_apart(
        tmp_path: Path) -> None:
    roots = [tmp_path / "a", tmp_path / "b"]
    for root in roots:
        build_root(root)
    out = tmp_path / "phases"
    out.mkdir()
    script = SCRIPT.format(bench=str(REPO / "bench"), repo=str(REPO), out=str(out),
                           roots=[str(r) for r in roots])
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert (summary["roots"], summary["processes"]) == (2, 1)
    assert (summary["first_roots"], summary["rest_roots"]) == (1, 1)
    assert len(summary["process_cpu_before_first_root"]) == 1
    # the engine's and the runtime's calls; Reflection's inner ones may be renamed by other
    # changes, which the report then lists as "not timed" instead of failing the bench
    for part in ("first", "rest"):
        phases = summary[part]
        assert phases["run thread: the whole run"][2] == 1  # one run per root
        assert phases["run thread: the whole run"][0] > 0
        assert phases["close the root"][2] == 1
    assert summary["rest_wall"] > 0 and summary["first_wall"] > 0
