"""``reports`` over an empty audit whose logs hold Reflection narratives (``.index/`` removed
and rebuilt): the count agrees with its noun. One narrative read "the logs hold 1 merged
narratives"."""

from __future__ import annotations

from datetime import date

from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.index.sync import Indexer
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime

REF = UserRef.of("u1")


def _narrative(rt: Runtime, n: int) -> None:
    rt.store.append(REF, Kind.EPISODE, {"timestamp": f"2026-10-0{n}T10:00:00+00:00",
                                        "parent_type": "cluster", "parent_id": f"cl_00{n}"},
                    {"Subject": "Dogs", "Content": f"Andrew adopted {n} dogs."},
                    day=date(2026, 10, n))


def test_reports_counts_one_merged_narrative_in_the_singular(rt: Runtime) -> None:
    _narrative(rt, 1)
    Indexer(rt).scan()
    one = CliRunner().invoke(cli, ["reports", "--root", str(rt.root)])
    _narrative(rt, 2)
    Indexer(rt).scan()
    two = CliRunner().invoke(cli, ["reports", "--root", str(rt.root)])

    assert (one.exit_code, two.exit_code) == (0, 0)
    assert "though the logs hold 1 merged narrative: the audit" in one.output
    assert "though the logs hold 2 merged narratives: the audit" in two.output
