"""`undo` with the wrong --user: "no entry X for user U", once, naming whose merge it is."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.errors import UnknownEntry
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.model import EntryId, Kind, UserRef
from everos_reflect.strategies.undo import undo_merge
from tests.reflect_fixtures import ANDREW, make_runtime, run_reflection, seed_pets

BEA = UserRef.of("u_bea")


def test_undo_for_another_user_says_no_entry_for_that_user(root: Path) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    seed_pets(rt)
    assert run_reflection(rt)["merged"] == 1
    (narrative,) = [e for e in rt.store.entries(ANDREW, Kind.EPISODE)
                    if e.parent_type == "cluster"]
    with pytest.raises(UnknownEntry) as raised:
        undo_merge(rt, BEA, narrative.id)
    assert str(raised.value) == (f"no entry {narrative.id} for user {BEA} (it is a merge of "
                                 f"{ANDREW}: check --user)")


def test_undo_with_a_wrong_user_says_it_in_one_line_saying_it_once(root: Path) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    seed_pets(rt)
    assert run_reflection(rt)["merged"] == 1
    (narrative,) = [e for e in rt.store.entries(ANDREW, Kind.EPISODE)
                    if e.parent_type == "cluster"]
    rt.close()
    result = CliRunner().invoke(cli, ["undo", narrative.id, "--user", "nobody",
                                      "--root", str(root)])
    assert result.exit_code == 1
    assert result.stderr == (f"error: no entry {narrative.id} for user "
                             f"default_app/default_project/nobody (it is a merge of {ANDREW}: "
                             "check --user)\n")


def test_a_same_id_ordinary_entry_of_the_wrong_user_is_not_called_a_non_merge(
    root: Path,
) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    seed_pets(rt)
    run_reflection(rt)
    (narrative,) = [e for e in rt.store.entries(ANDREW, Kind.EPISODE)
                    if e.parent_type == "cluster"]
    day = EntryId.parse(narrative.id).day
    while True:  # Bea's ordinary episodes of that day, up to the same id
        entry = rt.store.append(BEA, Kind.EPISODE, {"timestamp": f"{day}T09:00:00+00:00",
                                                    "parent_type": "memcell"},
                                {"Subject": "s", "Content": "c"}, day=day)
        if entry.id == narrative.id:
            break
    Indexer(rt).scan()
    with pytest.raises(UnknownEntry, match=f"^no entry {narrative.id} for user {BEA} \\("):
        undo_merge(rt, BEA, narrative.id)
