"""One user's clusters in memory: the centroid matrix the online rule scores against.

The service used to load its candidates from SQLite for every Episode (a query, a blob decode
and a Python loop per candidate); here they live in numpy arrays, loaded once per user and kept
in step with ``system.db`` by the service (:mod:`service`). Two structures keep the work per
Episode independent of how long the user's history is:

- **Time window.** ``recent`` holds every cluster whose ``last_ts`` is at or after
  ``horizon``; the horizon follows the newest Episode minus the window, and a lazy heap of
  ``(last_ts, id)`` drops clusters that fell behind it. An Episode older than the horizon (a
  late arrival) is checked against every row instead — exact, just slower, and rare.
- **Consolidated clusters** can be rejoined at any age, so they cannot be bounded by time. They
  are grouped around pivots (a consolidated centroid within ``GROUP_COS`` of a pivot joins its
  group); a group whose pivot is further from the Episode than the group's radius plus the
  rejoin angle cannot hold a cluster the Episode may rejoin (triangle inequality on angles), so
  it is skipped, and so is a member whose own angle to the pivot leaves it out of reach. Only
  the pairs left are scored: exact, never approximate. A run decides this per Episode
  (between them, a run's 256 Episodes reach nearly every group, so a per-run union grew with
  history), and scores the pairs left, not a matrix.

Candidates are then scored with :func:`online.similarities` and decided by
:func:`online.choose_scored`, exactly as the pure rule decides.
"""

from __future__ import annotations

import bisect
import heapq
import math
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

from everos_reflect.clustering.online import (
    JOIN,
    NEW,
    REJOIN,
    Candidate,
    Decision,
    choose_scored,
    choose_version,
    fold,
    in_window,
    in_window_rows,
    similarities,
    window_end,
    window_end_rows,
    window_start,
)

#: a consolidated centroid at least this close (cosine) to a pivot joins that pivot's group
GROUP_COS = 0.9
#: slack (radians) for rounding in the angle bound, so pruning never drops a true candidate
_ANGLE_SLACK = 1e-6
#: relative slack for vectors and centroids that are unit length only to within rounding
_NORM_SLACK = 4e-6
#: a group of at least this many members is scored as one block (the vectors that reach it
#: against all its members, one BLAS product); a smaller one pair by pair, gathered
BLOCK_MEMBERS = 8
#: pairs gathered per step when pairs are scored one by one (see :func:`_pair_dots`)
_CHUNK = 128
#: a run of at most this many items finds where each item's window ends in Python (a
#: bisection each) rather than with the array calls, whose fixed cost (~7 µs) was most of
#: a small run's set-up: a watcher's flush of one Episode is a run of one
_SMALL_RUN = 12


@dataclass
class ClusterRow:
    """Working copy of one ``clusters`` row."""

    cluster_id: str
    centroid: np.ndarray  # float32, unit length
    norm: float
    count: int
    first_ts: float
    last_ts: float
    consolidated_entry_id: str | None = None

    @classmethod
    def new(cls, cluster_id: str, vector: np.ndarray, ts: float,
            narrative: str | None = None) -> ClusterRow:
        """A one-member cluster; built with :func:`fold` like every later update, so a
        rebuild reproduces the stored centroid bit for bit."""
        centroid, norm = fold(None, 0.0, 0, vector)
        return cls(cluster_id, centroid, norm, 1, ts, ts, narrative)

    def candidate(self) -> Candidate:
        return Candidate(self.cluster_id, self.centroid, self.first_ts, self.last_ts,
                         self.consolidated_entry_id is not None, self.norm)

    def add(self, vector: np.ndarray, ts: float) -> None:
        self.centroid, self.norm = fold(self.centroid, self.norm, self.count, vector)
        self.count += 1
        self.first_ts = min(self.first_ts, ts)
        self.last_ts = max(self.last_ts, ts)


