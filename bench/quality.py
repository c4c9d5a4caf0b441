"""Consolidation quality on LoCoMo: recall at a fixed context budget, before vs after Reflection.

Pipeline, on a fresh root built by ``bench/locomo_root.py`` (Episodes = per-speaker session
observations, atomic facts = LoCoMo observations, ``dia_ids`` kept): index (bundled MiniLM) →
cluster (shipped threshold) → **before** figures → per (clustering member-fit threshold,
extractive paraphrase threshold, extractive topic threshold) point: copy the indexed root,
recluster with that member threshold, run ``reflect_episodes`` → **after** figures → the
**sanity row** (each user's whole history merged into one entry). With
``EVEROS_LLM__PROVIDER=openai`` and ``EVEROS_LLM__*`` set, the configured LLM merges instead
(one point).

Figures (definitions in docs/evaluation.md): recall within B words (100/200/400/800; full text
and snippet items; provenance- and observation-level) per split and category, unbudgeted
recall@k, live words, words per returned item, narrative ÷ source words, rejected merges. The
point reported for conversations 5-9 is chosen on 0-4 and vice versa (:func:`choose`).

    python bench/quality.py /path/to/locomo10.json [--out bench/results] [--paraphrase ...]
                            [--topic ...] [--member ...] [--version V] [--samples N] [--no-sanity]
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
import budget
import locomo_episodes as lm
import locomo_root

from everos_reflect.clustering.service import ClusterService
from everos_reflect.embedding import make_embedder
from everos_reflect.engine.engine import Engine
from everos_reflect.index.search import PASSAGES_PER_ENTRY, SearchHit, search
from everos_reflect.index.snippet import SNIPPET_WORDS, dated_sentences, make_snippet
from everos_reflect.index.sync import Indexer
from everos_reflect.llm.base import FactsRequest, FactsResult, MergeRequest, MergeResult, Usage
from everos_reflect.llm.extractive import VERSION_COSINE, ExtractiveLLM, split_sentences
from everos_reflect.llm.topics import TOPIC_COSINE
from everos_reflect.markdown.store import MarkdownStore
from everos_reflect.model import Entry, Kind, UserRef
from everos_reflect.provenance import provenance
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings, load_settings

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (5, 10)
FETCH = 30  # hits fetched per question, before dropping any the Markdown says are archived
OME = """[strategies.reflect_episodes]
enabled = false
max_clusters_per_run = 1000   # the whole backlog in one run (= several weekly runs)
max_sources_per_merge = 1000  # the sanity row merges a user's whole history at once
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


def provenance_map(entries: dict[str, Entry]) -> dict[str, frozenset[str]]:
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


def _leaves(entry_id: str, episodes: dict[str, Entry], seen: set[str] | None = None) -> set[str]:
    """The original (non-narrative) Episodes an entry stands for."""
    seen = seen if seen is not None else set()
    entry = episodes.get(entry_id)
    if entry is None or entry_id in seen:
        return set()
    seen.add(entry_id)
    if entry.parent_type != "cluster":
        return {entry_id}
    out: set[str] = set()
    for src in entry.sources:
        out |= _leaves(src, episodes, seen)
    return out


def memory_state(root: Path) -> dict[str, Any]:
    """Per user, from Markdown (the truth): every Episode, the live ones, live facts, and each
    live Episode's sentences with the evidence (dia_ids) each one stands for."""
    store = MarkdownStore(root)
    state: dict[str, Any] = {}
    for ref in _users(store):
        episodes = {e.id: e for e in store.entries(ref, Kind.EPISODE)}
        facts = [f for f in store.entries(ref, Kind.ATOMIC_FACT) if f.deprecated_by is None]
        prov = provenance_map(episodes)
        live = {i for i, e in episodes.items() if e.deprecated_by is None}
        sentences: dict[str, list[budget.Sentence]] = {}
        recorded = 0
        for i in live:
            p = provenance(episodes[i])
            recorded += p.recorded
            sentences[i] = [
                budget.Sentence(s.text, frozenset().union(*(prov.get(x, frozenset())
                                                            for x in s.sources)))
                for s in p.sentences]
        narratives = [i for i in live if episodes[i].parent_type == "cluster"]
        state[ref.user_id] = {
            "ref": ref,
            "episodes": episodes,
            "live": live,
            "facts": [f.content for f in facts],
            "prov": prov,
            "sentences": sentences,
            "narratives": narratives,
            "recorded": recorded,
            "narrative_words": sum(_words(episodes[i].content) for i in narratives),
            "narrative_source_words": sum(
                _words(episodes[leaf].content) for i in narratives
                for leaf in _leaves(i, episodes)),
            "live_words": sum(_words(episodes[i].content) for i in live),
        }
    return state


