"""What the latest-first order pays to read versions by their words (index/recency.py): ``--hits``
search hits of one owner, each a text of ``--kib`` KiB whose sentences tell a change of a fact
the others state, on days one after another, their stored vectors apart (so every pair is asked
of the words). The worst a search or a briefing can be handed: ``top_k`` is at most 100 and an
entry at most ``max_entry_bytes``. Prints the seconds of ``latest_first`` with and without the
texts (best of ``--repeat``, same run) and how many hits moved:

    python bench/latest_first_cost.py --hits 100 --kib 256 [--strangers]
    python bench/latest_first_cost.py --hits 100 --sentence --cosine 0.8 [--strangers]

``--sentence`` makes each text one sentence of about 990 characters (the longest the join
reads as one) and ``--cosine`` sets every pair's cosine: a pair of one-sentence hits under
the vectors' own threshold and at least ``CHANGE_COSINE`` is read in full with its cosine
(``newer_by_words_and_cosine``), the most a pair of hits can cost.

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


def sentence(i: int, strangers: bool) -> str:
    """One sentence telling a change, of about 990 characters (words of its own, no stop)."""
    who = name(i) if strangers else "Sam"
    head = f"{who} now drives a car number {i} instead of the old one"
    pad = " ".join(f"w{i}x{n}" for n in range(200))
    return (head + " with " + pad)[:989] + "."


def at_cosine(n: int, cosine: float, dim: int = 384) -> np.ndarray:
    """``n`` unit vectors, every pair at ``cosine`` (a shared axis plus one of each own)."""
    out = np.zeros((n, dim + n), dtype=np.float32)
    out[:, 0] = np.sqrt(cosine)
    out[np.arange(n), 1 + np.arange(n)] = np.sqrt(1 - cosine)
    return out


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
    parser.add_argument("--sentence", action="store_true",
                        help="each text one sentence of ~990 characters (--kib is ignored)")
    parser.add_argument("--cosine", type=float,
                        help="every pair of hits at this cosine (default: random vectors)")
    args = parser.parse_args()
    recency.TEXT_VERSION_HITS, recency.TEXT_VERSION_CHARS = args.read_hits, args.read_chars
    rng = np.random.default_rng(0)
    texts = [sentence(i, args.strangers) if args.sentence else text(i, args.kib, args.strangers)
             for i in range(args.hits)]
    if args.cosine is not None:
        vectors = at_cosine(args.hits, args.cosine)
    else:
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
        size = "one sentence of ~990 characters" if args.sentence else f"{args.kib} KiB"
        print(f"{way}: {seconds:.3f} s for {args.hits} hits of {size}, "
              f"{moved[way]} of them moved (words read: {args.read_hits} hits of each owner, "
              f"{args.read_chars} characters each)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
