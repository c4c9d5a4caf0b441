"""Topics of a merge: which sentences of a narrative talk about the same thing.

A LoCoMo-style Episode summarises a whole conversation session, so a cluster of them mixes
several topics, and one chronological paragraph per day interleaves them. The extractive merge
therefore writes one paragraph per *topic* (each chronological inside), so a reader — or a
search snippet — that needs one topic reads one paragraph.

Topics are found by agglomerative clustering (scikit-learn, average linkage) on the sentences'
cosine distances: a sentence joins a topic only when it is close to the topic's sentences on
average, not to just one of them (single linkage would chain unrelated sentences). Pure logic:
a similarity matrix in, one label per sentence out.
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
    # Imported here, not at module level: scikit-learn pulls in SciPy (~90 MB resident, most of
    # a second to import), and ``serve`` reaches this module through search snippets without
    # ever merging. Only a merge with several sentences pays for it.
    from sklearn.cluster import AgglomerativeClustering

    raw = AgglomerativeClustering(n_clusters=None, metric="precomputed", linkage="average",
                                  distance_threshold=1.0 - threshold).fit_predict(distance)
    renumber: dict[int, int] = {}
    return [renumber.setdefault(int(label), len(renumber)) for label in raw]


__all__ = ["TOPIC_COSINE", "topic_labels"]
