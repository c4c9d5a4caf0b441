"""The packer tokenizes only what may still fit, and answers as it did when it tokenized every
item: the same blocks as recorded before (``tests/data/briefing_golden.json``), token bounds
that never overshoot, and a 20,000-lesson pack that tokenizes a few dozen lines, not 40,000."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from everos_reflect.briefing.build import build_briefing
from everos_reflect.briefing.pack import Item, Section, _capped, item_line, line_floor, pack
from everos_reflect.briefing.tokens import TokenCounter, default_counter
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.index.sync import Indexer
from everos_reflect.model import Kind
from everos_reflect.runtime import Runtime
from tests.briefing_fixtures import (
    BUDGETS,
    GOLDEN_QUERIES,
    LOG_DAY,
    REF,
    lesson_rows,
    pack_sections,
    summary,
)

COUNTER = default_counter()
GOLDEN = json.loads((Path(__file__).parent / "data" / "briefing_golden.json").read_text())
HEADER = "Memory briefing (instance question)"

_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=300) | \
    st.text(st.sampled_from(list("ab1 .,-_\t\n\x07\x0b\x1cé\u0301\u3000先K;·…")), max_size=60)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("budget", BUDGETS)
def test_pack_answers_as_recorded_before(seed: int, budget: int) -> None:
    got = pack(pack_sections(seed), budget, COUNTER, header=HEADER)
    assert summary(got) == GOLDEN["pack"][f"{seed}/{budget}"]


def test_build_briefing_answers_as_recorded_before(root: Path) -> None:
    rt = Runtime(root, embedder=HashEmbedder())
    try:
        rt.store.append(REF, Kind.EPISODE, {"timestamp": "2026-10-12T09:00:00+00:00",
                                            "parent_type": "memcell", "parent_id": "mc_1"},
                        {"Subject": "Deploy",
                         "Content": "The registry timed out during the deploy."}, day=LOG_DAY)
        for meta, sections in lesson_rows(5):
            rt.store.append(REF, Kind.LESSON, meta, sections, day=LOG_DAY)
        Indexer(rt).scan()
        for query in GOLDEN_QUERIES:
            for budget in BUDGETS:
                got = build_briefing(rt, REF, query, task_type="deploy", max_tokens=budget,
                                     min_similarity=-1.0)
                assert summary(got) == GOLDEN["build"][f"{query}/{budget}"], (query, budget)
    finally:
        rt.close()


@settings(max_examples=400, deadline=None)
@given(text=_text)
def test_token_bounds_never_overshoot(text: str) -> None:
    assert COUNTER.at_least(text) <= COUNTER.count(text)
    if COUNTER.surely_within(text, 24):
        assert COUNTER.count(text) <= 24


@settings(max_examples=300, deadline=None)
@given(item=st.builds(Item, id=_text, kind=st.sampled_from(["lesson", "episode"]), text=_text,
                      timestamp=st.none() | _text, evidence=st.lists(_text, max_size=7),
                      note=_text),
       cap=st.integers(24, 400))
def test_a_line_floor_never_exceeds_the_line(item: Item, cap: int) -> None:
    assert line_floor(item, cap, COUNTER) <= COUNTER.count(item_line(_capped(item, cap,
                                                                               COUNTER)))


class _Tally(TokenCounter):
    """The bundled counter, counting the texts it tokenizes."""

    def __init__(self) -> None:
        from tokenizers import Tokenizer

        from everos_reflect.embedding.local import default_tokenizer_path

        super().__init__(Tokenizer.from_file(str(default_tokenizer_path())))
        self.texts = 0

    def count(self, text: str) -> int:
        self.texts += 1
        return super().count(text)

    def count_many(self, texts: list[str]) -> list[int]:
        self.texts += len(texts)
        return super().count_many(texts)

    def truncate(self, text: str, limit: int, marker: str = " …") -> str:
        self.texts += 1
        return super().truncate(text, limit, marker)


def test_packing_20000_lessons_tokenizes_only_what_may_fit() -> None:
    # Every lesson's line was cut to size and counted (40,000 texts tokenized, 3 s a call at
    # 20,000 lessons of one type) to keep the dozen that fit a 1,000-token budget.
    lessons = [Item(f"ls_20261012_{n:05d}", "lesson",
                    f"Check the registry credentials before rollout number {n}.",
                    "2026-10-12T09:00:00+00:00", [f"tk_20261012_{n % 999:04d}"], float(n % 7),
                    f"do, confirmed {n % 7}x") for n in range(20_000)]
    tally = _Tally()
    got = pack([Section("Lessons for deploy", lessons)], 1000, tally, header=HEADER)
    assert len(got.items) > 10 and len(got.omitted_ids) == 20_000 - len(got.items)
    assert tally.texts < 4 * len(got.items) + 10, tally.texts
    assert got.text == pack([Section("Lessons for deploy", lessons)], 1000, COUNTER,
                            header=HEADER).text


@pytest.mark.parametrize("text", [
    "Check the registry credentials and the image tag before each rollout. " * 30,
    "部署前先检查日志并确认镜像仓库可用。" * 100,  # no ASCII word to count
    "x" * 5_000,  # one word WordPiece does not spell: it counts a token a character
])
def test_packing_many_long_lessons_tokenizes_only_what_may_fit(
        text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # A text over an item's share of the budget may be cut, and its line's floor counted one
    # token for it: each of 2,000 long lessons was cut to size and counted (5 s a call, 8 s
    # in Chinese) to keep the two that fit a 1,000-token budget.
    lessons = [Item(f"ls_20261012_{n:05d}", "lesson", f"{n}: {text}",
                    "2026-10-12T09:00:00+00:00", [f"tk_20261012_{n % 999:04d}"], 1.0,
                    "do, confirmed 1x") for n in range(2_000)]
    tally = _Tally()
    got = pack([Section("Lessons for deploy", lessons)], 1000, tally, header=HEADER)
    assert len(got.items) >= 2 and len(got.omitted_ids) == 2_000 - len(got.items)
    assert tally.texts < 4 * len(got.items) + 10, tally.texts
    # the block every line counted gives: pruning leaves out only what could not fit
    monkeypatch.setattr("everos_reflect.briefing.pack.line_floor", lambda *args: 0)
    assert got.text == pack([Section("Lessons for deploy", lessons)], 1000, COUNTER,
                            header=HEADER).text
