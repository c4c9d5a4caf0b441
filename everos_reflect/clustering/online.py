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
import math
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

JOIN = "join"  # in the time window, similarity >= threshold
REJOIN = "rejoin"  # consolidated cluster, any time, similarity >= rejoin_threshold
NEW = "new"  # nothing close enough: start a new cluster
VERSION = "version"  # in the window, under the threshold, with a member whose fact it changes

#: The least cosine (to the centroid, and member fit) at which an Episode that tells a change
#: joins a cluster holding an earlier member it is the newer version or the end of
#: (:func:`choose_version`). Chosen on bench/state_stories.json's calibration half: the
#: highest step (0.05 apart) that keeps every same-story pair read so (the lowest, "Marta
#: rents a flat in Leeds." / "The flat was let go.", sits at 0.288); no cross-story pair of
#: that half is read so at any cosine.
VERSION_FLOOR = 0.25


@dataclass(frozen=True)
class Candidate:
    """What the rule needs to know about one existing cluster."""

    cluster_id: str
    centroid: np.ndarray  # float32, L2-normalised
    first_ts: float
    last_ts: float
    consolidated: bool  # holds a live Reflection narrative
    norm: float = 1.0  # length of the members' mean vector (1.0 for a single member)


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
    """The one definition of "in the time window": every other window test (the run's bisect,
    the vectorised filters, the horizon) is derived from it through :func:`window_start` and
    :func:`window_end`, so no Episode is in the window for one test and out for another."""
    return gap_seconds(ts, first_ts, last_ts) <= window_seconds


def window_end(last_ts: float, window_seconds: float) -> float:
    """The greatest float ``t`` with ``t - last_ts <= window_seconds`` as floats compute it.

    ``t <= last_ts + window_seconds`` is not that test: the sum is rounded, so at the edge
    (e.g. epochs just past a power of two) a ``t`` one ulp out of the window by
    :func:`in_window` passes it, and with small timestamps one in the window fails it. A
    rounded difference is monotone in ``t``, so the set is ``t <= window_end(...)``
    exactly. With ``window_seconds`` negative (never in the window) this is ``-inf``."""
    if not window_seconds >= 0.0:
        return -math.inf
    guess = last_ts + window_seconds
    # the usual answer, checked inline: this runs for nearly every Episode a run places,
    # and the general search costs a closure and calls per test
    if guess - last_ts <= window_seconds and not (
            math.nextafter(guess, math.inf) - last_ts <= window_seconds):
        return guess
    return _edge(lambda t: t - last_ts <= window_seconds, guess, True)


def window_end_rows(last_ts: np.ndarray, window_seconds: float) -> np.ndarray:
    """:func:`window_end` of every element of ``last_ts`` (float64), for a whole run at once:
    its usual answer checked by the same float operations element by element (numpy's
    float64 subtraction and ``nextafter`` round as Python's do), and :func:`window_end`
    itself for an element that fails the check. The same floats as one call per element."""
    if not window_seconds >= 0.0:
        return np.full(last_ts.shape, -math.inf)
    with np.errstate(invalid="ignore"):  # inf - inf: not the usual answer, checked below
        guess = last_ts + window_seconds
        usual = ((guess - last_ts <= window_seconds)
                 & ~(np.nextafter(guess, math.inf) - last_ts <= window_seconds))
    for i in (~usual).nonzero()[0].tolist():
        guess[i] = window_end(float(last_ts[i]), window_seconds)
    return guess


def window_start(first_ts: float, window_seconds: float) -> float:
    """The least float ``t`` with ``first_ts - t <= window_seconds`` as floats compute it:
    the other side of :func:`window_end`. For ``window_seconds >= 0``,
    ``in_window(t, first, last, w)`` is exactly
    ``window_start(first, w) <= t <= window_end(last, w)``; it is also the least ``last_ts``
    a cluster may have to be in the window of an Episode at ``first_ts`` (the horizon)."""
    if not window_seconds >= 0.0:
        return math.inf
    guess = first_ts - window_seconds
    if first_ts - guess <= window_seconds and not (
            first_ts - math.nextafter(guess, -math.inf) <= window_seconds):
        return guess  # the usual answer, checked inline (see window_end)
    return _edge(lambda t: first_ts - t <= window_seconds, guess, False)


