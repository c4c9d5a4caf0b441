"""CPU time of the text reading on the clustering's path: ``tells_change`` and
``tells_newer_version`` (``llm/extractive.py``), as an index flush asks them.

Places a stream of ``bench_clustering.py`` (LoCoMo, or one owner ×N) as
``clustering_split.py`` does, recording each call of the two in order; then replays the
calls in that order ``--repeat`` times, every per-text cache of the reading emptied before
each replay, and prints the least CPU time (``time.process_time``) per Episode of the
stream, each function apart, with the calls' answers (a tree that answers otherwise prints
other counts). Run it with either tree first on ``PYTHONPATH`` to compare two trees.

    python bench/change_reading.py LOCOMO_JSON --vectors-cache vecs.npy [--scale 20] \
        [--repeat 5] [--distinct] [--count-calls]

The one-owner streams repeat LoCoMo's 544 texts: a text read once is found in the caches
the reading keeps per text (what a member read against many later texts costs), so the
figures there are of a stream with 544 texts, not of one with as many as it has Episodes.
``--distinct`` makes each Episode's text its own (the n-th time a text comes, n spaces
after it: the same words, sentences and answers, another key for every cache kept per
text); the caches kept per sentence still find a repeat's sentences.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import pstats
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import clustering_split as cs

from everos_reflect.clustering import service
from everos_reflect.llm import extractive


def _forget() -> None:
    """Every cache the module keeps emptied (per text, per sentence, per token set)."""
    for value in list(vars(extractive).values()):
        clear = getattr(value, "cache_clear", None)
        if callable(clear):
            clear()
    extractive._VERSION_TEXTS.clear()
    extractive._VERSION_TEXTS_HELD[0] = 0


def _distinct(items: list[Any]) -> list[Any]:
    """``items`` with each text its own: the n-th time a text comes, n spaces after it."""
    seen: dict[str, int] = {}
    out = []
    for it in items:
        n = seen[it.text] = seen.get(it.text, -1) + 1
        out.append(replace(it, text=it.text + " " * n))
    return out


def record(argv: list[str], distinct: bool = False) -> tuple[list[tuple[str, tuple[str, ...]]],
                                                             int]:
    """The calls ``clustering_split.main(argv)`` makes of the two, in order, and how many
    Episodes it placed (``distinct``: each Episode's text its own, :func:`_distinct`)."""
    calls: list[tuple[str, tuple[str, ...]]] = []
    real: dict[str, Callable[..., bool]] = {
        "tells_change": service.tells_change,
        "tells_newer_version": service.tells_newer_version}

    def recorded(name: str) -> Callable[..., bool]:
        def call(*args: str) -> bool:
            calls.append((name, args))
            return real[name](*args)
        return call

    for name in real:
        setattr(service, name, recorded(name))
    placed: list[int] = []
    items = cs.bc.one_owner_stream

    def counted(*args: Any, **kwargs: Any) -> Any:
        out = items(*args, **kwargs)
        if distinct:
            out = _distinct(out)
        placed.append(len(out))
        return out

    cs.bc.one_owner_stream = counted
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # its own split, not needed here
            cs.main(argv)
    finally:
        for name, fn in real.items():
            setattr(service, name, fn)
        cs.bc.one_owner_stream = items
    return calls, placed[0] if placed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("locomo")
    parser.add_argument("--vectors-cache", type=Path)
    parser.add_argument("--scale", type=int, default=0, help="one owner ×N; 0: LoCoMo")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--distinct", action="store_true",
                        help="each Episode's text its own (one-owner streams)")
    parser.add_argument("--count-calls", action="store_true",
                        help="also count the Python function calls of a replay")
    args = parser.parse_args(argv)
    split = [args.locomo, "--scale", str(args.scale)]
    if args.vectors_cache:
        split += ["--vectors-cache", str(args.vectors_cache)]
    calls, n = record(split, args.distinct)
    if not n:  # LoCoMo: the stream as bench_clustering.py loads it
        n = len(cs.bc.locomo_stream(args.locomo, args.vectors_cache)[0])
    fns = {"tells_change": extractive.tells_change,
           "tells_newer_version": extractive.tells_newer_version}
    best = dict.fromkeys(fns, float("inf"))
    answers: dict[str, int] = {}
    for _ in range(args.repeat):
        _forget()
        spent = dict.fromkeys(fns, 0.0)
        yes = dict.fromkeys(fns, 0)
        for name, call_args in calls:
            fn = fns[name]
            t0 = time.process_time()
            told = fn(*call_args)
            spent[name] += time.process_time() - t0
            yes[name] += told
        best = {k: min(best[k], spent[k]) for k in fns}
        answers = yes
    print(f"{'one owner x' + str(args.scale) if args.scale else 'LoCoMo'}"
          f"{', each text its own' if args.distinct else ''}: {n:,} Episodes, "
          f"least of {args.repeat} replays, caches emptied before each")
    for name in fns:
        count = sum(1 for c, _ in calls if c == name)
        print(f"  {name}: {best[name] / n * 1e6:.2f} CPU-µs per Episode ({count:,} calls, "
              f"{answers[name]:,} yes)")
    print(f"  both: {sum(best.values()) / n * 1e6:.2f} CPU-µs per Episode")
    if args.count_calls:
        _count_calls(calls, fns, n)
    return 0


def _count_calls(calls: list[tuple[str, tuple[str, ...]]],
                 fns: dict[str, Callable[..., bool]], n: int) -> None:
    """One more replay, caches emptied first, each of the two under ``cProfile``: the
    Python function calls it makes per Episode, which a loaded machine does not blur."""
    _forget()
    made = dict.fromkeys(fns, 0)
    for name, call_args in calls:
        profile = cProfile.Profile()
        profile.runcall(fns[name], *call_args)
        made[name] += pstats.Stats(profile).total_calls
    for name, count in made.items():
        print(f"  {name}: {count / n:.1f} Python function calls per Episode ({count:,})")


if __name__ == "__main__":
    sys.exit(main())
