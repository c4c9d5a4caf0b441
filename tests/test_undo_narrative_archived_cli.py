"""CLI ``undo`` of a merge whose narrative a person had archived by hand (``deprecated_entries:
{narrative: undone}`` in its log's header): the undo restores the sources and leaves the
narrative as it is. The report said "archived no narrative ... (the narrative itself was
deleted by hand)" of a narrative still in its log; it says it was already archived, and how."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli import demo_cmds
from everos_reflect.cli.main import cli
from everos_reflect.index.sync import Indexer
from everos_reflect.llm.extractive import ExtractiveLLM
from tests.reflect_fixtures import ANDREW, make_runtime, reports, run_reflection, seed_pets

#: logs edited by the test itself, no other writer (conftest.py)
pytestmark = pytest.mark.usefixtures("settle_at_once")


def test_cli_undo_of_a_narrative_archived_by_hand_says_it_was_already_archived(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    sources = [e.id for e in seed_pets(rt)]
    run_reflection(rt)
    [row] = reports(rt)
    narrative = row["merged_entry_id"]
    log = rt.store.path_for_id(ANDREW, narrative)
    text = log.read_text("utf-8")
    log.write_text(text.replace("\ndate: ", f"\ndeprecated_entries: {{{narrative}: undone}}"
                                            "\ndate: ", 1), "utf-8")
    Indexer(rt).scan()
    monkeypatch.setattr(demo_cmds, "open_runtime", lambda _: rt)

    said = CliRunner().invoke(cli, ["undo", narrative, "--user", "u_andrew",
                                    "--root", str(rt.root)])

    assert said.exit_code == 0, said.output
    assert f"  restored 3 episodes: {', '.join(sources)}\n" in said.output
    assert (f"  archived no narrative and 4 atomic facts (deprecated_by: undone) ({narrative} "
            "was already archived (deprecated_by: undone): left as it is)\n") in said.output
    assert "deleted by hand" not in said.output
    assert rt.store.get(ANDREW, narrative).deprecated_by == "undone"
    assert all(rt.store.get(ANDREW, s).deprecated_by is None for s in sources)
