"""A person's worldview of thousands of words takes at most its share of a briefing while the
lessons, insights and records that answer the query want the room; the answer names what it
cut (``cut_ids``) and what it left out."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from everos_reflect.briefing.build import build_briefing
from everos_reflect.briefing.pack import Item, Section, item_line, pack
from everos_reflect.briefing.tokens import default_counter
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.index.sync import Indexer
from everos_reflect.model import Kind
from everos_reflect.runtime import Runtime
from tests.api_client import ApiClient
from tests.test_briefing import REF, _seed

COUNTER = default_counter()
SHARE = 1 / 3  # the worldview's share of a briefing (docs/briefing.md)
KEYS = ("identity", "strategy", "risks", "principles", "commitments")


@pytest.fixture
def runtime(root: Path) -> Iterator[Runtime]:
    rt = Runtime(root, embedder=HashEmbedder())
    yield rt
    rt.close()


def _worldview(rt: Runtime, words: int, keys: tuple[str, ...] = KEYS) -> list[str]:
    """Convictions written by hand, ``words`` words each, one per key."""
    ids = []
    for n, key in enumerate(keys):
        text = " ".join(f"{key}{w}" for w in range(words))
        ids.append(rt.store.append(REF, Kind.CONVICTION, {
            "timestamp": f"2026-10-2{n}T09:00:00+00:00", "key": key, "depth": 2,
            "status": "active", "evidence": ["in_20261012_0001"]}, {"Conviction": text}).id)
    return ids


def _tokens_of(b, kind: str) -> int:
    return sum(COUNTER.count(item_line(i)) for i in b.items if i.kind == kind)


def test_a_worldview_of_thousands_of_words_leaves_room_for_the_query(runtime: Runtime) -> None:
    ids = _seed(runtime)
    wv = _worldview(runtime, 2000)
    Indexer(runtime).scan()
    b = build_briefing(runtime, REF, "What usually breaks our deploys?", task_type="deploy",
                       max_tokens=1000, min_similarity=-1.0)
    assert b.tokens <= 1000
    got = [i.id for i in b.items]
    # the lessons, the insight and the Episodes that answer it are all there
    for name in ("ls_top", "ls_contested", "ls_low", "in_active", "Deploy failed"):
        assert ids[name] in got, name
    kept = [i.id for i in b.items if i.kind == "conviction"]
    by_key = [i for _, i in sorted(zip(KEYS, wv, strict=True))]  # the block's order
    assert kept and kept == by_key[:len(kept)]
    # what was cut and what was left out of the worldview is said
    assert set(b.cut_ids) == set(kept)
    assert all(i.text.endswith(" …") for i in b.items if i.kind == "conviction")
    assert b.omitted["conviction"] == len(wv) - len(kept)
    assert set(wv) - set(kept) <= set(b.omitted_ids)
    assert "Left out for budget: " in b.text and "conviction" in b.text.splitlines()[-1]


def test_a_worldview_alone_takes_the_room_nothing_else_wants(runtime: Runtime) -> None:
    wv = _worldview(runtime, 2000)
    Indexer(runtime).scan()
    b = build_briefing(runtime, REF, "What usually breaks our deploys?", max_tokens=1000)
    assert {i.kind for i in b.items} == {"conviction"}
    assert b.tokens <= 1000
    # more than the share: with nothing else to brief, the worldview is not cut to a third
    assert _tokens_of(b, "conviction") > 1000 * SHARE + 100
    assert b.cut_ids and set(b.cut_ids) <= set(wv)


def test_the_api_answer_names_the_items_it_cut(runtime: Runtime) -> None:
    _seed(runtime)
    wv = _worldview(runtime, 2000, KEYS[:1])
    Indexer(runtime).scan()
    resp = ApiClient(runtime)("POST", "/api/v1/memory/briefing", json={
        "user_id": REF.user_id, "query": "What usually breaks our deploys?",
        "max_tokens": 600})
    assert resp.status_code == 200
    data = resp.json()["data"] if "data" in resp.json() else resp.json()
    assert data["cut_ids"] == wv
    assert data["tokens"] <= 600


def test_a_section_held_to_its_share_gives_the_next_one_its_room() -> None:
    big = [Item(f"wv_20261012_{n:04d}", "conviction", "belief " * 80) for n in range(1, 21)]
    small = [Item(f"ep_20261012_{n:04d}", "episode", f"episode {n} said this")
             for n in range(1, 11)]
    unheld = pack([Section("W", big), Section("E", small)], 600, COUNTER, header="h")
    # the defect: the worldview took the room of all but what its last line left
    assert sum(i.kind == "episode" for i in unheld.items) < len(small) / 2
    held = pack([Section("W", big, share=SHARE), Section("E", small)], 600, COUNTER,
                header="h")
    assert [i.id for i in held.items if i.kind == "episode"] == [i.id for i in small]
    assert held.tokens <= 600
    assert held.cut_ids and set(held.cut_ids) <= {i.id for i in big}
    kept = [i.id for i in held.items if i.kind == "conviction"]
    assert held.omitted == {"conviction": len(big) - len(kept)}
    assert kept and set(held.cut_ids) == set(kept[-1:])  # the last one cut to the share
