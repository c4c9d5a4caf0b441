"""The chaos harness, short: a few SIGKILLs (during Reflection, recovery, add), one
malformed file of each kind (the huge ones at 5 % size), each LLM fault once against a 0.5 s
client timeout — every row must show 0 violations.

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
                           work=tmp_path, measure_windows=False, huge_scale=0.05,
                           llm_timeout=0.5)

    cases = {(r.section, r.case) for r in report.rows}
    assert ("kills", "SIGKILL during recovery") in cases
    # the recovery kill really had an interrupted merge to recover
    assert not any(op == "recovery" and "no journal row" in where
                   for (op, where), _ in report.landed), report.landed
    assert {c for s, c in cases if s == "malformed"}
    corpus = next(n for n in report.notes if n.startswith("malformed corpus"))
    assert all(case in corpus for case in chaos.chaos_corpus.CASES)
    assert {c for s, c in cases if s == "llm"} == set(chaos.faults(chaos.ChaosOpenAI()))
    bad = [r for r in report.rows if r.violations]
    assert not bad, report.markdown()


def test_a_broken_file_may_gain_entries_but_never_lose_or_change_bytes() -> None:
    """The malformed section's check: a broken log dated today receives the run's narratives
    after its own bytes (kept); an edit inside them, a truncation, a deleted file or a
    re-pointed symlink is a violation."""
    own = b"<!-- entry:ep_1 -->\n---\na: &a [1]\n---\n"
    assert chaos._kept(own, own)
    assert chaos._kept(own, own + b"<!-- entry:ep_2 -->\n...")
    assert not chaos._kept(own, own[:-1])
    assert not chaos._kept(own, b"X" + own[1:])
    assert not chaos._kept(own, None)
    link = b"-> /outside/secret.md"
    assert chaos._kept(link, link)
    assert not chaos._kept(link, link + b"x")
