"""Exploration only, not shipped: a two-tier clustering join, measured through the quality
and state-story benchmarks without touching the product.

Within ``NEAR_DAYS`` (default 7) of a cluster's span the shipped rule joins (cosine to the
centroid >= threshold, member fit >= ``clustering.member_threshold``); beyond it, up to the
time window given (``--window 1e5`` = the whole history), an Episode joins only a cluster it
fits at member fit >= ``FAR_MEMBER``: repeats of a topic gathered across time, loose
neighbours not. A near join wins over a far one. Both decision paths of the clustering
(``choose_scored`` for one Episode, ``_choose_live`` for a run) are replaced in this process.

    FAR_MEMBER=0.75 python bench/explore_far_join.py quality LOCOMO --samples 5 --no-sanity \
        --member 0.6 --window 1e5 --serve 1,3 --bulk --out /tmp/far
    FAR_MEMBER=0.75 python bench/explore_far_join.py state_stories --versions 0.75 \
        --paraphrase 0.75 --window 1e5 --out /tmp/far-stories

Results: bench/results/clusters_across_time.md.
"""
from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any

from everos_reflect.clustering import matrix
from everos_reflect.clustering.online import JOIN, Decision

NEAR = float(os.environ.get("NEAR_DAYS", "7")) * 86400.0
FAR = float(os.environ.get("FAR_MEMBER", "0.75"))
orig = matrix._choose_live


def two_tier(hits: list[tuple[int, int, float]], version: dict[int, int], ids: list[str],
             first: Any, last: Any, norm: Any, consolidated: Any, ts: float, threshold: float,
             window: float, rejoin_threshold: float,
             member_threshold: float) -> tuple[str, float, str] | None:
    """``matrix._choose_live`` with the two-tier join (see the module docstring)."""
    best = None
    for p, ver, sim in hits:
        if version.get(p, 0) != ver or sim < threshold:
            continue
        fit = sim * norm.item(p)
        gap = max(0.0, first.item(p) - ts, ts - last.item(p))
        need = member_threshold if gap <= NEAR else FAR
        if fit < need or gap > window:
            continue
        cid = ids[p]
        near = gap <= NEAR
        key = (not near, -sim, cid)  # a join in the near window wins, as the shipped rule
        if best is None or key < best[0]:
            best = (key, sim, cid)
    if best is not None:
        return best[2], best[1], JOIN
    return orig(hits, version, ids, first, last, norm, consolidated, ts, threshold, 0.0,
                rejoin_threshold, member_threshold)


matrix._choose_live = two_tier
orig_scored = matrix.choose_scored


def two_tier_scored(ids: Any, sims: Any, first_ts: Any, last_ts: Any, consolidated: Any,
                    ts: float, *, threshold: float, window_seconds: float,
                    rejoin_threshold: float, norms: Any = None,
                    member_threshold: float = 0.0) -> Decision:
    """``online.choose_scored`` with the two-tier join (see the module docstring)."""
    lengths = [1.0] * len(ids) if norms is None else list(norms)
    best = None
    for cid, sim, first, last, norm in zip(ids, list(sims), list(first_ts), list(last_ts),
                                           lengths, strict=True):
        sim, first, last, norm = float(sim), float(first), float(last), float(norm)
        if sim < threshold:
            continue
        gap = max(0.0, first - ts, ts - last)
        need = member_threshold if gap <= NEAR else FAR
        if sim * norm < need or gap > window_seconds:
            continue
        key = (gap > NEAR, -sim, cid)
        if best is None or key < best[0]:
            best = (key, sim, cid)
    if best is not None:
        return Decision(best[2], best[1], JOIN)
    return orig_scored(ids, sims, first_ts, last_ts, consolidated, ts, threshold=threshold,
                       window_seconds=0.0, rejoin_threshold=rejoin_threshold, norms=norms,
                       member_threshold=member_threshold)


matrix.choose_scored = two_tier_scored
if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    script = importlib.import_module(sys.argv[1])  # quality or state_stories
    sys.exit(script.main(sys.argv[2:]))
