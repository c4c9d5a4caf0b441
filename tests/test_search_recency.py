"""Latest version first: a superseded statement never ranks above its replacement."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from everos_reflect.index.recency import RECENCY_COSINE, latest_first
from everos_reflect.index.search import search
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.runtime import Runtime
from tests.reflect_fixtures import ANDREW, add_episode, make_runtime


@dataclass
class Hit:
    id: str
    timestamp: str | None
    score: float
    user_id: str = "u"
    app_id: str = "a"
    project_id: str = "p"
    kind: str = "episode"


def vec(*xs: float) -> np.ndarray:
    v = np.asarray(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def keyed(hits: list[Hit], vectors: dict[str, np.ndarray]) -> dict:
    return {(h.app_id, h.project_id, h.user_id, h.kind, h.id): vectors[h.id]
            for h in hits if h.id in vectors}


def test_a_later_version_moves_just_above_the_version_it_replaces() -> None:
    old = Hit("ep_old", "2026-03-01T10:00:00+00:00", 0.9)
    other = Hit("ep_other", "2026-03-02T10:00:00+00:00", 0.8)
    new = Hit("ep_new", "2026-06-01T10:00:00+00:00", 0.5)
    hits = [old, other, new]
    vectors = {"ep_old": vec(1, 0.1), "ep_other": vec(0, 1), "ep_new": vec(1, 0.2)}
    ranked = latest_first(hits, keyed(hits, vectors), threshold=0.75)
    assert [h.id for h in ranked] == ["ep_new", "ep_old", "ep_other"]
    assert [h.score for h in ranked] == sorted((h.score for h in ranked), reverse=True)


def test_nothing_moves_across_users_below_the_threshold_or_without_a_date() -> None:
    old = Hit("ep_old", "2026-03-01T10:00:00+00:00", 0.9)
    other_user = Hit("ep_x", "2026-06-01T10:00:00+00:00", 0.5, user_id="someone_else")
    far = Hit("ep_far", "2026-06-02T10:00:00+00:00", 0.4)
    undated = Hit("ep_undated", None, 0.3)
    hits = [old, other_user, far, undated]
    vectors = {"ep_old": vec(1, 0), "ep_x": vec(1, 0), "ep_far": vec(1, 1),
               "ep_undated": vec(1, 0)}
    ranked = latest_first(hits, keyed(hits, vectors), threshold=0.75)
    assert [h.id for h in ranked] == ["ep_old", "ep_x", "ep_far", "ep_undated"]


def test_an_earlier_version_never_moves_above_a_later_one() -> None:
    new = Hit("ep_new", "2026-06-01T10:00:00+00:00", 0.9)
    old = Hit("ep_old", "2026-03-01T10:00:00+00:00", 0.8)
    hits = [new, old]
    ranked = latest_first(hits, keyed(hits, {"ep_new": vec(1, 0), "ep_old": vec(1, 0)}),
                          threshold=RECENCY_COSINE)
    assert [h.id for h in ranked] == ["ep_new", "ep_old"]


class Toy:
    """Texts naming a car are close (the two statements at cosine 0.95); the rest orthogonal."""

    name, dim = "toy-cars", 8

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            if "Honda" in text:
                out[row, :2] = (1.0, 0.0)
            elif "Tesla" in text:
                out[row, :2] = (0.95, 0.312)
            else:
                out[row, 2 + row % 6] = 1.0
        return out


def cars(root: Path) -> tuple[Runtime, str, str]:
    """A runtime holding a car's two statements (March, June; :class:`Toy` vectors) and one
    unrelated Episode, indexed; the two statements' ids."""
    rt = make_runtime(root, ExtractiveLLM(), embedder=Toy())
    old = add_episode(rt, ANDREW, "2026-03-01T10:00:00+00:00", "Car",
                      "Sam drives a blue Honda Civic to work every day.")
    new = add_episode(rt, ANDREW, "2026-06-01T10:00:00+00:00", "Car",
                      "Sam drives a blue Tesla to work every day now.")
    add_episode(rt, ANDREW, "2026-06-05T10:00:00+00:00", "Bread",
                "Sam bakes bread on Sundays with his kids.")
    Indexer(rt).scan()
    return rt, old.id, new.id


def test_search_ranks_the_replacement_above_the_statement_it_superseded(root: Path) -> None:
    rt, old, new = cars(root)
    hits = search(rt, "Does Sam drive a Honda Civic?", top_k=3, user_id=ANDREW.user_id)
    ids = [h.id for h in hits]
    # the query words match the old statement better, yet its replacement comes first
    assert ids.index(new) < ids.index(old)
    assert len(ids) == 3  # nothing dropped: the old value still answers "what before?"
