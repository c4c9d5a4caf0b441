"""The online clustering rule: which cluster a new live Episode joins. Pure, no I/O.

An Episode joins the most similar cluster of the same user that is *near it in time*; a topic
that comes back long after its cluster was consolidated may rejoin that cluster under a stricter
similarity; anything else starts a new cluster. The service (``service.py``) and the full rebuild
(``ClusterService.recluster``) both decide with :func:`choose_cluster` and update centroids with
:func:`fold`, so incremental assignment in (timestamp, id) order and a rebuild agree bit for bit.

Time rule (handles out-of-order arrivals): a cluster is *in the window* of an Episode at ``ts``
when the gap between ``ts`` and the cluster's span ``[first_ts, last_ts]`` is at most the window,
i.e. ``first_ts - window <= ts <= last_ts + window``. For the usual in-order arrival
(``ts >= last_ts``) this is exactly ``ts - last_ts <= window``; a late-arriving older Episode is
checked against the other side of the span the same way.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

JOIN = "join"  # in the time window, similarity >= threshold
REJOIN = "rejoin"  # consolidated cluster, any time, similarity >= rejoin_threshold
NEW = "new"  # nothing close enough: start a new cluster


@dataclass(frozen=True)
class Candidate:
    """What the rule needs to know about one existing cluster."""

    cluster_id: str
    centroid: np.ndarray  # float32, L2-normalised
    first_ts: float
    last_ts: float
    consolidated: bool  # holds a live Reflection narrative


@dataclass(frozen=True)
class Decision:
    """The rule's answer. ``cluster_id`` is None for a new cluster; ``similarity`` is the best
    cosine seen (to the chosen cluster, else to the closest candidate; 0.0 with no candidates)."""

    cluster_id: str | None
    similarity: float
    reason: str


def gap_seconds(ts: float, first_ts: float, last_ts: float) -> float:
    """Distance in seconds from ``ts`` to the span ``[first_ts, last_ts]`` (0 inside it)."""
    return max(0.0, first_ts - ts, ts - last_ts)


def in_window(ts: float, first_ts: float, last_ts: float, window_seconds: float) -> bool:
    return gap_seconds(ts, first_ts, last_ts) <= window_seconds


def choose_cluster(
    vector: np.ndarray,
    ts: float,
    candidates: Iterable[Candidate],
    *,
    threshold: float,
    window_seconds: float,
    rejoin_threshold: float,
) -> Decision:
    """Pick the cluster for an Episode with L2-normalised ``vector`` at epoch ``ts``.

    1. Join: among candidates in the time window, the most similar one if cosine >= threshold.
    2. Rejoin: else, among consolidated candidates regardless of time, the most similar one if
       cosine >= rejoin_threshold (stricter, so only a clearly recurring topic comes back).
    3. Else a new cluster.

    Ties go to the smaller cluster id, so the answer never depends on candidate order.
    """
    cands = list(candidates)
    if not cands:
        return Decision(None, 0.0, NEW)
    v = np.asarray(vector, dtype=np.float64)
    sims = np.stack([np.asarray(c.centroid, dtype=np.float64) for c in cands]) @ v
    best_join: tuple[float, str] | None = None
    best_rejoin: tuple[float, str] | None = None
    for cand, sim in zip(cands, sims.tolist(), strict=True):
        near = in_window(ts, cand.first_ts, cand.last_ts, window_seconds)
        if near and sim >= threshold and _better(sim, cand.cluster_id, best_join):
            best_join = (sim, cand.cluster_id)
        if cand.consolidated and sim >= rejoin_threshold and _better(
            sim, cand.cluster_id, best_rejoin
        ):
            best_rejoin = (sim, cand.cluster_id)
    if best_join is not None:
        return Decision(best_join[1], best_join[0], JOIN)
    if best_rejoin is not None:
        return Decision(best_rejoin[1], best_rejoin[0], REJOIN)
    return Decision(None, float(sims.max()), NEW)


def _better(sim: float, cluster_id: str, best: tuple[float, str] | None) -> bool:
    """Higher similarity wins; an exact tie goes to the smaller id."""
    return best is None or (-sim, cluster_id) < (-best[0], best[1])


def normalize(vector: np.ndarray) -> np.ndarray:
    """float32 unit vector; a vector already unit length (within 1e-6) is kept bit for bit."""
    v = np.asarray(vector, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(v.astype(np.float64)))
    if norm == 0.0 or not np.isfinite(norm):
        raise ValueError("cannot cluster a zero or non-finite vector")
    return v if abs(norm - 1.0) <= 1e-6 else (v / norm).astype(np.float32)


def fold(
    centroid: np.ndarray | None, norm: float, count: int, vector: np.ndarray
) -> tuple[np.ndarray, float]:
    """Add one member to a running mean kept as (unit direction, length of the mean).

    The stored centroid is the *normalised* mean; its length is kept beside it so the next
    update is the true mean of all members rather than a drift towards old members.
    Returns the new (centroid float32, norm).
    """
    v = np.asarray(vector, dtype=np.float64)
    if centroid is None or count == 0:
        mean = v
    else:
        mean = (np.asarray(centroid, dtype=np.float64) * norm * count + v) / (count + 1)
    length = float(np.linalg.norm(mean))
    if length < 1e-12:  # members cancel out exactly: keep the newest direction
        return np.asarray(v / np.linalg.norm(v), dtype=np.float32), 0.0
    return np.asarray(mean / length, dtype=np.float32), length


def mean_of(vectors: Iterable[np.ndarray]) -> tuple[np.ndarray | None, float, int]:
    """Fold ``vectors`` in the given order: the centroid a cluster of these members would have."""
    centroid: np.ndarray | None = None
    norm, count = 0.0, 0
    for v in vectors:
        centroid, norm = fold(centroid, norm, count, v)
        count += 1
    return centroid, norm, count


def cluster_id_for(
    app: str, project: str, user_id: str, first_member: str, attempt: int = 0
) -> str:
    """``cl_`` + 12 hex derived from the user and the first member, so a rebuild reproduces ids.

    ``attempt`` > 0 gives the next id when that one is taken (a member that founded a cluster,
    left it after an edit and founds another).
    """
    key = f"{app}/{project}/{user_id}/{first_member}"
    if attempt:
        key += f"#{attempt}"
    return "cl_" + hashlib.sha256(key.encode()).hexdigest()[:12]
