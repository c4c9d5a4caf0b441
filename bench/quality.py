"""Consolidation quality on LoCoMo: does Reflection keep what matters while compacting memory?

Pipeline, on a fresh root built by ``bench/locomo_root.py`` (Episodes = per-speaker session
observations, atomic facts = LoCoMo observations, ``dia_ids`` kept): index (bundled MiniLM) →
cluster → **before** figures → per clustering threshold: copy the indexed root, recluster,
run ``reflect_episodes`` (extractive by default; an OpenAI-compatible server when
``EVEROS_LLM__PROVIDER=openai`` and ``EVEROS_LLM__*`` are set) → **after** figures.

Figures (definitions also in docs/evaluation.md):

- **live entries**: Episodes not archived in Markdown; compaction = after / before.
- **evidence recall@k** over the non-adversarial questions (categories 1-4): the question is
  searched (default hybrid mode, live Episodes only) over *both speakers* of its conversation
  (one project-scoped search). Provenance of a returned Episode = its own ``dia_ids`` plus,
  recursively, those of its ``sources``. recall@k = share of the question's evidence turns
  found in the provenance of the top k, averaged over questions; hit@k = share of questions
  with at least one.
- **observation coverage**: share of LoCoMo observations of a user whose best cosine to one of
  that user's live statements (a sentence of a live Episode, or a live atomic fact) is at least
  ``--coverage-threshold``. Provenance coverage would be 100 % by construction (a narrative
  inherits its sources' dia_ids), so the text-based measure is the one reported.
- **rejected merges**: ``reflection_report`` rows with status ``rejected`` (the coverage guard)
  with the guard's reason.

    python bench/quality.py /path/to/locomo10.json [--out bench/results] [--thresholds ...]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import locomo_episodes as lm
import locomo_root

from everos_reflect.clustering.service import ClusterService
from everos_reflect.embedding import make_embedder
from everos_reflect.engine.engine import Engine
from everos_reflect.index.search import search
from everos_reflect.index.sync import Indexer
from everos_reflect.llm.extractive import split_sentences
from everos_reflect.markdown.store import MarkdownStore
from everos_reflect.model import Entry, Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings, load_settings

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (5, 10)
FETCH = 20  # hits fetched per question, before dropping any the Markdown says are archived
OME = """[strategies.reflect_episodes]
enabled = false
max_clusters_per_run = 1000   # the whole backlog in one run (= several weekly runs)
"""


class CachingEmbedder:
    """Wraps the configured embedder with a text -> vector cache shared by every sweep point:
    the coverage guard and the coverage measure re-embed the same sentences many times."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name: str = inner.name
        self.dim: int = inner.dim
        self.cache: dict[str, np.ndarray] = {}

    def embed(self, texts: list[str]) -> np.ndarray:
        todo = list(dict.fromkeys(t for t in texts if t not in self.cache))
        if todo:
            for text, vec in zip(todo, self.inner.embed(todo), strict=True):
                self.cache[text] = vec
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self.cache[t] for t in texts]).astype(np.float32)


# --------------------------------------------------------------------------- measures


def provenance(entries: dict[str, Entry]) -> dict[str, frozenset[str]]:
    """Entry id -> every dia_id it stands for: its own, and its sources', recursively."""
    memo: dict[str, frozenset[str]] = {}

    def walk(entry_id: str, path: frozenset[str]) -> frozenset[str]:
        if entry_id in memo:
            return memo[entry_id]
        entry = entries.get(entry_id)
        if entry is None or entry_id in path:
            return frozenset()
        own = set(locomo_root.dia_ids_in(entry.meta.get("dia_ids") or []))
        for src in entry.sources:
            own |= walk(src, path | {entry_id})
        memo[entry_id] = frozenset(own)
        return memo[entry_id]

    return {entry_id: walk(entry_id, frozenset()) for entry_id in entries}


def _users(store: MarkdownStore) -> list[UserRef]:
    return sorted(store.iter_users())