def _edge(ok: Callable[[float], bool], guess: float, upper: bool) -> float:
    """The last float (``upper``) or the first (not ``upper``) where the monotone ``ok``
    holds, found from ``guess`` (the rounded bound, normally the answer or one ulp off): a
    check of the guess and its neighbour, then a galloping search over the floats' order
    for the rare far case (operands of very different magnitudes)."""
    if math.isnan(guess):
        return guess
    out = math.inf if upper else -math.inf  # the direction ``ok`` turns false
    inn = -out
    if ok(guess) and not ok(math.nextafter(guess, out)):
        return guess
    # general case: over the integers that order the floats, find the boundary
    k = _order(guess)
    sign = 1 if upper else -1
    if ok(guess):  # move outwards until ok fails
        good, step = k, 1
        while True:
            bad = _clamp(k + sign * step)
            if not ok(_float(bad)):
                break
            if _float(bad) == out:
                return out
            good, step = bad, step * 2
    else:  # move inwards until ok holds
        bad, step = k, 1
        while True:
            good = _clamp(k - sign * step)
            if ok(_float(good)):
                break
            if _float(good) == inn:
                return math.nan  # ok holds nowhere (not with a non-NaN window)
            bad, step = good, step * 2
    while abs(bad - good) > 1:
        mid = (good + bad) // 2
        if ok(_float(mid)):
            good = mid
        else:
            bad = mid
    return _float(good)


_SIGN = 1 << 63
_INF_ORDER = 0x7FF0000000000000  # _order(inf)


def _order(x: float) -> int:
    """An integer that orders the non-NaN floats as they compare (adjacent floats differ by 1)."""
    i = struct.unpack("<q", struct.pack("<d", x))[0]
    return i if i >= 0 else -(i & (_SIGN - 1))


def _float(k: int) -> float:
    """The inverse of :func:`_order`."""
    bits = k if k >= 0 else (-k) | _SIGN
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


def _clamp(k: int) -> int:
    return max(-_INF_ORDER, min(_INF_ORDER, k))


def in_window_rows(ts: float, first_ts: np.ndarray, last_ts: np.ndarray,
                   window_seconds: float) -> np.ndarray:
    """:func:`in_window` over arrays of spans: the same float operations element by element
    (numpy's float64 subtraction rounds as Python's does), so the same answer per row."""
    gap = np.maximum(np.maximum(first_ts - ts, ts - last_ts), 0.0)
    return gap <= window_seconds


def choose_cluster(
    vector: np.ndarray,
    ts: float,
    candidates: Iterable[Candidate],
    *,
    threshold: float,
    window_seconds: float,
    rejoin_threshold: float,
    member_threshold: float = 0.0,
) -> Decision:
    """Pick the cluster for an Episode with L2-normalised ``vector`` at epoch ``ts``.

    1. Join: among candidates in the time window, the most similar one if cosine >= threshold.
    2. Rejoin: else, among consolidated candidates regardless of time, the most similar one if
       cosine >= rejoin_threshold (stricter, so only a clearly recurring topic comes back).
    3. Else a new cluster.

    Either way the Episode must also *fit the members*: see :func:`member_fit`. Ties go to the
    smaller cluster id, so the answer never depends on candidate order.
    """
    cands = list(candidates)
    if not cands:
        return Decision(None, 0.0, NEW)
    sims = similarities(np.stack([np.asarray(c.centroid) for c in cands]), vector)
    return choose_scored(
        [c.cluster_id for c in cands], sims,
        np.array([c.first_ts for c in cands], dtype=np.float64),
        np.array([c.last_ts for c in cands], dtype=np.float64),
        np.array([c.consolidated for c in cands], dtype=bool), ts,
        threshold=threshold, window_seconds=window_seconds, rejoin_threshold=rejoin_threshold,
        norms=np.array([c.norm for c in cands], dtype=np.float64),
        member_threshold=member_threshold)


