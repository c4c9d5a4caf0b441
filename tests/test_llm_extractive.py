"""The offline providers: ExtractiveLLM (the default) and ScriptedLLM (the test fake)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from everos_reflect.errors import ProviderUnavailable
from everos_reflect.llm import ExtractiveLLM, ScriptedLLM
from everos_reflect.llm.base import (
    FactsRequest,
    MergeMember,
    MergeRequest,
    MergeResult,
    ScriptExhausted,
    Usage,
)
from everos_reflect.llm.extractive import split_sentences
from everos_reflect.markdown.parser import parse_log

EXAMPLE_ROOT = Path(__file__).resolve().parents[1] / "memory_root_example"
LLM = ExtractiveLLM()


def member(day: str, content: str, subject: str = "Pets", n: int = 1) -> MergeMember:
    ts = datetime.fromisoformat(day).replace(tzinfo=UTC)
    return MergeMember(f"ep_{day.replace('-', '')}_{n:04d}", ts, subject, content)


ANDREW = [
    member("2026-08-10", "Andrew has no pets yet.", "Andrew has no pets"),
    member("2026-09-10", "Andrew adopted a dog named Toby.", "Andrew adopted Toby"),
    member(
        "2026-10-10",
        "Andrew also adopted another dog named Buddy. He now has two dogs.",
        "Andrew also adopted Buddy",
    ),
]


def paragraphs(text: str) -> list[str]:
    return text.split("\n\n")


def test_andrew_walkthrough_keeps_the_timeline_and_says_each_sentence_once():
    result = LLM.merge(MergeRequest("init", list(reversed(ANDREW))))

    # "also adopted" adds a dog: Buddy's adoption is no newer version of Toby's (it was
    # written as the current state, Toby's adoption as history replaced by it)
    assert paragraphs(result.content) == [
        "2026-08-10: Andrew has no pets yet.",
        "2026-09-10: Andrew adopted a dog named Toby.",
        "2026-10-10: Andrew also adopted another dog named Buddy. Andrew now has two dogs.",
    ]
    assert "Andrew" in result.title
    assert (result.provider, result.model, result.usage) == ("extractive", "extractive-v3", Usage())
    # every sentence once: no recap repeating the timeline
    sentences = split_sentences(result.content)
    assert len(sentences) == 4
    # sentence-level provenance lines up with the sentences
    assert result.provenance == (
        (ANDREW[0].id,), (ANDREW[1].id,), (ANDREW[2].id,), (ANDREW[2].id,))


def test_restatements_are_folded_into_one_sentence_crediting_both_sources():
    members = [
        member("2026-07-06", "Mei wants the assistant to always use metric units.", n=1),
        member("2026-07-08", "Mei plays cello in a community orchestra.", n=2),
        member("2026-08-05", "Mei wants the assistant to always use metric units!", n=3),
    ]
    result = LLM.merge(MergeRequest("init", members))
    assert result.content.count("metric units") == 1
    assert "2026-08-05: Mei wants the assistant to always use metric units!" in result.content
    rows = dict(zip(split_sentences(result.content), result.provenance, strict=True))
    assert rows["2026-08-05: Mei wants the assistant to always use metric units!"] == (
        members[0].id, members[2].id)


def test_a_short_recap_of_a_longer_sentence_is_dropped():
    result = LLM.merge(
        MergeRequest(
            "init",
            [
                member(
                    "2026-09-07", "Andrew adopted Buddy, a shy senior beagle mix, from the shelter."
                ),
                member("2026-09-08", "Andrew adopted Buddy from the shelter."),
            ],
        )
    )
    assert "Andrew adopted Buddy from the shelter." not in result.content
    assert "shy senior beagle mix" in result.content
    assert result.content.startswith("2026-09-08: ")  # dated when it was last said


class Toy:
    """A toy embedder: a text containing one of the keys gets that key's vector; every other
    text gets its own axis (orthogonal to everything)."""

    name, dim = "toy", 16

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            key = next((k for k in self.vectors if k in text), None)
            if key is None:
                out[row, 8 + row % 8] = 1.0
            else:
                v = np.asarray(self.vectors[key], dtype=np.float32)
                out[row, : len(v)] = v / np.linalg.norm(v)
        return out


def test_paraphrases_with_different_words_are_merged_by_the_embedder():
    members = [
        member("2026-07-01", "Jon is training for the Berlin marathon in September.", n=1),
        member("2026-07-09", "Jon keeps preparing to run a marathon.", n=2),
    ]
    words_only = LLM.merge(MergeRequest("init", members)).content
    assert "Berlin" in words_only and "keeps preparing" in words_only  # no shared words

    result = ExtractiveLLM(Toy({"marathon": [1.0]})).merge(MergeRequest("init", members))
    # one sentence stays: the one with the detail the other lacks, dated when last said
    assert result.content == "2026-07-09: Jon is training for the Berlin marathon in September."
    assert result.provenance == ((members[0].id, members[1].id),)


def test_sentences_differing_in_number_or_negation_are_never_merged():
    result = LLM.merge(
        MergeRequest(
            "init",
            [
                member("2026-08-01", "Andrew has one dog at home."),
                member("2026-09-01", "Andrew has two dogs at home."),
                member("2026-09-02", "Andrew does not have a cat at home."),
                member("2026-09-03", "Andrew does have a cat at home."),
            ],
        )
    )
    for sentence in ("one dog", "two dogs", "does not have a cat", "does have a cat"):
        assert result.content.count(sentence) == 1


def test_the_latest_version_wins_even_when_something_unrelated_follows():
    # "lives in" and "moved to" are close (cosine 0.77): versions, not paraphrases
    toy = Toy({"lives in": [1.0, 0.0], "moved to": [0.77, 0.638]})
    result = ExtractiveLLM(toy).merge(MergeRequest("init", [
        member("2026-07-01", "Andrew lives in Denver.", "Home", 1),
        member("2026-07-20", "Andrew works at Lumen Analytics.", "Job", 2),
        member("2026-08-18", "Andrew moved to Portland.", "Move", 3),
        member("2026-09-01", "Andrew likes sourdough bread.", "Baking", 4),
    ]))
    *timeline, current = paragraphs(result.content)
    assert timeline == [
        "2026-07-01: Andrew lives in Denver.",
        "2026-07-20: Andrew works at Lumen Analytics.",
        "2026-09-01: Andrew likes sourdough bread.",
    ]
    assert current == "Current state (2026-08-18): Andrew moved to Portland."


def test_without_an_embedder_versions_are_found_by_structure():
    result = LLM.merge(MergeRequest("init", [
        member("2026-08-01", "Priya runs 5 km in the park every week.", n=1),
        member("2026-09-01", "Priya runs 12 km in the park every week.", n=2),
        member("2026-09-05", "Priya bought new shoes for the winter.", n=3),
    ]))
    assert paragraphs(result.content)[-1] == (
        "Current state (2026-09-01): Priya runs 12 km in the park every week.")
    assert "2026-08-01: Priya runs 5 km in the park every week." in result.content


def test_merge_is_deterministic_whatever_the_input_order():
    outputs = {
        LLM.merge(MergeRequest("init", list(order))) for order in itertools.permutations(ANDREW)
    }
    assert len(outputs) == 1


def test_non_english_input_stays_in_its_language():
    members = [
        member("2026-08-10", "Andreas wohnt in Berlin und hat keine Haustiere.", "Wohnung"),
        member("2026-09-10", "Andreas hat einen Hund namens Toby adoptiert.", "Toby"),
        member("2026-10-10", "Andreas wohnt in Hamburg und hat keine Haustiere.", "Umzug"),
    ]
    content = LLM.merge(MergeRequest("init", members)).content

    assert "Current state" not in content
    assert paragraphs(content)[-1] == ("→ (2026-10-10) Andreas wohnt in Hamburg und hat keine "
                                       "Haustiere.")
    # Everything else is the input's own sentences behind ISO dates.
    assert paragraphs(content)[0] == "2026-08-10: Andreas wohnt in Berlin und hat keine Haustiere."


def test_update_folds_new_members_into_the_existing_narrative_keeping_provenance():
    first = LLM.merge(MergeRequest("init", ANDREW[:2]))
    existing = MergeMember("ep_20260911_0001", ANDREW[1].timestamp, first.title, first.content,
                           first.provenance)
    updated = LLM.merge(MergeRequest("update", [ANDREW[2]], existing=existing))

    parts = paragraphs(updated.content)
    assert parts[:2] == ["2026-08-10: Andrew has no pets yet.",
                         "2026-09-10: Andrew adopted a dog named Toby."]
    assert sum(p.startswith("Current state") for p in parts) <= 1
    assert "Andrew now has two dogs." in updated.content
    # carried-over sentences still credit the original Episodes, not the old narrative
    assert updated.provenance[0] == (ANDREW[0].id,)
    assert existing.id not in {i for row in updated.provenance for i in row}


def test_update_keeps_the_current_state_of_an_earlier_narrative():
    existing = member("2026-09-10", "2026-08-10: Andrew has no pets yet.\n\n"
                      "Current state: Andrew adopted a dog named Toby.", "Andrew's pets", 9)
    updated = LLM.merge(MergeRequest("update", [member("2026-10-01", "Andrew likes jazz.")],
                                     existing=existing))
    assert "Andrew adopted a dog named Toby." in updated.content


def test_update_keeps_an_undated_llm_narrative_as_its_first_paragraph():
    existing = member("2026-09-10", "Andrew had no pets, then adopted Toby.", "Andrew's pets", 9)
    updated = LLM.merge(MergeRequest("update", [ANDREW[2]], existing=existing))
    assert paragraphs(updated.content)[0] == "2026-09-10: Andrew had no pets, then adopted Toby."


def test_extract_facts_reads_a_narrative_without_dates_labels_or_repeats():
    narrative = LLM.merge(MergeRequest("init", ANDREW)).content
    facts = LLM.extract_facts(FactsRequest(narrative)).facts
    assert sorted(facts) == sorted([
        "Andrew has no pets yet.",
        "Andrew adopted a dog named Toby.",
        "Andrew also adopted another dog named Buddy.",
        "Andrew now has two dogs.",
    ])


def test_extract_facts_drops_filler_and_dates_and_names_pronoun_subjects():
    text = "Thanks! 2026-10-10. Mei passed her PhD defense. She is now Dr. Mei Lin. OK."
    facts = LLM.extract_facts(FactsRequest(text)).facts
    assert facts == ["Mei passed her PhD defense.", "Mei is now Dr. Mei Lin."]


def _example_members(user: str, words: tuple[str, ...]) -> list[MergeMember]:
    out = []
    for path in sorted(
        EXAMPLE_ROOT.glob(f"default_app/default_project/users/{user}/episodes/*.md")
    ):
        for e in parse_log(path.read_text(encoding="utf-8"), str(path)).entries:
            if any(w in f"{e.subject} {e.content}".lower() for w in words):
                out.append(MergeMember(e.id, e.timestamp, e.subject, e.content))
    return out


def test_example_root_pet_episodes_become_one_compact_narrative():
    members = _example_members("u_andrew", ("pet", "dog"))
    assert len(members) >= 4
    result = LLM.merge(MergeRequest("init", members))

    content = result.content
    assert content.index("never had a pet") < content.index("Toby") < content.index("Buddy")
    # never longer than the sources, beyond what the guard allows: a date per source + label
    assert len(content.split()) <= sum(len(m.content.split()) + 1 for m in members) + 2
    said = split_sentences(content)
    assert len(said) == len(set(said))  # no sentence twice: no recap of the timeline
    facts = LLM.extract_facts(FactsRequest(content)).facts
    assert any("Buddy" in f for f in facts)
    assert len(facts) == len(set(facts))


# --- ScriptedLLM, the fake the strategies' tests use ---------------------------------------


def test_scripted_llm_replays_its_queue_and_records_requests():
    llm = ScriptedLLM(
        merges=[("Pets", "Two dogs."), ProviderUnavailable("down")],
        facts=[["Andrew has two dogs."]],
    )
    req = MergeRequest("init", ANDREW)
    assert llm.merge(req) == MergeResult("Pets", "Two dogs.", Usage(), "scripted", "scripted-v1")
    with pytest.raises(ProviderUnavailable, match="down"):
        llm.merge(req)
    assert llm.extract_facts(FactsRequest("x")).facts == ["Andrew has two dogs."]
    assert llm.merge_requests == [req, req]
    with pytest.raises(ScriptExhausted):
        llm.merge(req)


def test_scripted_llm_builds_replies_from_the_request_or_falls_back():
    llm = ScriptedLLM(
        merges=[lambda r: MergeResult("n", str(len(r.members)))], fallback=ExtractiveLLM()
    )
    assert llm.merge(MergeRequest("init", ANDREW)).content == "3"
    assert llm.merge(MergeRequest("init", ANDREW)).provider == "extractive"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mode": "merge", "members": ANDREW}, "mode"),
        ({"mode": "init", "members": []}, "at least one member"),
        ({"mode": "update", "members": ANDREW}, "existing narrative"),
    ],
)
def test_merge_request_rejects_an_impossible_merge(kwargs, message):
    with pytest.raises(ValueError, match=message):
        MergeRequest(**kwargs)


def test_pronouns_are_resolved_only_when_unambiguous() -> None:
    result = LLM.merge(MergeRequest("init", [
        member("2026-07-27", "Andrew has a final interview with Northwind on Thursday. "
               "He practised a system-design answer.", "Interview"),
        member("2026-07-30", "Northwind offered Andrew the Staff SRE role. "
               "He is leaning towards yes.", "Offer"),
        member("2026-08-15", "Andrew and Jess arrived in Portland. "
               "They are staying in a rental.", "Arrived"),
    ]))
    text = result.content
    assert "Andrew practised a system-design answer." in text  # previous subject: Andrew
    assert "He is leaning towards yes." in text  # previous subject: Northwind — left alone
    assert "Northwind is leaning" not in text
    assert "They are staying in a rental." in text  # plural: never resolved
    assert result.title.startswith("Andrew")  # most mentioned, not merely first seen


def test_no_pronoun_is_rewritten_without_a_clear_main_person() -> None:
    result = LLM.merge(MergeRequest("init", [
        member("2026-07-27", "Andrew has an interview with Northwind Robotics. Northwind "
               "Robotics builds warehouse robots.", "Interview at Northwind"),
        member("2026-07-30", "Northwind Robotics offered Andrew the role. He is leaning "
               "towards yes.", "Offer from Northwind"),
        member("2026-08-01", "Andrew accepted the offer from Northwind Robotics. He starts "
               "on August 24.", "Accepted"),
    ]))
    # Andrew and Northwind each start two sentences: no clear main person, so no pronoun is
    # rewritten (a guess could turn "He is leaning towards yes" into a false statement).
    assert "He is leaning towards yes." in result.content
    assert "He starts on August 24." in result.content
    assert "Northwind is leaning" not in result.content


def test_a_swapped_value_is_a_version_even_above_the_paraphrase_threshold():
    # both versions sit at cosine 1.0: above any paraphrase threshold
    toy = Toy({"for personal email": [1.0], "every morning": [0.0, 1.0], "daily": [0.0, 0.0, 1.0],
               "each and every day": [0.0, 0.0, 0.95, 0.31]})
    llm = ExtractiveLLM(toy, paraphrase=0.65, version=0.9)
    result = llm.merge(MergeRequest("init", [
        member("2026-03-01", "Mia uses Gmail for personal email.", "Email", 1),
        member("2026-03-05", "Mia uses Proton Mail for personal email now.", "Email", 2),
        member("2026-03-09", "Mia reads her personal email every morning.", "Email", 3),
    ]))
    *timeline, current = paragraphs(result.content)
    # the replaced value stays as history, the new one is the current state ...
    assert "2026-03-01: Mia uses Gmail for personal email." in timeline
    assert current == "Current state (2026-03-05): Mia uses Proton Mail for personal email now."
    # ... while a restatement with no swapped value is still folded
    repeat = llm.merge(MergeRequest("init", [
        member("2026-03-01", "Mia checks her personal email daily.", "Email", 1),
        member("2026-03-05", "Mia checks her personal email each and every day.", "Email", 2),
    ]))
    assert len(split_sentences(repeat.content)) == 1


def test_a_fold_never_drifts_away_from_a_sentence_it_absorbed():
    # workshop ~ fair (0.8) and fair ~ concert (0.8), but workshop and concert are different
    # events (0.28): folding the concert into the fair's wording would drop the workshop while
    # still crediting its source
    toy = Toy({"pottery workshop": [1.0, 0.0], "ceramics fair": [0.8, 0.6],
               "jazz concert": [0.28, 0.96]})
    llm = ExtractiveLLM(toy, paraphrase=0.75, version=0.9)
    members = [
        member("2026-05-01", "Ana attended a pottery workshop.", "Outings", 1),
        member("2026-05-08", "Ana attended a weekend ceramics fair with friends from Lisbon.",
               "Outings", 2),
        member("2026-05-15", "Ana went to a jazz concert.", "Outings", 3),
    ]
    result = llm.merge(MergeRequest("init", members))
    sentences = split_sentences(result.content)
    # the fair (more detail) stands for the workshop it restates; the concert stays its own
    assert any("ceramics fair" in s for s in sentences)
    assert any("jazz concert" in s for s in sentences)
    credit = dict(zip([("fair" if "fair" in s else "concert") for s in sentences],
                      result.provenance, strict=True))
    assert set(credit["fair"]) == {members[0].id, members[1].id}
    assert set(credit["concert"]) == {members[2].id}
