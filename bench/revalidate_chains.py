"""Revalidation over thousands of stale insights citing each other in chains: this checkout
against another, one run.

``revalidate_insights`` judges stale insights shallowest first and re-reads the owner's records
after each verdict; each round asks which stale insights wait for a stale one they cite
(``held_by_cited``). This builds one root with ``--insights`` stale insights in chains of
``--chain`` (each cites the one before it in its chain and one Episode, all ``depth: 1`` as a
person may write them), with the citations pointing to lower ids (``up``) or to higher ids
(``down``: the cited insight is judged after the one citing it, which made ``held_by_cited``
walk the whole chain below each insight). Then for each source tree (``--tree``, e.g. an export
of an older commit made with ``git archive``), a child process with that tree first on
``PYTHONPATH``, on its own copy of the root, times ``held_by_cited`` once on the loaded
records, and one run judging ``--judge`` insights with an in-process model that answers
``--verdict`` ("holds", or "retire": the rest of the chain is then retired by the citation
floor with no call) (rounds and seconds), and prints a digest of the verdicts written. With
``--until-clear RUNS`` it runs under the strategy's default limits instead, run after run,
until one is not cut short by a limit (at most RUNS), and counts the runs and the calls.

    python bench/revalidate_chains.py --tree /tmp/old --tree . [--insights 5000] [--chain 50]
                                      [--judge 200] [--direction down] [--verdict holds]
                                      [--until-clear 500]

Asserts nothing; label the figures loaded unless run under /work/notes/bin/idle.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from datetime import date, timedelta
from pathlib import Path

CHILD = r"""
import hashlib, json, sys, time
from pathlib import Path
tree, root, judge = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
verdict, until_clear = sys.argv[4], int(sys.argv[5])
sys.meta_path = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
sys.path[:0] = [str(tree)]
import everos_reflect
where = Path(everos_reflect.__file__).resolve()
assert where.is_relative_to(tree.resolve()), where
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.engine.registry import RunContext, validate_strategy_settings
from everos_reflect.llm.base import Usage
from everos_reflect.llm.tasks import TaskResult
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.strategies import provenance, revalidate

class Model:
    provider, model, calls = "bench", verdict, 0
    def run_task(self, name, req):
        Model.calls += 1
        return TaskResult({"verdict": verdict, "insight": "",
                           "evidence": [r.id for r in req.records]}, Usage(10, 5),
                          self.provider, self.model)

ref = UserRef.of("u_bench")
rt = Runtime(root, embedder=HashEmbedder(32))
rt.__dict__["llm"] = Model()
records = provenance.load_records(rt, ref)
t0 = time.perf_counter()
held = revalidate.held_by_cited(records)
once = time.perf_counter() - t0
rounds = 0
real = revalidate.held_by_cited
def counted(records):
    global rounds
    rounds += 1
    return real(records)
revalidate.held_by_cited = counted
if until_clear:  # the strategy's default limits, run after run until one is not cut short
    values = validate_strategy_settings(revalidate.NAME, {"enabled": True}, "ome.toml")
    runs, counts, t0 = 0, {}, time.perf_counter()
    while runs < until_clear:
        runs += 1
        got = revalidate.RevalidateInsights().run(
            RunContext(rt, values, f"run_{runs}", "manual", force=True))
        for key, value in got.items():
            counts[key] = counts.get(key, 0) + value
        if not got.get("limit_reached"):
            break
    run = time.perf_counter() - t0
    left = len(revalidate.stale_insights(provenance.load_records(rt, ref)))
    counts.update({"runs": runs, "llm_calls": Model.calls, "stale_left": left})
else:
    values = validate_strategy_settings(revalidate.NAME, {
        "enabled": True, "max_llm_calls": judge, "max_records": min(judge, 1000),
        "max_tokens": 10**9, "max_wall_seconds": 86400}, "ome.toml")
    t0 = time.perf_counter()
    counts = revalidate.RevalidateInsights().run(
        RunContext(rt, values, "run_b", "manual", force=True))
    run = time.perf_counter() - t0
digest = hashlib.sha256()
for e in sorted(rt.store.entries(ref, Kind.INSIGHT), key=lambda e: e.id):
    digest.update(f"{e.id}:{e.meta.get('status')}:{e.meta.get('evidence')}".encode())
