"""Latest version first by words: a later hit that tells a change of what an earlier hit
states ranks above it even when their vectors are far apart (index/recency.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from everos_reflect.briefing.build import latest_rows_first
from everos_reflect.index import recency
from everos_reflect.index.recency import RECENCY_COSINE, key, latest_first
from everos_reflect.index.search import search
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.llm.extractive import tells_newer_version
from tests.reflect_fixtures import ANDREW, add_episode, make_runtime
from tests.test_search_recency import Hit

OLD = "Ravi trains at the Ironworks gym."
NEW = "Ravi now trains at the Summit Fitness gym."


def apart(n: int) -> list[np.ndarray]:
    """``n`` unit vectors at cosine 0 to each other: no pair a version by vectors."""
    return list(np.eye(n, dtype=np.float32))


def ranked(hits: list[Hit], texts: dict[str, str] | None) -> list[str]:
    vectors = {key(h): v for h, v in zip(hits, apart(len(hits)), strict=True)}
    by_key = None if texts is None else {key(h): texts[h.id] for h in hits if h.id in texts}
    return [h.id for h in latest_first(hits, vectors, threshold=RECENCY_COSINE, texts=by_key)]


def test_the_join_reads_these_as_versions_and_not_the_other_way() -> None:
    assert tells_newer_version(OLD, NEW)
    assert not tells_newer_version(NEW, OLD)


def test_a_later_version_by_its_words_moves_above_at_any_cosine() -> None:
    hits = [Hit("ep_old", "2026-03-01T10:00:00+00:00", 0.9),
            Hit("ep_other", "2026-03-02T10:00:00+00:00", 0.8),
            Hit("ep_new", "2026-06-01T10:00:00+00:00", 0.5)]
    texts = {"ep_old": OLD, "ep_other": "Ravi bakes bread on Sundays.", "ep_new": NEW}
    assert ranked(hits, texts) == ["ep_new", "ep_old", "ep_other"]
    assert ranked(hits, None) == ["ep_old", "ep_other", "ep_new"]  # vectors alone: apart


def test_words_move_nothing_earlier_across_owners_or_undated() -> None:
    earlier_new = [Hit("ep_old", "2026-06-01T10:00:00+00:00", 0.9),
                   Hit("ep_new", "2026-03-01T10:00:00+00:00", 0.5)]
    assert ranked(earlier_new, {"ep_old": OLD, "ep_new": NEW}) == ["ep_old", "ep_new"]
    other_user = [Hit("ep_old", "2026-03-01T10:00:00+00:00", 0.9),
                  Hit("ep_new", "2026-06-01T10:00:00+00:00", 0.5, user_id="someone_else")]
    assert ranked(other_user, {"ep_old": OLD, "ep_new": NEW}) == ["ep_old", "ep_new"]
    other_kind = [Hit("ep_old", "2026-03-01T10:00:00+00:00", 0.9),
                  Hit("af_new", "2026-06-01T10:00:00+00:00", 0.5, kind="atomic_fact")]
    assert ranked(other_kind, {"ep_old": OLD, "af_new": NEW}) == ["ep_old", "af_new"]
    undated = [Hit("ep_old", "2026-03-01T10:00:00+00:00", 0.9), Hit("ep_new", None, 0.5)]
    assert ranked(undated, {"ep_old": OLD, "ep_new": NEW}) == ["ep_old", "ep_new"]


def test_only_each_owners_first_hits_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recency, "TEXT_VERSION_HITS", 3)
    filler = [Hit(f"ep_f{i}", f"2026-03-0{i + 2}T10:00:00+00:00", 0.8 - i / 100)
              for i in range(2)]
    texts = {"ep_old": OLD, "ep_new": NEW, **{h.id: f"Ravi read book {h.id}." for h in filler}}
    third = [Hit("ep_old", "2026-03-01T10:00:00+00:00", 0.9), *filler,
             Hit("ep_new", "2026-06-01T10:00:00+00:00", 0.5)]
    assert ranked(third, texts) == ["ep_old", "ep_f0", "ep_f1", "ep_new"]  # 4th: not read
    # another owner's hits in between do not use up this owner's reads
    strangers = [Hit(f"ep_s{i}", "2026-03-05T10:00:00+00:00", 0.85, user_id="v")
                 for i in range(5)]
    texts |= {h.id: "Mia plays chess." for h in strangers}
    mixed = [Hit("ep_old", "2026-03-01T10:00:00+00:00", 0.9), *strangers,
             Hit("ep_new", "2026-06-01T10:00:00+00:00", 0.5)]
    assert ranked(mixed, texts)[0] == "ep_new"


def test_a_text_is_read_up_to_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recency, "TEXT_VERSION_CHARS", 200)
    hits = [Hit("ep_old", "2026-03-01T10:00:00+00:00", 0.9),
            Hit("ep_new", "2026-06-01T10:00:00+00:00", 0.5)]
    near = "Ravi went out. " * 5 + NEW
    far = "Ravi went out. " * 20 + NEW  # the change starts past character 200
    assert ranked(hits, {"ep_old": OLD, "ep_new": near}) == ["ep_new", "ep_old"]
    assert ranked(hits, {"ep_old": OLD, "ep_new": far}) == ["ep_old", "ep_new"]


def test_each_pair_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[str, str]] = []
    real = recency.newer_by_words_and_cosine

    def counted(earlier: str, later: str, cosine: float | None) -> bool:
        asked.append((earlier, later))
        return real(earlier, later, cosine)

    monkeypatch.setattr(recency, "newer_by_words_and_cosine", counted)
    people = ["Ravi", "Mia", "Noor", "Sam", "Leo", "Zara"]
    hits = [Hit(f"ep_{i}", f"2026-0{i + 1}-01T10:00:00+00:00", 0.9 - i / 10)
            for i in range(len(people))]
    texts = {h.id: f"{p} now trains at the Summit gym {i}." for i, (h, p)
             in enumerate(zip(hits, people, strict=True))}
    ranked(hits, texts)
    assert len(asked) == len(set(asked)) == len(hits) * (len(hits) - 1) // 2


class Apart:
    """Every text on an axis of its own: no two hits versions by their vectors."""

    name, dim = "apart", 16

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row, sum(map(ord, text)) % self.dim] = 1.0
        return out


def test_search_ranks_the_new_gym_above_the_old(root: Path) -> None:
    rt = make_runtime(root, ExtractiveLLM(), embedder=Apart())
    old = add_episode(rt, ANDREW, "2026-03-01T10:00:00+00:00", "Gym", OLD)
    new = add_episode(rt, ANDREW, "2026-06-01T10:00:00+00:00", "Gym", NEW)
    Indexer(rt).scan()
    query = "Ironworks gym"  # the old statement's words: it ranks first by relevance
    plain = [h.id for h in search(rt, query, top_k=5, mode="keyword", user_id=ANDREW.user_id,
                                  latest_first_order=False)]
    shipped = [h.id for h in search(rt, query, top_k=5, mode="keyword",
                                    user_id=ANDREW.user_id)]
    assert plain.index(old.id) < plain.index(new.id)
    assert shipped.index(new.id) < shipped.index(old.id)
    assert sorted(plain) == sorted(shipped)  # nothing dropped: the old still answers "before?"


def test_a_briefings_rows_are_read_by_their_words() -> None:
    rows = [{"id": "ep_old", "app_id": "a", "project_id": "p", "user_id": "u",
             "kind": "episode", "timestamp": "2026-03-01T10:00:00+00:00", "_similarity": 0.9,
             "text": OLD, "vector": [1.0, 0.0]},
            {"id": "ep_new", "app_id": "a", "project_id": "p", "user_id": "u",
             "kind": "episode", "timestamp": "2026-06-01T10:00:00+00:00", "_similarity": 0.4,
             "text": NEW, "vector": [0.0, 1.0]}]
    assert [r["id"] for r in latest_rows_first(rows)] == ["ep_new", "ep_old"]
    assert [r["_similarity"] for r in latest_rows_first(rows)] == [0.4, 0.9]  # own scores