def member_fit(similarity: float, norm: float) -> float:
    """Mean cosine of an Episode to a cluster's members, from its cosine to the centroid.

    The stored centroid is the members' mean direction and ``norm`` the mean's length, so
    ``mean_i(v · m_i) = v · mean = similarity × norm`` exactly, with no member vector read.
    The centroid alone is a loose test: a cluster whose members disagree has a short mean,
    and its normalised centroid sits between their topics, close to anything in between (a
    road trip and a video game both look like "hobbies" there). Requiring the mean cosine to
    the members as well keeps a cluster about one topic; a single member has norm 1, so the
    two tests agree until the cluster holds two or more."""
    return similarity * norm


def similarities(centroids: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """Cosines of ``vector`` with each row of ``centroids`` (unit vectors), in float64.

    ``einsum`` rather than a BLAS product on purpose: BLAS kernels round a row's dot product
    differently depending on where the row sits in the matrix, while the online path and a
    rebuild score the same cluster inside different candidate sets and must agree bit for bit.
    """
    return np.einsum("ij,j->i", np.asarray(centroids, dtype=np.float64),
                     np.asarray(vector, dtype=np.float64))


def choose_scored(
    ids: Sequence[str],
    sims: Sequence[float] | np.ndarray,
    first_ts: Sequence[float] | np.ndarray,
    last_ts: Sequence[float] | np.ndarray,
    consolidated: Sequence[bool] | np.ndarray,
    ts: float,
    *,
    threshold: float,
    window_seconds: float,
    rejoin_threshold: float,
    norms: Sequence[float] | np.ndarray | None = None,
    member_threshold: float = 0.0,
) -> Decision:
    """:func:`choose_cluster` on candidates given as aligned arrays with their cosines already
    computed (by :func:`similarities`): the form the in-memory centroid matrix scores in.
    ``norms`` are the clusters' mean lengths for :func:`member_fit` (None: every cluster is
    taken as tight, which with ``member_threshold`` 0 is the centroid-only rule).

    A plain loop: candidate sets are small (the time window plus the consolidated clusters
    within reach), where per-call numpy overhead would cost more than the work.
    """
    if len(ids) == 0:
        return Decision(None, 0.0, NEW)
    sim_list = sims.tolist() if isinstance(sims, np.ndarray) else list(sims)
    firsts = first_ts.tolist() if isinstance(first_ts, np.ndarray) else list(first_ts)
    lasts = last_ts.tolist() if isinstance(last_ts, np.ndarray) else list(last_ts)
    flags = consolidated.tolist() if isinstance(consolidated, np.ndarray) else list(consolidated)
    if norms is None:
        lengths = [1.0] * len(sim_list)
    else:
        lengths = norms.tolist() if isinstance(norms, np.ndarray) else list(norms)
    best_join: tuple[float, str] | None = None
    best_rejoin: tuple[float, str] | None = None
    for cid, sim, first, last, cons, norm in zip(ids, sim_list, firsts, lasts, flags, lengths,
                                                 strict=True):
        if member_fit(sim, norm) < member_threshold:
            continue
        if sim >= threshold and in_window(ts, first, last, window_seconds) \
                and _better(sim, cid, best_join):
            best_join = (sim, cid)
        if cons and sim >= rejoin_threshold and _better(sim, cid, best_rejoin):
            best_rejoin = (sim, cid)
    if best_join is not None:
        return Decision(best_join[1], best_join[0], JOIN)
    if best_rejoin is not None:
        return Decision(best_rejoin[1], best_rejoin[0], REJOIN)
    return Decision(None, max(sim_list), NEW)


def choose_version(
    ids: Sequence[str],
    sims: Sequence[float] | np.ndarray,
    first_ts: Sequence[float] | np.ndarray,
    last_ts: Sequence[float] | np.ndarray,
    norms: Sequence[float] | np.ndarray,
    ts: float,
    *,
    window_seconds: float,
    floor: float,
    holds_partner: Callable[[str], bool],
    read_first: Callable[[list[str]], None] | None = None,
) -> Decision | None:
    """The join of a fact's newer version, asked only when :func:`choose_scored` founds a new
    cluster for an Episode that tells a change: among the clusters in the time window with
    cosine and member fit at least ``floor``, the most similar (ties to the smaller id) that
    ``holds_partner``: a live member, earlier and in the window, whose fact the Episode is
    the newer version or the end of, read by the merge's words (``llm.extractive
    .tells_newer_version``: "Noor works at Arup." / "Noor was let go.", cosine 0.40).

    Such a pair says less in common than a restatement, so it sits under the threshold, and
    the member-fit rule (stricter than the threshold) would refuse every such join: the
    words stand in for the similarity, and ``floor`` for both tests. None: no such cluster
    (a new one, as before). ``read_first``: told the clusters ``holds_partner`` may then
    be asked of, in the order it will be, once before the first (so that their members
    can be read at once)."""
    order = sorted(
        (-sim, cid) for cid, sim, first, last, norm in zip(
            ids, sims.tolist() if isinstance(sims, np.ndarray) else sims,
            first_ts.tolist() if isinstance(first_ts, np.ndarray) else first_ts,
            last_ts.tolist() if isinstance(last_ts, np.ndarray) else last_ts,
            norms.tolist() if isinstance(norms, np.ndarray) else norms, strict=True)
        if sim >= floor and member_fit(sim, norm) >= floor
        and in_window(ts, first, last, window_seconds))
    if order and read_first is not None:
        read_first([cid for _, cid in order])
    for neg, cid in order:
        if holds_partner(cid):
            return Decision(cid, -neg, VERSION)
    return None


def _better(sim: float, cluster_id: str, best: tuple[float, str] | None) -> bool:
    """Higher similarity wins; an exact tie goes to the smaller id."""
    return best is None or (-sim, cluster_id) < (-best[0], best[1])


def normalize(vector: np.ndarray) -> np.ndarray:
    """float32 unit vector; a vector already unit length (within 1e-6) is kept bit for bit."""
    v = np.asarray(vector, dtype=np.float32).reshape(-1)
    norm = _length(v.astype(np.float64))
    if norm == 0.0 or not np.isfinite(norm):
        raise ValueError("cannot cluster a zero or non-finite vector")
    return v if abs(norm - 1.0) <= 1e-6 else (v / norm).astype(np.float32)


def normalize_rows(matrix: np.ndarray) -> np.ndarray:
    """:func:`normalize` applied to every row of a 2-D array, with the same bits, for a batch.

    A vectorised length rounds differently from :func:`normalize`'s (by ~1e-16), so it only
    settles the rows that are unit length with room to spare (within 1e-6 by more than 1e-9):
    those are kept as they are, exactly as :func:`normalize` keeps them; every other row goes
    through :func:`normalize` itself (and a zero or non-finite one raises, as there).
    """
    m = np.asarray(matrix, dtype=np.float32)
    if m.ndim != 2:
        raise ValueError(f"expected a 2-D array of vectors, got shape {m.shape}")
    m64 = m.astype(np.float64)
    lengths = np.sqrt(np.einsum("ij,ij->i", m64, m64))
    sure = np.abs(lengths - 1.0) <= 1e-6 - 1e-9
    if sure.all():
        return m
    out = m.copy()
    for i in np.flatnonzero(~sure):
        out[i] = normalize(m[i])
    return out


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
    length = _length(mean)
    if length < 1e-12:  # members cancel out exactly: keep the newest direction
        return np.asarray(v / _length(v), dtype=np.float32), 0.0
    return np.asarray(mean / length, dtype=np.float32), length


def _length(v: np.ndarray) -> float:
    """Euclidean length of a 1-D float64 vector: ``sqrt(v·v)``, the same operations (and
    bits) as ``np.linalg.norm`` without its generic-dispatch overhead."""
    return math.sqrt(float(np.dot(v, v)))


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