rt.close()
print(json.dumps({"held_once_s": round(once, 4), "held": len(held), "run_s": round(run, 2),
                  "rounds": rounds, "counts": counts, "digest": digest.hexdigest()[:16]}))
"""


def build(root: Path, insights: int, chain: int, direction: str) -> None:
    from everos_reflect.embedding.base import HashEmbedder
    from everos_reflect.index.sync import Indexer
    from everos_reflect.model import Kind, UserRef
    from everos_reflect.runtime import Runtime

    ref = UserRef.of("u_bench")
    rt = Runtime(root, embedder=HashEmbedder(32))
    start = date(2026, 1, 1)
    eps = rt.store.append_many(ref, Kind.EPISODE, [
        ({"timestamp": f"{start.isoformat()}T09:00:00+00:00", "parent_type": "memcell",
          "parent_id": f"mc_{n}"},
         {"Subject": f"Deploy {n}", "Content": f"Deploy number {n} failed at step {n % 7}."})
        for n in range(max(2, insights // chain))], day=start)
    # ids are allocated per day log: chains laid out over days of 100 insights each
    per_day, made = 100, 0
    ids: list[str] = []
    planned = []  # (chain, position)
    for c in range(insights // chain):
        planned += [(c, k) for k in range(chain)]
    if direction == "down":  # the later in a chain, the lower its id
        planned = [(c, chain - 1 - k) for c, k in planned]
    slot: dict[tuple[int, int], int] = {p: n for n, p in enumerate(planned)}
    # the ids the insights will get, in write order
    day_of = [start + timedelta(days=1 + n // per_day) for n in range(len(planned))]
    id_of = [f"in_{d.strftime('%Y%m%d')}_{n % per_day + 1:04d}" for n, d in enumerate(day_of)]
    for day_start in range(0, len(planned), per_day):
        batch = []
        for n in range(day_start, min(day_start + per_day, len(planned))):
            c, k = planned[n]
            ep = eps[c % len(eps)]
            cited = [ep.id] + ([id_of[slot[(c, k - 1)]]] if k else [eps[(c + 1) % len(eps)].id])
            batch.append(({"timestamp": f"{day_of[n].isoformat()}T09:00:00+00:00",
                           "evidence": cited, "depth": 1, "importance": 5, "question": "q?",
                           "status": "stale", "stale_reason": "evidence was edited",
                           "insight_type": "reflection", "derivation": f"dw_{c}",
                           "evidence_hash": {i: "0" * 64 for i in cited}},
                          {"Insight": f"Chain {c} step {k}: deploys fail at step {c % 7}."}))
        written = rt.store.append_many(ref, Kind.INSIGHT, batch, day=day_of[day_start])
        ids += [e.id for e in written]
        made += len(written)
    assert ids == id_of, "ids not as planned"
    Indexer(rt).scan()
    rt.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", action="append", required=True)
    ap.add_argument("--insights", type=int, default=5000)
    ap.add_argument("--chain", type=int, default=50)
    ap.add_argument("--judge", type=int, default=200)
    ap.add_argument("--direction", choices=("up", "down"), default="down")
    ap.add_argument("--verdict", choices=("holds", "retire"), default="holds",
                    help="what the model answers (retire: the rest of a chain is retired "
                         "by the citation floor, no call)")
    ap.add_argument("--until-clear", type=int, default=0, metavar="RUNS",
                    help="instead of one run judging --judge: runs under the default limits, "
                         "one after another, until one is not cut short (at most RUNS)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="revalidate_chains_"))
    try:
        base = work / "base"
        base.mkdir()
        build(base, args.insights, args.chain, args.direction)
        print(f"{args.insights} stale insights, chains of {args.chain} ({args.direction}), "
              f"model answers {args.verdict!r}, "
              + (f"runs under the default limits until clear (at most {args.until_clear})"
                 if args.until_clear else f"{args.judge} judged per run"))
        for n, tree in enumerate(args.tree):
            root = work / f"root{n}"
            shutil.copytree(base, root)
            out = subprocess.run([sys.executable, "-c", CHILD, str(Path(tree).resolve()),
                                  str(root), str(args.judge), args.verdict,
                                  str(args.until_clear)], capture_output=True, text=True,
                                 check=True)
            print(tree, json.dumps(json.loads(out.stdout.strip().splitlines()[-1])))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
