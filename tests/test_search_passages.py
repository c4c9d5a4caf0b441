"""Passage-level results: one entry may answer with several passages, each its own ranked item
with its own snippet and date, so a merged narrative serves a caller's word budget as the
Episodes it replaced did."""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.embedding import HashEmbedder
from everos_reflect.errors import EverosError
from everos_reflect.index.search import SearchHit, search, with_passages
from everos_reflect.index.snippet import make_passages, make_snippet
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings

ANDREW = UserRef.of("u_andrew")

NARRATIVE = ("2026-08-10: Andrew moved to Portland. Andrew took up sailing on weekends.\n\n"
             "2026-09-10: Andrew repainted the kitchen blue.\n\n"
             "2026-10-10: Andrew bought a sailing boat called Tern. Andrew named it after a bird.")


def test_further_passages_open_on_other_anchors_and_never_share_a_sentence() -> None:
    anchors = ["Andrew bought a sailing boat called Tern", "Andrew took up sailing on weekends",
               "Jess plays the cello", "Andrew named it after a bird"]
    first, more = make_passages(NARRATIVE, "when did Andrew go sailing", date="2026-10-11",
                                max_words=14, anchors=anchors, limit=3)
    # the first passage is exactly the one-passage snippet
    assert first == make_snippet(NARRATIVE, "when did Andrew go sailing", date="2026-10-11",
                                 max_words=14, anchors=anchors)
    assert first.text.startswith("Andrew bought a sailing boat called Tern.")
    assert first.date == "2026-10-10"
    # further passages open on the next anchors no passage holds yet, each with its own date;
    # the cello anchor is stated by no sentence and opens nothing
    second, third = more
    assert (second.anchor, third.anchor) == (1, 3)
    assert second.snippet.text == "Andrew took up sailing on weekends."
    assert second.snippet.date == "2026-08-10"
    assert third.snippet.text == "Andrew named it after a bird."
    assert third.snippet.date == "2026-10-10"
    served = [first.sentences, second.snippet.sentences, third.snippet.sentences]
    assert len({i for s in served for i in s}) == sum(len(s) for s in served)  # no overlap
    # the limit counts the first passage
    assert len(make_passages(NARRATIVE, "when did Andrew go sailing", max_words=14,
                             anchors=anchors, limit=2)[1]) == 1
    # limit 1 (or no anchors): the snippet alone
    assert make_passages(NARRATIVE, "sailing", anchors=anchors, limit=1)[1] == []
    assert make_passages(NARRATIVE, "sailing", limit=3)[1] == []


def test_a_further_passage_stays_within_its_day_and_out_of_served_sentences() -> None:
    text = ("2026-08-10: Andrew moved to Portland. Andrew took up sailing. Andrew sails alone.")
    first, more = make_passages(text, "sailing", max_words=40,
                                anchors=["Andrew sails alone", "Andrew moved to Portland"],
                                limit=2)
    # one day: the first passage takes both sailing sentences, the second only what is left
    assert first.sentences == (1, 2)
    assert [p.snippet.sentences for p in more] == [(0,)]


def _put(rt: Runtime, entry_id: str, text: str, *, when: str = "2026-10-11T09:00:00+00:00",
         parent_type: str = "memcell", parent_id: str | None = None) -> None:
    kind = Kind.ATOMIC_FACT if entry_id.startswith("af") else Kind.EPISODE
    rt.vectors.upsert(kind, [{
        "id": entry_id, "app_id": ANDREW.app, "project_id": ANDREW.project,
        "user_id": ANDREW.user_id, "ts": 1_790_000_000.0, "timestamp": when,
        "subject": "", "text": text, "parent_type": parent_type,
        "parent_id": parent_id or "mc_" + entry_id, "session_id": None,
        "embed_model": rt.embedder.name, "vector": rt.embedder.embed([text])[0]}])