def _words(text: str) -> int:
    return len(text.split())


def split_of(sample_index: int) -> str:
    return "0-4" if sample_index < 5 else "5-9"


def _snippet_item(entry: Entry, sentences: list[budget.Sentence],
                  query: str, hit: SearchHit) -> list[budget.Sentence]:
    """The hit as a snippet reader sees it: the date, then the snippet's sentences, each with
    the evidence of the full-text sentence it comes from. The sentences are the ones search
    chose (``snippet_sentences``), mapped on the Markdown text the evidence comes from; should
    the index's text differ from the Markdown, the snippet is remade from the Markdown with
    the hit's anchors (``passages``)."""
    if hit.episode == entry.content and hit.snippet_sentences:
        chosen, day = hit.snippet_sentences, hit.snippet_date
    else:
        snip = make_snippet(entry.content, query,
                            date=entry.timestamp.date().isoformat() if entry.timestamp else None,
                            anchors=hit.passages)
        chosen, day = snip.sentences, snip.date
    texts = dated_sentences(entry.content, day)
    item = [budget.Sentence(day or "", frozenset())] if day else []
    item += [budget.Sentence(texts[i][0], sentences[i].evidence) for i in chosen
             if i < len(sentences)]
    return item


def serve_mode(per_entry: int) -> str:
    """The metric name of snippet items served with ``per_entry`` passages per entry."""
    return "snippet" if per_entry == 1 else f"snippet{per_entry}"


def stated_evidence(embedder: CachingEmbedder, state: dict[str, Any],
                    observations: dict[str, dict[str, frozenset[str]]],
                    threshold: float) -> dict[str, budget.StatedEvidence]:
    """Per conversation, the statement-level credit (``budget.StatedEvidence``); every live
    sentence is embedded up front in one batch (normalised, as observations are)."""
    texts = [budget.normalise(t) for user in state.values() for i in user["live"]
             for t in [s.text for s in user["sentences"][i]]
             + [t for t, _ in dated_sentences(user["episodes"][i].content, None)]]
    embedder.embed(list(dict.fromkeys(t for t in texts if t)))

    def vector(text: str) -> np.ndarray:
        return embedder.embed([text])[0]

    out = {}
    for sample_id, by_text in observations.items():
        items = list(by_text.items())
        matrix = embedder.embed([text for text, _ in items])
        out[sample_id] = budget.StatedEvidence(items, matrix, vector, threshold)
    return out


