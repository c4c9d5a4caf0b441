"""bench/chaos.py names each row of its kills section for what happened: the ``copy`` operation
kills nothing (a user's folder is copied while a Reflection run commits, and the run goes on),
yet its row read "SIGKILL during copy", a kill the table's reader counted that never was."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import chaos
import chaos_kills
import chaos_reader


def test_the_copy_row_says_no_kill_and_the_others_say_sigkill(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def run_section(root: Path, env: dict[str, str], template: Path, *, n: int, seed: int,
                    measure_windows: bool, budget_s: float, on_kill: object,
                    ops: list[str] | None = None) -> tuple[object, int]:
        for i, op in enumerate(ops or chaos_kills.OPS):  # each once, nothing found
            on_kill(i, op, "here", chaos_reader.Violations(), "")  # type: ignore[operator]
        kills = SimpleNamespace(times={}, landed={}, recoverers={})
        return kills, len(ops or chaos_kills.OPS)

    monkeypatch.setattr(chaos_kills, "run_section", run_section)
    report = chaos.Report()
    chaos.section_kills(report, 2, 1, tmp_path, {}, tmp_path, ops=["reflect", "copy"])
    cases = [r.case for r in report.rows if not r.case.startswith("invariant: ")]
    assert cases == ["SIGKILL during reflect", "folder copied mid-commit (no kill)"]
    assert not [c for c in cases if "copy" in c and "SIGKILL" in c]