@pytest.fixture
def rt(tmp_path: Path) -> Runtime:
    runtime = Runtime(tmp_path, Settings(), embedder=HashEmbedder(64))
    _put(runtime, "ep_20261011_0001", NARRATIVE, parent_type="cluster")
    sentences = ["Andrew moved to Portland", "Andrew took up sailing on weekends",
                 "Andrew repainted the kitchen blue", "Andrew bought a sailing boat called Tern",
                 "Andrew named it after a bird"]
    for n, fact in enumerate(sentences, start=1):
        _put(runtime, f"af_20261011_000{n}", fact, parent_type="episode",
             parent_id="ep_20261011_0001")
    _put(runtime, "ep_20261001_0001", "Andrew fixed the garden fence with his sister.")
    return runtime


def test_search_serves_several_passages_of_one_entry_as_items_of_their_own(
        rt: Runtime) -> None:
    query = "Andrew sailing boat weekends"
    [one] = [h for h in search(rt, query, mode="hybrid", top_k=5, passages_per_entry=1)
             if h.id == "ep_20261011_0001"]
    hits = search(rt, query, mode="hybrid", top_k=5, passages_per_entry=3)
    mine = [h for h in hits if h.id == "ep_20261011_0001"]
    assert len(mine) >= 2
    # the entry's own item is unchanged; further ones follow it, each its own passage and date
    assert mine[0].passage == 0 and mine[0].snippet == one.snippet
    assert [h.passage for h in mine] == list(range(len(mine)))
    assert len({h.snippet for h in mine}) == len(mine)
    # each snippet is text of the entry, dated by its own paragraph
    for h in mine:
        line = next(ln for ln in NARRATIVE.splitlines() if h.snippet.split(".")[0] in ln)
        assert line.startswith(f"{h.snippet_date}: ")
    assert all(later.score < mine[0].score for later in mine[1:])
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # top_k counts items, and no entry fills more than passages_per_entry of them
    assert len(search(rt, query, mode="hybrid", top_k=2, passages_per_entry=3)) == 2
    assert len([h for h in search(rt, query, mode="hybrid", top_k=10, passages_per_entry=2)
                if h.id == "ep_20261011_0001"]) <= 2
    # the API shape: every item has the SPEC §7 fields, and which passage it is
    data = mine[1].to_dict()
    assert {"id", "subject", "episode", "session_id", "timestamp", "parent_type", "score",
            "kind", "snippet", "passage"} <= set(data)
    assert "more" not in data and "snippet_sentences" not in data


def test_keyword_and_vector_search_keep_one_item_per_entry(rt: Runtime) -> None:
    for mode in ("keyword", "vector"):
        hits = search(rt, "Andrew sailing", mode=mode, top_k=10, passages_per_entry=3)
        assert len({h.id for h in hits}) == len(hits)


def test_passages_per_entry_must_be_a_positive_integer(rt: Runtime) -> None:
    for bad in (0, -1, True, 1.5):
        with pytest.raises(EverosError, match="passages_per_entry"):
            search(rt, "sailing", passages_per_entry=bad)  # type: ignore[arg-type]


def _hit(entry_id: str, score: float, more: list | None = None) -> SearchHit:
    return SearchHit(id=entry_id, subject="", episode="", session_id=None, timestamp=None,
                     parent_type=None, parent_id=None, score=score, user_id="u", app_id="a",
                     project_id="p", snippet=f"{entry_id} best", more=more or [])


def test_a_further_passage_ranks_where_its_share_of_the_entry_score_puts_it() -> None:
    a = _hit("a", 1.0, [("a second", "2026-01-02", (3,), "fact", 0.6),
                        ("a third", None, (5,), "fact", 0.3)])
    b = _hit("b", 0.8)
    c = _hit("c", 0.5, [("c second", None, (1,), "fact", 0.99)])
    items = with_passages([a, b, c], 2)
    assert [(h.id, h.passage) for h in items] == [("a", 0), ("b", 0), ("a", 1), ("c", 0),
                                                  ("c", 1)]
    assert items[2].snippet == "a second" and items[2].snippet_date == "2026-01-02"
    assert items[2].score == pytest.approx(0.6)
    # one passage per entry: the hits as they were
    assert [(h.id, h.passage) for h in with_passages([a, b, c], 1)] == [("a", 0), ("b", 0),
                                                                        ("c", 0)]