def memory_state(root: Path) -> dict[str, Any]:
    """Per user, from Markdown (the truth): every Episode, the live ones, live facts."""
    store = MarkdownStore(root)
    state: dict[str, Any] = {}
    for ref in _users(store):
        episodes = {e.id: e for e in store.entries(ref, Kind.EPISODE)}
        facts = [f for f in store.entries(ref, Kind.ATOMIC_FACT) if f.deprecated_by is None]
        state[ref.user_id] = {
            "ref": ref,
            "episodes": episodes,
            "live": {i for i, e in episodes.items() if e.deprecated_by is None},
            "facts": [f.content for f in facts],
            "prov": provenance(episodes),
        }
    return state


def evidence_recall(rt: Runtime, state: dict[str, Any],
                    questions: Sequence[lm.LocomoQuestion]) -> dict[str, Any]:
    """recall@k and hit@k per category and overall (see the module docstring)."""
    prov_by_project: dict[str, dict[str, frozenset[str]]] = defaultdict(dict)
    live_by_project: dict[str, set[str]] = defaultdict(set)
    for user in state.values():
        project = user["ref"].project
        prov_by_project[project].update(
            {(user["ref"].user_id, i): p for i, p in user["prov"].items()})
        live_by_project[project] |= {(user["ref"].user_id, i) for i in user["live"]}
    sums: dict[str, Counter[str]] = defaultdict(Counter)
    stale = 0
    for q in questions:
        evidence = set(locomo_root.dia_ids_in(list(q.evidence)))
        hits = search(rt, q.question, top_k=FETCH, app_id=locomo_root.APP,
                      project_id=q.sample_id)
        keys = [(h.user_id, h.id) for h in hits]
        fresh = [k for k in keys if k in live_by_project[q.sample_id]]
        stale += len(keys) - len(fresh)
        for bucket in (CATEGORIES[q.category], "overall"):
            sums[bucket]["n"] += 1
            for k in KS:
                found: set[str] = set()
                for key in fresh[:k]:
                    found |= prov_by_project[q.sample_id].get(key, frozenset())
                got = evidence & found
                sums[bucket][f"recall@{k}"] += len(got) / len(evidence)
                sums[bucket][f"hit@{k}"] += bool(got)
    out: dict[str, Any] = {}
    for bucket, s in sums.items():
        out[bucket] = {"n": s["n"], **{m: round(s[m] / s["n"], 4) for m in s if m != "n"}}
    out["stale_hits"] = stale
    return out


def observation_coverage(embedder: CachingEmbedder, state: dict[str, Any],
                         obs_by_user: dict[str, list[str]], threshold: float) -> dict[str, Any]:
    """Share of observations restated (cosine >= threshold) by a live sentence or fact."""
    covered = total = 0
    best_sum = 0.0
    for user_id, observations in obs_by_user.items():
        user = state.get(user_id)
        if user is None or not observations:
            continue
        statements = list(dict.fromkeys(
            [s for i in sorted(user["live"])
             for s in split_sentences(user["episodes"][i].content)] + user["facts"]))
        total += len(observations)
        if not statements:
            continue
        best = (embedder.embed(observations) @ embedder.embed(statements).T).max(axis=1)
        covered += int((best >= threshold).sum())
        best_sum += float(best.sum())
    return {"threshold": threshold, "observations": total,
            "covered": round(covered / total, 4) if total else None,
            "mean_best_cosine": round(best_sum / total, 4) if total else None}


def rejected_merges(rt: Runtime) -> dict[str, Any]:
    rows = rt.db().execute(
        "SELECT owner_id, cluster_id, source_count, fact_coverage, error FROM reflection_report "
        "WHERE status = 'rejected' ORDER BY created_at").fetchall()
    statuses = dict(rt.db().execute(
        "SELECT status, COUNT(*) FROM reflection_report GROUP BY status").fetchall())
    return {
        "statuses": statuses,
        "rejected": len(rows),
        "examples": [{"user": r["owner_id"], "cluster": r["cluster_id"],
                      "sources": r["source_count"], "fact_coverage": r["fact_coverage"],
                      "reason": r["error"]} for r in rows[:5]],
    }


