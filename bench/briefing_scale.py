"""Briefing time with many lessons of one task type: this checkout against another, one run.

A briefing with ``task_type`` offers that type's live lessons, most confirmed first, and packs
what fits its token budget. This builds one root with ``--lessons`` live lessons of one type
(in daily logs of 200, written whole) and a few Episodes (indexed with the hashed embedder, so
no model is loaded), then for each source tree (``--tree``, e.g. an export of an older commit
made with ``git archive``) a child process with that tree first on ``PYTHONPATH`` times
``build_briefing`` on that root: the first call (parses the logs) and ``--calls`` calls after it
(parsed logs cached), each with the same queries. It prints each tree's times and a digest of
its answers (the whole ``Briefing.to_dict()`` of every call), so the two trees can be checked to
give the same briefings.

    python bench/briefing_scale.py --tree /tmp/old --tree . [--lessons 20000] [--calls 5]
                                   [--max-tokens 1000] [--rounds 1]

Asserts nothing; label the figures loaded unless run under /work/notes/bin/idle.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

CHILD = r"""
import hashlib, json, sys, time
from pathlib import Path
tree, root, calls, budget = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
# an editable install's finder would import the installed checkout instead of this tree
sys.meta_path = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
sys.path[:0] = [str(tree)]
import everos_reflect
from everos_reflect.briefing.build import build_briefing
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.model import UserRef
from everos_reflect.runtime import Runtime
where = Path(everos_reflect.__file__).resolve()
assert where.is_relative_to(tree.resolve()), where
ref = UserRef.of("u_agent")
rt = Runtime(root, embedder=HashEmbedder())
queries = ["Deploy the payments service to production", "What usually breaks our deploys?",
           "When did the registry time out during a rollout?"]
digest = hashlib.sha256()
def one(query):
    t0 = time.perf_counter()
    b = build_briefing(rt, ref, query, task_type="deploy", max_tokens=budget)
    took = time.perf_counter() - t0
    digest.update(json.dumps(b.to_dict(), sort_keys=True).encode())
    return took, b
first, b = one(queries[0])
times = [one(queries[n % len(queries)])[0] for n in range(calls)]
rt.close()
times.sort()
print(json.dumps({"first_call_s": round(first, 3), "median_s": round(times[len(times) // 2], 3),
                  "max_s": round(times[-1], 3), "calls": calls,
                  "lessons_kept": sum(1 for i in b.items if i.kind == "lesson"),
                  "lessons_left_out": b.omitted.get("lesson", 0), "tokens": b.tokens,
                  "digest": digest.hexdigest()[:16]}))
"""

LESSON_WORDS = ["check", "the", "registry", "credentials", "before", "rolling", "out", "pin",
                "image", "tags", "read", "logs", "retry", "once", "canary", "first", "roll",
                "back", "on", "errors", "warm", "cache", "drain", "nodes", "quota", "timeout"]


def build_root(root: Path, lessons: int, seed: int) -> None:
    """``lessons`` live ``deploy`` lessons in daily logs of 200 plus a few indexed Episodes."""
    from everos_reflect.embedding.base import HashEmbedder
    from everos_reflect.index.sync import Indexer
    from everos_reflect.markdown import writer
    from everos_reflect.model import EntryId, Kind, UserRef
    from everos_reflect.runtime import Runtime

    ref = UserRef.of("u_agent")
    rng = random.Random(seed)
    rt = Runtime(root, embedder=HashEmbedder())
    for n, text in enumerate(["The payments deploy stalled on the registry.",
                              "Dana asked for a canary before every rollout.",
                              "The registry timed out during the rollout on Monday."]):
        rt.store.append(ref, Kind.EPISODE, {"timestamp": f"2026-10-1{n}T09:00:00+00:00",
                                            "parent_type": "memcell", "parent_id": "mc_b"},
                        {"Subject": "Deploy", "Content": text})
    Indexer(rt).scan()
    rt.close()
    # lessons are read from their Markdown by the briefing, never from the index
    base = root / ref.app / ref.project / "users" / ref.user_id / Kind.LESSON.folder
    base.mkdir(parents=True, exist_ok=True)
    start = date(2025, 1, 1)
    per_day = 200
    for d in range((lessons + per_day - 1) // per_day):
        day = start + timedelta(days=d)
        text = writer.new_log_text(Kind.LESSON, ref.user_id, day)
        for seq in range(1, min(per_day, lessons - d * per_day) + 1):
            words = " ".join(rng.choice(LESSON_WORDS) for _ in range(rng.randint(6, 30)))
            meta = {"owner_id": ref.user_id,
                    "timestamp": datetime.combine(day, datetime.min.time(), UTC)
                    + timedelta(minutes=seq),
                    "task_type": "deploy", "lesson_type": rng.choice(["do", "avoid"]),
                    "evidence": [f"tk_20250101_{rng.randint(1, 999):04d}"
                                 for _ in range(rng.randint(1, 3))],
                    "confirmations": rng.randint(1, 40), "depth": 1,
                    "status": rng.choice(["active"] * 9 + ["contested"]),
                    "created_by": "learn_lessons"}
            block = writer.render_entry(str(EntryId(Kind.LESSON, day, seq)), meta,
                                        {"Lesson": words.capitalize() + "."})
            text = writer.append_entry(text, block)
        (base / Kind.LESSON.filename(day)).write_text(text)


def time_tree(tree: Path, root: Path, calls: int, budget: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree), "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run([sys.executable, "-c", CHILD, str(tree), str(root), str(calls),
                           str(budget)], env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: child failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, action="append", required=True,
                        help="a source tree to time (give two or more)")
    parser.add_argument("--lessons", type=int, default=20_000)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    results: dict[str, list[dict[str, Any]]] = {str(t): [] for t in args.tree}
    with tempfile.TemporaryDirectory(prefix="everos-briefing-") as tmp:
        root = Path(tmp) / "root"
        build_root(root, args.lessons, args.seed)
        time.sleep(2.5)  # past the cache's racy window: later calls may reuse parsed logs
        print(f"{args.lessons} live lessons of one task type, budget {args.max_tokens} tokens",
              flush=True)
        for r in range(args.rounds):
            for tree in args.tree:
                got = time_tree(tree.resolve(), root, args.calls, args.max_tokens)
                results[str(tree)].append(got)
                print(f"round {r} {tree}: {got}", flush=True)
    digests = {t: {x["digest"] for x in runs} for t, runs in results.items()}
    same = len(set().union(*digests.values())) == 1
    print("same briefings from every tree" if same else f"briefings DIFFER: {digests}")
    for tree in args.tree:
        runs = results[str(tree)]
        print(f"{tree}: first call {min(x['first_call_s'] for x in runs):.3f} s, "
              f"cached calls median {min(x['median_s'] for x in runs):.3f} s "
              f"(best of {args.rounds} round(s))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
