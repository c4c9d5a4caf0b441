"""A briefing stays within its budget whatever the tiers hold: insights of 30,000 characters
without a space, a line of emoji, kana with no space, CJK text, hundreds of lessons. The budget
is counted in the bundled tokenizer's tokens, which made one ``[UNK]`` of any word longer than
100 characters: such a word counted as one token, and a 100-token briefing held 70,000
characters. Checked against a bound of characters no tokenizer decides: no token of the
vocabulary spells more than 18 characters, so a block of N tokens, one space or line break
between them at most, holds at most 19 N characters."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from everos_reflect.briefing.pack import Item, Section, pack
from everos_reflect.briefing.tokens import default_counter
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.index.sync import Indexer
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from tests.api_client import ApiClient

REF = UserRef.of("u_ops")
COUNTER = default_counter()
LONGEST_PIECE = max(len(k.removeprefix("##")) for k in COUNTER._tok.get_vocab()
                    if not k.startswith("["))
TEXTS = ["deploy" + "x" * 30_000, "\U0001f680" * 2_000, "\u3042\u3044\u3046" * 1_000,
         "\u5148\u5907\u4efd\u6570\u636e\u5e93" * 900, "word " * 6_000,
         "https://example.com/" + "a1b2c3" * 3_000]


def within(text: str, max_tokens: int) -> bool:
    return len(text) <= max_tokens * (LONGEST_PIECE + 1)


@pytest.fixture
def runtime(root: Path) -> Iterator[Runtime]:
    rt = Runtime(root, embedder=HashEmbedder())
    yield rt
    rt.close()


def seed(rt: Runtime) -> None:
    ep = rt.store.append(REF, Kind.EPISODE, {"timestamp": "2026-10-10T09:00:00+00:00",
                                             "parent_type": "memcell", "parent_id": "mc_1"},
                         {"Subject": "Deploy", "Content": "The deploy failed." + "z" * 20_000})
    for n, text in enumerate(TEXTS):
        rt.store.append(REF, Kind.INSIGHT, {
            "timestamp": f"2026-10-2{n}T09:00:00+00:00", "evidence": [ep.id, ep.id],
            "depth": 1, "status": "active"}, {"Insight": text})
    rt.store.append(REF, Kind.CONVICTION, {
        "timestamp": "2026-10-21T09:00:00+00:00", "evidence": [ep.id], "depth": 2,
        "status": "active", "key": "principles"}, {"Conviction": "q" * 40_000})
    rt.store.append_many(REF, Kind.LESSON, [(
        {"timestamp": "2026-10-20T09:00:00+00:00", "task_type": "deploy", "lesson_type": "do",
         "evidence": ["tk_20261012_0001"], "confirmations": 1 + n % 5, "depth": 1,
         "status": "active"},
        {"Lesson": TEXTS[n % len(TEXTS)][: 500 + 37 * n]}) for n in range(300)])
    Indexer(rt).scan()


@pytest.mark.parametrize("max_tokens", [40, 300, 3000])
def test_a_briefing_of_hostile_texts_stays_within_its_budget(
        runtime: Runtime, max_tokens: int) -> None:
    seed(runtime)
    resp = ApiClient(runtime)("POST", "/api/v1/memory/briefing", json={
        "user_id": REF.user_id, "query": "deploy", "task_type": "deploy",
        "max_tokens": max_tokens})
    assert resp.status_code == 200, resp.text
    data = resp.json()["data"]
    assert COUNTER.count(data["text"]) == data["tokens"] <= max_tokens
    assert within(data["text"], max_tokens), len(data["text"])
    assert sum(len(i["text"]) for i in data["items"]) <= len(data["text"])
    if max_tokens >= 300:
        assert data["items"]  # something fits: a long text is cut, not the whole block lost


@pytest.mark.parametrize("text", TEXTS, ids=["no spaces", "emoji", "kana", "cjk", "words",
                                             "url"])
def test_one_long_text_is_cut_to_its_share_in_characters_too(text: str) -> None:
    got = pack([Section("Insights", [Item("in_20261020_0001", "insight", text)])], 120,
               COUNTER, header="Memory briefing")
    assert COUNTER.count(got.text) == got.tokens <= 120
    assert within(got.text, 120), len(got.text)
    assert got.cut_ids == ["in_20261020_0001"]
