"""Procedural lessons and the bounded briefing on a synthetic agent history.

    python bench/lessons_briefing.py [--tasks-per-type 45] [--seed 7] [--latency-records 10000]
                                     [--queries 100] [--parts lessons,precision,latency]
                                     [--load-note TEXT] [--out bench/results/lessons_briefing]

1. **Lessons.** Five task types, each with a planted recurring error (in most failed tasks,
   with volatile numbers/hosts) and a planted fix (a step every successful task takes and no
   failed one does), plus noise steps and one-off errors. Tasks are written in date order and
   ``learn_lessons`` runs after every batch of 25 (as the on-write trigger would, with its
   cooldown) with the offline provider (no LLM here). Counted: planted lessons recovered, and
   false lessons (any live lesson that is neither a planted error nor a planted fix).
2. **Briefing precision** at 500 / 1,000 / 2,000 tokens: the share of the block's tokens
   (header, headings and the "left out" line included, counted as not relevant) that belong to
   records of the query's topic, against a baseline that is plain top-k hybrid search text
   (episode hits as ``- subject: text`` lines until the budget is full). Episodes, tasks and
   lessons are embedded with the bundled MiniLM.
3. **Briefing latency** at ``--latency-records`` records for one user (episodes, facts, tasks,
   lessons, insights), loaded through the bulk path (whole daily logs, then one ``reindex``):
   wall time of ``build_briefing`` per distinct query, the query embedding with the bundled
   ONNX model included, for both ``[embedding] low_memory`` settings (timed query by query in
   turn). The records' vectors are MiniLM vectors of their template sentences (embedding 10k
   texts on 2 shared cores adds minutes and changes no query cost); queries are embedded for
   real, each one new to the embedder's cache.

Prints the figures and writes ``<out>.json`` / ``<out>.md``. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from everos_reflect.briefing.build import build_briefing
from everos_reflect.briefing.tokens import default_counter
from everos_reflect.embedding.base import CachingEmbedder
from everos_reflect.embedding.local import LocalEmbedder
from everos_reflect.engine.registry import RunContext, validate_strategy_settings
from everos_reflect.index.search import search
from everos_reflect.index.sync import Indexer
from everos_reflect.llm.extractive import ExtractiveLLM
from everos_reflect.markdown import writer
from everos_reflect.model import EntryId, Kind, UserRef
from everos_reflect.procedural.lessons import read_lesson
from everos_reflect.procedural.tasks import new_task
from everos_reflect.runtime import Runtime
from everos_reflect.strategies.lessons import NAME, LearnLessons

REF = UserRef.of("u_agent")
START = date(2026, 1, 5)

TYPES: dict[str, dict[str, Any]] = {
    "deploy": dict(
        goal="Deploy the {svc} service to production",
        error="ImagePullBackOff: registry timeout after {n}s on node {host}",
        error_key="imagepullbackoff: registry timeout",
        fix="check the registry credentials",
        steps=["build the container image", "push the image", "roll out the release"]),
    "db_migration": dict(
        goal="Migrate the {svc} database schema",
        error="lock timeout on table {tbl} after {n} ms",
        error_key="lock timeout on table",
        fix="take a database backup first",
        steps=["write the migration script", "run the migration", "verify the schema"]),
    "cert_renewal": dict(
        goal="Renew the TLS certificate of {svc}",
        error="ACME challenge failed: DNS record not found for {host}",
        error_key="acme challenge failed",
        fix="check the DNS TXT record",
        steps=["request the certificate", "install the certificate", "reload the proxy"]),
    "data_backup": dict(
        goal="Back up the {svc} data volume",
        error="disk quota exceeded on /backups/{n}",
        error_key="disk quota exceeded",
        fix="prune old snapshots",
        steps=["snapshot the volume", "copy the snapshot offsite", "verify the checksum"]),
    "dependency_upgrade": dict(
        goal="Upgrade the dependencies of {svc}",
        error="ImportError: cannot import name '{name}' from '{pkg}'",
        error_key="importerror: cannot import name",
        fix="read the changelog for breaking changes",
        steps=["bump the versions", "run the test suite", "merge the upgrade"]),
}
NOISE_STEPS = ["notify the team channel", "update the ticket", "pair with a colleague",
               "write down the timeline", "ask for a review"]
ONE_OFF = ["worker {w} crashed while {v} the {x}", "unexpected {w} response while {v} {x}",
           "{x} step aborted by {w}"]
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
         "juliet", "kilo", "lima", "mike", "november", "oscar", "papa"]
VERBS = ["reading", "writing", "syncing", "parsing", "sending", "hashing"]
SERVICES = ["payments", "search", "billing", "auth", "web", "reports", "inventory"]

TOPICS: dict[str, list[str]] = {
    # work topics, one per task type (relevant to that type's queries)
    "deploy": ["Dana and the agent talked about the {svc} deploy; the rollout stalled twice.",
               "The {svc} release went out after the registry credentials were rotated.",
               "Deploy window for {svc} moved to Thursday because of the registry outage.",
               "Dana asked for a canary before every {svc} rollout from now on."],
    "db_migration": ["The {svc} schema migration locked the orders table for minutes.",
                     "Dana wants a backup before any {svc} database migration.",
                     "The migration of {svc} added two columns and an index.",
                     "Long migrations on {svc} now run at night."],
    "cert_renewal": ["The TLS certificate of {svc} expires in two weeks.",
                     "The DNS TXT record for the {svc} ACME challenge was missing.",
                     "Certificates for {svc} are now renewed thirty days ahead.",
                     "The proxy in front of {svc} needed a reload after the new certificate."],
    "data_backup": ["The {svc} backup job filled the disk quota again.",
                    "Old snapshots of {svc} were pruned to free space.",
                    "Backups of {svc} are copied offsite every night.",
                    "A restore drill of the {svc} backup took forty minutes."],
    "dependency_upgrade": ["Upgrading the {svc} dependencies broke an import.",
                           "The changelog of the {svc} web framework listed breaking changes.",
                           "The {svc} test suite caught the upgrade regression.",
                           "Dependabot opened twelve upgrade pull requests for {svc}."],
    # personal topics (relevant only to their own queries)
    "pets": ["Andrew walked his dog {w} in the park.", "The vet said {w} the beagle is healthy.",
             "Andrew is thinking about adopting a second dog.", "{w} chewed Andrew's shoes."],
    "running": ["Joanna ran {n} kilometres along the river.", "Joanna signed up for a marathon.",
                "Joanna's knee hurt after the long run.", "Joanna bought new running shoes."],
    "cooking": ["Mei baked sourdough bread with a new starter.", "Mei cooked ramen for friends.",
                "Mei tried a recipe for dumplings.", "Mei's tomato sauce needed more salt."],
    "travel": ["Caroline booked a trip to Lisbon in {m}.", "Caroline's flight was delayed.",
               "Caroline visited the old town and the castle.", "Caroline packed for the beach."],
    "music": ["Nate practised guitar chords for an hour.", "Nate played a gig at the cafe.",
              "Nate bought new guitar strings.", "Nate is learning a jazz standard."],
    "garden": ["The tomatoes in Andrew's garden are ripening.", "Andrew planted basil and mint.",
               "Slugs ate the lettuce in the garden.", "Andrew built a raised bed."],
}
QUERIES: list[tuple[str, str, str | None]] = [  # (query, topic, task_type for the briefing)
    ("Deploy the payments service to production", "deploy", "deploy"),
    ("What usually breaks our deploys?", "deploy", "deploy"),
    ("When did the registry time out during a rollout?", "deploy", "deploy"),
    ("Migrate the billing database schema", "db_migration", "db_migration"),
    ("What goes wrong in database migrations?", "db_migration", "db_migration"),
    ("Renew the TLS certificate of the auth service", "cert_renewal", "cert_renewal"),
    ("Why do certificate renewals fail?", "cert_renewal", "cert_renewal"),
    ("Back up the reports data volume", "data_backup", "data_backup"),
    ("What happens when the backup disk fills up?", "data_backup", "data_backup"),
    ("Upgrade the dependencies of the search service", "dependency_upgrade",
     "dependency_upgrade"),
    ("What breaks when we upgrade dependencies?", "dependency_upgrade", "dependency_upgrade"),
    ("How is Andrew's dog doing?", "pets", None),
    ("How is Joanna's marathon training going?", "running", None),
    ("What did Mei cook recently?", "cooking", None),
    ("Where did Caroline travel?", "travel", None),
    ("How is Nate's guitar playing?", "music", None),
    ("What grows in Andrew's garden?", "garden", None),
]


def fill(template: str, rng: random.Random) -> str:
    return template.format(svc=rng.choice(SERVICES), n=rng.randint(10, 900),
                           host=f"node-{rng.randint(1, 40)}", tbl=rng.choice(["orders", "users"]),
                           name=rng.choice(["Session", "Mapping", "Client"]),
                           pkg=rng.choice(["httpx", "sqlalchemy", "pydantic"]),
                           w=rng.choice(WORDS).title(), v=rng.choice(VERBS),
                           x=rng.choice(WORDS), m=rng.choice(["May", "June", "July"]))


# -- building a root ---------------------------------------------------------------------------


def write_logs(root: Path, ref: UserRef, kind: Kind,
               rows: list[tuple[datetime, dict[str, Any], dict[str, str]]]) -> list[str]:
    """Write entries straight into day files (the bench's bulk loader), one file per day."""
    by_day: dict[date, list[tuple[datetime, dict[str, Any], dict[str, str]]]] = defaultdict(list)
    for row in rows:
        by_day[row[0].date()].append(row)
    ids = []
    base = root / ref.app / ref.project / "users" / ref.user_id / kind.folder
    base.mkdir(parents=True, exist_ok=True)
    for day, items in sorted(by_day.items()):
        text = writer.new_log_text(kind, ref.user_id, day)
        for seq, (ts, meta, sections) in enumerate(items, start=1):
            entry_id = str(EntryId(kind, day, seq))
            ids.append(entry_id)
            full = {"owner_id": ref.user_id, "timestamp": ts, **meta}
            text = writer.append_entry(text, writer.render_entry(entry_id, full, sections))
        (base / kind.filename(day)).write_text(text)
    return ids


def make_tasks(rng: random.Random, per_type: int) -> list[tuple[datetime, str, dict[str, Any]]]:
    """(when, type, new_task kwargs) in date order, planted errors and fixes included."""
    out = []
    for task_type, spec in TYPES.items():
        for i in range(per_type):
            when = datetime.combine(START + timedelta(days=rng.randint(0, 300)),
                                    datetime.min.time(), UTC) + timedelta(hours=9 + i % 8)
            success = rng.random() < 0.6
            steps = list(spec["steps"])
            if success:
                steps.insert(1, spec["fix"])
            if rng.random() < 0.3:
                steps.insert(rng.randint(0, len(steps)), rng.choice(NOISE_STEPS))
            errors = []
            if not success:
                errors.append(fill(spec["error"] if rng.random() < 0.8
                                   else rng.choice(ONE_OFF), rng))
            out.append((when, task_type, dict(
                task_type=task_type, goal=fill(spec["goal"], rng), steps=steps,
                outcome="success" if success else "failure", errors=errors)))
    out.sort(key=lambda t: t[0])
    return out


def learn(rt: Runtime, runs: list[int]) -> None:
    values = validate_strategy_settings(NAME, {}, "ome.toml")
    ctx = RunContext(rt, values, run_id=f"run_bench_{len(runs)}", trigger="bench")
    runs.append(sum(LearnLessons().run(ctx).get(k, 0) for k in ("written",)))


def lessons_part(rt: Runtime, rng: random.Random, per_type: int) -> dict[str, Any]:
    tasks = make_tasks(rng, per_type)
    runs: list[int] = []
    for n, (when, _, kwargs) in enumerate(tasks, start=1):
        t = new_task(REF, timestamp=when, **kwargs)
        rt.store.append(REF, Kind.TASK, t.meta, t.sections, day=t.day)
        if n % 25 == 0 or n == len(tasks):
            learn(rt, runs)
    live = [x for x in (read_lesson(e) for e in rt.store.entries(REF, Kind.LESSON)) if x.live]
    planted = {(t, "avoid"): spec["error_key"] for t, spec in TYPES.items()}
    planted |= {(t, "do"): spec["fix"] for t, spec in TYPES.items()}
    found, false = set(), []
    for x in live:
        key = (x.task_type, x.lesson_type)
        if key in planted and planted[key].lower() in x.text.lower():
            found.add(key)
        else:
            false.append(x.text)
    return {"tasks": len(tasks), "task_types": len(TYPES), "learn_runs": len(runs),
            "live_lessons": len(live), "planted": len(planted), "recovered": len(found),
            "missed": sorted(f"{t}/{k}" for t, k in set(planted) - found),
            "false_lessons": len(false), "false_examples": false[:5],
            "lessons": [{"task_type": x.task_type, "type": x.lesson_type, "text": x.text,
                         "confirmations": x.confirmations} for x in live]}


def episodes_rows(rng: random.Random, per_topic: int) -> tuple[list[Any], dict[str, str]]:
    rows, topic_of = [], {}
    for topic, templates in TOPICS.items():
        for _ in range(per_topic):
            when = datetime.combine(START + timedelta(days=rng.randint(0, 300)),
                                    datetime.min.time(), UTC) + timedelta(hours=rng.randint(8, 20))
            text = fill(rng.choice(templates), rng)
            rows.append((when, {"parent_type": "memcell", "parent_id": "mc_bench"},
                         {"Subject": topic.replace("_", " ").title(), "Content": text}, topic))
    rows.sort(key=lambda r: r[0])
    return rows, topic_of


def precision_part(rt: Runtime, rng: random.Random, per_topic: int) -> dict[str, Any]:
    rows, _ = episodes_rows(rng, per_topic)
    ids = write_logs(rt.root, REF, Kind.EPISODE, [r[:3] for r in rows])
    topic = dict(zip(ids, (r[3] for r in rows), strict=True))
    Indexer(rt).scan()
    for e in rt.store.entries(REF, Kind.TASK):
        topic[e.id] = str(e.meta["task_type"])
    for e in rt.store.entries(REF, Kind.LESSON):
        topic[e.id] = str(e.meta["task_type"])
    counter = default_counter()
    result: dict[str, Any] = {"episodes": len(ids), "queries": len(QUERIES), "budgets": {}}
    for budget in (500, 1000, 2000):
        ours, base = [], []
        for query, want, task_type in QUERIES:
            b = build_briefing(rt, REF, query, task_type=task_type, max_tokens=budget)
            relevant = sum(counter.count(line) for line, item in _lines(b)
                           if topic.get(item) == want)
            ours.append(relevant / max(1, b.tokens))
            base.append(_baseline(rt, counter, query, budget, topic, want))
        result["budgets"][budget] = {"briefing": round(statistics.mean(ours), 3),
                                     "baseline_topk": round(statistics.mean(base), 3)}
    return result


def _lines(b: Any) -> list[tuple[str, str]]:
    out = []
    for line in b.text.splitlines():
        if line.startswith("- ["):
            out.append((line, line[3:].split(" ", 1)[0]))
    return out


def _baseline(rt: Runtime, counter: Any, query: str, budget: int, topic: dict[str, str],
              want: str) -> float:
    hits = search(rt, query, top_k=100, user_id=REF.user_id, passages_per_entry=1)  # whole texts
    used = relevant = 0
    for h in hits:
        line = f"- {h.subject}: {h.episode}"
        cost = counter.count(line)
        if used + cost > budget:
            break
        used += cost
        relevant += cost if topic.get(h.id) == want else 0
    return relevant / max(1, used)


# -- latency -----------------------------------------------------------------------------------


class TemplateEmbedder:
    """Indexing-only embedder: the MiniLM vector of each record's template sentence (the text
    before `` | ``), computed once per template."""

    def __init__(self, real: LocalEmbedder) -> None:
        self.real, self.name, self.dim = real, real.name, real.dim
        self.cache: dict[str, np.ndarray] = {}

    def embed(self, texts: list[str]) -> np.ndarray:
        keys = [t.split(" | ")[0] for t in texts]
        todo = sorted({k for k in keys if k not in self.cache})
        if todo:
            self.cache.update(zip(todo, self.real.embed(todo), strict=True))
        return np.stack([self.cache[k] for k in keys]) if keys else np.zeros((0, self.dim))


EMBEDDERS = {  # how the query is embedded: the shipped default and the faster, larger session
    "low_memory": dict(low_memory=True),
    "folded": dict(low_memory=False),
}


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[int(q * (len(ordered) - 1))], 1)


