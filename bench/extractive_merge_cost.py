"""CPU time of the offline ``extractive`` merge itself, and a digest of what it writes.

A Reflection run with the default provider spends its own CPU on three things: reading the
sources' logs, the merge (sentences read, repeats folded, versions joined, the narrative
rendered) and the commit. This times the merge alone, on LoCoMo's observation Episodes: each
user's history, in time order, cut into windows of 2, 3, 5, 8 and 13 Episodes in turn (the
sizes of the clusters Reflection merges), each window merged in ``init`` mode, then the next
window folded into that narrative in ``update`` mode. The sentence vectors come from the
bundled MiniLM, embedded once before the timing (a dict in front of the model), so the figure
is the merge's own work, not the model's; what the merge keeps per text is emptied before
each pass (every text is read anew, as a run's Episodes are).

Printed per tree: CPU-ms for all merges (least and median of ``--repeat`` passes) and a digest
of every title, narrative and provenance row: two trees that merge alike print the same digest.
Each tree (``--tree``, e.g. a ``git worktree`` of another commit; default this checkout) runs in
a process of its own, the trees alternating ``--rounds`` times.

    python bench/extractive_merge_cost.py /path/to/locomo10.json [--tree OLD --tree .]
        [--rounds 3] [--repeat 5]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import locomo_episodes as lm
from place_after_merges_cost import call_in_tree

WINDOWS = (2, 3, 5, 8, 13)


class _Remembered:
    """The model's vectors, each text embedded once: the passes time the merge, not it."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self.seen: dict[str, np.ndarray] = {}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        todo = [t for t in dict.fromkeys(texts) if t not in self.seen]
        if todo:
            self.seen.update(zip(todo, self.inner.embed(todo), strict=True))
        return np.stack([self.seen[t] for t in texts]) if texts else np.zeros((0, self.dim))


def requests(data_path: Path) -> list[tuple[Any, Any]]:
    """``(init request, update request or None)`` per window of every user's history."""
    from everos_reflect.llm.base import MergeMember, MergeRequest

    by_user: dict[str, list[lm.LocomoEpisode]] = {}
    for ep in lm.episodes(lm.load(data_path)):
        by_user.setdefault(ep.user_id, []).append(ep)
    out: list[tuple[Any, Any]] = []
    for user in sorted(by_user):
        eps = sorted(by_user[user], key=lambda e: e.timestamp)
        start, turn = 0, 0
        while start + 1 < len(eps):
            size = WINDOWS[turn % len(WINDOWS)]
            window, later = eps[start:start + size], eps[start + size:start + 2 * size]
            members = [MergeMember(e.episode_key, e.timestamp, e.subject, e.text) for e in window]
            news = [MergeMember(e.episode_key, e.timestamp, e.subject, e.text) for e in later]
            out.append((MergeRequest("init", members), news or None))
            start, turn = start + size, turn + 1
    return out


def measure(data_path: str, repeat: int) -> dict[str, Any]:
    """Every merge ``repeat`` times in this process: CPU-ms per pass and the digest."""
    from everos_reflect.embedding import make_embedder
    from everos_reflect.llm import extractive
    from everos_reflect.llm.base import MergeMember, MergeRequest
    from everos_reflect.llm.extractive import ExtractiveLLM
    from everos_reflect.settings import Settings

    llm = ExtractiveLLM(_Remembered(make_embedder(Settings().embedding)))

    def forget() -> None:
        """Each pass reads every text anew, as a run reads Episodes it never read: what the
        merge keeps per text (its ``lru_cache`` functions) is emptied before it."""
        for value in vars(extractive).values():
            if callable(getattr(value, "cache_clear", None)):
                value.cache_clear()
    work = requests(Path(data_path))

    def one_pass() -> tuple[float, str, int]:
        forget()
        digest, merges = hashlib.sha256(), 0
        start = time.process_time()
        for init, news in work:
            first = llm.merge(init)
            merges += 1
            digest.update(json.dumps([first.title, first.content, first.provenance]).encode())
            if news is None:
                continue
            last = init.members[-1]
            existing = MergeMember("narrative", last.timestamp, first.title, first.content,
                                   first.provenance)
            second = llm.merge(MergeRequest("update", news, existing=existing))
            merges += 1
            digest.update(json.dumps([second.title, second.content, second.provenance]).encode())
        return time.process_time() - start, digest.hexdigest()[:16], merges

    _, warm_digest, merges = one_pass()  # embeds every sentence once; not timed
    times, digests = [], set()
    for _ in range(repeat):
        spent, digest, _ = one_pass()
        times.append(spent * 1000)
        digests.add(digest)
    if digests != {warm_digest}:
        raise SystemExit(f"the merge wrote different narratives across passes: {digests}")
    return {"merges": merges, "least_ms": round(min(times), 1),
            "median_ms": round(statistics.median(times), 1), "digest": warm_digest,
            "load": round(os.getloadavg()[0], 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", type=Path)
    ap.add_argument("--tree", type=Path, action="append",
                    help="source tree to time (repeat); default: this checkout")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    trees = args.tree or [Path(__file__).resolve().parent.parent]
    call = f"measure({str(args.data.resolve())!r}, {args.repeat})"
    for r in range(args.rounds):
        for tree in trees:
            row = call_in_tree(tree.resolve(), "extractive_merge_cost", call)
            print(json.dumps({"round": r + 1, **row}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