def evidence_recall(rt: Runtime, state: dict[str, Any], questions: Sequence[lm.LocomoQuestion],
                    observations: dict[str, dict[str, frozenset[str]]],
                    sample_split: dict[str, str],
                    stated: dict[str, budget.StatedEvidence],
                    serve: Sequence[int] = (1,)) -> dict[str, Any]:
    """Budgeted recall (full text and snippet items), the observation- and statement-level
    variants, and the unbudgeted recall@k, per split and category; plus words per returned
    item. Snippet items are measured for each ``serve`` value (passages per entry, one search
    each); full text and recall@k come from the one-passage search (one item per entry)."""
    by_project: dict[str, dict[tuple[str, str], Any]] = defaultdict(dict)
    for user in state.values():
        project = user["ref"].project
        for i in user["live"]:
            by_project[project][(user["ref"].user_id, i)] = (
                user["episodes"][i], user["sentences"][i], user["prov"][i])
    sums: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    item_words: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    stale = 0
    for q in questions:
        evidence = set(locomo_root.dia_ids_in(list(q.evidence)))
        live = by_project[q.sample_id]
        split = sample_split[q.sample_id]
        items: dict[str, list[list[budget.Sentence]]] = {}
        fresh: list[Any] = []
        for per_entry in sorted(set(serve) | {1}):
            hits = search(rt, q.question, top_k=FETCH, app_id=locomo_root.APP,
                          project_id=q.sample_id, passages_per_entry=per_entry)
            kept = [h for h in hits if (h.user_id, h.id) in live]
            found = [live[(h.user_id, h.id)] for h in kept]
            stale += len(hits) - len(found)
            items[serve_mode(per_entry)] = [
                _snippet_item(entry, sentences, q.question, h)
                for h, (entry, sentences, _) in zip(kept, found, strict=True)]
            if per_entry == 1:
                fresh = found
                items["full"] = [sentences for _, sentences, _ in found]
        for mode, mode_items in items.items():
            item_words[split][mode] += [sum(s.words for s in it) for it in mode_items[:10]]
        row: dict[str, float] = {}
        for k in KS:
            found: set[str] = set()
            for _, _, prov in fresh[:k]:
                found |= prov
            row[f"recall@{k}"] = budget.recall(evidence, found)
        obs = observations.get(q.sample_id, {})
        for mode, mode_items in items.items():
            for b in budget.BUDGETS:
                read = budget.within_budget(mode_items, b)
                row[f"{mode}@{b}"] = budget.recall(evidence, budget.evidence_in(read))
                row[f"{mode}_obs@{b}"] = budget.recall(
                    evidence, budget.observation_evidence(read, obs))
                row[f"{mode}_stmt@{b}"] = budget.recall(
                    evidence, stated[q.sample_id].evidence(read))
        for key in ((split, CATEGORIES[q.category]), (split, "overall"),
                    ("all", CATEGORIES[q.category]), ("all", "overall")):
            sums[key]["n"] += 1
            for metric, value in row.items():
                sums[key][metric] += value
    out: dict[str, Any] = {"stale_hits": stale}
    for (split, bucket), s in sums.items():
        out.setdefault(split, {})[bucket] = {
            "n": s["n"], **{m: round(s[m] / s["n"], 4) for m in s if m != "n"}}
    out["item_words"] = {
        split: {mode: {"mean": round(sum(v) / len(v), 1) if v else 0.0,
                       "p90": budget.percentile(v, 0.9)} for mode, v in modes.items()}
        for split, modes in item_words.items()}
    return out


def observation_coverage(embedder: CachingEmbedder, state: dict[str, Any],
                         obs_by_user: dict[str, list[str]], threshold: float) -> dict[str, Any]:
    """Share of observations restated (cosine >= threshold) by a live sentence or fact."""
    covered = total = 0
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
    return {"threshold": threshold, "observations": total,
            "covered": round(covered / total, 4) if total else None}


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


def word_figures(state: dict[str, Any], user_split: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Counter[str]] = defaultdict(Counter)
    for user_id, user in state.items():
        for split in (user_split[user_id], "all"):
            c = out[split]
            c["live_episodes"] += len(user["live"])
            c["live_words"] += user["live_words"]
            c["narratives"] += len(user["narratives"])
            c["narratives_with_sentence_provenance"] += user["recorded"]
            c["narrative_words"] += user["narrative_words"]
            c["narrative_source_words"] += user["narrative_source_words"]
    return {split: dict(c) for split, c in out.items()}


def measure(rt: Runtime, embedder: CachingEmbedder, questions: Sequence[lm.LocomoQuestion],
            ctx: dict[str, Any], coverage_threshold: float) -> dict[str, Any]:
    state = memory_state(rt.root)
    started = time.perf_counter()
    stated = stated_evidence(embedder, state, ctx["observations"], coverage_threshold)
    recall = evidence_recall(rt, state, questions, ctx["observations"], ctx["sample_split"],
                             stated, ctx.get("serve", (1,)))
    return {
        "words": word_figures(state, ctx["user_split"]),
        "index_live_episodes": rt.db().execute(
            "SELECT COUNT(*) FROM entries WHERE kind='episode' AND deprecated_by IS NULL"
        ).fetchone()[0],
        "recall": recall,
        "coverage": observation_coverage(embedder, state, ctx["obs_by_user"],
                                         coverage_threshold),
        "search_seconds": round(time.perf_counter() - started, 1),
    }


