"""The merge's topic clustering (llm/topics.py) gives scikit-learn's topics without importing it.

``average_linkage`` is SciPy's ``linkage(method="average")`` in numpy and ``topic_labels`` cuts
it as scikit-learn's ``AgglomerativeClustering(metric="precomputed", linkage="average",
distance_threshold=...)`` does. These compare the tree with SciPy's, bit for bit, and the
labels with scikit-learn's, on the same matrices: random ones, clustered ones, ones full of
ties and ones with distances exactly at the threshold.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.cluster.hierarchy import linkage
from sklearn.cluster import AgglomerativeClustering

from everos_reflect.llm.topics import TOPIC_COSINE, average_linkage, topic_labels


def sklearn_topics(sims: np.ndarray, threshold: float = TOPIC_COSINE) -> list[int]:
    """The code topics.py used before it dropped scikit-learn, verbatim."""
    n = len(sims)
    if n < 2:
        return [0] * n
    distance = np.clip(1.0 - np.asarray(sims, dtype=np.float64), 0.0, 2.0)
    distance = (distance + distance.T) / 2
    np.fill_diagonal(distance, 0.0)
    raw = AgglomerativeClustering(n_clusters=None, metric="precomputed", linkage="average",
                                  distance_threshold=1.0 - threshold).fit_predict(distance)
    renumber: dict[int, int] = {}
    return [renumber.setdefault(int(label), len(renumber)) for label in raw]


def _unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def _clustered(rng: np.random.Generator, n: int, centres: int, dim: int,
               spread: float) -> np.ndarray:
    base = rng.normal(size=(centres, dim))
    rows = base[rng.integers(centres, size=n)] + spread * rng.normal(size=(n, dim))
    vectors = _unit(rows).astype(np.float32)  # as the embedder gives them
    return vectors @ vectors.T


@pytest.mark.parametrize("seed", range(40))
def test_same_topics_as_scikit_learn_on_embedding_like_matrices(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 120))
    sims = _clustered(rng, n, int(rng.integers(1, 8)), 24, float(rng.uniform(0.2, 1.5)))
    for threshold in (TOPIC_COSINE, 0.3, 0.8):
        assert topic_labels(sims, threshold) == sklearn_topics(sims, threshold)


@pytest.mark.parametrize("seed", range(20))
def test_same_topics_with_ties_and_distances_at_the_threshold(seed: int) -> None:
    rng = np.random.default_rng(1000 + seed)
    n = int(rng.integers(2, 40))
    # similarities from a few values only: many equal distances, some exactly 1 - threshold
    values = np.array([1.0, TOPIC_COSINE, 0.9, 0.2, -0.1, 0.55, 0.45])
    sims = values[rng.integers(len(values), size=(n, n))]
    sims = np.triu(sims, 1) + np.triu(sims, 1).T + np.eye(n)
    assert topic_labels(sims) == sklearn_topics(sims)
    assert topic_labels(sims, 0.45) == sklearn_topics(sims, 0.45)


def _scipy_numbered(merges: np.ndarray, n: int) -> np.ndarray:
    """``merges`` numbered as SciPy numbers its tree: leaves 0..n-1, merge k makes node
    n + k; each row's two nodes, smaller first, then its distance."""
    parent = list(range(2 * n - 1))

    def find(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    rows = []
    for k, (a, b, dist) in enumerate(merges):
        x, y = find(int(a)), find(int(b))
        parent[x] = parent[y] = n + k
        rows.append((min(x, y), max(x, y), dist))
    return np.array(rows, dtype=np.float64).reshape(-1, 3)


def _tie_heavy(rng: np.random.Generator, n: int) -> np.ndarray:
    values = np.array([0.0, 0.45, 0.1, 0.8, 1.1, 0.45, 0.3])
    upper = np.triu(values[rng.integers(len(values), size=(n, n))], 1)
    return upper + upper.T


@pytest.mark.parametrize("seed", range(10))
def test_average_linkage_is_scipys_tree_bit_for_bit(seed: int) -> None:
    rng = np.random.default_rng(2000 + seed)
    for trial in range(60):
        n = int(rng.integers(2, 90))
        if trial % 3 == 0:
            distance = _tie_heavy(rng, n)
        else:
            sims = _clustered(rng, n, int(rng.integers(1, 6)), 16, float(rng.uniform(0.1, 1.5)))
            distance = np.clip(1.0 - sims.astype(np.float64), 0.0, 2.0)
            distance = np.triu(distance, 1) + np.triu(distance, 1).T
        upper, right = np.triu_indices(n, k=1)
        theirs = linkage(distance[upper, right], method="average")[:, :3]
        ours = _scipy_numbered(average_linkage(distance), n)
        assert np.array_equal(ours, theirs), (seed, trial, n)


def test_labels_follow_the_input_order() -> None:
    a, b = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    vectors = np.stack([b, a, b, a, a])
    assert topic_labels(vectors @ vectors.T) == [0, 1, 0, 1, 1]
    assert topic_labels(np.ones((1, 1))) == [0]
    assert topic_labels(np.ones((0, 0))) == []