class _PivotGroups:
    """The consolidated clusters, grouped around pivot directions: the index that bounds the
    clusters a vector may rejoin.

    A consolidated cluster can be rejoined at any age, so time cannot bound them; their number
    grows with history (one owner ×20 with monthly consolidation: ~60 early, ~400 at the end).
    Scoring all of them for every Episode made an assignment cost grow with history. Grouped
    around pivots, a group whose pivot is further (in angle) from the vector than the group's
    radius plus the rejoin angle holds no cluster within reach (triangle inequality on angles
    between directions), so it is skipped; in a group in reach, a member is skipped when its own
    angle to the pivot leaves it out of reach by the same inequality; the pairs left are scored,
    each exactly. Pruning is decided per vector, never for a whole run at once (a run's
    256 Episodes reach most groups between them, while each one reaches a few).

    Group membership is kept as sets of ids (a cluster moves, joins or leaves in O(1)), and
    each member also has a slot in three arrays (its row position, group and spread); the
    members' positions grouped by group are laid out from those arrays by one stable sort
    when a query needs them and membership changed since (a join that keeps a cluster in
    its group, or a row moved into a removed one's place, updates the layout in place).
    Building the layout from the sets and dicts in Python cost ~3 ms per run at 2,500
    consolidated clusters, and with consolidation between every two runs it was rebuilt for
    each. Groups emptied by members that drifted away are dropped between runs
    (:meth:`compact`)."""

    def __init__(self) -> None:
        self.pivots: list[np.ndarray] = []  # float64 unit directions
        self.matrix: np.ndarray | None = None  # stacked pivots, rebuilt when pivots change
        self.matrix32 = np.empty((0, 0), dtype=np.float32)  # the same in float32, for bounds
        self.radius: list[float] = []  # max angle (radians) of a member's direction to its pivot
        self.members: list[set[str]] = []
        self.group_of: dict[str, int] = {}
        #: each member's own angle (radians) to its group's pivot, as of its last put
        self.spread: dict[str, float] = {}
        #: members' row positions grouped by group, their spreads in the same order, each
        #: group's start and size in them
        self._layout: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
        #: each member's slot in the arrays below (kept while it stays a member)
        self._slot: dict[str, int] = {}
        self._free: list[int] = []  # slots given up by members that left
        self._used = 0  # slots ever handed out (the arrays' live prefix)
        self._slot_pos = np.empty(0, dtype=np.int64)  # the member's row position
        self._slot_group = np.empty(0, dtype=np.int64)  # its group, -1 for a free slot
        self._slot_spread = np.empty(0, dtype=np.float64)  # its spread (as ``spread``)
        #: slot -> index in the layout, while the layout holds
        self._where = np.empty(0, dtype=np.int64)
        #: groups left without members (their pivots still cost a column of the bounds)
        self.emptied = 0

    def put(self, cluster_id: str, centroid: np.ndarray, position: int) -> None:
        """Place (or move) a consolidated cluster whose centroid is ``centroid`` and whose
        row position is ``position``."""
        c = np.asarray(centroid, dtype=np.float64)
        length = math.sqrt(float(np.dot(c, c)))
        g = self.group_of.get(cluster_id)
        if g is not None:
            cos = float(np.dot(self.pivots[g], c)) / length
            if cos >= GROUP_COS:
                angle = _angle(cos)
                if angle > self.radius[g]:
                    self.radius[g] = angle
                self.spread[cluster_id] = angle
                slot = self._slot[cluster_id]
                self._slot_spread[slot] = angle
                self._slot_pos[slot] = position
                if self._layout is not None:  # same group: its spread moved, in place
                    at = self._where[slot]
                    self._layout[1][at] = angle
                    self._layout[0][at] = position
                return
            self.discard(cluster_id)
        self._layout = None
        if self.pivots:
            # an einsum, not ``@``: OpenBLAS runs this (pivots × dim) gemv on every core,
            # and its threads then spin, billed to the process, through whatever follows
            sims = np.einsum("ij,j->i", self._matrix(), c) / length
            g = int(np.argmax(sims))
            if sims[g] >= GROUP_COS:
                angle = _angle(float(sims[g]))
                if not self.members[g]:
                    self.emptied -= 1
                self.members[g].add(cluster_id)
                self.group_of[cluster_id] = g
                self.spread[cluster_id] = angle
                self.radius[g] = max(self.radius[g], angle)
                self._take_slot(cluster_id, g, angle, position)
                return
        self.pivots.append(c / length)
        self.matrix = None
        self.radius.append(0.0)
        self.members.append({cluster_id})
        self.group_of[cluster_id] = len(self.pivots) - 1
        self.spread[cluster_id] = 0.0
        self._take_slot(cluster_id, len(self.pivots) - 1, 0.0, position)

    def _take_slot(self, cluster_id: str, group: int, spread: float, position: int) -> None:
        if self._free:
            slot = self._free.pop()
        else:
            slot = self._used
            self._used += 1
            if slot >= self._slot_group.size:
                cap = max(64, 2 * self._slot_group.size)
                for name in ("_slot_pos", "_slot_group", "_slot_spread"):
                    getattr(self, name).resize(cap, refcheck=False)
        self._slot[cluster_id] = slot
        self._slot_pos[slot] = position
        self._slot_group[slot] = group
        self._slot_spread[slot] = spread

    def discard(self, cluster_id: str) -> None:
        g = self.group_of.pop(cluster_id, None)
        if g is not None:
            self.members[g].discard(cluster_id)  # the radius stays: an upper bound is enough
            self.spread.pop(cluster_id, None)
            slot = self._slot.pop(cluster_id)
            self._slot_group[slot] = -1
            self._free.append(slot)
            self._layout = None
            if not self.members[g]:
                self.emptied += 1

    def moved(self, cluster_id: str, position: int) -> None:
        """``cluster_id``'s row now sits at ``position`` (moved into a removed one's place);
        nothing to do unless it is a member."""
        slot = self._slot.get(cluster_id)
        if slot is not None:
            self._slot_pos[slot] = position
            if self._layout is not None:
                self._layout[0][self._where[slot]] = position

    def compact(self) -> None:
        """Drop the groups left empty and shrink every radius to its members' spreads.

        A member that drifts out of its group founds a new pivot (or joins another) and
        leaves its old group behind, possibly empty, with a radius that only ever grew: one
        owner ×20 with monthly consolidation left ~12 % of its pivots empty, and every pivot
        costs a column of :meth:`cosines` for every Episode. Called between runs (the group
        numbers of a run's bounds stay valid within it); the index stays exact, since every
        member's spread is its angle to the pivot as of its last :meth:`put`."""
        keep = [g for g, m in enumerate(self.members) if m]
        radius = [max((self.spread[c] for c in self.members[g]), default=0.0) for g in keep]
        if len(keep) == len(self.members) and radius == self.radius:
            return
        renumber = {g: n for n, g in enumerate(keep)}
        self.pivots = [self.pivots[g] for g in keep]
        self.members = [self.members[g] for g in keep]
        self.radius = radius
        self.group_of = {c: renumber[g] for c, g in self.group_of.items()}
        numbers = np.full(max(renumber, default=0) + 1, -1, dtype=np.int64)
        numbers[list(renumber)] = list(renumber.values())
        groups = self._slot_group[:self._used]
        live = groups >= 0
        groups[live] = numbers[groups[live]]
        self.matrix = None
        self._layout = None
        self.emptied = 0

    def tidy(self) -> None:
        """:meth:`compact` once more than a sixteenth of the groups are empty (so that a run
        of a few Episodes does not restack the pivots for each emptied group)."""
        if self.emptied and self.emptied * 16 > len(self.pivots):
            self.compact()

    def cosines(self, vectors: np.ndarray) -> np.ndarray:
        """Upper bounds on the cosine between the direction of each of ``vectors`` (rows,
        unit to within rounding) and each pivot: ``(vectors, pivots)``, float64.

        A bound only, so it is computed in float32, made safe by adding the float32 error
        bound of a ``dim``-term dot product of unit vectors (``2 (dim + 2) 2^-24``, twice the
        textbook ``dim u``), which any summation order obeys: so a BLAS product, on one
        thread (:func:`one_blas_thread`). OpenBLAS would run a 256 × 384 × 260 product on
        every core, and its threads spin on after it (a late run of one owner ×20 cost more
        than twice the CPU time on a busy two-core host); the ``einsum`` used before instead
        was ~5× slower than one BLAS thread (~10 µs per Episode at 260 pivots). The pruning
        tests compare these cosines with the cosines of their angle limits
        (:func:`_cos_limit`) instead of taking ``arccos`` of the whole matrix."""
        pivots = self._matrix32()
        v32 = np.asarray(vectors, dtype=np.float32).reshape(-1, pivots.shape[1])
        v64 = v32.astype(np.float64)
        lengths = np.sqrt(np.einsum("ij,ij->i", v64, v64))
        with one_blas_thread():
            product = v32 @ pivots.T
        cos = product / np.maximum(lengths, 1e-300)[:, None]
        cos += 2.0 * (pivots.shape[1] + 2) * 2.0 ** -24
        return cos

    def pairs(self, cosines: np.ndarray, reach: float,
              pos: dict[str, int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(rows, items)``: every (consolidated cluster, vector) pair that may be within
        the angle ``reach`` (:func:`_reach`), as row positions and indices into the vectors
        ``cosines`` (:meth:`cosines`) was computed for. (The positions are those given to
        :meth:`put` and :meth:`moved`; ``pos``, the owner's map, is no longer read.) Every
        pair whose product can reach the threshold ``reach`` stands for is among them; the
        caller scores them exactly.

        Two triangle inequalities on angles, both exact: a group whose pivot is further from
        the vector than its radius plus ``reach`` is skipped whole; in a group that is kept,
        a member is dropped too when the vector's angle to the pivot exceeds the member's own
        angle to it (its spread) plus ``reach``. The second test costs a comparison per
        pair, where scoring a pair gathers two rows of ``dim`` floats; it cut the pairs left
        per Episode at the end of one owner ×20 from ~26 to ~18."""
        empty = np.empty(0, dtype=np.int64)
        if not self.group_of or cosines.size == 0:
            return empty, empty
        items, groups = self._reached(cosines, reach)
        flat, spreads, starts, sizes = self._positions()
        at, items = self._members_near(cosines, items, groups, reach, spreads, starts, sizes)
        return flat[at], items

    def near(self, cosines: np.ndarray, vectors: np.ndarray, centroids: np.ndarray,
             reach: float, floor: float) -> tuple[np.ndarray, np.ndarray]:
        """``(rows, items)``: the pairs of :meth:`pairs` whose float32 product
        (``vectors[item] · centroids[row]``) reaches ``floor``, which the caller sets below its
        threshold by that product's error bound: every pair whose exact product reaches the
        threshold is among them, and few others.

        Scoring is what grows with history (one owner ×184 with monthly consolidation:
        ~180 members of groups in reach per Episode at the end, ~8 of them at or above the
        rejoin threshold), and gathering two 384-float rows per pair is most of its cost. So
        a group of ``BLOCK_MEMBERS`` or more is scored as one block: its members' rows
        against the rows of the vectors that reach it, one float32 BLAS product on one
        thread, without the members' own angle test (every member is scored, at a fraction
        of a gathered pair's cost). Smaller groups (most are singletons) keep that test and
        are scored pair by pair, in steps of ``_CHUNK``. Run with BLAS on one thread
        (:func:`one_blas_thread`)."""
        empty = np.empty(0, dtype=np.int64)
        if not self.group_of or cosines.size == 0:
            return empty, empty
        items, groups = self._reached(cosines, reach)
        if not items.size:
            return empty, empty
        flat, spreads, starts, sizes = self._positions()
        big = sizes[groups] >= BLOCK_MEMBERS
        found_rows: list[np.ndarray] = []
        found_items: list[np.ndarray] = []
        if not big.all():
            small = ~big
            at, its = self._members_near(cosines, items[small], groups[small], reach, spreads,
                                         starts, sizes)
            rows = flat[at]
            keep = _pair_dots(centroids, rows, vectors, its) >= floor
            found_rows.append(rows[keep])
            found_items.append(its[keep])
        if big.any():
            block_items, block_groups = items[big], groups[big]
            order = np.argsort(block_groups, kind="stable")
            block_items, block_groups = block_items[order], block_groups[order]
            cuts = (np.flatnonzero(block_groups[1:] != block_groups[:-1]) + 1).tolist()
            for lo, hi in zip([0, *cuts], [*cuts, block_groups.size], strict=True):
                g = int(block_groups[lo])
                start = int(starts[g])
                members = flat[start:start + int(sizes[g])]
                its = block_items[lo:hi]
                ii, mm = (vectors[its] @ centroids[members].T >= floor).nonzero()
                if ii.size:
                    found_rows.append(members[mm])
                    found_items.append(its[ii])
        if not found_rows:
            return empty, empty
        return np.concatenate(found_rows), np.concatenate(found_items)

    def _reached(self, cosines: np.ndarray, reach: float) -> tuple[np.ndarray, np.ndarray]:
        """``(items, groups)`` whose pivot bound leaves the group within ``reach``."""
        width = cosines.shape[1]
        return (cosines >= _cos_limit(np.asarray(self.radius[:width]) + reach)).nonzero()

    @staticmethod
    def _members_near(cosines: np.ndarray, items: np.ndarray, groups: np.ndarray,
                      reach: float, spreads: np.ndarray, starts: np.ndarray,
                      sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each (item, group) pair expanded to one pair per member of the group, less the
        members whose own angle to the pivot leaves them out of ``reach``: ``(layout slots,
        items)``."""
        counts = sizes[groups]
        total = int(counts.sum())
        if total == 0:
            empty = np.empty(0, dtype=np.int64)
            return empty, empty
        ends = np.cumsum(counts)
        at = np.repeat(starts[groups] - (ends - counts), counts) + np.arange(total,
                                                                            dtype=np.int64)
        near = np.repeat(cosines[items, groups], counts) >= _cos_limit(spreads[at] + reach)
        return at[near], np.repeat(items, counts)[near]

    def _positions(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(positions, spreads, starts, sizes)``: the members' row positions and spreads
        grouped by group (a stable sort of the live slots by group), each group's start and
        size in them."""
        if self._layout is None:
            groups = self._slot_group[:self._used]
            live = np.flatnonzero(groups >= 0)
            order = live[np.argsort(groups[live], kind="stable")]
            sizes = np.bincount(groups[order], minlength=len(self.members))
            self._where = np.empty(self._used, dtype=np.int64)
            self._where[order] = np.arange(order.size, dtype=np.int64)
            self._layout = (self._slot_pos[order], self._slot_spread[order],
                            np.cumsum(sizes) - sizes, sizes)
        return self._layout

    def _matrix(self) -> np.ndarray:
        if self.matrix is None:
            self.matrix = np.stack(self.pivots)
            self.matrix32 = self.matrix.astype(np.float32)
        return self.matrix

    def _matrix32(self) -> np.ndarray:
        self._matrix()
        return self.matrix32


def _pair_dots(left: np.ndarray, rows: np.ndarray, right: np.ndarray,
               items: np.ndarray) -> np.ndarray:
    """``left[rows[k]] · right[items[k]]`` for every k, in the wider of the two dtypes (a
    float32 row is widened first when ``right`` is float64), by ``einsum("ij,ij->i")``: the
    per-pair dot kernel of :func:`online.similarities`, so a float64 result has the bits
    :meth:`UserClusters.choose` computes for the pair.

    In steps of ``_CHUNK`` pairs: gathering thousands of rows at once made temporaries of
    several MB, which glibc maps fresh and returns on every call, and their page faults
    cost ~7× the products (0.57 ms in steps against 4.0 ms at once for 1,900 pairs)."""
    wide = right.dtype == np.float64
    out = np.empty(rows.size, dtype=np.float64 if wide else np.float32)
    for lo in range(0, rows.size, _CHUNK):
        hi = lo + _CHUNK
        a = left[rows[lo:hi]]
        np.einsum("ij,ij->i", a.astype(np.float64) if wide else a, right[items[lo:hi]],
                  out=out[lo:hi])
    return out


_BLAS_CONTROLLER: Any = None
#: held through every block of :func:`one_blas_thread` (re-entrant: a block may nest)
_BLAS_LOCK = threading.RLock()
#: how deep this thread is in :func:`one_blas_thread` blocks (``depth``)
_BLAS_HELD = threading.local()


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """A context in which BLAS runs on one thread (``threadpoolctl``), for the float32
    products of the pivot index.

    Why: OpenBLAS splits a product above ~262k multiply-adds over every core and its
    threads spin on after it, billed to the process; on a shared two-core host that cost
    more than the product itself. numpy has no switch for it. The controller (which scans
    the loaded libraries once, a few ms) is made on first use; the limit is process-wide
    while it holds, so another thread's BLAS call meanwhile runs on one thread too (slower,
    never different: these products are bounds and filters with an error margin).

    One block at a time in the process (``_BLAS_LOCK``), each lowering and restoring the
    limit on its own thread: two blocks that overlapped each saved the count they found, so
    the one that left last put back the other's 1 and BLAS stayed on one thread for good;
    and OpenBLAS (0.3.31) ignores raising the count from a thread other than the one that
    lowered it, so a count shared between threads cannot fix that. The blocks are products
    of a few ms.

    A block nested in another of the same thread costs only the lock: the limit already
    holds. Changing OpenBLAS's count and putting it back costs ~15 µs (it resizes its pool),
    more than the one-row product it guards, so a loop of many such products (a rebuild
    replaying a long history, :meth:`UserClusters.choose` per Episode) holds one block
    around a step of them (``BLAS_STEP``)."""
    global _BLAS_CONTROLLER
    with _BLAS_LOCK:
        depth = getattr(_BLAS_HELD, "depth", 0)
        if depth:
            _BLAS_HELD.depth = depth + 1
            try:
                yield
            finally:
                _BLAS_HELD.depth = depth
            return
        if _BLAS_CONTROLLER is None:
            from threadpoolctl import ThreadpoolController

            _BLAS_CONTROLLER = ThreadpoolController()
        with _BLAS_CONTROLLER.limit(limits=1, user_api="blas"):
            _BLAS_HELD.depth = 1
            try:
                yield
            finally:
                _BLAS_HELD.depth = 0


#: at most this many consolidated clusters, an Episode's rule scores them all instead of
#: bounding them with the pivot index (:meth:`UserClusters.candidate_positions`)
SCORE_ALL_CONSOLIDATED = 32

#: Episodes a rebuild replays per :func:`one_blas_thread` block (another thread's block, the
#: watcher's assignments meanwhile, waits for one step, a few ms to ~50 ms, not the replay)
BLAS_STEP = 256


def _cos_limit(angles: np.ndarray) -> np.ndarray:
    """The cosines of angle limits (radians), for comparing cosine bounds with them: a
    direction at a cosine of at least ``cos(a)`` from a pivot is within the angle ``a`` of it
    (cosine falls monotonically on [0, π]). A limit of π or more keeps everything (-inf)."""
    return np.where(angles < math.pi, np.cos(np.minimum(angles, math.pi)), -np.inf)


def _cos_at(angle: float) -> float:
    """:func:`_cos_limit` of one angle, in Python floats."""
    return math.cos(angle) if angle < math.pi else -math.inf


def _reach(rejoin_threshold: float) -> float:
    """The widest angle between the directions of a vector and a centroid whose product can
    still reach ``rejoin_threshold``. The rule compares raw products, and its vectors are
    unit only to within 1e-6 (:func:`online.normalize` keeps those as they are), centroids to
    float32 rounding: a product can exceed the cosine of the directions by a factor up to
    ~1 + 1.2e-6, so the threshold is lowered by more than that before taking its angle, and
    ``_ANGLE_SLACK`` covers the rounding of the angles themselves and of the cosines of the
    limits they are compared as (:func:`_cos_limit`)."""
    if rejoin_threshold <= 0.0:
        return math.pi
    return _angle(rejoin_threshold * (1.0 - _NORM_SLACK)) + _ANGLE_SLACK


#: how far below a floor a cosine may still reach it when computed in float32 (twice the
#: error bound of a 384-term float32 dot product of unit vectors, ~9e-5): :func:`_may_reach`
#: keeps any cluster that close
_FLOOR_SLACK = 2e-4
#: :func:`_may_reach` scores at most this many clusters a run changed (more: it says yes)
_REACH_ROWS = 16
#: :meth:`UserClusters.assign_run` reads which items a cluster as it stood before the run
#: may take for the join of a newer version only up to this many (cluster, item) pairs
#: (~30 µs); past it every item that would found a cluster is asked, as before: the test
#: costs ~0.6 ms at 300 clusters × 256 items, and one owner with that many clusters in a
#: run's window has one near nearly every Episode anyway (84 % of one owner ×20's)
_REACH_PAIRS = 4096


#: ``np.einsum`` without ``optimize`` returns this call's result, behind a dispatch that costs
#: ~0.7 µs a call; the run rescores with it once per Episode (the same kernel, the same bits)
try:
    from numpy._core.multiarray import c_einsum as _c_einsum
except ImportError:  # pragma: no cover - a numpy laid out otherwise
    _c_einsum = np.einsum


def _may_reach(c32: np.ndarray, first: np.ndarray, last: np.ndarray, changed: Collection[int],
               vector: np.ndarray, ts: float, window: float, floor: float) -> bool:
    """May one of the rows ``changed`` (positions in ``c32``: the clusters a run created or
    changed so far) in the time window of ``ts`` score at least ``floor`` against ``vector``
    (float32, unit)? With the run's scores of the clusters as they stood before it, this
    tells whether any cluster may: a test that may say yes for none, never no for one. A
    float32 product, against the floor less :data:`_FLOOR_SLACK`; the window by its ends,
    as :meth:`UserClusters._run_rows` takes it. Past :data:`_REACH_ROWS` rows it says yes
    unasked: gathering them would cost what it saves (one owner's run of 256 changes ~170;
    a LoCoMo speaker's, ~13)."""
    if len(changed) > _REACH_ROWS:
        return True
    if not changed:
        return False
    lo, hi = window_start(ts, window), window_end(ts, window)
    rows = [p for p in changed if first.item(p) <= hi and last.item(p) >= lo]
    if not rows:
        return False
    # (``take`` gathers a list of rows without first making an index array of it, and a
    # few products are compared as Python floats: ~2 µs less a call, asked of most
    # Episodes that found a cluster of a LoCoMo speaker)
    return max(c32.take(rows, axis=0).dot(vector).tolist()) >= floor - _FLOOR_SLACK


def _choose_live(hits: list[tuple[int, int, float]], version: dict[int, int], ids: list[str],
                 first: np.ndarray, last: np.ndarray, norm: np.ndarray,
                 consolidated: np.ndarray, ts: float, threshold: float, window: float,
                 rejoin_threshold: float, member_threshold: float,
                 far: tuple[float, str] | None = None) -> tuple[str, float, str] | None:
    """:func:`online.choose_scored` over the pairs of ``hits`` still current (scored against
    the version of the row they name), for :meth:`UserClusters.assign_run`: the same tests in
    the same float operations (``member_fit``, ``in_window``, ties to the smaller id), in one
    loop over Python scalars instead of five lists per Episode. ``far``: the best rejoin
    among the clusters out of every window of the run and unchanged in it
    (:func:`_best_unchanged`), which compete with the rejoins of ``hits``. None: a new
    cluster."""
    best_join: tuple[float, str] | None = None
    best_rejoin: tuple[float, str] | None = far
    for p, ver, sim in hits:
        if version.get(p, 0) != ver or sim * norm.item(p) < member_threshold:
            continue
        if sim >= threshold and in_window(ts, first.item(p), last.item(p), window):
            cid = ids[p]
            if best_join is None or (-sim, cid) < (-best_join[0], best_join[1]):
                best_join = (sim, cid)
        if sim >= rejoin_threshold and consolidated.item(p):
            cid = ids[p]
            if best_rejoin is None or (-sim, cid) < (-best_rejoin[0], best_rejoin[1]):
                best_rejoin = (sim, cid)
    if best_join is not None:
        return best_join[1], best_join[0], JOIN
    if best_rejoin is not None:
        return best_rejoin[1], best_rejoin[0], REJOIN
    return None


def _best_unchanged(rows: list[int], sims: list[float], lo: int, hi: int,
                    version: dict[int, int], ids: list[str], norm: np.ndarray,
                    member_threshold: float) -> tuple[float, str] | None:
    """``(cosine, id)`` of the best rejoin among ``rows[lo:hi]`` (one item's pairs with the
    consolidated clusters out of every window of its run, each at or above the rejoin
    threshold, by falling cosine) whose cluster is unchanged in the run (version 0) and
    that the item fits (``member_fit``): the first such, and among exact ties with it the
    smallest id, as :func:`_choose_live` would have picked among them."""
    best: tuple[float, str] | None = None
    for j in range(lo, hi):
        sim = sims[j]
        if best is not None and sim < best[0]:
            break
        p = rows[j]
        if p in version or sim * norm.item(p) < member_threshold:
            continue
        cid = ids[p]
        if best is None or cid < best[1]:
            best = (sim, cid)
    return best


def _angle(cos: float) -> float:
    return math.acos(max(-1.0, min(1.0, cos)))


class UserClusters:
    """Every cluster of one user as aligned arrays; ``version`` is the ``cluster_versions`` row
    it was last in step with (the service compares it before trusting the arrays)."""

    def __init__(self, dim: int | None = None) -> None:
        self.version: int | None = None
        self.ids: list[str] = []
        self.pos: dict[str, int] = {}
        self.narrative: list[str | None] = []
        #: ``clusters.cluster_key`` of the rows already in SQLite (the service fills it), so
        #: a member row is written with its key instead of looking it up by the hash id
        self.keys: dict[str, int] = {}
        self._dim = dim
        self._cap = 0
        self._c32 = np.empty((0, 0), dtype=np.float32)
        self._norm = np.empty(0, dtype=np.float64)
        self._count = np.empty(0, dtype=np.int64)
        self._first = np.empty(0, dtype=np.float64)
        self._last = np.empty(0, dtype=np.float64)
        self._consolidated = np.empty(0, dtype=bool)
        self.horizon = -math.inf
        self.recent: set[str] = set()
        self._heap: list[tuple[float, str]] = []
        self._groups = _PivotGroups()

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def nbytes(self) -> int:
        """Approximate memory held (arrays at capacity, ids, pivots)."""
        arrays = self._c32.nbytes + 8 * 4 * self._cap + self._cap
        return arrays + 120 * len(self.ids) + 8 * len(self._groups.pivots) * (self._dim or 0)

    def __contains__(self, cluster_id: object) -> bool:
        return cluster_id in self.pos

    # ------------------------------------------------------------------ rows

    def get(self, cluster_id: str) -> ClusterRow:
        p = self.pos[cluster_id]
        return ClusterRow(cluster_id, self._c32[p].copy(), float(self._norm[p]),
                          int(self._count[p]), float(self._first[p]), float(self._last[p]),
                          self.narrative[p])

    def stored(self, cluster_id: str) -> tuple[bytes, float, int, float, float, str | None]:
        """The ``clusters`` columns of one cluster (centroid as little-endian float32 bytes,
        norm, count, first_ts, last_ts, narrative) straight from the arrays: what a write
        needs, without the copy :meth:`get` makes."""
        p = self.pos[cluster_id]
        return (self._c32[p].astype("<f4", copy=False).tobytes(), float(self._norm[p]),
                int(self._count[p]), float(self._first[p]), float(self._last[p]),
                self.narrative[p])

    def stored_many(self, cluster_ids: Sequence[str]
                    ) -> list[tuple[bytes, float, int, float, float, str | None]]:
        """:meth:`stored` for several clusters, with one array operation per column instead
        of six scalar reads per cluster (a batch writes a few hundred rows); the same
        bytes and values."""
        return list(zip(*self.stored_columns(cluster_ids), strict=True))

    def stored_columns(self, cluster_ids: Sequence[str]
                       ) -> tuple[list[bytes], list[float], list[int], list[float],
                                  list[float], list[str | None]]:
        """:meth:`stored_many` as six columns (centroids, norms, counts, first_ts, last_ts,
        narratives), for a writer that zips them into its rows with other columns: no
        tuple per cluster built and taken apart again."""
        if not cluster_ids:
            return [], [], [], [], [], []
        pos = self.pos
        if len(cluster_ids) <= 4:
            # a few clusters (a lone Episode's transaction writes one or two) by scalars:
            # the same bytes and values, without six array gathers and conversions
            at = [pos[c] for c in cluster_ids]
            c32, norm, count = self._c32, self._norm, self._count
            first, last, narratives = self._first, self._last, self.narrative
            return ([c32[p].astype("<f4", copy=False).tobytes() for p in at],
                    [norm.item(p) for p in at], [count.item(p) for p in at],
                    [first.item(p) for p in at], [last.item(p) for p in at],
                    [narratives[p] for p in at])
        ps = np.fromiter((pos[c] for c in cluster_ids), dtype=np.int64, count=len(cluster_ids))
        blob = self._c32[ps].astype("<f4", copy=False).tobytes()
        width = len(blob) // len(ps)
        narratives = self.narrative
        at = ps.tolist()
        return ([blob[i:i + width] for i in range(0, len(blob), width)],
                self._norm[ps].tolist(), self._count[ps].tolist(), self._first[ps].tolist(),
                self._last[ps].tolist(), [narratives[p] for p in at])

    def rows(self) -> Iterable[ClusterRow]:
        return (self.get(cid) for cid in list(self.ids))

    def ending_at_or_after(self, ts: float) -> dict[str, float]:
        """``{cluster_id: last_ts}`` of the clusters with a member at or after ``ts``: those an
        Episode at ``ts`` joins out of order (one array comparison; empty in the usual case,
        an Episode newer than every cluster)."""
        n = len(self.ids)
        ids, last = self.ids, self._last
        return {ids[p]: float(last[p]) for p in np.flatnonzero(last[:n] >= ts).tolist()}

    def put(self, row: ClusterRow) -> None:
        """Insert or replace one cluster."""
        self._store(row.cluster_id, row.centroid, row.norm, row.count, row.first_ts,
                    row.last_ts, row.consolidated_entry_id)

    def _store(self, cluster_id: str, centroid: np.ndarray, norm: float, count: int,
               first_ts: float, last_ts: float, narrative: str | None) -> int:
        """:meth:`put` from the columns, returning the row's position: what the run path
        writes without building a :class:`ClusterRow` per Episode."""
        p = self.pos.get(cluster_id)
        if p is None:
            p = len(self.ids)
            if p >= self._cap:
                self._grow(p + 1, len(centroid))
            self.ids.append(cluster_id)
            self.narrative.append(None)
            self.pos[cluster_id] = p
        self._c32[p] = centroid
        self._norm[p] = norm
        self._count[p] = count
        self._first[p] = first_ts
        self._last[p] = last_ts
        consolidated = narrative is not None
        self._consolidated[p] = consolidated
        self.narrative[p] = narrative
        if last_ts >= self.horizon:
            self.recent.add(cluster_id)
            heapq.heappush(self._heap, (last_ts, cluster_id))
            if len(self._heap) > 4 * len(self.recent) + 64:  # stale entries: compact
                self._heap = [(float(self._last[self.pos[c]]), c) for c in self.recent]
                heapq.heapify(self._heap)
        if consolidated:
            self._groups.put(cluster_id, self._c32[p], p)
        elif self._groups.group_of:
            self._groups.discard(cluster_id)
        return p

    def remove(self, cluster_id: str) -> None:
        p = self.pos.pop(cluster_id, None)
        if p is None:
            return
        last = len(self.ids) - 1
        if p != last:  # move the last row into the hole
            moved = self.ids[last]
            for arr in (self._c32, self._norm, self._count, self._first, self._last,
                        self._consolidated):
                arr[p] = arr[last]
            self.ids[p] = moved
            self.narrative[p] = self.narrative[last]
            self.pos[moved] = p
            self._groups.moved(moved, p)
        self.ids.pop()
        self.narrative.pop()
        self.keys.pop(cluster_id, None)
        self.recent.discard(cluster_id)
        self._groups.discard(cluster_id)

    def _grow(self, need: int, dim: int) -> None:
        """Make room for ``need`` rows, in place (``resize`` reallocates the buffer: a large
        one is remapped, not copied), by a quarter at a time, so a long history never pays a
        full copy of its centroid matrix at once, nor holds twice the rows it has. The arrays
        never leave this object (:meth:`get` copies), so no view outlives a resize."""
        if self._dim is None:
            self._dim = dim
        if need <= self._cap:
            return
        cap = max(64, need, self._cap + self._cap // 4)
        if self._c32.shape[1] != self._dim:  # the empty initial array has no width yet
            self._c32 = np.zeros((0, self._dim), dtype=np.float32)
        self._c32.resize((cap, self._dim), refcheck=False)
        for name in ("_norm", "_count", "_first", "_last", "_consolidated"):
            getattr(self, name).resize(cap, refcheck=False)
        self._cap = cap

    # ------------------------------------------------------------------ the rule

    def _rows_since(self, lo: float) -> np.ndarray:
        """Rows whose span may reach back to ``lo``: the recent set once ``lo`` is past the
        horizon (which then advances to it), every row for a late arrival before it."""
        if lo >= self.horizon:
            self._advance(lo)
            return np.fromiter((self.pos[c] for c in self.recent), dtype=np.int64,
                               count=len(self.recent))
        return np.arange(len(self.ids), dtype=np.int64)

    def candidate_positions(self, ts: float, window: float, vector: np.ndarray,
                            rejoin_threshold: float) -> np.ndarray:
        """Rows to score for an Episode at ``ts``: clusters in its time window, plus the
        consolidated ones its vector may rejoin. Never the whole history (but for late
        arrivals older than the horizon).

        Up to ``SCORE_ALL_CONSOLIDATED`` consolidated clusters are all scored, without the
        pivot index: bounding them costs a BLAS product and a handful of small numpy calls,
        more than scoring twenty rows exactly; past ~32 the rule's loop over the extra
        candidates costs more (``bench/score_all_consolidated.py``). The rows added are those
        the index would have left out, whose products cannot reach the rejoin threshold and
        which lie outside the window, so they cannot be chosen."""
        if not self.ids:
            return np.empty(0, dtype=np.int64)
        rows = self._rows_since(window_start(ts, window))
        if rows.size:
            rows = rows[in_window_rows(ts, self._first[rows], self._last[rows], window)]
        groups = self._groups
        groups.tidy()
        if not groups.group_of:
            extra = None
        elif len(groups.group_of) <= SCORE_ALL_CONSOLIDATED:
            extra = groups._positions()[0]
        else:
            extra = groups.pairs(groups.cosines(vector), _reach(rejoin_threshold))[0]
        if extra is not None and extra.size:
            # appended, not merged (``union1d`` sorted them: a tenth of a rebuild's plan): a
            # consolidated cluster in the window comes twice, and the rule does not mind the
            # order or a repeat (a tie goes to the smaller id; each row's cosine is its own)
            rows = np.concatenate((rows, extra))
        return rows

    def choose(self, vector: np.ndarray, ts: float, *, threshold: float,
               window_seconds: float, rejoin_threshold: float,
               member_threshold: float = 0.0) -> Decision:
        """The online rule over this user's clusters (same answer as :func:`choose_cluster`
        given every cluster as a candidate; ``similarity`` of a new cluster is the best among
        the rows scored)."""
        rows = self.candidate_positions(ts, window_seconds, vector, rejoin_threshold)
        if rows.size == 0:
            return Decision(None, 0.0, NEW)
        ids = [self.ids[p] for p in rows]
        sims = similarities(self._c32[rows], vector)  # float64 math on the float32 rows
        return choose_scored(ids, sims, self._first[rows], self._last[rows],
                             self._consolidated[rows], ts, threshold=threshold,
                             window_seconds=window_seconds, rejoin_threshold=rejoin_threshold,
                             norms=self._norm[rows], member_threshold=member_threshold)

    def choose_version(self, vector: np.ndarray, ts: float, *, window_seconds: float,
                       floor: float, holds_partner: Callable[[str], bool],
                       read_first: Callable[[list[str]], None] | None = None
                       ) -> Decision | None:
        """:func:`online.choose_version` over this user's clusters in the window of ``ts``."""
        if not self.ids:
            return None
        rows = self._rows_since(window_start(ts, window_seconds))
        if rows.size == 0:
            return None
        rows = np.sort(rows)
        sims = similarities(self._c32[rows], vector)
        return choose_version([self.ids[p] for p in rows], sims, self._first[rows],
                              self._last[rows], self._norm[rows], ts,
                              window_seconds=window_seconds, floor=floor,
                              holds_partner=holds_partner, read_first=read_first)

    def assign_run(
        self,
        vectors: np.ndarray,
        ts: Sequence[float],
        new_id: Callable[[int], str],
        *,
        threshold: float,
        window_seconds: float,
        rejoin_threshold: float,
        member_threshold: float = 0.0,
        version_of: Callable[[int, list[tuple[str, float | None, str]]],
                             Decision | None] | None = None,
        version_floor: float | None = None,
    ) -> list[tuple[str, float | None, str]]:
        """Place a run of Episodes one after the other, exactly as :meth:`choose` followed by
        the update would, item by item, and apply each placement to these arrays.

        ``vectors`` are unit rows (:func:`online.normalize_rows`), ``ts`` their epochs, in
        the order to place them; ``new_id(i)`` names the cluster item ``i`` founds (called
        after the earlier items are in, so it sees their clusters). Returns per item
        ``(cluster_id, similarity, reason)``; ``similarity`` is None for a new cluster.

        ``version_of(i, placed)``: asked for an item that would found a cluster, with the
        placements of the items before it (``placed``, as returned), while these arrays hold
        exactly those: a cluster it answers (the join of a fact's newer version, read by the
        caller, :meth:`choose_version`) is joined as :meth:`choose` then the update would.
        Asked inside the run, an Episode that tells a change no longer ends it (the run's
        scores for the later items stay good: a cluster it joins is rescored, as any), and
        only those that would found a cluster are read for a change at all.
        ``version_floor``: the cosine a cluster needs for that join (``online.choose_version``
        takes none below it); ``version_of`` is then asked only of an item some cluster of
        these arrays may score that high against, since for any other it can answer only
        None: by the run's exact scores (the clusters as they stood before it, and in a run
        in time order those it created or changed, as each change rescored them), else
        :func:`_may_reach`. Reading an Episode for a change costs ~20 CPU-µs (LoCoMo), and
        three in four that found a cluster of a LoCoMo speaker have no cluster that near.

        Why it is faster and still exact: a cosine below ``min(threshold, rejoin_threshold)``
        can never decide, so only the pairs at or above it need their exact value.

        - The clusters as they stand before the run are scored against every item in one
          float64 ``einsum``, whose contraction runs the per-pair dot kernel of
          :func:`online.similarities`: each score has the bits :meth:`choose` computes
          (a BLAS product would not); pairs below the floor are dropped.
        - A cluster an item creates or changes is scored right away against the later items
          that could still join it (in its time window; every later item if it is
          consolidated), exactly; its earlier scores are dropped by a version count.

        Each item then decides with :func:`online.choose_scored` over its surviving pairs —
        the same answer as over every cluster, since the others cannot reach a threshold.
        """
        count = len(ts)
        if count == 0:
            return []
        v32 = np.ascontiguousarray(vectors, dtype=np.float32)
        v64 = v32.astype(np.float64)
        times = [float(t) for t in ts]
        ordered = all(a <= b for a, b in pairwise(times))
        ts_arr = np.asarray(times, dtype=np.float64)
        window = window_seconds
        # ordered: per item, where the later items in the window of a span ending at its
        # time end (bisect_right of window_end, for the whole run at once): what a cluster
        # the item founds, or joins without moving its end, rescores
        ends_at: list[int] | None = None
        if ordered and count <= _SMALL_RUN:
            ends_at = [bisect.bisect_right(times, window_end(t, window)) for t in times]
        elif ordered:
            ends_at = np.searchsorted(ts_arr, window_end_rows(ts_arr, window),
                                      side="right").tolist()
        floor = min(threshold, rejoin_threshold)
        # (row position, version of the row it was scored against, exact cosine)
        hits: list[list[tuple[int, int, float]]] = [[] for _ in range(count)]
        rows = self._run_rows(times[0] if ordered else float(ts_arr.min()),
                              times[-1] if ordered else float(ts_arr.max()), window)
        # per item, whether a cluster as it stands before the run may take the join of a
        # fact's newer version (``version_floor``); None: every item is asked
        near_before: list[bool] | None = None
        if version_floor is not None and rows.size * count <= _REACH_PAIRS:
            near_before = [False] * count
        if rows.size:
            # Every pair's exact cosine in one float64 einsum: its contraction runs the same
            # per-pair dot kernel as similarities() (the reduction axis is the contiguous
            # inner one in both), so each entry has the bits choose() computes for that pair
            # (checked in tests/test_cluster_batch.py). A BLAS product would not: gemm blocks
            # and rounds a row differently from a per-vector product.
            exact = np.einsum("ij,kj->ik", self._c32[rows].astype(np.float64), v64)
            if near_before is not None:
                # the clusters as they stand before the run, each in the time window of
                # the item (online.in_window_rows, by pairs): those the run changes are
                # scored again when asked (_may_reach)
                first, last = self._first[rows][:, None], self._last[rows][:, None]
                gap = np.maximum(np.maximum(first - ts_arr, ts_arr - last), 0.0)
                near_before = ((exact >= version_floor - _FLOOR_SLACK / 2)
                               & (gap <= window)).any(axis=0).tolist()
            rr, kk = (exact >= floor).nonzero()
            if rr.size:
                for p, q, sim in zip(rows[rr].tolist(), kk.tolist(), exact[rr, kk].tolist(),
                                     strict=True):
                    hits[q].append((p, 0, sim))
        # the consolidated clusters out of the run's window, per item: only the pairs the
        # pivot index leaves are scored (a run's items between them reach most groups)
        groups = self._groups
        groups.tidy()
        bounds = groups.cosines(v32) if groups.group_of else None
        reach = _reach(rejoin_threshold)
        # Those pairs are kept apart from ``hits``, per item by falling cosine: such a
        # cluster is out of every item's window while unchanged (it is not in ``rows``), so
        # it can only be rejoined, and only the best one still unchanged can be picked.
        # :func:`_best_unchanged` finds it at the head of the item's list (further only past
        # clusters changed earlier in the run, whose new scores are in ``hits``), where
        # walking every pair made a decision's cost grow with the consolidated clusters
        # near its topic (one owner ×184: ~10 such pairs per Episode at the end).
        far_rows: list[int] = []
        far_sims: list[float] = []
        far_at = [0] * (count + 1)
        if bounds is not None:
            r_rows, r_items, r_sims = self._rejoin_pairs(bounds, v32, v64, rejoin_threshold,
                                                         rows)
            if r_rows.size:
                order = np.lexsort((-r_sims, r_items))
                far_rows, far_sims = r_rows[order].tolist(), r_sims[order].tolist()
                far_at = np.searchsorted(r_items[order], np.arange(count + 1)).tolist()
        # Ordered: the run's own scores mark the rest, so no cluster is scored twice for the
        # join of a newer version. A cluster the run creates or changes is rescored right
        # away against every later item in its time window, exactly (below); one that
        # scores the floor there is marked in ``near_before`` (an older version's mark
        # stays: the test may say yes for none, never no for one). Before, each Episode
        # that would found a cluster gathered the rows the run had changed and scored them
        # again (_may_reach, ~5 µs a call, asked of two in three LoCoMo Episodes); a run
        # out of order still does.
        marks = near_before if ordered else None
        low = version_floor - _FLOOR_SLACK / 2 if version_floor is not None else 0.0
        version: dict[int, int] = {}
        out: list[tuple[str, float | None, str]] = []
        # Room for every cluster the run may create, up front: the arrays are then bound to
        # locals once (a resize replaces the buffer, never these objects) and each item
        # writes its row inline instead of through _store. What the loop does per item is
        # what ClusterRow.new / get + add + put did, in the same float operations.
        if self._cap < len(self.ids) + count:
            self._grow(len(self.ids) + count, v32.shape[1])
        ids, pos, narratives, recent, heap = self.ids, self.pos, self.narrative, \
            self.recent, self._heap
        c32, norms, counts = self._c32, self._norm, self._count
        firsts, lasts, consolidated = self._first, self._last, self._consolidated
        dot, sqrt, einsum, multiply = np.dot, math.sqrt, _c_einsum, np.multiply
        # What fold(None, 0.0, 0, v) gives each item if it founds a cluster, for the whole
        # run at once: |v| by a stacked matmul of each row with itself (numpy runs one BLAS
        # ddot per row, the very call np.dot(v, v) makes: the same bits), then v / |v| and
        # the cast to float32, elementwise, as fold does them.
        # (a row too short to divide by takes fold itself below; the floor only keeps the
        # division quiet, without the cost of an errstate block per run)
        lengths_arr = np.sqrt(np.matmul(v64[:, None, :], v64[:, :, None]).reshape(count))
        units = (v64 / np.maximum(lengths_arr, 1e-300)[:, None]).astype(np.float32)
        units64 = units.astype(np.float64)  # the stored rows, as the rescoring reads them
        lengths = lengths_arr.tolist()
        mean = np.empty(v64.shape[1], dtype=np.float64)
        for q in range(count):
            t = times[q]
            h = hits[q]
            lo, hi = far_at[q], far_at[q + 1]
            far = _best_unchanged(far_rows, far_sims, lo, hi, version, ids, norms,
                                  member_threshold) if hi > lo else None
            decision = _choose_live(h, version, ids, firsts, lasts, norms, consolidated, t,
                                    threshold, window, rejoin_threshold,
                                    member_threshold, far) if h or far else None
            if decision is None and version_of is not None and (
                    near_before is None or near_before[q]
                    or (len(version) > _REACH_ROWS if marks is not None
                        else _may_reach(c32, firsts, lasts, version, v32[q], t, window,
                                        floor=version_floor))):
                joined = version_of(q, out)
                if joined is not None and joined.cluster_id is not None:
                    decision = (joined.cluster_id, joined.similarity, joined.reason)
            if decision is None:
                cid = new_id(q)
                p = len(ids)
                ids.append(cid)
                narratives.append(None)
                pos[cid] = p
                # fold(None, 0.0, 0, v32[q]), computed above for the whole run
                length = lengths[q]
                if length < 1e-12:
                    c32[p], length = fold(None, 0.0, 0, v32[q])
                    row64 = c32[p].astype(np.float64)
                else:
                    c32[p] = units[q]
                    row64 = units64[q]
                norms[p] = length
                counts[p] = 1
                firsts[p] = lasts[p] = t
                consolidated[p] = False
                # (a new id is in no pivot group: the groups hold exactly the consolidated
                # rows, tests/test_cluster_pivot_layout.py)
                out.append((cid, None, NEW))
                narrative, first_q, last_q = None, t, t
            else:
                cid, similarity, reason = decision
                p = pos[cid]
                members = counts.item(p)
                norm_p = norms.item(p)
                # fold(c32[p], norm_p, members, v32[q]) inline, in place: the same float
                # operations in the same order (the row widened to float64, then times
                # norm_p), without a temporary array per step
                multiply(c32[p], norm_p, out=mean, dtype=np.float64)
                mean *= members
                mean += v64[q]
                mean /= members + 1
                length = sqrt(float(dot(mean, mean)))
                if length < 1e-12:
                    c32[p], length = fold(c32[p], norm_p, members, v32[q])
                else:
                    mean /= length
                    c32[p] = mean  # cast to float32 as fold's astype does
                row64 = None
                first_q, last_q = min(firsts.item(p), t), max(lasts.item(p), t)
                narrative = narratives[p]
                norms[p] = length
                counts[p] = members + 1
                firsts[p] = first_q
                lasts[p] = last_q
                if narrative is not None:
                    # the stored row in float64, once: the index's put and the re-scoring
                    # below both read it (put widens a float32 row to the same values)
                    row64 = c32[p].astype(np.float64)
                    groups.put(cid, row64, p)
                # a cluster without a narrative is in no group: nothing to discard
                out.append((cid, similarity, reason))
            if last_q >= self.horizon:
                recent.add(cid)
                heapq.heappush(heap, (last_q, cid))
            if q + 1 == count:
                break
            ver = version[p] = version.get(p, 0) + 1
            span: tuple[int, int] | None = None
            if narrative is not None:  # may be rejoined at any distance in time
                later: slice | np.ndarray | None
                later, span = self._later_rejoin(q, cid, first_q, last_q, times, ts_arr,
                                                 ordered, window, bounds, reach)
            elif ends_at is not None:  # ordered: only the span's end rules later items out
                end = ends_at[q] if last_q == t else bisect.bisect_right(
                    times, window_end(last_q, window), q + 1)
                later = slice(q + 1, end) if end > q + 1 else None
            else:
                later = self._later(q, False, first_q, last_q, times, ts_arr, ordered, window)
            if later is None:
                continue
            # the stored row, in float64: what choose and the product above score against
            sims = einsum("ij,j->i", v64[later],
                          c32[p].astype(np.float64) if row64 is None else row64)
            # a few scores (a time window's worth) are read as Python floats at once;
            # a long tail (a consolidated cluster against the rest of the run) is thinned
            # by numpy first
            start = later.start if isinstance(later, slice) else None
            if sims.size <= 16 and start is not None and narrative is None:
                # the usual case (a cluster founded or joined, against the few later items
                # of its window): each score read with its item's index, in one loop
                if marks is None:
                    for k, sim in enumerate(sims.tolist(), start):
                        if sim >= floor:
                            hits[k].append((p, ver, sim))
                    continue
                for k, sim in enumerate(sims.tolist(), start):
                    if sim >= floor:
                        hits[k].append((p, ver, sim))
                    if sim >= low:
                        marks[k] = True
                continue
            if marks is not None:  # every later item in the window is among ``later``
                for j in (sims >= low).nonzero()[0].tolist():
                    marks[start + j if start is not None else int(later[j])] = True
            if sims.size > 16:
                close = (sims >= floor).nonzero()[0]
                idx, scores = close.tolist(), sims[close].tolist()
            else:
                idx, scores = range(sims.size), sims.tolist()
            if narrative is None:
                for j, sim in zip(idx, scores, strict=True):
                    if sim >= floor:
                        hits[start + j if start is not None else int(later[j])].append(
                            (p, ver, sim))
                continue
            # A consolidated cluster against the rest of the run: an item out of its time
            # window can only rejoin it, so a score below the rejoin threshold is kept only
            # for the items in the window (the test is _choose_live's, on the span it will
            # read while this version holds). Before, every score above the join threshold
            # was kept, and the decision loop walked them all: one owner ×20 with monthly
            # consolidation, 3.9 pairs walked per Episode before, 1.8 after.
            # (``span``: the items in that window, as a range of the ordered run)
            at = later.tolist() if start is None else None
            for j, sim in zip(idx, scores, strict=True):
                if sim >= floor:
                    k = start + j if at is None else at[j]
                    if sim >= rejoin_threshold or (
                            span[0] <= k < span[1] if span is not None
                            else in_window(times[k], first_q, last_q, window)):
                        hits[k].append((p, ver, sim))
        if len(heap) > 4 * len(recent) + 64:  # stale entries: compact (as _store does)
            self._heap = [(float(lasts[pos[c]]), c) for c in recent]
            heapq.heapify(self._heap)
        return out

    def _run_rows(self, earliest: float, latest: float, window: float) -> np.ndarray:
        """Rows the whole run (its items' times from ``earliest`` to ``latest``) is scored
        against: every cluster whose span is in the window of some item of the run (a row
        outside is out of every item's window)."""
        if not self.ids:
            return np.empty(0, dtype=np.int64)
        # the least last_ts and greatest first_ts in_window allows for some item of the run
        lo, hi = window_start(earliest, window), window_end(latest, window)
        rows = self._rows_since(lo)
        if rows.size:
            rows = rows[(self._first[rows] <= hi) & (self._last[rows] >= lo)]
        return rows

    def _rejoin_pairs(self, bounds: np.ndarray, v32: np.ndarray, v64: np.ndarray,
                      rejoin_threshold: float,
                      scored: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(rows, items, cosines)`` of the consolidated clusters outside ``scored`` (the
        run's window rows) that some item may rejoin: the pairs the pivot index leaves for
        each item (a bounded set, see :class:`_PivotGroups`), each scored exactly, those at
        or above ``rejoin_threshold`` kept. Out of every item's window, such a cluster can
        only be rejoined, so no pair below that threshold can decide.

        The pairs are first scored in float32 (:meth:`_PivotGroups.near`: whole groups as
        one block product each, small ones pair by pair), and only those within that
        product's error bound of the threshold are scored exactly (a few per item: most
        pairs the index leaves are well below it), ``_CHUNK`` at a time (:func:`_pair_dots`).
        ``einsum("ij,ij->i")`` over the gathered pairs runs the per-pair dot kernel of
        :func:`online.similarities` on the same contiguous rows: each cosine has the bits
        :meth:`choose` computes for that pair (checked in tests/test_cluster_batch.py).
        The float32 filter is compared in float32 against a floor set by twice the product's
        error bound below the threshold, so the floor's own rounding (2^-24 relative) is far
        inside the margin."""
        slack = 2.0 * (v32.shape[1] + 2) * 2.0 ** -24
        with one_blas_thread():
            rows, items = self._groups.near(bounds, v32, self._c32, _reach(rejoin_threshold),
                                            rejoin_threshold - slack)
        if rows.size and scored.size:
            keep = ~np.isin(rows, scored)
            rows, items = rows[keep], items[keep]
        if not rows.size:
            return rows, items, np.empty(0, dtype=np.float64)
        sims = _pair_dots(self._c32, rows, v64, items)
        close = sims >= rejoin_threshold
        return rows[close], items[close], sims[close]

    def _later_rejoin(self, q: int, cluster_id: str, first_ts: float, last_ts: float,
                      times: list[float], ts: np.ndarray, ordered: bool, window: float,
                      bounds: np.ndarray | None, reach: float
                      ) -> tuple[slice | np.ndarray | None, tuple[int, int] | None]:
        """The items after ``q`` that may still pick a consolidated cluster just changed: those
        in its time window (a join), and beyond it only those the pivot bound of its group
        leaves (a rejoin; :meth:`_PivotGroups.cosines` of the run, against the cluster's own
        angle to its pivot as it now stands plus the reach). Every later item when its group
        is newer than the run's bounds.
        Before, every later item was scored: a run's cost grew with the share of its items
        that rejoin, which grows with history.

        Also returns, for an ordered run, the items in the window as a range ``(lo, hi)`` of
        the run (``in_window`` is exactly ``window_start <= t <= window_end``, an interval of
        the sorted times, found by bisection), so that neither this nor the caller tests the
        window item by item; None for a run out of order. This runs for every consolidated
        join of a run (about half the Episodes of one owner ×184 with monthly
        consolidation), so its numpy calls are kept few: the bound column is compared once
        and the window's range set in the same mask."""
        span: tuple[int, int] | None = None
        if ordered:
            span = (bisect.bisect_left(times, window_start(first_ts, window), q + 1),
                    bisect.bisect_right(times, window_end(last_ts, window), q + 1))
        groups = self._groups
        g = groups.group_of.get(cluster_id)
        if bounds is None or g is None or g >= bounds.shape[1]:
            return slice(q + 1, len(times)), span
        keep = bounds[q + 1:, g] >= _cos_at(groups.spread[cluster_id] + reach)
        if span is None:
            rest = ts[q + 1:]
            keep |= ((rest >= window_start(first_ts, window))
                     & (rest <= window_end(last_ts, window)))
        elif span[1] > span[0]:
            keep[span[0] - q - 1:span[1] - q - 1] = True
        idx = keep.nonzero()[0]
        if not idx.size:
            return None, span
        idx += q + 1
        return idx, span

    def _later(self, q: int, consolidated: bool, first_ts: float, last_ts: float,
               times: list[float], ts: np.ndarray, ordered: bool,
               window: float) -> slice | np.ndarray | None:
        """The items after ``q`` that may still pick a cluster spanning ``[first_ts,
        last_ts]`` as it now stands (a slice of the run, or indices), None for none."""
        if consolidated:  # may be rejoined at any distance in time
            return slice(q + 1, len(times))
        if ordered:  # later items are no older, so only the span's end can rule them out
            end = bisect.bisect_right(times, window_end(last_ts, window), q + 1)
            return slice(q + 1, end) if end > q + 1 else None
        rest = ts[q + 1:]
        idx = np.flatnonzero((rest >= window_start(first_ts, window))
                             & (rest <= window_end(last_ts, window)))
        return idx + (q + 1) if idx.size else None

    def _advance(self, horizon: float) -> None:
        """Raise the horizon, dropping clusters whose last activity fell behind it."""
        self.horizon = horizon
        heap = self._heap
        while heap and heap[0][0] < horizon:
            _, cid = heapq.heappop(heap)
            p = self.pos.get(cid)
            if p is None or self._last[p] < horizon:
                self.recent.discard(cid)


__all__ = ["GROUP_COS", "ClusterRow", "UserClusters"]
