"""bench/cost.py's fake LLM writes a narrative Reflection accepts: short, and only the sources'
words — so the Reflection benches (cost.py, fleet.py) measure real merges, not rejections."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

from everos_reflect.llm.base import FactsRequest, MergeMember, MergeRequest
from everos_reflect.llm.prompts import DEFAULT_PROMPTS

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from cost import FAKE_NARRATIVE_RATIO, _fake_reply

TEXTS = [
    "Caroline went to an LGBTQ support group yesterday and it was so powerful. "
    "She did not like the coffee there.",
    "Caroline is thinking about a career in counseling. She went to the support group again "
    "on Friday with her friend Melanie.",
    "Caroline went to an LGBTQ support group yesterday and it was so powerful.",
]


def _body(mode: str = "init") -> dict:
    members = [MergeMember(f"ep_{i}", datetime(2023, 5, 1 + i, tzinfo=UTC), "Caroline", t)
               for i, t in enumerate(TEXTS)]
    existing = None
    if mode == "update":
        existing = MergeMember("ep_old", datetime(2023, 4, 1, tzinfo=UTC), "Old",
                               "Caroline adopted a cat named Oscar in April.")
    req = MergeRequest(mode, members, existing)
    return {"messages": DEFAULT_PROMPTS.merge_messages(req)}


def _words(text: str) -> set[str]:
    return {w.strip(".,!?").lower() for w in text.split()}


def test_merge_reply_is_short_and_built_from_the_sources_only() -> None:
    reply = _fake_reply(_body())
    content = reply["content"]
    source_words = sum(len(t.split()) for t in TEXTS)
    assert 0 < len(content.split()) <= FAKE_NARRATIVE_RATIO * source_words
    assert _words(content) <= _words(" ".join(TEXTS))
    # the prompt's instructions and tags never leak into the narrative
    assert "episode" not in content.lower() and "json" not in content.lower()
    # facts survive: names, negations, days
    for word in ("Caroline", "LGBTQ", "not", "counseling", "Friday", "Melanie"):
        assert word in content
    # a sentence said twice is said once
    assert content.count("LGBTQ") == 1


def test_update_reply_keeps_the_old_narrative() -> None:
    content = _fake_reply(_body("update"))["content"]
    assert "Oscar" in content


def test_facts_reply_lists_the_sentences_of_the_text_only() -> None:
    messages = DEFAULT_PROMPTS.facts_messages(
        FactsRequest(text="Ann moved to Oslo. Ann has two dogs."))
    body = {"response_format": {"json_schema": {"schema": {"properties": {"facts": {}}}}},
            "messages": messages}
    assert _fake_reply(body)["facts"] == ["Ann moved to Oslo.", "Ann has two dogs."]
