"""Hybrid search of an Episode without atomic facts (every ``add``ed Episode until a
Reflection run) that only the keyword search finds: a name or a rare word its vector does not
bring among the vector candidates. Ranked by one list of three, it lost to every entry two
lists ranked anywhere near the top, however weakly; its one passage (its own text) now takes
the by-passage ranking where the keyword search placed it."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from everos_reflect.embedding import HashEmbedder
from everos_reflect.index import search as search_module
from everos_reflect.index.search import search
from everos_reflect.model import UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from tests.test_search import put

ANDREW = UserRef.of("u_andrew")
QUERY = "Zanzibar"


def _root(tmp_path: Path) -> Runtime:
    rt = Runtime(tmp_path, Settings(), embedder=HashEmbedder(64))
    toward = rt.embedder.embed([QUERY])[0]
    rng = np.random.default_rng(7)
    # 24 Episodes near the query by vector and without its word: they fill the vector
    # candidates (20 for a top 5); the first six have a fact as near
    for n in range(24):
        entry = f"ep_202507{n + 1:02d}_0001"
        vector = toward + 0.3 * rng.normal(size=toward.shape)
        put(rt, ANDREW, entry, "Travel", f"Andrew talked about travel plans, round {n}",
            vector=vector.astype(np.float32))
        if n < 6:
            put(rt, ANDREW, f"af_202507{n + 1:02d}_0001", "", f"Andrew plans trip {n}",
                parent_type="episode", parent_id=entry, vector=vector.astype(np.float32))
    # the one Episode that says the word, added since the last Reflection run: no facts, and
    # a vector pointing away from the query's
    put(rt, ANDREW, "ep_20250901_0001", "Trip", "Andrew booked a trip to Zanzibar",
        vector=(-toward).astype(np.float32))
    return rt


def test_a_fact_less_episode_found_by_keyword_alone_is_ranked_by_its_passage(
        tmp_path: Path) -> None:
    rt = _root(tmp_path)
    keyword = [h.id for h in search(rt, QUERY, mode="keyword", user_id="u_andrew")]
    vector = [h.id for h in search(rt, QUERY, mode="vector", user_id="u_andrew", top_k=20,
                                   passages_per_entry=1)]
    assert keyword == ["ep_20250901_0001"] and "ep_20250901_0001" not in vector
    hits = search(rt, QUERY, user_id="u_andrew", top_k=5, passages_per_entry=1)
    assert hits[0].id == "ep_20250901_0001", [h.id for h in hits]
    assert hits[0].snippet == "Andrew booked a trip to Zanzibar"


def test_one_with_facts_found_by_keyword_alone_keeps_out_of_the_passage_ranking(
        tmp_path: Path) -> None:
    # "No fact among the nearest" is not "no facts": its facts answer for it, as before
    rt = _root(tmp_path)
    put(rt, ANDREW, "af_20250901_0001", "", "Andrew paid the deposit",
        parent_type="episode", parent_id="ep_20250901_0001",
        vector=(-rt.embedder.embed([QUERY])[0]).astype(np.float32))
    by_text = rt.vectors.search_text(search_module.Kind.EPISODE, QUERY, k=20)
    order = search_module._passage_order(rt.vectors, [], {}, [], where=None, by_text=by_text)
    assert order == []
