"""The briefing ranks a later version of a record above it, as search does: a block the budget
cuts keeps the current state, not the statement it replaced."""

from __future__ import annotations

from pathlib import Path

from everos_reflect.briefing.build import build_briefing
from tests.reflect_fixtures import ANDREW
from tests.test_search_recency import cars


def test_the_replacement_comes_before_the_statement_it_superseded(tmp_path: Path) -> None:
    rt, old, new = cars(tmp_path)
    # the question's words (and its vector: 1.0 against 0.95) match the old statement better
    b = build_briefing(rt, ANDREW, "Does Sam drive a Honda Civic?", max_tokens=2000)
    ids = [i.id for i in b.items]
    assert ids.index(new) < ids.index(old)  # both offered: the old value still says "before"
    scores = {i.id: i.score for i in b.items}
    assert scores[old] == 1.0 and scores[new] < 1.0  # each keeps its own similarity


def test_a_budget_for_one_record_keeps_the_current_state(tmp_path: Path) -> None:
    rt, old, new = cars(tmp_path)
    roomy = build_briefing(rt, ANDREW, "Does Sam drive a Honda Civic?", max_tokens=2000)
    record = next(i for i in roomy.items if i.id == new)
    # the smallest budget that holds the header, one record line and the "left out" line
    tight = next(b for n in range(20, 200)
                 if (b := build_briefing(rt, ANDREW, "Does Sam drive a Honda Civic?",
                                         max_tokens=n)).items)
    assert [i.id for i in tight.items] == [record.id]
    assert old in tight.omitted_ids
