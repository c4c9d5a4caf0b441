"""Topics of a merge: which sentences of a narrative talk about the same thing.

A LoCoMo-style Episode summarises a whole conversation session, so a cluster of them mixes
several topics, and one chronological paragraph per day interleaves them. The extractive merge
therefore writes one paragraph per *topic* (each chronological inside), so a reader — or a
search snippet — that needs one topic reads one paragraph.

Topics are found by agglomerative clustering (average linkage) on the sentences' cosine
distances: a sentence joins a topic only when it is close to the topic's sentences on average,
not to just one of them (single linkage would chain unrelated sentences). Pure logic: a
similarity matrix in, one label per sentence out.

This used to be scikit-learn's ``AgglomerativeClustering(metric="precomputed",
linkage="average", distance_threshold=...)``, which builds the tree with SciPy's ``linkage``
(the nearest-neighbour-chain algorithm) and undoes the merges at or above the threshold. Both
are done here in numpy, step for step and with the same arithmetic, so the tree is SciPy's bit
for bit and the topics are scikit-learn's (``tests/test_topics.py`` checks both on thousands of
matrices, ties and distances at the threshold included). Importing scikit-learn cost every
process that merged ~90 MB resident, SciPy alone ~30 MB — and a daemon keeps what it imported
(docs/memory.md).
"""

from __future__ import annotations

import numpy as np

#: Mean cosine (bundled MiniLM) at which sentences share a topic. Chosen on LoCoMo
#: conversations 0-4 (``bench/quality.py --samples 5``); never on what is reported.
TOPIC_COSINE = 0.55


def topic_labels(sims: np.ndarray, threshold: float = TOPIC_COSINE) -> list[int]:
    """One topic label per row of the cosine-similarity matrix ``sims``, numbered in order of
    each topic's first row (so the labels are deterministic and follow the input order).

    Rows that are close on average (average-linkage cosine ≥ ``threshold``) share a label.
    """
    n = len(sims)
    if n < 2:
        return [0] * n
    distance = np.clip(1.0 - np.asarray(sims, dtype=np.float64), 0.0, 2.0)
    distance = (distance + distance.T) / 2  # exact symmetry; float32 products may differ
    np.fill_diagonal(distance, 0.0)
    return _cut(average_linkage(distance), n, 1.0 - threshold)


def average_linkage(distance: np.ndarray) -> np.ndarray:
    """The merges of average-linkage clustering of a symmetric distance matrix, as SciPy's
    ``linkage(..., method="average")`` makes them, before it renumbers them: one row
    ``(a, b, distance)`` per merge, ``a < b`` the slots of the two groups (the merged group
    keeps slot ``b``), sorted by distance (stable).

    SciPy's nearest-neighbour chain, step for step: the chain starts at the first live slot;
    each step moves to the nearest live slot (the lowest-numbered of equally near ones, and
    back to the previous slot unless one is strictly nearer); two slots nearest to each other
    merge, and the merged group's distance to every other is
    ``(size_a * d_a + size_b * d_b) / (size_a + size_b)``, computed as SciPy computes it."""
    n = len(distance)
    d = np.array(distance, dtype=np.float64)  # a copy, updated as groups merge
    size = np.ones(n, dtype=np.int64)  # 0: the slot's group merged into another
    nowhere = np.full(n, np.inf)
    merges = np.empty((n - 1, 3))
    chain: list[int] = []
    for k in range(n - 1):
        if not chain:
            chain.append(int(np.flatnonzero(size)[0]))
        while True:
            x = chain[-1]
            if len(chain) > 1:  # the previous slot wins ties, so the chain never cycles
                y, nearest = chain[-2], d[x, chain[-2]]
            else:
                y, nearest = -1, np.inf
            row = np.where(size > 0, d[x], nowhere)
            row[x] = np.inf
            i = int(np.argmin(row))  # the first of equally near slots
            if row[i] < nearest:
                y, nearest = i, row[i]
            if len(chain) > 1 and y == chain[-2]:
                break
            chain.append(y)
        del chain[-2:]
        a, b = min(x, y), max(x, y)
        size_a, size_b = size[a], size[b]
        merges[k] = (a, b, nearest)
        size[a], size[b] = 0, size_a + size_b
        others = size > 0
        others[b] = False
        merged = (size_a * d[a, others] + size_b * d[b, others]) / (size_a + size_b)
        d[b, others] = merged
        d[others, b] = merged
    return merges[np.argsort(merges[:, 2], kind="mergesort")]


def _cut(merges: np.ndarray, n: int, distance_threshold: float) -> list[int]:
    """The flat topics of ``merges`` (:func:`average_linkage`) over ``n`` rows, cut as
    scikit-learn cuts the tree: it counts the merges at ``distance_threshold`` or above and
    undoes that many, the latest first. What stays is the merges before them in distance
    order; the topics are the groups those join."""
    kept = len(merges) - int(np.count_nonzero(merges[:, 2] >= distance_threshold))
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b, _ in merges[:kept]:
        parent[find(int(b))] = find(int(a))
    renumber: dict[int, int] = {}
    return [renumber.setdefault(find(i), len(renumber)) for i in range(n)]


__all__ = ["TOPIC_COSINE", "average_linkage", "topic_labels"]
