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


def test_phase_clocks_sum_a_process_roots_and_keep_its_first_root_apart(
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
    assert (summary["roots"], summary["processes"], summary["first_roots"]) == (2, 1, 1)
    assert len(summary["process_cpu_before_first_root"]) == 1
    # the engine's and the runtime's calls; Reflection's inner ones may be renamed by other
    # changes, which the report then lists as "not timed" instead of failing the bench
    phases = summary["all"]
    assert phases["run thread: the whole run"][2] == 2  # one run per root, both counted once
    assert phases["run thread: the whole run"][0] > 0
    assert phases["close the root"][2] == 2
    assert summary["wall"] > summary["first_wall"] > 0