def measure(rt: Runtime, embedder: CachingEmbedder, questions: Sequence[lm.LocomoQuestion],
            obs_by_user: dict[str, list[str]], coverage_threshold: float) -> dict[str, Any]:
    state = memory_state(rt.root)
    live = sum(len(u["live"]) for u in state.values())
    started = time.perf_counter()
    recall = evidence_recall(rt, state, questions)
    return {
        "live_episodes": live,
        "live_facts": sum(len(u["facts"]) for u in state.values()),
        "index_live_episodes": rt.db().execute(
            "SELECT COUNT(*) FROM entries WHERE kind='episode' AND deprecated_by IS NULL"
        ).fetchone()[0],
        "recall": recall,
        "coverage": observation_coverage(embedder, state, obs_by_user, coverage_threshold),
        "search_seconds": round(time.perf_counter() - started, 1),
    }


# --------------------------------------------------------------------------- pipeline


def with_threshold(settings: Settings, threshold: float) -> Settings:
    return replace(settings, clustering=replace(settings.clustering, threshold=threshold))


def reflect_at(base: Path, work: Path, threshold: float, settings: Settings,
               embedder: CachingEmbedder) -> tuple[Runtime, dict[str, Any]]:
    """Copy the indexed root, recluster at ``threshold``, run Reflection; return the runtime."""
    root = work / f"t{threshold:.2f}"
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(base, root)
    rt = Runtime(root, with_threshold(settings, threshold), embedder=embedder)
    t0 = time.perf_counter()
    clusters = ClusterService(rt).recluster()
    t1 = time.perf_counter()
    outcome = Engine(rt).trigger("reflect_episodes", force=True, timeout=None)
    t2 = time.perf_counter()
    eligible = rt.db().execute("SELECT COUNT(*) FROM clusters WHERE member_count >= 2"
                               ).fetchone()[0]
    return rt, {"recluster": clusters, "recluster_seconds": round(t1 - t0, 1),
                "reflect_status": outcome.status, "reflect_error": outcome.error,
                "reflect_counts": outcome.counts, "reflect_seconds": round(t2 - t1, 1),
                "clusters_2plus_after": eligible}


def run(data_path: Path, work: Path, thresholds: Sequence[float], coverage_threshold: float,
        *, bulk: bool, samples: int | None) -> dict[str, Any]:
    data = lm.load(data_path)
    if samples:
        data = data[:samples]
    base = work / "base"
    if base.exists():
        shutil.rmtree(base)
    base.mkdir(parents=True)
    (base / "ome.toml").write_text(OME, encoding="utf-8")
    t0 = time.perf_counter()
    built = locomo_root.write_root(base, lm.episodes(data), locomo_root.observations(data),
                                   bulk=bulk)
    print(f"built: {built.as_dict()}", flush=True)
    settings = load_settings(base)
    embedder = CachingEmbedder(make_embedder(settings.embedding))
    rt = Runtime(base, settings, embedder=embedder)
    t1 = time.perf_counter()
    Indexer(rt).scan()
    t2 = time.perf_counter()
    print(f"indexed in {t2 - t1:.0f} s", flush=True)

    questions = [q for q in lm.questions(data)
                 if q.category in CATEGORIES and locomo_root.dia_ids_in(list(q.evidence))]
    skipped = sum(1 for q in lm.questions(data) if q.category in CATEGORIES) - len(questions)
    obs_by_user: dict[str, list[str]] = defaultdict(list)
    for (sample_id, _, speaker), facts in locomo_root.observations(data).items():
        obs_by_user[lm.user_id_for(sample_id, speaker)] += [f for f, _ in facts]
    obs_by_user = {u: list(dict.fromkeys(v)) for u, v in obs_by_user.items()}

    before = measure(rt, embedder, questions, obs_by_user, coverage_threshold)
    rt.close()
    print(f"before: {before['live_episodes']} live episodes, "
          f"recall@5 {before['recall']['overall']['recall@5']}", flush=True)
    sweep = []
    for threshold in thresholds:
        rt_t, info = reflect_at(base, work, threshold, settings, embedder)
        after = measure(rt_t, embedder, questions, obs_by_user, coverage_threshold)
        after["rejections"] = rejected_merges(rt_t)
        rt_t.close()
        after.update(info, threshold=threshold,
                     compaction=round(after["live_episodes"] / before["live_episodes"], 4))
        sweep.append(after)
        print(f"threshold {threshold}: {after['live_episodes']} live episodes "
              f"(x{after['compaction']}), recall@5 {after['recall']['overall']['recall@5']}, "
              f"reflect {info['reflect_seconds']} s", flush=True)
    return {
        "data": {"samples": len(data), "episodes": built.episodes, "facts": built.facts,
                 "users": len(built.users), "episode_text": built.sources,
                 "questions": len(questions), "questions_without_evidence": skipped},
        "settings": {"default_threshold": settings.clustering.threshold,
                     "time_window_days": settings.clustering.time_window_days,
                     "llm": f"{settings.llm.provider}:{settings.llm.model}"
                            if settings.llm.provider != "extractive" else "extractive",
                     "embedder": embedder.name, "search_mode": settings.index.search_mode,
                     "coverage_threshold": coverage_threshold},
        "seconds": {"build": round(t1 - t0, 1), "index": round(t2 - t1, 1),
                    "total": round(time.perf_counter() - t0, 1)},
        "before": before,
        "sweep": sweep,
    }