class WholeHistoryLLM:
    """The sanity row's 'merge': every member's text, in order, as one entry per user (with
    exact sentence provenance) — what maximises unbudgeted recall@k."""

    provider = "whole-history"
    model = "concat"

    def merge(self, req: MergeRequest) -> MergeResult:
        members = req.chronological()
        content = "\n\n".join(m.content.strip() for m in members)
        rows = tuple((m.id,) for m in members for _ in split_sentences(m.content))
        return MergeResult("Everything", content, Usage(), self.provider, self.model,
                           provenance=rows)

    def extract_facts(self, req: FactsRequest) -> FactsResult:
        return FactsResult(split_sentences(req.text), Usage())


# --------------------------------------------------------------------------- pipeline


def with_threshold(settings: Settings, threshold: float, window: float | None = None) -> Settings:
    clustering = replace(settings.clustering, threshold=threshold)
    if window is not None:  # the sanity row: one cluster per user, whatever the member fit
        clustering = replace(clustering, time_window_days=window, rejoin_threshold=threshold,
                             member_threshold=0.0)
    return replace(settings, clustering=clustering)


def reflect_at(base: Path, work: Path, name: str, settings: Settings, embedder: CachingEmbedder,
               llm: Any) -> tuple[Runtime, dict[str, Any]]:
    """Copy the indexed root, recluster with ``settings``, run Reflection with ``llm``."""
    root = work / name
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(base, root)
    rt = Runtime(root, settings, embedder=embedder, llm=llm)
    t0 = time.perf_counter()
    clusters = ClusterService(rt).recluster()
    t1 = time.perf_counter()
    outcome = Engine(rt).trigger("reflect_episodes", force=True, timeout=None)
    t2 = time.perf_counter()
    return rt, {"recluster": clusters, "recluster_seconds": round(t1 - t0, 1),
                "reflect_status": outcome.status, "reflect_error": outcome.error,
                "reflect_counts": outcome.counts, "reflect_seconds": round(t2 - t1, 1)}


def score(point: dict[str, Any], split: str) -> float:
    """What calibration maximises: mean recall within 200 and 400 words, both item kinds."""
    if split not in point["recall"]:
        return 0.0
    o = point["recall"][split]["overall"]
    return sum(o[f"{m}@{b}"] for m in ("full", "snippet") for b in (200, 400)) / 4


