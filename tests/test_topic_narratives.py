"""Topic paragraphs: the extractive merge writes one paragraph per topic, dated per line."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from everos_reflect.index.snippet import dated_sentences
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.llm.base import FactsRequest, MergeMember, MergeRequest
from everos_reflect.llm.extractive import narrative_sentences, plain_sentences, split_sentences
from everos_reflect.llm.topics import topic_labels

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import quality


def member(day: str, content: str, n: int = 1) -> MergeMember:
    ts = datetime.fromisoformat(day).replace(tzinfo=UTC)
    return MergeMember(f"ep_{day.replace('-', '')}_{n:04d}", ts, "Week", content)


class TopicToy:
    """A sentence naming one of a topic's words shares that topic's direction (cosine 0.6
    within a topic, 0.1 across: related, never a paraphrase); other text is orthogonal."""

    name, dim = "topic-toy", 96

    def __init__(self, topics: list[tuple[str, ...]]) -> None:
        self.topics = topics

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            topic = next((i for i, words in enumerate(self.topics)
                          if any(w in text for w in words)), None)
            out[row, 16 + row % 80] = 1.0 if topic is None else 0.4 ** 0.5
            if topic is not None:
                out[row, 0] = 0.1 ** 0.5
                out[row, 1 + topic] = 0.5 ** 0.5
        return out


def test_topic_labels_group_rows_close_on_average_in_order_of_first_row() -> None:
    a, b = np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0])
    c = np.array([0.0, 0.0, 1.0])
    rows = np.stack([b, a, b * 0.9 + a * 0.1, c, a])
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    sims = rows @ rows.T
    assert topic_labels(sims, 0.5) == [0, 1, 0, 2, 1]
    assert topic_labels(sims, 0.0) == [0, 0, 0, 0, 0] or topic_labels(sims, -1.0) == [0] * 5
    assert topic_labels(sims[:1, :1]) == [0]
    assert topic_labels(np.zeros((0, 0))) == []


WEEKS = [
    member("2026-03-02", "Nadia signed up for a spring marathon. "
                         "Nadia repainted the kitchen yellow. Nadia repainted her kitchen yellow.",
           1),
    member("2026-03-09", "Nadia ran 18 km on Sunday in preparation for the marathon race. "
                         "Nadia bought new kitchen chairs.", 2),
    member("2026-03-16", "Nadia adopted a grey cat called Pixel.", 3),
]


def test_merge_writes_earlier_days_as_topic_paragraphs_then_the_latest_day() -> None:
    llm = ExtractiveLLM(TopicToy([("marathon",), ("kitchen",)]))
    result = llm.merge(MergeRequest("init", list(reversed(WEEKS))))
    assert result.content.split("\n\n") == [
        "2026-03-02: Nadia signed up for a spring marathon.\n"
        "2026-03-09: Nadia ran 18 km on Sunday in preparation for the marathon race.",
        "2026-03-02: Nadia repainted her kitchen yellow.\n"
        "2026-03-09: Nadia bought new kitchen chairs.",
        "2026-03-16: Nadia adopted a grey cat called Pixel.",  # the newest news comes last
    ]
    rows = dict(zip(plain_sentences(result.content), result.provenance, strict=True))
    assert rows["Nadia ran 18 km on Sunday in preparation for the marathon race."] == (
        WEEKS[1].id,)
    assert rows["Nadia repainted her kitchen yellow."] == (WEEKS[0].id,)
    # without an embedder: one paragraph per day, as before
    plain = ExtractiveLLM().merge(MergeRequest("init", WEEKS)).content
    assert [p[:11] for p in plain.split("\n\n")] == ["2026-03-02:", "2026-03-09:",
                                                        "2026-03-16:"]


def test_topic_layout_is_dropped_when_its_dates_would_outgrow_the_sources() -> None:
    # four topics, nothing repeated: topic lines would write five dates, days only three
    many = [member("2026-03-02", "Nadia runs. Nadia paints. Nadia sings. Nadia cooks.", 1),
            member("2026-03-09", "Nadia jogs often. Nadia draws murals. Nadia hums tunes. "
                                 "Nadia bakes bread.", 2),
            member("2026-03-16", "Nadia moved to Porto.", 3)]
    llm = ExtractiveLLM(TopicToy([("runs", "jogs"), ("paints", "draws"), ("sings", "hums"),
                                  ("cooks", "bakes")]))
    content = llm.merge(MergeRequest("init", many)).content
    sources = sum(len(m.content.split()) for m in many)
    assert len(content.split()) == sources + 3  # the day layout: three dates, not nine
    assert [p[:11] for p in content.split("\n\n")] == ["2026-03-02:", "2026-03-09:",
                                                          "2026-03-16:"]


def test_narrative_sentences_date_each_line_and_mark_the_current_state() -> None:
    text = ("2026-03-02: A ran. B sang.\n2026-03-09: C cooked.\n\n"
            "2026-13-40: Not a date.\n\nCurrent state: D lives in Oslo.")
    parsed = narrative_sentences(text)
    assert len(parsed) == len(split_sentences(text))
    assert [(s.text, s.day, s.state, s.paragraph) for s in parsed] == [
        ("A ran.", "2026-03-02", False, 0),
        ("B sang.", "2026-03-02", False, 0),
        ("C cooked.", "2026-03-09", False, 0),
        ("2026-13-40: Not a date.", None, False, 1),
        ("D lives in Oslo.", None, True, 2),
    ]
    assert dated_sentences(text, "2026-04-01")[2] == ("C cooked.", "2026-03-09")
    assert dated_sentences(text, "2026-04-01")[-1] == ("D lives in Oslo.", "2026-04-01")


def test_update_keeps_each_line_date_of_a_topic_narrative() -> None:
    llm = ExtractiveLLM(TopicToy([("marathon",), ("kitchen",)]))
    first = llm.merge(MergeRequest("init", WEEKS))
    existing = MergeMember("ep_20260316_0009", WEEKS[2].timestamp, first.title, first.content,
                           first.provenance)
    later = member("2026-03-23", "Nadia finished the marathon in 3 hours.", 4)
    updated = llm.merge(MergeRequest("update", [later], existing=existing))
    parts = updated.content.split("\n\n")
    assert parts[0].splitlines() == [
        "2026-03-02: Nadia signed up for a spring marathon.",
        "2026-03-09: Nadia ran 18 km on Sunday in preparation for the marathon race.",
    ]
    assert "2026-03-16: Nadia adopted a grey cat called Pixel." in parts
    assert parts[-1] == "2026-03-23: Nadia finished the marathon in 3 hours."
    rows = dict(zip(plain_sentences(updated.content), updated.provenance, strict=True))
    assert rows["Nadia bought new kitchen chairs."] == (WEEKS[1].id,)
    assert rows["Nadia adopted a grey cat called Pixel."] == (WEEKS[2].id,)
    assert existing.id not in {i for row in updated.provenance for i in row}


def test_facts_of_a_topic_narrative_carry_no_dates() -> None:
    llm = ExtractiveLLM(TopicToy([("marathon",), ("kitchen",)]))
    content = llm.merge(MergeRequest("init", WEEKS)).content
    facts = llm.extract_facts(FactsRequest(content)).facts
    assert sorted(facts) == sorted(plain_sentences(content))
    assert len(facts) == 5 and not any(f[:4].isdigit() for f in facts)


def test_calibration_chooses_the_topic_threshold_on_the_other_split() -> None:
    def point(topic: float, cal: float, rep: float) -> dict:
        recall = {split: {"overall": {f"{m}@{b}": value for m in ("full", "snippet")
                                      for b in (200, 400)}}
                  for split, value in (("0-4", cal), ("5-9", rep))}
        return {"member": 0.6, "paraphrase": 0.75, "topic": topic, "recall": recall}

    points = [point(0.45, 0.70, 0.90), point(0.55, 0.75, 0.60)]
    chosen = quality.choose(points)
    assert chosen["5-9"]["topic"] == 0.55  # best on 0-4, whatever it scores on 5-9
    assert chosen["0-4"]["topic"] == 0.45
    result = {"points": points, "chosen": chosen}
    assert quality.point_for(result, "5-9") is points[1]


def test_a_sentence_without_a_final_stop_never_runs_into_the_next_dated_line() -> None:
    bare = [member("2026-03-02", "Nadia signed up for a spring marathon", 1),
            member("2026-03-09", "Nadia ran 18 km on Sunday in preparation for the marathon race",
                   2),
            member("2026-03-16", "Nadia adopted a grey cat called Pixel", 3)]
    llm = ExtractiveLLM(TopicToy([("marathon",), ("kitchen",)]))
    content = llm.merge(MergeRequest("init", bare)).content
    assert "Nadia signed up for a spring marathon\n2026-03-09: Nadia ran" in content
    assert plain_sentences(content)[:2] == [
        "Nadia signed up for a spring marathon",
        "Nadia ran 18 km on Sunday in preparation for the marathon race",
    ]
    assert [s.day for s in narrative_sentences(content)][:2] == ["2026-03-02", "2026-03-09"]
    facts = llm.extract_facts(FactsRequest(content)).facts
    assert not any("2026-" in f for f in facts)
    # an ordinary wrapped line still joins its sentence
    assert split_sentences("Nadia lives\nin Porto. She runs.") == ["Nadia lives in Porto.",
                                                                   "She runs."]
