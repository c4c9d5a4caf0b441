"""CPU time of the clustering's version join reading texts, alone, replayed cold.

Placing an Episode that would found a cluster, the clustering asks whether its text tells a
change of a fact (``tells_change``), and if so whether it is the newer version of a fact a
member of a cluster near it states (``tells_newer_version``, each member read in turn). On
the one-owner streams with texts of their own (``bench_clustering.py --distinct-texts``) this
reading is most of what the row is over its target by, and the bench's figure carries
SQLite, the pivot index and the machine's load besides. This records every such call the
service makes on the stream, in its order, with its answer (``--record``, once: the service
as this checkout has it), then replays them in each tree: every per-text reading emptied
before each pass (every text read anew, as a real owner's new texts are), CPU time of the
process, the answers checked against the recorded ones (a tree that answers otherwise is
refused: the clusters would differ).

    python bench/version_join_cost.py LOCOMO_JSON --vectors-cache vecs.npy --calls calls.json
        [--scale 20] [--repeated-texts] [--tree OLD --tree .] [--rounds 3] [--repeat 3]
        [--profile 30]

``--split N``: ``tells_change``'s calls replayed cold N times, its three stages timed apart
(the word gate, the change patterns, the full reading of the texts that pass both: least
CPU-ms each), then one cold pass of all the calls in their order counting the sentences read
in full (``_reading``'s misses) within each function: how much of a text's full reading
``tells_newer_version`` does again after ``tells_change`` did it.

``--calls``: where the recorded calls go (written when missing, read otherwise: record once,
replay in any tree). Printed per tree and round: the least CPU-ms over ``--repeat`` passes of
each function's calls, and the two together per Episode of the stream. ``--profile N``: one
more cold pass in this checkout under cProfile, its N functions of most cumulative time (where
to look, not what a change gains: cProfile charges every Python call).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from place_after_merges_cost import call_in_tree


def record(locomo: str, vectors: str | None, scale: int, distinct: bool, out: str) -> None:
    """Place the stream as ``bench_clustering.py`` does, 256 per transaction, and write
    every ``tells_change`` / ``tells_newer_version`` call the service makes to ``out``."""
    import bench_clustering as bc

    from everos_reflect.clustering import service
    from everos_reflect.settings import Settings

    settings = Settings()
    settings = replace(settings, clustering=replace(settings.clustering, member_threshold=0.0))
    base, _ = bc.locomo_stream(locomo, Path(vectors) if vectors else None)
    items = bc.one_owner_stream(base, scale, distinct=distinct) if scale else base
    calls: list[list[Any]] = []
    change, newer = service.tells_change, service.tells_newer_version

    def tells_change(text: str) -> bool:
        answer = change(text)
        calls.append(["change", text, None, answer])
        return answer

    def tells_newer_version(earlier: str, later: str) -> bool:
        answer = newer(earlier, later)
        calls.append(["newer", earlier, later, answer])
        return answer

    service.tells_change, service.tells_newer_version = tells_change, tells_newer_version
    try:
        bc.run_ours(items, settings, bc.BATCH)
    finally:
        service.tells_change, service.tells_newer_version = change, newer
    Path(out).write_text(json.dumps({"episodes": len(items), "calls": calls}))


def forget() -> None:
    """Every per-text reading of the offline reader emptied: its ``lru_cache`` functions and
    the version join's own cache of texts."""
    from everos_reflect.llm import extractive

    for value in vars(extractive).values():
        if callable(getattr(value, "cache_clear", None)):
            value.cache_clear()
    with extractive._VERSION_TEXTS_LOCK:
        extractive._VERSION_TEXTS.clear()
        extractive._VERSION_TEXTS_HELD[0] = 0


def profile(calls_path: str, top: int) -> None:
    """One cold pass of the recorded calls under cProfile (CPU time), its ``top`` functions
    by cumulative time printed."""
    from everos_reflect.llm.extractive import tells_change, tells_newer_version

    calls = json.loads(Path(calls_path).read_text())["calls"]
    forget()
    prof = cProfile.Profile(time.process_time)
    prof.enable()
    for kind, a, b, _ in calls:
        tells_change(a) if kind == "change" else tells_newer_version(a, b)
    prof.disable()
    pstats.Stats(prof).sort_stats("cumulative").print_stats(top)