def run(data_path: Path, work: Path, paraphrases: Sequence[float], coverage_threshold: float,
        *, bulk: bool, samples: int | None, sanity: bool, members: Sequence[float] | None = None,
        windows: Sequence[float] | None = None,
        version: float = VERSION_COSINE,
        topics: Sequence[float] = (TOPIC_COSINE,),
        serve: Sequence[int] = (1,)) -> dict[str, Any]:
    data = lm.load(data_path)
    if samples:
        data = data[:samples]
    sample_split = {d["sample_id"]: split_of(i) for i, d in enumerate(data)}
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
    observations: dict[str, dict[str, frozenset[str]]] = defaultdict(dict)
    for (sample_id, _, speaker), facts in locomo_root.observations(data).items():
        obs_by_user[lm.user_id_for(sample_id, speaker)] += [f for f, _ in facts]
        for fact, ids in facts:
            key = budget.normalise(fact)
            observations[sample_id][key] = observations[sample_id].get(key, frozenset()) | \
                frozenset(locomo_root.dia_ids_in(list(ids)))
    ctx = {
        "obs_by_user": {u: list(dict.fromkeys(v)) for u, v in obs_by_user.items()},
        "observations": observations,
        "sample_split": sample_split,
        "user_split": {u: sample_split[u.rsplit("-", 1)[0]] for u in obs_by_user},
        "serve": tuple(serve),
    }
    for ep in lm.episodes(data):
        ctx["user_split"].setdefault(lm.user_id_for(ep.sample_id, ep.speaker),
                                     sample_split[ep.sample_id])

    before = measure(rt, embedder, questions, ctx, coverage_threshold)
    rt.close()
    print(f"before: {before['words']['all']['live_episodes']} live episodes, "
          f"{before['search_seconds']} s of search", flush=True)
    members = list(members) if members else [settings.clustering.member_threshold]
    windows = list(windows) if windows else [settings.clustering.time_window_days]
    points = []
    if settings.llm.provider != "extractive":  # a configured LLM: one point, no calibration
        paraphrases = paraphrases[:1]
    for member in members:
        for window in windows:
            shipped = replace(settings, clustering=replace(
                settings.clustering, member_threshold=member, time_window_days=window))
            for value in paraphrases:
                for topic in topics:
                    points.append(_point(base, work, shipped, embedder, questions, ctx,
                                         coverage_threshold, member, value, version, topic))
    sanity_point = None
    if sanity:
        one = with_threshold(settings, -1.0, window=1e5)
        rt_s, info = reflect_at(base, work, "whole-history", one, embedder, WholeHistoryLLM())
        sanity_point = measure(rt_s, embedder, questions, ctx, coverage_threshold)
        sanity_point.update(info)
        rt_s.close()
        print(f"sanity: {sanity_point['words']['all']['live_episodes']} live entries", flush=True)
    return {
        "data": {"samples": len(data), "episodes": built.episodes, "facts": built.facts,
                 "users": len(built.users), "episode_text": built.sources,
                 "questions": len(questions), "questions_without_evidence": skipped,
                 "questions_per_split": dict(Counter(sample_split[q.sample_id]
                                                     for q in questions))},
        "settings": {"threshold": settings.clustering.threshold, "version": version,
                     "time_window_days": settings.clustering.time_window_days,
                     "llm": f"{settings.llm.provider}:{settings.llm.model}"
                            if settings.llm.provider != "extractive" else "extractive",
                     "embedder": embedder.name, "search_mode": settings.index.search_mode,
                     "coverage_threshold": coverage_threshold,
                     "snippet_words": SNIPPET_WORDS, "serve": list(serve)},
        "seconds": {"build": round(t1 - t0, 1), "index": round(t2 - t1, 1),
                    "total": round(time.perf_counter() - t0, 1)},
        "before": before,
        "points": points,
        "chosen": choose(points),
        "sanity": sanity_point,
    }


def _point(base: Path, work: Path, settings: Settings, embedder: CachingEmbedder,
           questions: Sequence[lm.LocomoQuestion], ctx: dict[str, Any], coverage_threshold: float,
           member: float, paraphrase: float, version: float,
           topic: float = TOPIC_COSINE) -> dict[str, Any]:
    """One calibration point: recluster at ``member``, reflect at ``paraphrase`` and
    ``topic`` (the extractive merge's topic-paragraph cosine), measure."""
    llm = (ExtractiveLLM(embedder, paraphrase=paraphrase, version=version, topic=topic)
           if settings.llm.provider == "extractive" else None)
    window = settings.clustering.time_window_days
    rt_p, info = reflect_at(base, work,
                            f"m{member:.2f}w{window:g}p{paraphrase:.2f}t{topic:.2f}", settings,
                            embedder,
                            llm)
    after = measure(rt_p, embedder, questions, ctx, coverage_threshold)
    after["rejections"] = rejected_merges(rt_p)
    rt_p.close()
    after.update(info, paraphrase=paraphrase, member=member, version=version, topic=topic,
                 window=window)
    print(f"member {member} window {window:g} paraphrase {paraphrase} topic {topic}: "
          f"{after['words']['all']['live_episodes']} live episodes, "
          f"reflect {info['reflect_seconds']} s, score 0-4 {score(after, '0-4'):.4f} "
          f"5-9 {score(after, '5-9'):.4f}", flush=True)
    return after


def _key(p: dict[str, Any]) -> tuple[float, float, float, float]:
    """A point's calibrated values; ``window`` (the clustering time window, days) defaults to
    the 7 days every run before session 11 used."""
    return (p.get("member", 0.0), p.get("window", 7.0), p["paraphrase"], p.get("topic", 0.0))


