"""What the latest-first order pays to read versions by their words (index/recency.py): ``--hits``
search hits of one owner, each a text of ``--kib`` KiB whose sentences tell a change of a fact
the others state, on days one after another, their stored vectors apart (so every pair is asked
of the words). The worst a search or a briefing can be handed: ``top_k`` is at most 100 and an
entry at most ``max_entry_bytes``. Prints the seconds of ``latest_first`` with and without the
texts (best of ``--repeat``, same run) and how many hits moved:

    python bench/latest_first_cost.py --hits 100 --kib 256 [--strangers]

``--read-hits`` and ``--read-chars`` set the bounds (:data:`~everos_reflect.index.recency.
TEXT_VERSION_HITS`, ``TEXT_VERSION_CHARS``) to show what they save.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np

from everos_reflect.index import recency
from everos_reflect.index.recency import RECENCY_COSINE, key, latest_first


@dataclass
class Hit:
    id: str
    timestamp: str
    score: float
    user_id: str = "u"
    app_id: str = "a"
    project_id: str = "p"
    kind: str = "episode"


def name(i: int) -> str:
    """A name of its own for hit ``i`` ("Bab", "Bac" ...)."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    return "B" + letters[i // 26 % 26] + letters[i % 26]


def text(i: int, kib: int, strangers: bool) -> str:
    """Sentences that each tell a change, with words of their own (a repeated text would be
    read once: the join keeps a reading per text): of one person's car, so each hit is a
    newer version of the one before, or (``strangers``) each hit of another person, so no
    pair is a version and every pair is read."""
    who = name(i) if strangers else "Sam"
    said = [f"{who} now drives a car number {i}-{n} instead of the old one."
            for n in range(kib * 1024 // 60 + 1)]
    return " ".join(said)[: kib * 1024]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hits", type=int, default=100)
    parser.add_argument("--kib", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--strangers", action="store_true",
                        help="no hit a version of another: every pair read, none moved")
    parser.add_argument("--read-hits", type=int, default=recency.TEXT_VERSION_HITS,
                        help="hits of each owner read by their words (the shipped bound)")
    parser.add_argument("--read-chars", type=int, default=recency.TEXT_VERSION_CHARS,
                        help="characters of each text read (the shipped bound)")
    args = parser.parse_args()
    recency.TEXT_VERSION_HITS, recency.TEXT_VERSION_CHARS = args.read_hits, args.read_chars
    rng = np.random.default_rng(0)
    texts = [text(i, args.kib, args.strangers) for i in range(args.hits)]
    vectors = rng.normal(size=(args.hits, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    best = {"vectors": float("inf"), "words": float("inf")}
    moved = {}
    for _ in range(args.repeat):
        for way in best:
            hits = [Hit(f"ep_{i:04d}", f"2026-01-01T00:00:{i % 60:02d}+00:00"
                        if i < 60 else f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}+00:00",
                        1.0 - i / 1000) for i in range(args.hits)]
            by_key = {key(h): vectors[i] for i, h in enumerate(hits)}
            extra = {"texts": {key(h): texts[i] for i, h in enumerate(hits)}} \
                if way == "words" else {}
            started = time.perf_counter()
            ranked = latest_first(hits, by_key, threshold=RECENCY_COSINE, **extra)
            best[way] = min(best[way], time.perf_counter() - started)
            moved[way] = sum(a.id != b for a, b in zip(ranked, (h.id for h in hits), strict=True))
    for way, seconds in best.items():
        print(f"{way}: {seconds:.3f} s for {args.hits} hits of {args.kib} KiB, "
              f"{moved[way]} of them moved (words read: {args.read_hits} hits of each owner, "
              f"{args.read_chars} characters each)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
