"""Topics of a merge: which sentences of a narrative talk about the same thing.

A LoCoMo-style Episode summarises a whole conversation session, so a cluster of them mixes
several topics, and one chronological paragraph per day interleaves them. The extractive merge
therefore writes one paragraph per *topic* (each chronological inside), so a reader — or a
search snippet — that needs one topic reads one paragraph.

Topics are found by agglomerative clustering (average linkage) on the sentences' cosine
distances: a sentence joins a topic only when it is close to the topic's sentences on average,
not to just one of them (single linkage would chain unrelated sentences). Pure logic: a
similarity matrix in, one label per sentence out.

The tree comes from SciPy's ``linkage``, cut where scikit-learn's ``AgglomerativeClustering``
(``metric="precomputed"``, ``distance_threshold``) cuts it: that estimator builds this very tree
with this very call, so the topics are the same (``tests/test_topics.py`` checks it against
scikit-learn). Importing scikit-learn only for that call cost a Reflection run ~60 MB resident
(~1,700 modules loaded against ~980 for ``scipy.cluster.hierarchy``; docs/memory.md).
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
    # Imported here, not at module level: SciPy is ~30 MB resident and a fraction of a second
    # to import, and ``serve`` reaches this module through search snippets without ever
    # merging. Only a merge with several sentences pays for it.
    from scipy.cluster.hierarchy import linkage

    upper, right = np.triu_indices(n, k=1)
    tree = linkage(distance[upper, right], method="average")
    return _cut(tree, n, 1.0 - threshold)


def _cut(tree: np.ndarray, n: int, distance_threshold: float) -> list[int]:
    """The flat topics of a linkage ``tree`` over ``n`` rows, cut as scikit-learn cuts it.

    scikit-learn counts the merges at ``distance_threshold`` or above and undoes that many,
    the latest first. ``linkage`` lists merges by ascending distance (average linkage never
    merges below an earlier merge), so what stays is the merges before the first one at the
    threshold: the topics are the groups those join."""
    kept = len(tree) - int(np.count_nonzero(tree[:, 2] >= distance_threshold))
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    # node n + k is the group merge k made; its first leaf stands for it
    leaf = list(range(n)) + [0] * len(tree)
    for k in range(kept):
        a, b = leaf[int(tree[k, 0])], leaf[int(tree[k, 1])]
        parent[find(b)] = find(a)
        leaf[n + k] = a
    renumber: dict[int, int] = {}
    return [renumber.setdefault(find(i), len(renumber)) for i in range(n)]


__all__ = ["TOPIC_COSINE", "topic_labels"]
