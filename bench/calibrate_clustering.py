"""Calibrate the clustering threshold, window and rejoin threshold on LoCoMo.

Episodes: one per LoCoMo session and speaker (``locomo_episodes.py``, text = that speaker's
observations for the session), embedded with the bundled local model. Each speaker is a user;
clustering runs per user in (timestamp, id) order with the production rule
(:func:`everos_reflect.clustering.online.choose_cluster`).

Reference: two Episodes of the same user belong together when one QA question cites evidence
turns in both (a multi-session question is exactly what a merged narrative should answer).
Scored pairwise over all same-user Episode pairs: precision, recall, F1. Also reported: number
of clusters, share of singletons and the size distribution.

The rejoin rule only acts on consolidated clusters, so the rejoin sweep simulates Reflection:
every Monday 02:00 each eligible cluster is "consolidated" into a narrative whose vector is the
cluster centroid (a stand-in for embedding the merged text).

    python bench/calibrate_clustering.py /path/to/locomo10.json [--markdown]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import locomo_episodes as lm

from everos_reflect.clustering.online import Candidate, choose_cluster, fold
from everos_reflect.embedding.local import LocalEmbedder

DAY = 86400.0
THRESHOLDS = [round(0.35 + 0.05 * i, 2) for i in range(11)]  # 0.35 .. 0.85
WINDOWS = [7.0, 14.0, 30.0]
REJOINS = [None, 0.70, 0.75, 0.80, 0.85, 0.90]


@dataclass
class _C:
    cid: str
    centroid: np.ndarray
    norm: float
    count: int
    first: float
    last: float
    members: list[int]
    consolidated: bool = False
    new_since: int = 0


def _next_monday_2am(ts: float) -> float:
    d = datetime.fromtimestamp(ts, UTC)
    monday = (d - timedelta(days=d.weekday())).replace(hour=2, minute=0, second=0, microsecond=0)
    if monday.timestamp() <= ts:
        monday += timedelta(days=7)
    return monday.timestamp()


def cluster_user(ts: list[float], vecs: np.ndarray, threshold: float, window_days: float,
                 rejoin: float | None) -> list[int]:
    """Label each Episode (given in time order) with a cluster number."""
    window = window_days * DAY
    clusters: list[_C] = []
    labels: list[int] = []
    next_run = _next_monday_2am(ts[0]) if ts else 0.0
    for i, (t, v) in enumerate(zip(ts, vecs, strict=True)):
        while rejoin is not None and t >= next_run:  # a weekly Reflection run
            for c in clusters:
                if (not c.consolidated and c.count >= 2) or (c.consolidated and c.new_since):
                    c.consolidated, c.new_since, c.count = True, 0, 1  # narrative = centroid
                    c.norm = 1.0
            next_run += 7 * DAY
        cands = [Candidate(c.cid, c.centroid, c.first, c.last, c.consolidated)
                 for c in clusters]
        d = choose_cluster(v, t, cands, threshold=threshold, window_seconds=window,
                           rejoin_threshold=rejoin if rejoin is not None else 2.0)
        if d.cluster_id is None:
            clusters.append(_C(f"{len(clusters):06d}", v, 1.0, 1, t, t, [i]))
            labels.append(len(clusters) - 1)
            continue
        k = int(d.cluster_id)
        c = clusters[k]
        c.centroid, c.norm = fold(c.centroid, c.norm, c.count, v)
        c.count += 1
        c.first, c.last = min(c.first, t), max(c.last, t)
        c.members.append(i)
        c.new_since += c.consolidated
        labels.append(k)
    return labels


def reference_pairs(eps: list[lm.LocomoEpisode], qs: list[lm.LocomoQuestion]) -> set[tuple]:
    turn = lm.episode_of_turn(eps)
    pairs: set[tuple] = set()
    for q in qs:
        hit = {turn[(q.sample_id, d)] for d in q.evidence if (q.sample_id, d) in turn}
        for a, b in itertools.combinations(sorted(hit, key=lambda e: e.episode_key), 2):
            if a.user_id == b.user_id:
                pairs.add((a.episode_key, b.episode_key))
    return pairs


def score(by_user: dict[str, list[lm.LocomoEpisode]], labels: dict[str, list[int]],
          truth: set[tuple]) -> dict[str, float]:
    tp = fp = 0
    sizes: list[int] = []
    for user, eps in by_user.items():
        lab = labels[user]
        sizes += list(Counter(lab).values())
        for i, j in itertools.combinations(range(len(eps)), 2):
            if lab[i] == lab[j]:
                key = tuple(sorted((eps[i].episode_key, eps[j].episode_key)))
                tp += key in truth
                fp += key not in truth
    fn = len(truth) - tp
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * p * r / (p + r) if p + r else 0.0
    return {
        "precision": p, "recall": r, "f1": f1, "clusters": len(sizes),
        "singletons": sum(s == 1 for s in sizes) / len(sizes),
        "mean_size": float(np.mean(sizes)), "max_size": max(sizes),
        "size_2": sum(s == 2 for s in sizes), "size_3_5": sum(3 <= s <= 5 for s in sizes),
        "size_6+": sum(s >= 6 for s in sizes),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_path", help="path to locomo10.json")
    parser.add_argument("--mode", choices=lm.MODES, default="observation")
    parser.add_argument("--threshold", type=float, default=None,
                        help="threshold for the rejoin sweep (default: best F1 at 7 days)")
    args = parser.parse_args(argv)

    data = lm.load(args.data_path)
    eps = lm.episodes(data, args.mode)
    truth = reference_pairs(eps, lm.questions(data))
    started = time.perf_counter()
    vecs = LocalEmbedder().embed([e.text for e in eps])
    print(f"{len(eps)} episodes, {len({e.user_id for e in eps})} users, "
          f"{len(truth)} reference pairs; embedded in {time.perf_counter() - started:.1f}s")

    by_user: dict[str, list[lm.LocomoEpisode]] = defaultdict(list)
    vec_by_user: dict[str, list[np.ndarray]] = defaultdict(list)
    for e, v in zip(eps, vecs, strict=True):  # eps are ordered by user, then time
        by_user[e.user_id].append(e)
        vec_by_user[e.user_id].append(v)

    def run(threshold: float, window: float, rejoin: float | None) -> dict[str, float]:
        labels = {
            u: cluster_user([e.timestamp.timestamp() for e in by_user[u]],
                            np.asarray(vec_by_user[u]), threshold, window, rejoin)
            for u in by_user
        }
        return score(by_user, labels, truth)

    header = ("| threshold | window d | precision | recall | F1 | clusters | singletons "
              "| mean size | max | 2 | 3-5 | 6+ |")
    print("\n## Threshold x window (no consolidation)\n")
    print(header)
    print("|" + "---|" * 12)
    best: tuple[float, float] = (-1.0, 0.0)
    for window in WINDOWS:
        for t in THRESHOLDS:
            s = run(t, window, None)
            if window == 7.0 and s["f1"] > best[0]:
                best = (s["f1"], t)
            print(f"| {t:.2f} | {window:g} | {s['precision']:.3f} | {s['recall']:.3f} | "
                  f"{s['f1']:.3f} | {s['clusters']} | {s['singletons']:.0%} | "
                  f"{s['mean_size']:.2f} | {s['max_size']} | {s['size_2']} | "
                  f"{s['size_3_5']} | {s['size_6+']} |")
    for label, t in (("everything in one cluster", -1.0), ("all singletons", 2.0)):
        s = run(t, 1e6, None)
        print(f"| baseline: {label} | - | {s['precision']:.3f} | {s['recall']:.3f} | "
              f"{s['f1']:.3f} | {s['clusters']} | {s['singletons']:.0%} | "
              f"{s['mean_size']:.2f} | {s['max_size']} | {s['size_2']} | {s['size_3_5']} | "
              f"{s['size_6+']} |")

    chosen = args.threshold if args.threshold is not None else best[1]
    print(f"\n## Rejoin sweep (threshold {chosen:.2f}, window 7 d, weekly consolidation)\n")
    print("| rejoin | precision | recall | F1 | clusters | singletons | mean size | max |")
    print("|" + "---|" * 8)
    for rejoin in REJOINS:
        s = run(chosen, 7.0, rejoin)
        name = "off" if rejoin is None else f"{rejoin:.2f}"
        print(f"| {name} | {s['precision']:.3f} | {s['recall']:.3f} | {s['f1']:.3f} | "
              f"{s['clusters']} | {s['singletons']:.0%} | {s['mean_size']:.2f} | "
              f"{s['max_size']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
