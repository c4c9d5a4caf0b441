"""Latest version first when the words alone cannot tell: a one-sentence hit read with its
cosine to the earlier one, as the merge reads two sentences of a cluster, and a return to an
earlier state ("... again", "went back to ...") newer than both states it follows
(llm/extractive.py: ``newer_by_words_and_cosine``; index/recency.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from everos_reflect.briefing.build import latest_rows_first
from everos_reflect.index.recency import RECENCY_COSINE, key, latest_first
from everos_reflect.index.search import search
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.llm.extractive import newer_by_words_and_cosine, tells_newer_version
from tests.reflect_fixtures import ANDREW, add_episode, make_runtime
from tests.test_search_recency import Hit

FIRST = "Andrew reads paper books."
BETWEEN = "Andrew reads on an e-reader."
BACK = "Andrew reads paper books again."
#: unit vectors with cosine 0.80 (first, back: under the vectors' own threshold 0.85),
#: 0.71 (between, back) and 0.60 (first, between)
VECTORS = {FIRST: np.array([1.0, 0.0, 0.0]),
           BACK: np.array([0.8, 0.6, 0.0]),
           BETWEEN: np.array([0.6, 0.23 / 0.6, np.sqrt(1 - 0.36 - (0.23 / 0.6) ** 2)])}


def test_the_vectors_are_as_said() -> None:
    for text, v in VECTORS.items():
        assert abs(float(np.linalg.norm(v)) - 1) < 1e-9, text
    assert round(float(VECTORS[FIRST] @ VECTORS[BACK]), 2) == 0.80 < RECENCY_COSINE
    assert round(float(VECTORS[BETWEEN] @ VECTORS[BACK]), 2) == 0.71
    assert round(float(VECTORS[FIRST] @ VECTORS[BETWEEN]), 2) == 0.60


def test_a_return_is_newer_than_the_state_it_returns_to_and_the_one_it_leaves() -> None:
    assert not tells_newer_version(FIRST, BACK)  # the words alone: no change told
    assert not tells_newer_version(BETWEEN, BACK)
    assert newer_by_words_and_cosine(FIRST, BACK, 0.80)
    assert newer_by_words_and_cosine(BETWEEN, BACK, 0.71)
    assert newer_by_words_and_cosine("Lena switched to email bank statements.",
                                     "Lena went back to paper bank statements.", 0.79)
    # what the return is said of comes first: the earlier states say no return
    assert not newer_by_words_and_cosine(BACK, FIRST, 0.80)
    assert not newer_by_words_and_cosine(BACK, BETWEEN, 0.71)


def test_what_is_no_return_or_no_version_of_it() -> None:
    assert not newer_by_words_and_cosine(FIRST, BACK, 0.50)  # too far apart
    assert not newer_by_words_and_cosine(FIRST, BACK, None)  # no cosine: words alone
    # no cosine of two unit vectors: a damaged stored vector is no evidence either way
    for cosine in (float("nan"), float("inf"), 1.5, -1.5):
        assert not newer_by_words_and_cosine(FIRST, BACK, cosine)
    assert not newer_by_words_and_cosine(FIRST, "Ivan reads paper books again.", 0.9)
    assert not newer_by_words_and_cosine(FIRST, "Andrew wants to read paper books again.", 0.8)
    assert not newer_by_words_and_cosine(FIRST, "Does Andrew read paper books again?", 0.8)
    assert not newer_by_words_and_cosine("Andrew lives in Lisbon.",
                                         "Andrew came back from Lisbon.", 0.7)
    # nothing shared but the person and the return
    assert not newer_by_words_and_cosine(FIRST, "Andrew is back at the gym.", 0.6)


def test_one_sentence_each_is_read_with_the_cosine_and_longer_texts_by_words_alone() -> None:
    old, new = "Nina is vegetarian.", "Nina is vegan now."
    assert not tells_newer_version(old, new)
    assert newer_by_words_and_cosine(old, new, 0.83)
    assert not newer_by_words_and_cosine(old, new, 0.40)
    assert not newer_by_words_and_cosine(f"{old} Nina likes tea.", new, 0.83)
    assert not newer_by_words_and_cosine(old, f"{new} Nina likes jazz.", 0.83)
    assert not newer_by_words_and_cosine(f"{FIRST} Andrew likes tea.", BACK, 0.80)


def hits_of(texts: list[str]) -> tuple[list[Hit], dict, dict]:
    hits = [Hit(f"ep_{n}", f"2026-0{n + 1}-01T10:00:00+00:00", 0.9 - n / 10)
            for n in range(len(texts))]
    vectors = {key(h): VECTORS[t] for h, t in zip(hits, texts, strict=True)}
    return hits, vectors, {key(h): t for h, t in zip(hits, texts, strict=True)}


def test_search_order_puts_the_return_above_both_states() -> None:
    hits, vectors, texts = hits_of([FIRST, BETWEEN, BACK])
    plain = latest_first(hits, vectors, threshold=RECENCY_COSINE)  # vectors alone
    assert [h.id for h in plain] == ["ep_0", "ep_1", "ep_2"]
    hits, vectors, texts = hits_of([FIRST, BETWEEN, BACK])
    shipped = latest_first(hits, vectors, threshold=RECENCY_COSINE, texts=texts)
    assert [h.id for h in shipped] == ["ep_2", "ep_0", "ep_1"]


class Known:
    """Each of the three sentences on its vector of :data:`VECTORS` (the longest held in the
    text embedded), anything else on an axis of its own."""

    name, dim = "known", 8

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            held = [s for s in VECTORS if s in text]
            if held:
                out[row, :3] = VECTORS[max(held, key=len)]
            else:
                out[row, 3 + sum(map(ord, text)) % (self.dim - 3)] = 1.0
        return out


def test_search_end_to_end_ranks_the_return_first(root: Path) -> None:
    rt = make_runtime(root, ExtractiveLLM(), embedder=Known())
    first = add_episode(rt, ANDREW, "2026-03-01T10:00:00+00:00", "Books", FIRST)
    between = add_episode(rt, ANDREW, "2026-04-01T10:00:00+00:00", "Books", BETWEEN)
    back = add_episode(rt, ANDREW, "2026-05-01T10:00:00+00:00", "Books", BACK)
    Indexer(rt).scan()
    query = "Andrew reads"  # hybrid: the vector side brings each hit's stored vector
    plain = [h.id for h in search(rt, query, top_k=5, mode="hybrid", user_id=ANDREW.user_id,
                                  latest_first_order=False)]
    shipped = [h.id for h in search(rt, query, top_k=5, mode="hybrid",
                                    user_id=ANDREW.user_id)]
    assert sorted(plain) == sorted(shipped) == sorted([first.id, between.id, back.id])
    assert plain[0] != back.id
    assert shipped[0] == back.id


def test_a_briefings_rows_are_read_with_their_cosine() -> None:
    rows = [{"id": f"ep_{n}", "app_id": "a", "project_id": "p", "user_id": "u",
             "kind": "episode", "timestamp": f"2026-0{n + 1}-01T10:00:00+00:00",
             "_similarity": 0.9 - n / 10, "text": t, "vector": VECTORS[t].tolist()}
            for n, t in enumerate([FIRST, BETWEEN, BACK])]
    assert [r["id"] for r in latest_rows_first(rows)] == ["ep_2", "ep_0", "ep_1"]