def load_latency_root(root: Path, rng: random.Random, records: int,
                      indexing: LocalEmbedder) -> dict[str, Any]:
    """One user with ``records`` records, loaded through the bulk path: whole daily logs written
    at once, offline lessons learnt over the tasks, then one ``reindex`` (one embedding batch
    per 2,048 entries, one recluster) — never one add per record."""
    n_tasks, n_insights = 450, 50
    n_facts = records // 7
    n_eps = records - n_tasks - n_facts - n_insights
    rt = Runtime(root, embedder=TemplateEmbedder(indexing), llm=ExtractiveLLM())
    phases: dict[str, float] = {}
    started = time.perf_counter()
    ep_rows, fact_rows = [], []
    templates = [t for ts in TOPICS.values() for t in ts]
    for i in range(n_eps):
        when = datetime.combine(START + timedelta(days=i % 365), datetime.min.time(), UTC)
        text = fill(rng.choice(templates), rng)
        ep_rows.append((when + timedelta(minutes=i % 600),
                        {"parent_type": "memcell", "parent_id": "mc_bench"},
                        {"Subject": "Note", "Content": f"{text} | {i}"}))
    ep_ids = write_logs(root, REF, Kind.EPISODE, ep_rows)
    for i in range(n_facts):
        when = datetime.combine(START + timedelta(days=i % 365), datetime.min.time(), UTC)
        fact_rows.append((when, {"parent_type": "episode", "parent_id": ep_ids[i]},
                          {"Fact": f"{fill(rng.choice(templates), rng)} | f{i}"}))
    write_logs(root, REF, Kind.ATOMIC_FACT, fact_rows)
    task_rows = []
    for when, _, kwargs in make_tasks(rng, n_tasks // len(TYPES)):
        t = new_task(REF, timestamp=when, **kwargs)
        task_rows.append((when, {k: v for k, v in t.meta.items()
                                 if k not in ("owner_id", "timestamp")}, t.sections))
    write_logs(root, REF, Kind.TASK, task_rows)
    insight_rows = [(datetime.combine(START + timedelta(days=300), datetime.min.time(), UTC),
                     {"evidence": [ep_ids[i], ep_ids[i + 1]], "depth": 1, "status": "active"},
                     {"Insight": f"{fill(rng.choice(templates), rng)} | i{i}"})
                    for i in range(n_insights)]
    write_logs(root, REF, Kind.INSIGHT, insight_rows)
    phases["write_logs_s"] = time.perf_counter() - started
    started = time.perf_counter()
    learn(rt, [])  # offline lessons over the tasks
    phases["learn_lessons_s"] = time.perf_counter() - started
    started = time.perf_counter()
    Indexer(rt).reindex()
    phases["reindex_s"] = time.perf_counter() - started
    total = rt.db().execute("SELECT count(*) FROM entries WHERE user_id = ?",
                            (REF.user_id,)).fetchone()[0]
    rt.close()
    return {"records": total, **{k: round(v, 1) for k, v in phases.items()}}


def latency_part(root: Path, rng: random.Random, records: int, queries: int) -> dict[str, Any]:
    """Briefing and plain-search wall times per query, for each way of embedding the query,
    interleaved query by query so both sides see the same machine."""
    embedders = {mode: LocalEmbedder(**kw) for mode, kw in EMBEDDERS.items()}
    started = time.perf_counter()
    setup = load_latency_root(root, rng, records, embedders["folded"])
    setup["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps({"latency_setup": setup}), flush=True)

    runtimes = {mode: Runtime(root, embedder=CachingEmbedder(e), llm=ExtractiveLLM())
                for mode, e in embedders.items()}
    for rt in runtimes.values():  # first use: model load, tables opened
        build_briefing(rt, REF, "warm-up query about deploys", task_type="deploy")
    brief: dict[str, list[float]] = {m: [] for m in runtimes}
    plain: dict[str, list[float]] = {m: [] for m in runtimes}
    embed: dict[str, list[float]] = {m: [] for m in runtimes}
    for i in range(queries):
        query, _, task_type = QUERIES[i % len(QUERIES)]
        tag = f"{WORDS[i % len(WORDS)]} {i}"  # every query new to the embedders' caches
        for mode, rt in runtimes.items():
            t = time.perf_counter()
            build_briefing(rt, REF, f"{query} ({tag})", task_type=task_type, max_tokens=1000)
            brief[mode].append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            search(rt, f"{query} [{tag}]", top_k=5, user_id=REF.user_id)
            plain[mode].append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            embedders[mode].embed([f"{query} <{tag}>"])
            embed[mode].append((time.perf_counter() - t) * 1000)
    for rt in runtimes.values():
        rt.close()
    return {"records": setup["records"], "queries": queries, "setup": setup,
            "modes": {m: {"p50_ms": _pct(brief[m], 0.5), "p95_ms": _pct(brief[m], 0.95),
                          "max_ms": round(max(brief[m]), 1),
                          "plain_search_p50_ms": _pct(plain[m], 0.5),
                          "plain_search_p95_ms": _pct(plain[m], 0.95),
                          "query_embedding_p50_ms": _pct(embed[m], 0.5),
                          "query_embedding_p95_ms": _pct(embed[m], 0.95)}
                      for m in runtimes}}


PARTS = ("lessons", "precision", "latency")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks-per-type", type=int, default=45)
    ap.add_argument("--episodes-per-topic", type=int, default=30)
    ap.add_argument("--latency-records", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--parts", default=",".join(PARTS),
                    help="comma-separated subset of lessons,precision,latency (precision needs "
                         "lessons)")
    ap.add_argument("--out", default="bench/results/lessons_briefing")
    ap.add_argument("--load-note", default="",
                    help="how the machine was held, e.g. 'run alone under /work/notes/bin/idle'")
    args = ap.parse_args()
    parts = [x.strip() for x in args.parts.split(",") if x.strip()]
    if not parts or set(parts) - set(PARTS) or ("precision" in parts and "lessons" not in parts):
        ap.error(f"--parts must be a subset of {','.join(PARTS)}, with lessons for precision")

    load = os.getloadavg()
    result: dict[str, Any] = {}
    work = Path(tempfile.mkdtemp(prefix="everos-bench-lessons-"))
    try:
        if "lessons" in parts:
            rt = Runtime(work / "history", embedder=CachingEmbedder(LocalEmbedder()),
                         llm=ExtractiveLLM())
            rt.root.mkdir()
            started = time.perf_counter()
            lessons = lessons_part(rt, random.Random(args.seed), args.tasks_per_type)
            lessons["seconds"] = round(time.perf_counter() - started, 1)
            result["lessons"] = lessons
            print(json.dumps({"lessons": {k: v for k, v in lessons.items() if k != "lessons"}},
                             indent=2), flush=True)
            if "precision" in parts:
                result["precision"] = precision_part(rt, random.Random(args.seed + 1),
                                                     args.episodes_per_topic)
                print(json.dumps({"precision": result["precision"]}, indent=2), flush=True)
            rt.close()
        if "latency" in parts:
            (work / "latency").mkdir()
            result["latency"] = latency_part(work / "latency", random.Random(args.seed + 2),
                                             args.latency_records, args.queries)
            print(json.dumps({"latency": result["latency"]}, indent=2), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load_after = os.getloadavg()
    result |= {"command": "python bench/lessons_briefing.py " + shlex.join(sys.argv[1:]),
               "load_note": args.load_note,
               "load_average_before": [round(x, 2) for x in load],
               "load_average_after": [round(x, 2) for x in load_after],
               "cpus": os.cpu_count(), "when": datetime.now(UTC).isoformat(timespec="seconds")}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    out.with_suffix(".md").write_text(render(result))
    print(render(result))
    print(f"wrote {out.with_suffix('.md')}")


def render(r: dict[str, Any]) -> str:
    loads = (f"1-min load average {r['load_average_before'][0]} → "
             f"{r['load_average_after'][0]} on {r['cpus']} cores, this benchmark's own threads "
             "included")
    if r.get("load_note"):
        label = f"{r['load_note']} ({loads})"
    else:
        loaded = max(r["load_average_before"][0], r["load_average_after"][0]) > (r["cpus"] or 2)
        label = f"**measured under load** ({loads})" if loaded else f"quiet machine ({loads})"
    lines = ["# Lessons and briefing on a synthetic agent history", "",
             f"`{r['command']}` — {r['when']}, {label}.", ""]
    if "lessons" in r:
        les = r["lessons"]
        lines += [
            "## Lessons (offline provider)",
            "",
            f"{les['tasks']} task records over {les['task_types']} types, `learn_lessons` after "
            f"every 25 ({les['learn_runs']} runs, {les['seconds']} s in all). No LLM here: these "
            "are the offline lessons (the LLM path is tested against the fake OpenAI server, not "
            "measured).",
            "",
            "| planted lessons | recovered | missed | false lessons | live lessons |",
            "| ---: | ---: | --- | ---: | ---: |",
            f"| {les['planted']} | {les['recovered']} | {', '.join(les['missed']) or '—'} | "
            f"{les['false_lessons']} | {les['live_lessons']} |",
            "",
        ]
    if "precision" in r:
        pre = r["precision"]
        lines += [
            "## Briefing precision (share of the block's tokens from records of the query's "
            "topic)",
            "",
            f"{pre['queries']} queries over {pre['episodes']} Episodes plus the task records and "
            "lessons above; baseline = plain top-k hybrid search text (episode hits) up to the "
            "same budget.",
            "",
            "| budget (tokens) | briefing | baseline top-k |",
            "| ---: | ---: | ---: |",
        ]
        for budget, row in pre["budgets"].items():
            lines.append(f"| {budget} | {row['briefing']:.3f} | {row['baseline_topk']:.3f} |")
        lines.append("")
    if "latency" in r:
        lat = r["latency"]
        st = lat["setup"]
        lines += [
            f"## Briefing latency at {lat['records']:,} records of one user",
            "",
            f"Set-up through the bulk path: daily logs written whole ({st['write_logs_s']} s), "
            f"offline lessons ({st['learn_lessons_s']} s), one `reindex` ({st['reindex_s']} s); "
            f"{st['seconds']} s in all.",
            "",
            f"{lat['queries']} distinct queries, each new to the embedder's cache; the two query "
            "embedders are timed query by query in turn, so both see the same machine.",
            "",
            "| query embedder | briefing p50 | briefing p95 | target p95 | plain search top-5 "
            "p50 / p95 | query embedding alone p50 / p95 |",
            "| --- | ---: | ---: | --- | ---: | ---: |",
        ]
        names = {"low_memory": "`low_memory = true` (default)",
                 "folded": "`low_memory = false`"}
        for mode, m in lat["modes"].items():
            verdict = "met" if m["p95_ms"] <= 100 else "missed"
            lines.append(
                f"| {names.get(mode, mode)} | {m['p50_ms']} ms | {m['p95_ms']} ms | ≤ 100 ms: "
                f"{verdict} | {m['plain_search_p50_ms']} / {m['plain_search_p95_ms']} ms | "
                f"{m['query_embedding_p50_ms']} / {m['query_embedding_p95_ms']} ms |")
        lines += [
            "",
            "The briefing embeds the query once, runs its vector searches (Episodes, facts, "
            "tasks, insights) on that vector, reads lessons and convictions from their Markdown "
            "(cached by size and mtime) and packs the block. About half of its time is the query "
            "embedding: with `low_memory = true` the int8 weights are cast to float on every "
            "model call, a fixed cost that batching hides when indexing but that a single query "
            "pays in full; `low_memory = false` folds them once (~115 MB more resident, "
            "docs/memory.md).",
            "",
        ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