def choose(points: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per reported split, the (member-fit, paraphrase, topic) point with the best score on the
    *other* split (ties: the stricter, i.e. higher, thresholds). A paraphrase threshold below
    the version threshold is allowed: the extractive merge refuses to fold a pair that swaps a
    value (it is a version), which bench/state_stories.py checks."""
    chosen = {}
    for calibrate, report in (("0-4", "5-9"), ("5-9", "0-4")):
        best = max(points, key=lambda p: (score(p, calibrate), _key(p)))
        chosen[report] = {"calibrated_on": calibrate, "paraphrase": best["paraphrase"],
                          "member": best.get("member", 0.0), "topic": best.get("topic", 0.0),
                          "window": best.get("window", 7.0),
                          "calibration_score": round(score(best, calibrate), 4)}
    return chosen


# --------------------------------------------------------------------------- report


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}"


def _delta(after: float, before: float) -> str:
    return f"{100 * (after - before):+.1f}"


def point_for(result: dict[str, Any], split: str) -> dict[str, Any]:
    c = result["chosen"][split]
    return next(p for p in result["points"] if _key(p) == _key(c))


def _ratio(a: float, b: float) -> str:
    return f"×{a / b:.2f}" if b else "–"


def split_table(result: dict[str, Any], split: str) -> list[str]:
    b, a, z = result["before"], point_for(result, split), result.get("sanity")
    wb, wa = b["words"][split], a["words"][split]
    wz = z["words"][split] if z else None
    rb, ra = b["recall"][split]["overall"], a["recall"][split]["overall"]
    rz = z["recall"][split]["overall"] if z else None
    chosen = result["chosen"][split]
    if len(result["points"]) == 1:  # the shipped defaults, calibrated beforehand on 0-4
        role = "held out" if split == "5-9" else "the calibration split"
        title = (f"### Conversations {split} ({role}; member threshold "
                 f"{chosen.get('member', 0.0)}, window {chosen.get('window', 7.0):g} days, "
                 f"paraphrase threshold {chosen['paraphrase']}, "
                 f"topic threshold {chosen.get('topic', 0.0)}: "
                 f"the shipped defaults, chosen on conversations 0-4)")
    else:
        title = (f"### Conversations {split} (held out; member threshold "
                 f"{chosen.get('member', 0.0)}, window {chosen.get('window', 7.0):g} days, "
                 f"paraphrase threshold {chosen['paraphrase']}, "
                 f"topic threshold {chosen.get('topic', 0.0)} "
                 f"chosen on conversations {chosen['calibrated_on']})")
    lines = [
        title,
        "",
        "| | before | after | change | whole history as one entry (sanity) |",
        "|---|---:|---:|---:|---:|",
        f"| live Episodes | {wb['live_episodes']} | {wa['live_episodes']} | "
        f"{_ratio(wa['live_episodes'], wb['live_episodes'])} | "
        f"{wz['live_episodes'] if wz else ''} |",
        f"| words of live text | {wb['live_words']} | {wa['live_words']} | "
        f"{_ratio(wa['live_words'], wb['live_words'])} | {wz['live_words'] if wz else ''} |",
        f"| narrative words ÷ their sources' words | | "
        f"{wa['narrative_words']} / {wa['narrative_source_words']} | "
        f"{_ratio(wa['narrative_words'], wa['narrative_source_words'])} | |",
    ]
    served = [n for n in result["settings"].get("serve", [1]) if n > 1]
    item_modes = [("full", "full text"), ("snippet", "snippet")] + [
        (serve_mode(n), f"snippet, ≤ {n} passages per entry") for n in served]
    for mode, label in item_modes:
        ib = b["recall"]["item_words"][split][mode]
        ia = a["recall"]["item_words"][split][mode]
        iz = z["recall"]["item_words"][split][mode] if z else None
        sanity = f"{iz['mean']} / {iz['p90']:.0f}" if iz else ""
        lines.append(f"| words per returned item, top 10, {label}: mean / p90 | "
                     f"{ib['mean']} / {ib['p90']:.0f} | {ia['mean']} / {ia['p90']:.0f} | | "
                     f"{sanity} |")
    rows = [("full", "full text"), ("snippet", "snippets"),
            ("full_obs", "full text, observation-level"),
            ("snippet_obs", "snippets, observation-level"),
            ("full_stmt", "full text, statement-level"),
            ("snippet_stmt", "snippets, statement-level")]
    for n in served:
        rows += [(serve_mode(n), f"snippets ≤ {n} per entry"),
                 (f"{serve_mode(n)}_obs", f"snippets ≤ {n} per entry, observation-level"),
                 (f"{serve_mode(n)}_stmt", f"snippets ≤ {n} per entry, statement-level")]
    for mode, label in rows:
        for bud in budget.BUDGETS:
            key = f"{mode}@{bud}"
            if key not in rb:  # a result saved before the statement-level variant
                continue
            lines.append(f"| recall within {bud} words, {label} (%) | {_pct(rb[key])} | "
                         f"{_pct(ra[key])} | {_delta(ra[key], rb[key])} | "
                         f"{_pct(rz[key]) if rz else ''} |")
    for k in KS:
        key = f"recall@{k}"
        lines.append(f"| recall@{k}, unbudgeted (%) | {_pct(rb[key])} | {_pct(ra[key])} | "
                     f"{_delta(ra[key], rb[key])} | {_pct(rz[key]) if rz else ''} |")
    rej = a["rejections"]
    lines += [f"| merges ok / rejected | | {rej['statuses'].get('ok', 0)} / {rej['rejected']} "
              f"| | |", ""]
    return lines


def category_table(result: dict[str, Any], split: str) -> list[str]:
    b, a = result["before"]["recall"][split], point_for(result, split)["recall"][split]
    served = [n for n in result["settings"].get("serve", [1]) if n > 1]
    lines = [
        f"#### Per category, conversations {split} (recall %, before → after)",
        "",
        "| category | n | full ≤200 | full ≤400 | snippets ≤200 | snippets ≤400 "
        "| snippets, statement-level ≤200 | ≤400 |" + "".join(
            f" ≤ {n} passages per entry, statement-level ≤200 | ≤400 |" for n in served),
        "|---|---:|---:|---:|---:|---:|---:|---:|" + "---:|---:|" * len(served),
    ]
    keys = ("full@200", "full@400", "snippet@200", "snippet@400", "snippet_stmt@200",
            "snippet_stmt@400", *(f"{serve_mode(n)}_stmt@{bud}" for n in served
                                  for bud in (200, 400)))
    for name in [*CATEGORIES.values(), "overall"]:
        if name not in b:
            continue
        cells = [f"{_pct(b[name][k])} → {_pct(a[name][k])}" if k in b[name] else ""
                 for k in keys]
        lines.append(f"| {name} | {b[name]['n']} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def markdown(result: dict[str, Any]) -> str:
    d, st = result["data"], result["settings"]
    lines = [
        "# Consolidation quality on LoCoMo",
        "",
        f"Generated by `python bench/quality.py locomo10.json`. {d['samples']} conversations, "
        f"{d['users']} users, {d['episodes']} Episodes, {d['facts']} atomic facts, "
        f"{d['questions']} questions (categories 1-4 with evidence; per split "
        f"{d['questions_per_split']}). LLM: {st['llm']}; embedder: {st['embedder']}; search: "
        f"{st['search_mode']}; clustering threshold {st['threshold']}; snippets ≤ "
        f"{st['snippet_words']} words; snippet items served with "
        f"{' and '.join(str(n) for n in st.get('serve', [1]))} passage(s) per entry at most. "
        f"Method: docs/evaluation.md.",
        "",
        ("One point, the shipped defaults, which an earlier calibration run chose on "
         "conversations 0-4 (docs/evaluation.md): 5-9 are held out, 0-4 are not;"
         if len(result["points"]) == 1 else
         "Each split's *after* column uses the clustering member-fit and paraphrase thresholds "
         "chosen on the *other* split;") +
        " nothing reported as held out was tuned on the conversations it is reported for.",
        "",
        "## Before vs after Reflection, at a fixed word budget",
        "",
    ]
    for split in ("5-9", "0-4"):
        if split in result["chosen"] and split in result["before"]["recall"]:
            lines += split_table(result, split) + category_table(result, split)
    lines += [
        "## Calibration of the member-fit, paraphrase and topic thresholds",
        "",
        "Score = mean recall within 200 and 400 words, full text and snippets.",
        "",
        "| member fit | window days | paraphrase cosine | topic cosine | score 0-4 | score 5-9 "
        "| live words | narrative ÷ sources | merged | rejected | reflect s |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for p in result["points"]:
        w = p["words"]["all"]
        c = p["reflect_counts"]
        lines.append(
            f"| {p.get('member', 0.0)} | {p.get('window', 7.0):g} | {p['paraphrase']} | "
            f"{p.get('topic', '–')} | "
            f"{_pct(score(p, '0-4'))} | "
            f"{_pct(score(p, '5-9'))} | "
            f"{w['live_words']} | {_ratio(w['narrative_words'], w['narrative_source_words'])} "
            f"| {c.get('merged', 0)} | {p['rejections']['rejected']} | "
            f"{p['reflect_seconds']} |")
    lines += [""]
    for p in result["points"]:
        for ex in p["rejections"]["examples"]:
            lines.append(f"- rejected at {_key(p)}: {ex['user']} {ex['cluster']} "
                         f"({ex['sources']} sources): {ex['reason']}")
    stale = [p["recall"]["stale_hits"] for p in result["points"]]
    if any(stale):
        lines += ["", f"Note: the index returned {stale} hits (per point) that the Markdown "
                  "shows archived; they were dropped before scoring."]
    lines.append("")
    return "\n".join(lines)


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.replace(",", " ").split()]


def _ints(text: str) -> list[int]:
    return sorted({int(x) for x in text.replace(",", " ").split()})


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_path", type=Path, help="path to locomo10.json")
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("--paraphrase", type=_floats, default=[0.65, 0.7, 0.75, 0.8],
                        help="paraphrase cosines to calibrate, e.g. '0.8 0.85 0.9'")
    parser.add_argument("--member", type=_floats,
                        help="clustering member-fit thresholds to calibrate, e.g. '0 0.4' "
                             "(default: the shipped clustering.member_threshold)")
    parser.add_argument("--window", type=_floats,
                        help="clustering time windows (days) to calibrate, e.g. '7 30 1e5' "
                             "(default: the shipped clustering.time_window_days)")
    parser.add_argument("--topic", type=_floats, default=[TOPIC_COSINE],
                        help="extractive topic-paragraph cosines to calibrate, e.g. '0.45 0.55'")
    parser.add_argument("--serve", type=_ints, default=[1, PASSAGES_PER_ENTRY],
                        help="passages per entry to measure snippet items with, e.g. '1 2 3' "
                             "(one search each; default: 1 and the shipped value)")
    parser.add_argument("--version", type=float, default=VERSION_COSINE,
                        help="extractive version cosine (calibrated by bench/state_stories.py)")
    parser.add_argument("--coverage-threshold", type=float, default=0.75,
                        help="cosine at which an observation counts as still stated "
                             "(default: the coverage guard's fact_match_threshold)")
    parser.add_argument("--work", type=Path, help="keep the roots here (default: a temp dir)")
    parser.add_argument("--samples", type=int, help="only the first N conversations (quick run)")
    parser.add_argument("--no-sanity", action="store_true",
                        help="skip the whole-history-as-one-entry sanity row")
    parser.add_argument("--render", type=Path,
                        help="only re-render the tables from a saved quality.json")
    parser.add_argument("--bulk", action="store_true",
                        help="build the root with single file writes instead of one "
                             "MarkdownStore.append per entry (same bytes, faster)")
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.render:
        result = json.loads(args.render.read_text(encoding="utf-8"))
        result["chosen"] = choose(result["points"])
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "quality.json").write_text(json.dumps(result, indent=2) + "\n",
                                               encoding="utf-8")
        (args.out / "quality.md").write_text(markdown(result), encoding="utf-8")
        print(markdown(result))
        return 0
    if not args.data_path.is_file():
        parser.error(f"no such file: {args.data_path}")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    with tempfile.TemporaryDirectory(prefix="everos-quality-") as tmp:
        work = args.work or Path(tmp)
        result = run(args.data_path, work, args.paraphrase, args.coverage_threshold,
                     bulk=args.bulk, samples=args.samples, sanity=not args.no_sanity,
                     members=args.member, windows=args.window, version=args.version,
                     topics=args.topic,
                     serve=args.serve)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "quality.json").write_text(json.dumps(result, indent=2, default=str) + "\n",
                                           encoding="utf-8")
    (args.out / "quality.md").write_text(markdown(result), encoding="utf-8")
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
