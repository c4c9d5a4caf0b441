"""``[llm] max_prompt_tokens`` bounds every request before it is sent (docs/limits.md).

A merge's prompt was bounded only by ``max_sources_per_merge`` × ``max_entry_bytes`` (50 ×
256 KiB, ~12 MiB): it was sent whole, and only a server answering 413 set the cluster aside.
Now a cluster too large for one request is merged in chronological parts, one part a run; one
whose least mergeable part is already too large is set aside unsent, the run record and its
audit row naming the size and the limit. Every other task's request is refused unsent by the
client the same way. The offline provider sends no prompt and is not bounded. Through the
real client and the loopback fake server, whose recorded request bodies show what was sent.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.embedding import HashEmbedder
from everos_reflect.engine.engine import Engine, list_runs
from everos_reflect.errors import ConfigError, ProviderUnavailable
from everos_reflect.index.audit import list_derivations
from everos_reflect.llm import ExtractiveLLM, FactsRequest, MergeRequest
from everos_reflect.llm.budget import estimate_tokens, text_tokens
from everos_reflect.llm.openai_llm import OpenAILLM
from everos_reflect.llm.prompts import Prompts
from everos_reflect.llm.tasks import Record, TaskRequest
from everos_reflect.model import Entry, Kind
from everos_reflect.runtime import Runtime
from everos_reflect.settings import LLMSettings, packaged_text, parse_settings
from everos_reflect.strategies.consolidate import member_of
from everos_reflect.strategies.reflect import NAME
from everos_reflect.strategies.setaside import set_aside_clusters
from tests.reflect_fixtures import (
    ANDREW,
    add_episode,
    check_invariants,
    make_runtime,
    reports,
    run_reflection,
    seed_pets,
)
from tests.test_aside_settings import ADA, openai_settings, run

pytest_plugins = ["tests.fake_openai"]

FILLER = "Andrew and Toby met the neighbours at the park gate and talked about the weather. "
CONTENT_RE = re.compile(r"<content>\n(.*?)\n</content>", re.DOTALL)


def walks(rt: Runtime, n: int = 4) -> list[Entry]:
    """``n`` long Episodes of one cluster, a week apart: each ~1,700 bytes (~570 tokens)."""
    return [add_episode(rt, ANDREW, f"2026-08-{2 + 7 * i:02d}T09:00:00+00:00",
                        f"Andrew walked Toby in week {i + 1}",
                        f"Andrew walked his dog Toby along the river in week {i + 1}. "
                        + FILLER * 20) for i in range(n)]


def merge_tokens(sources: list[Entry]) -> int:
    """The estimated tokens of the init merge request of ``sources``, as a run sends it."""
    request = MergeRequest("init", [member_of(e) for e in sources])
    return estimate_tokens(Prompts().merge_messages(request))


def answer(body: dict[str, Any]) -> dict[str, Any]:
    """A faithful model: a narrative of each distinct sentence shown, once; its facts."""
    text = next(m["content"] for m in body["messages"] if m["role"] == "user")
    if body["response_format"]["json_schema"]["name"] == "atomic_facts":
        narrative = text.split("<text>\n", 1)[1].split("\n</text>", 1)[0]
        return {"facts": [s.strip() + "." for s in narrative.split(".") if s.strip()]}
    sentences = [s.strip() for block in CONTENT_RE.findall(text)
                 for s in block.split(". ") if s.strip()]
    kept = list(dict.fromkeys(s.rstrip(".") + "." for s in sentences))
    return {"title": "Andrew walks Toby", "content": " ".join(kept)}


def client(fake: Any, budget: int | None) -> OpenAILLM:
    return OpenAILLM(model="fake-model", base_url=fake.base_url, api_key="k", max_retries=0,
                     timeout_seconds=10, max_prompt_tokens=budget, sleep=lambda s: None)


def sent(fake: Any) -> list[dict[str, Any]]:
    return fake.chat_bodies()


def test_an_oversized_cluster_is_merged_in_chronological_parts_none_over_the_budget(
        root: Path, fake_openai: Any) -> None:
    fake_openai.script(*[answer] * 8)
    llm = client(fake_openai, None)
    rt = make_runtime(root, llm)
    sources = walks(rt)
    # two sources fit, not three
    llm.max_prompt_tokens = budget = (merge_tokens(sources[:2]) + merge_tokens(sources[:3])) // 2

    first = run_reflection(rt, "run_1")

    assert first["merged"] == 1 and first["split_to_fit"] == 1
    assert first["deferred_sources"] == 2
    merge_body = sent(fake_openai)[0]
    text = merge_body["messages"][1]["content"]
    assert [s.id for s in sources if f'id="{s.id}"' in text] == [s.id for s in sources[:2]]
    [row] = reports(rt)
    assert row["status"] == "ok" and row["source_members"] == [s.id for s in sources[:2]]

    second = run_reflection(rt, "run_2")  # the rest, folded into the narrative in order

    assert second["merged"] == 1 and not second.get("split_to_fit")
    assert reports(rt)[-1]["mode"] == "update"
    assert reports(rt)[-1]["source_members"][-2:] == [s.id for s in sources[2:]]
    assert all(estimate_tokens(b["messages"]) <= budget for b in sent(fake_openai))
    entries = check_invariants(rt)
    assert all(entries[s.id].deprecated_by for s in sources)


def test_a_cluster_whose_least_part_is_too_large_is_set_aside_unsent_saying_why(
        root: Path, fake_openai: Any) -> None:
    llm = client(fake_openai, None)
    rt = make_runtime(root, llm)
    sources = walks(rt, 3)
    size = merge_tokens(sources[:2])
    llm.max_prompt_tokens = budget = size - 1  # not even the two oldest sources fit
    before = {p: p.read_bytes() for p in rt.store.iter_files()}

    outcome = Engine(rt).trigger(NAME, force=True, timeout=60)

    assert sent(fake_openai) == []  # nothing was sent
    assert outcome.counts["failed"] == 1 and outcome.counts["set_aside"] == 1
    why = (f"the merge prompt of its 2 oldest sources is about {size:,} tokens, over "
           f"llm.max_prompt_tokens ({budget:,}); not sent")
    [row] = reports(rt)
    assert row["status"] == "failed" and row["error"].startswith(why)
    assert "llm.max_prompt_tokens change" in row["error"]
    assert why in (list_runs(rt, strategy=NAME)[0]["error"] or "")
    assert {p: p.read_bytes() for p in rt.store.iter_files()} == before
    [aside] = set_aside_clusters(rt)
    assert aside.reason.startswith(why) and aside.members == tuple(s.id for s in sources)

    assert run_reflection(rt, "run_again") == {}  # unchanged: not tried again
    assert len(reports(rt)) == 1

    rt.__dict__["llm"] = client(fake_openai, 100_000)  # a larger budget brings it back
    fake_openai.script(*[answer] * 2)
    assert run_reflection(rt, "run_larger")["merged"] == 1
    assert len(sent(fake_openai)) == 2


def facts_tokens(sources: list[Entry], ratio: float) -> int:
    """The estimated tokens of the fact extraction of a narrative ``ratio`` times as long as
    ``sources``, as a run bounds it before merging."""
    instructions = estimate_tokens(Prompts().facts_messages(FactsRequest(text="")))
    return instructions + math.ceil(ratio * text_tokens("\n".join(e.content for e in sources)))


def test_a_merge_is_fitted_so_its_fact_extraction_fits_too_before_it_is_paid(
        root: Path, fake_openai: Any) -> None:
    fake_openai.script(*[answer] * 2)
    llm = client(fake_openai, None)
    rt = make_runtime(root, llm)
    sources = walks(rt)
    # all four merge within the budget, but the facts of a narrative twice as long as more
    # than two (max_narrative_ratio 2) would not fit
    budget = (facts_tokens(sources[:2], 2.0) + facts_tokens(sources[:3], 2.0)) // 2
    assert merge_tokens(sources) <= budget
    llm.max_prompt_tokens = budget

    counts = run_reflection(rt, max_narrative_ratio=2.0)

    assert counts["merged"] == 1 and counts["split_to_fit"] == 1
    merge_body, facts_body = sent(fake_openai)
    text = merge_body["messages"][1]["content"]
    assert [s.id for s in sources if f'id="{s.id}"' in text] == [s.id for s in sources[:2]]
    assert facts_body["response_format"]["json_schema"]["name"] == "atomic_facts"
    assert all(estimate_tokens(b["messages"]) <= budget for b in sent(fake_openai))


def test_a_cluster_whose_fact_extraction_cannot_fit_is_set_aside_before_its_merge_is_paid(
        root: Path, fake_openai: Any) -> None:
    llm = client(fake_openai, 3_000)
    rt = make_runtime(root, llm)
    sources = walks(rt, 2)
    assert merge_tokens(sources) <= 3_000  # the merge alone would be sent
    wordy = "Extract each fact of the text, one short sentence each. " * 110 + "$text"
    # in ome.toml too, where `status` and `clusters` read the prompts the set-aside key holds
    (root / "ome.toml").write_text(f'[strategies.{NAME}.prompts]\nextract_facts = "{wordy}"\n')

    counts = run_reflection(rt, prompts={"extract_facts": wordy})

    assert sent(fake_openai) == []  # neither the merge nor its facts call
    assert counts["failed"] == 1 and counts["set_aside"] == 1
    [row] = reports(rt)
    assert row["status"] == "failed" and row["prompt_tokens"] == 0
    assert row["error"].startswith("the fact extraction after merging its 2 oldest sources")
    assert "over llm.max_prompt_tokens (3,000); neither call sent" in row["error"]
    [aside] = set_aside_clusters(rt)  # `status` and `clusters` list it, saying why
    assert aside.reason.startswith("the fact extraction after merging its 2 oldest sources")


def test_a_note_a_person_added_counts_toward_the_fact_extraction_before_the_merge_is_paid(
        root: Path, fake_openai: Any) -> None:
    # A merge sends a member's own sections (## Notes) with its Content and the narrative keeps
    # them; the fact extraction was bounded by the Contents alone, so the merge was paid, its
    # narrative found too long for its facts call, and the same merge paid again every run.
    fake_openai.script(*[answer] * 2)
    llm = client(fake_openai, None)
    rt = make_runtime(root, llm)
    note = " ".join(f"Toby sniffed lamp post number {i} on the way home." for i in range(30))
    sources = [rt.store.append(
        ANDREW, Kind.EPISODE,
        {"timestamp": f"2026-08-0{d}T09:00:00+00:00", "parent_type": "memcell"},
        {"Subject": "Andrew walked Toby", "Content": f"Andrew walked Toby on August {d}.",
         "Notes": note if d == 2 else "Toby was tired."}, day=date(2026, 8, d))
        for d in (2, 3)]
    wordy = "Extract each fact of the text, one short sentence each. " * 200 + "$text"
    instructions = estimate_tokens(Prompts(extract_facts=wordy).facts_messages(
        FactsRequest(text="")))
    llm.max_prompt_tokens = budget = instructions + text_tokens(
        "\n".join(e.content for e in sources)) + 50
    assert merge_tokens(sources) <= budget  # the merge alone would be sent

    counts = run_reflection(rt, prompts={"extract_facts": wordy})

    assert sent(fake_openai) == []  # neither the merge nor its facts call
    assert counts["failed"] == 1 and counts["set_aside"] == 1, counts
    [row] = reports(rt)
    assert row["error"].startswith("the fact extraction after merging its 2 oldest sources")


def test_a_narrative_too_long_for_its_fact_extraction_fails_the_run_not_set_aside(
        root: Path, fake_openai: Any) -> None:
    def long_narrative(body: dict[str, Any]) -> dict[str, Any]:
        return {"title": "Andrew walks Toby", "content": FILLER * 100}

    fake_openai.script(long_narrative, long_narrative)
    llm = client(fake_openai, None)
    rt = make_runtime(root, llm)
    sources = walks(rt, 2)
    llm.max_prompt_tokens = budget = merge_tokens(sources) + 100

    counts = run_reflection(rt, "run_1")

    [merge_body] = sent(fake_openai)  # the facts call was not sent
    assert estimate_tokens(merge_body["messages"]) <= budget
    assert counts["failed"] == 1 and not counts.get("set_aside")
    [row] = reports(rt)
    assert row["status"] == "failed" and row["prompt_tokens"] == 11  # the merge's, paid
    assert row["error"].startswith("the merge's narrative (1,500 words) is too long for its "
                                   "fact extraction: the prompt is about ")
    assert "merged again next run (not set aside)" in row["error"]
    assert set_aside_clusters(rt) == []

    assert run_reflection(rt, "run_2")["failed"] == 1  # asked again
    assert len(sent(fake_openai)) == 2


def test_a_cluster_within_the_budget_is_sent_whole(root: Path, fake_openai: Any) -> None:
    fake_openai.script(*[answer] * 2)
    rt = make_runtime(root, client(fake_openai, 100_000))
    sources = seed_pets(rt)

    counts = run_reflection(rt)

    assert counts["merged"] == 1 and not counts.get("split_to_fit")
    assert not counts.get("deferred_sources")
    text = sent(fake_openai)[0]["messages"][1]["content"]
    assert all(f'id="{s.id}"' in text for s in sources)


def test_the_offline_provider_merges_a_large_cluster_whole_whatever_the_budget(
        root: Path) -> None:
    rt = make_runtime(root, ExtractiveLLM(HashEmbedder(64)))
    rt.settings = replace(rt.settings, llm=replace(rt.settings.llm, max_prompt_tokens=1_000))
    sources = walks(rt)

    counts = run_reflection(rt)

    assert counts["merged"] == 1 and not counts.get("split_to_fit")
    assert reports(rt)[0]["source_members"] == [s.id for s in sources]


def test_any_task_over_the_budget_fails_unsent_as_refused_for_good(fake_openai: Any) -> None:
    llm = client(fake_openai, 1_000)
    record = Record("new", "episode", "Shipped release 4 past review. " * 200)

    with pytest.raises(ProviderUnavailable) as info:
        llm.run_task("importance", TaskRequest(records=(record,)))

    assert info.value.permanent
    assert "over llm.max_prompt_tokens (1,000); not sent" in str(info.value)
    assert sent(fake_openai) == []


#: 500 characters of each: 1,500 bytes, 500 tokens at 3 bytes a token, but up to a token or
#: two a character for the model.
WIDE_TEXTS = {"chinese": "评审被跳过了" * 84, "japanese": "ひらがなカタ" * 84,
              "korean": "한국어로쓴기" * 84}


@pytest.mark.parametrize("script", sorted(WIDE_TEXTS))
def test_a_cjk_prompt_within_3_bytes_a_token_but_over_at_2_a_character_is_not_sent(
        fake_openai: Any, script: str) -> None:
    llm = client(fake_openai, 1_000)
    record = Record("new", "episode", WIDE_TEXTS[script][:500])

    with pytest.raises(ProviderUnavailable) as info:
        llm.run_task("importance", TaskRequest(records=(record,)))

    assert "over llm.max_prompt_tokens (1,000); not sent" in str(info.value)
    assert sent(fake_openai) == []


def test_english_of_the_same_bytes_is_still_counted_3_bytes_a_token_and_sent(
        fake_openai: Any) -> None:
    fake_openai.script('{"importance": 5}')
    llm = client(fake_openai, 1_000)
    record = Record("new", "episode", ("Shipped the release. " * 72)[:1_500])

    llm.run_task("importance", TaskRequest(records=(record,)))

    [body] = sent(fake_openai)
    assert record.text in body["messages"][1]["content"]


@pytest.mark.parametrize(("text", "tokens"), [
    ("Reviews get skipped", 7),          # ASCII: 19 bytes, 3 a token
    ("评审被跳过", 10),                   # Han: 2 a character
    ("ひらがな、カタカナ", 18),            # Kana and CJK punctuation
    ("한국어", 6),                        # Hangul syllables
    ("ＡＢＣ", 6),                        # full-width forms
    ("Привет", 6),                       # Cyrillic: 2 bytes, one token each
    ("café 😀", 5),                      # 4 ASCII bytes (4/3), é one, the emoji two
])
def test_the_estimate_counts_each_script_on_the_high_side(text: str, tokens: int) -> None:
    assert estimate_tokens([{"role": "user", "content": text}]) == tokens + 4


def test_a_tier_window_of_records_each_over_the_budget_is_set_aside_unsent(
        root: Path, fake_openai: Any) -> None:
    settings = openai_settings(fake_openai.base_url)
    settings = replace(settings, llm=replace(settings.llm, max_prompt_tokens=1_000))
    rt = Runtime(root, settings, embedder=HashEmbedder(32))
    try:
        eps = [e.id for e in rt.store.append_many(ADA, Kind.EPISODE, [(
            {"timestamp": "2026-10-01T09:00:00+00:00", "parent_type": "memcell",
             "parent_id": "mc_1"}, {"Subject": f"Release {d}", "Content": "Shipped."})
            for d in (1, 2)])]
        rt.store.append_many(ADA, Kind.INSIGHT, [(
            {"evidence": eps, "depth": 1, "status": "active", "insight_type": "reflection"},
            {"Insight": text * 200}) for text in ("Reviews get skipped. ", "Launch dates win. ",
                                                 "Ops is tired. ")])

        assert run(rt, "update_worldview") == {"failed": 1, "set_aside": 3}

        assert sent(fake_openai) == []
        [row] = list_derivations(rt.db(), strategy="update_worldview")
        assert "over llm.max_prompt_tokens (1,000); not sent" in str(row["error"])
    finally:
        rt.close()


@pytest.mark.parametrize("value", [999, 0, 10**10])
def test_max_prompt_tokens_out_of_range_is_refused_naming_file_and_key(value: int) -> None:
    with pytest.raises(ConfigError) as info:
        parse_settings(packaged_text("default.toml"), f"[llm]\nmax_prompt_tokens = {value}\n",
                       {}, "root/everos.toml")
    [(file, key, reason)] = info.value.problems
    assert (file, key) == ("root/everos.toml", "llm.max_prompt_tokens")
    assert "1,000 to 1,000,000,000" in reason


def test_the_configured_budget_reaches_the_client(tmp_path: Path) -> None:
    from everos_reflect.llm import make_llm

    llm = make_llm(LLMSettings(provider="openai", base_url="http://127.0.0.1:9/v1",
                               max_prompt_tokens=8_000))
    assert isinstance(llm, OpenAILLM) and llm.max_prompt_tokens == 8_000
