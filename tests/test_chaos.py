"""The chaos harness, short: a few SIGKILLs (during Reflection, recovery, add), one
malformed file of each kind, each LLM fault once — every row must show 0 violations.

The full run (100 kills, 306 files, schemathesis) is ``python bench/chaos.py``; its table is in
bench/results/chaos.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import chaos


@pytest.mark.slow
def test_short_chaos_run_has_no_violations(tmp_path: Path) -> None:
    report = chaos.run_all(kills=3, malformed=13, seed=3, fuzz=False, fuzz_examples=0,
                           work=tmp_path, measure_windows=False)

    cases = {(r.section, r.case) for r in report.rows}
    assert ("kills", "SIGKILL during recovery") in cases
    assert {c for s, c in cases if s == "llm"} == set(chaos.faults(chaos.ChaosOpenAI()))
    bad = [r for r in report.rows if r.violations]
    assert not bad, report.markdown()