def split(calls_path: str, repeat: int) -> dict[str, Any]:
    """``tells_change``'s stages apart (least CPU over ``repeat`` cold passes), and the full
    readings each function makes in one cold pass of every call in its order."""
    from everos_reflect.llm import extractive as x

    recorded = json.loads(Path(calls_path).read_text())
    calls, episodes = recorded["calls"], recorded["episodes"]
    texts = [a for kind, a, _, _ in calls if kind == "change"]
    stages = ("gate", "patterns", "reading")
    best = dict.fromkeys(stages, float("inf"))
    passed = dict.fromkeys(stages, 0)
    clock = time.process_time
    for _ in range(repeat):
        forget()
        spent = dict.fromkeys(stages, 0.0)
        passed = dict.fromkeys(stages, 0)
        for text in texts:
            t0 = clock()
            ok = x._may_tell_change(text)
            spent["gate"] += clock() - t0
            passed["gate"] += 1
            if not ok:
                continue
            t0 = clock()
            ok = any(r.search(text) for r in x._CHANGE_MARKS)
            spent["patterns"] += clock() - t0
            passed["patterns"] += 1
            if not ok:
                continue
            t0 = clock()
            any(x._sentence_tells_change(t) for t in x._version_text(text).sentences)
            spent["reading"] += clock() - t0
            passed["reading"] += 1
        for stage in stages:
            best[stage] = min(best[stage], spent[stage])
    forget()
    readings = {"change": 0, "newer": 0}
    for kind, a, b, _ in calls:
        before = x._reading.cache_info().misses
        x.tells_change(a) if kind == "change" else x.tells_newer_version(a, b)
        readings[kind] += x._reading.cache_info().misses - before
    return {**{f"{s}_calls": passed[s] for s in stages},
            **{f"{s}_ms": round(best[s] * 1000, 1) for s in stages},
            "us_per_episode": round(sum(best.values()) / episodes * 1e6, 2),
            "sentences_read_by_tells_change": readings["change"],
            "sentences_read_by_tells_newer_version": readings["newer"],
            "load": round(os.getloadavg()[0], 1)}


def measure(calls_path: str, repeat: int) -> dict[str, Any]:
    """The recorded calls replayed ``repeat`` times, cold each time: least CPU-ms each."""
    from everos_reflect.llm.extractive import tells_change, tells_newer_version

    recorded = json.loads(Path(calls_path).read_text())
    calls, episodes = recorded["calls"], recorded["episodes"]
    best = {"change": float("inf"), "newer": float("inf")}
    for _ in range(repeat):
        forget()
        spent = {"change": 0.0, "newer": 0.0}
        for kind, a, b, answer in calls:
            start = time.process_time()
            got = tells_change(a) if kind == "change" else tells_newer_version(a, b)
            spent[kind] += time.process_time() - start
            if got != answer:
                raise SystemExit(f"{kind} answered {got} where the recorded call answered "
                                 f"{answer}: {a[:80]!r}")
        for kind in best:
            best[kind] = min(best[kind], spent[kind])
    counts = {k: sum(1 for c in calls if c[0] == k) for k in best}
    yes = {k: sum(1 for c in calls if c[0] == k and c[3]) for k in best}
    return {"tells_change_calls": counts["change"], "tells_change_yes": yes["change"],
            "tells_change_ms": round(best["change"] * 1000, 1),
            "tells_newer_version_calls": counts["newer"],
            "tells_newer_version_yes": yes["newer"],
            "tells_newer_version_ms": round(best["newer"] * 1000, 1),
            "us_per_episode": round(sum(best.values()) / episodes * 1e6, 1),
            "episodes": episodes, "load": round(os.getloadavg()[0], 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("locomo")
    ap.add_argument("--vectors-cache")
    ap.add_argument("--calls", required=True, type=Path)
    ap.add_argument("--scale", type=int, default=20, help="one owner ×N; 0: LoCoMo")
    ap.add_argument("--repeated-texts", action="store_true",
                    help="the copies repeat LoCoMo's texts (default: texts of their own)")
    ap.add_argument("--tree", type=Path, action="append",
                    help="source tree to time (repeat); default: this checkout")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", type=int, default=0, metavar="N")
    ap.add_argument("--split", type=int, default=0, metavar="N",
                    help="tells_change's stages apart, least of N cold passes, and the "
                         "full readings each function makes")
    args = ap.parse_args(argv)
    here = Path(__file__).resolve().parent.parent
    if not args.calls.exists():
        call_in_tree(here, "version_join_cost",
                     f"record({args.locomo!r}, {args.vectors_cache!r}, {args.scale}, "
                     f"{not args.repeated_texts}, {str(args.calls)!r}) or {{}}")
    trees = args.tree or [here]
    call = f"measure({str(args.calls.resolve())!r}, {args.repeat})"
    for r in range(args.rounds):
        for tree in trees:
            row = call_in_tree(tree.resolve(), "version_join_cost", call)
            print(json.dumps({"round": r + 1, **row}), flush=True)
    if args.split:
        for tree in trees:
            row = call_in_tree(tree.resolve(), "version_join_cost",
                               f"split({str(args.calls.resolve())!r}, {args.split})")
            print(json.dumps({"split": True, **row}), flush=True)
    if args.profile:
        profile(str(args.calls), args.profile)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
