"""A person replaced a narrative's log with one holding an Episode of their own under the
narrative's id: the merge's sources stay archived toward that id, hidden from search behind
an entry that is not the merge's, and ``lint`` said nothing. It names each, with the file
and line of its mark and the ``undo`` that restores it; a person's own draft archived toward
their Episode is their mark, and an undone merge's id names nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.lint import hidden_source_message, lint_report
from everos_reflect.llm.extractive import ExtractiveLLM
from everos_reflect.markdown.marks import frontmatter_line
from everos_reflect.strategies.undo import undo_merge
from tests.reflect_fixtures import (
    ANDREW,
    make_runtime,
    replace_log_with_own_episode,
    reports,
    run_reflection,
    seed_pets,
)

#: logs replaced by the test itself, no other writer (conftest.py)
pytestmark = pytest.mark.usefixtures("settle_at_once")


def test_sources_hidden_behind_a_persons_episode_under_a_merges_id_are_named(
        root: Path) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    sources = [e.id for e in seed_pets(rt)]
    run_reflection(rt)
    [row] = reports(rt)
    narrative = row["merged_entry_id"]
    draft = f"{narrative[:-4]}0009"
    replace_log_with_own_episode(rt, narrative, draft=draft)
    Indexer(rt).scan()
    marks = {s: rt.store.path_for_id(ANDREW, s) for s in sources}

    problems = [(p["file"], p["line"], p["message"]) for p in lint_report(root)["problems"]]

    assert problems == [
        (path.relative_to(root).as_posix(), frontmatter_line(path.read_text("utf-8"), s),
         hidden_source_message(ANDREW, s, narrative)) for s, path in marks.items()]
    assert hidden_source_message(ANDREW, sources[0], narrative) == (
        f"deprecated_entries: {sources[0]} is archived toward {narrative}, where a Reflection "
        f"merge wrote its narrative, but {narrative} holds an Episode that is no narrative now "
        f"(written by hand): {sources[0]} stays hidden behind it; `everos-reflect undo "
        f"{narrative} --user u_andrew` restores the merge's sources and leaves {narrative} as "
        "it is")

    undo_merge(rt, ANDREW, narrative)  # what the message says to do
    rt.close()
    assert lint_report(root)["problems"] == []  # the draft's mark toward it is the person's