# --------------------------------------------------------------------------- report


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}"


def _delta(after: float, before: float) -> str:
    return f"{100 * (after - before):+.1f}"


def headline(result: dict[str, Any]) -> dict[str, Any]:
    """The sweep point at the shipped default threshold (else the first)."""
    default = result["settings"]["default_threshold"]
    return next((s for s in result["sweep"] if abs(s["threshold"] - default) < 1e-9),
                result["sweep"][0])


def markdown(result: dict[str, Any]) -> str:
    b, d = result["before"], result["data"]
    h = headline(result)
    lines = [
        "# Consolidation quality on LoCoMo",
        "",
        f"Generated by `python bench/quality.py locomo10.json`. {d['samples']} conversations, "
        f"{d['users']} users, {d['episodes']} Episodes, {d['facts']} atomic facts, "
        f"{d['questions']} questions (categories 1-4 with evidence). LLM: "
        f"{result['settings']['llm']}; embedder: {result['settings']['embedder']}; search: "
        f"{result['settings']['search_mode']}. Method: docs/evaluation.md.",
        "",
        f"## Before vs after Reflection (clustering threshold {h['threshold']})",
        "",
        "| | before | after | change |",
        "|---|---:|---:|---:|",
        f"| live Episodes | {b['live_episodes']} | {h['live_episodes']} | "
        f"×{h['compaction']:.2f} |",
    ]
    for k in KS:
        for metric in (f"recall@{k}", f"hit@{k}"):
            x, y = b["recall"]["overall"][metric], h["recall"]["overall"][metric]
            lines.append(f"| evidence {metric} (%) | {_pct(x)} | {_pct(y)} | {_delta(y, x)} |")
    cb, ca = b["coverage"]["covered"], h["coverage"]["covered"]
    lines += [
        f"| observation coverage, cos ≥ {b['coverage']['threshold']} (%) | {_pct(cb)} | "
        f"{_pct(ca)} | {_delta(ca, cb)} |",
        f"| merges ok / rejected by the coverage guard | | "
        f"{h['rejections']['statuses'].get('ok', 0)} / {h['rejections']['rejected']} | |",
        "",
        "## Evidence recall per category (%)",
        "",
        "| category | n | recall@5 before | after | recall@10 before | after |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name in [*CATEGORIES.values(), "overall"]:
        rb, ra = b["recall"].get(name), h["recall"].get(name)
        if not rb or not ra:
            continue
        lines.append(f"| {name} | {rb['n']} | {_pct(rb['recall@5'])} | {_pct(ra['recall@5'])} "
                     f"| {_pct(rb['recall@10'])} | {_pct(ra['recall@10'])} |")
    lines += [
        "",
        "## Clustering threshold sweep",
        "",
        "| threshold | merge attempts | merged | rejected | live Episodes | "
        "compaction | recall@5 | recall@10 | coverage | reflect s |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        f"| (before) | | | | {b['live_episodes']} | 1.00 | "
        f"{_pct(b['recall']['overall']['recall@5'])} | "
        f"{_pct(b['recall']['overall']['recall@10'])} | {_pct(b['coverage']['covered'])} | |",
    ]
    for s in result["sweep"]:
        c = s["reflect_counts"]
        lines.append(
            f"| {s['threshold']:.2f} | {c.get('merged', 0) + s['rejections']['rejected'] + c.get('failed', 0)} | "  # noqa: E501
            f"{c.get('merged', 0)} | {s['rejections']['rejected']} | {s['live_episodes']} | "
            f"{s['compaction']:.2f} | {_pct(s['recall']['overall']['recall@5'])} | "
            f"{_pct(s['recall']['overall']['recall@10'])} | {_pct(s['coverage']['covered'])} | "
            f"{s['reflect_seconds']} |")
    lines += ["", "![recall and compaction vs threshold](quality_sweep.png)", ""]
    rej = h["rejections"]
    lines += [f"## Merges rejected by the coverage guard (threshold {h['threshold']})", ""]
    if not rej["rejected"]:
        lines.append("None.")
    for ex in rej["examples"]:
        lines.append(f"- {ex['user']} {ex['cluster']} ({ex['sources']} sources): {ex['reason']}")
    stale = [s["recall"]["stale_hits"] for s in result["sweep"]]
    if any(stale):
        lines += ["", f"Note: the index returned {stale} hits (per sweep point) that the Markdown "
                  "shows archived; they were dropped before scoring."]
    lines.append("")
    return "\n".join(lines)


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [s["threshold"] for s in result["sweep"]]
    b = result["before"]["recall"]["overall"]
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for k, style in zip(KS, ("o-", "s-"), strict=True):
        ax.plot(xs, [100 * s["recall"]["overall"][f"recall@{k}"] for s in result["sweep"]],
                style, label=f"recall@{k} after")
        ax.axhline(100 * b[f"recall@{k}"], ls=":", color=ax.lines[-1].get_color(),
                   label=f"recall@{k} before")
    ax.set_xlabel("clustering threshold (cosine)")
    ax.set_ylabel("evidence recall (%)")
    ax2 = ax.twinx()
    ax2.plot(xs, [s["compaction"] for s in result["sweep"]], "^--", color="tab:red",
             label="compaction (live after / before)")
    ax2.set_ylabel("compaction ratio")
    ax2.set_ylim(0, 1.05)
    handles = ax.get_legend_handles_labels()
    handles2 = ax2.get_legend_handles_labels()
    ax.legend(handles[0] + handles2[0], handles[1] + handles2[1], fontsize=8, loc="lower left")
    ax.set_title("LoCoMo: recall and compaction vs clustering threshold")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.replace(",", " ").split()]


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_path", type=Path, help="path to locomo10.json")
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("--thresholds", type=_floats, default=[0.45, 0.55, 0.65, 0.75],
                        help="clustering thresholds to sweep, e.g. '0.55 0.65'")
    parser.add_argument("--coverage-threshold", type=float, default=0.75,
                        help="cosine at which an observation counts as still stated "
                             "(default: the coverage guard's fact_match_threshold)")
    parser.add_argument("--work", type=Path, help="keep the roots here (default: a temp dir)")
    parser.add_argument("--samples", type=int, help="only the first N conversations (quick run)")
    parser.add_argument("--bulk", action="store_true",
                        help="build the root with single file writes instead of one "
                             "MarkdownStore.append per entry (same bytes, faster)")
    args = parser.parse_args(list(argv) if argv is not None else None)
    if not args.data_path.is_file():
        parser.error(f"no such file: {args.data_path}")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    with tempfile.TemporaryDirectory(prefix="everos-quality-") as tmp:
        work = args.work or Path(tmp)
        result = run(args.data_path, work, args.thresholds, args.coverage_threshold,
                     bulk=args.bulk, samples=args.samples)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "quality.json").write_text(json.dumps(result, indent=2, default=str) + "\n",
                                           encoding="utf-8")
    (args.out / "quality.md").write_text(markdown(result), encoding="utf-8")
    plot(result, args.out / "quality_sweep.png")
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
