"""Latest-state benchmark: does a merged narrative end with the *current* value of a changed fact?

Data: ``bench/state_stories.json`` — short stories, each a few Episodes about one person and one
changing fact (a replacement, a number, a negation, or a reversal A → B → A) across 32 domains
(cars, phones, gyms, salaries, medication doses, ...). In half of them something unrelated is
said *after* the change, so "the last thing said" is not the answer; in the childhood and
youth domains (session 29) what is said after it tells of an earlier time ("Nina was a
pescatarian as a teenager."), which must not become the current state; the sport and city
domains (session 30) tell changes with a change verb ("switched to", "moved to"); the energy
and club domains (session 31) tell them by naming what ended ("left Volta Power for
Brightwave Energy.", "quit the rowing club for ...", "no longer has solar panels"); the job
and habit domains (session 32) tell them by a start ("joined Hooli.", "cycles to work now.",
"moved to Braga.") and say a one-off or temporary event after them ("left work early.",
"stopped running for a week with a cold."), which must not become the current state.

Pipeline: four stories of different domains per user, interleaved in time (the clustering has
to keep them apart) → index with the configured embedder → recluster → ``reflect_episodes``
(the shipped extractive provider, or ``EVEROS_LLM__*``) → score each story:

- **merged**: one live narrative stands for every state-carrying Episode of the story;
- **right**: that narrative's final paragraph contains every ``current`` phrase and no ``old``
  phrase (case-insensitive);
- **stated**: right, and that final paragraph is the "Current state" one: the change was
  recognised, not merely said last (a narrative without a current state that ends with the
  newest news is right, not stated).

Before any merge it also counts the pairs of one user's Episodes in the time window and
under the clustering's threshold that the join of a fact's newer version reads as one
(``version_pairs``: same-story against cross-story, per half and cosine floor; the floor is
chosen on the calibration half), and checks ranking: searching "<name> <domain>", does the
latest state Episode rank above the earlier ones (shipped search vs its plain fused order)?

The version threshold (``VERSION_COSINE``) and the paraphrase threshold
(``PARAPHRASE_COSINE``) are swept together: a paraphrase threshold below the version threshold
folds more repeats, and the stories check it does not fold a replaced fact away. The pair chosen
on the *calibration* stories (even-numbered domains) is reported on the *report* stories
(odd-numbered domains). ``--member`` sets the clustering's member-fit threshold
(``clustering.member_threshold``; default: the shipped setting), ``--window`` its time window
in days (``clustering.time_window_days``).

    python bench/state_stories.py [--versions 0.65,0.7,0.75] [--paraphrase 0.65,0.8]
                                  [--member 0.4] [--window 30] [--out bench/results]
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
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from everos_reflect.briefing.build import build_briefing
from everos_reflect.clustering.service import ClusterService
from everos_reflect.embedding import CachingEmbedder, make_embedder
from everos_reflect.engine.engine import Engine
from everos_reflect.index.recency import RECENCY_COSINE, latest_first
from everos_reflect.index.recency import key as recency_key
from everos_reflect.index.search import search
from everos_reflect.index.sync import Indexer
from everos_reflect.llm.extractive import (
    PARAPHRASE_COSINE,
    ExtractiveLLM,
    narrative_sentences,
    tells_change,
    tells_newer_version,
)
from everos_reflect.markdown.store import MarkdownStore
from everos_reflect.model import MAX_BRIEFING_TOKENS, Kind, UserRef
from everos_reflect.provenance import provenance
from everos_reflect.runtime import Runtime
from everos_reflect.settings import load_settings

DATA = Path(__file__).resolve().parent / "state_stories.json"
STORIES_PER_USER = 4
START = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
OME = """[strategies.reflect_episodes]
enabled = false
max_clusters_per_run = 1000
"""


def load(path: Path = DATA) -> list[dict[str, Any]]:
    """The stories, checked: every phrase must be where the story says it is."""
    stories = json.loads(path.read_text(encoding="utf-8"))["stories"]
    for s in stories:
        states = [e["text"].lower() for e in s["episodes"] if e["state"]]
        if not all(c.lower() in states[-1] for c in s["current"]):
            raise ValueError(f"{s['id']}: current phrase not in its last state")
        if not all(any(o.lower() in t for t in states[:-1]) for o in s["old"]):
            raise ValueError(f"{s['id']}: old phrase not in an earlier state")
        if any(o.lower() in states[-1] for o in s["old"]):
            raise ValueError(f"{s['id']}: old phrase repeated by the new state")
    return stories


def users_of(stories: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Four stories of different domains per user (story i with i + n/4, i + n/2, ...)."""
    stride = -(-len(stories) // STORIES_PER_USER)
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for i, story in enumerate(stories):
        out[f"u_story{i % stride:02d}"].append(story)
    return out


def build(root: Path, stories: Sequence[dict[str, Any]]) -> dict[str, list[str]]:
    """Write the Episodes; return story id -> ids of its state-carrying Episodes."""
    store = MarkdownStore(root)
    state_ids: dict[str, list[str]] = {}
    for user, mine in users_of(stories).items():
        ref = UserRef.of(user)
        for slot, story in enumerate(mine):
            state_ids[story["id"]] = []
            for step, ep in enumerate(story["episodes"]):
                when = START + timedelta(days=4 * step + slot, hours=slot)
                entry = store.append(
                    ref, Kind.EPISODE,
                    {"timestamp": when.isoformat(), "parent_type": "memcell",
                     "parent_id": f"mc_{story['id']}_{step}", "session_id": f"s_{when:%m%d}"},
                    {"Subject": ep["text"].split(" ", 1)[1][:60], "Content": ep["text"]},
                    day=when.date())
                if ep["state"]:
                    state_ids[story["id"]].append(entry.id)
    return state_ids


def stated(narrative: str) -> bool:
    """Is the final paragraph of ``narrative`` its current state: labelled "Current state:",
    or "Current state (2026-03-09):" when no line shows the day the change was said?"""
    said = narrative_sentences(narrative)
    return bool(said) and said[-1].state


def score(root: Path, stories: Sequence[dict[str, Any]],
          state_ids: dict[str, list[str]]) -> dict[str, Any]:
    store = MarkdownStore(root)
    narratives: dict[str, list[tuple[set[str], str]]] = defaultdict(list)
    for ref in store.iter_users():
        for e in store.entries(ref, Kind.EPISODE):
            if e.deprecated_by is None and e.parent_type == "cluster":
                covered = {x for s in provenance(e).sentences for x in s.sources}
                narratives[ref.user_id].append((covered | set(e.sources), e.content))
    user_of = {s["id"]: u for u, mine in users_of(stories).items() for s in mine}
    rows = []
    for s in stories:
        wanted = set(state_ids[s["id"]])
        found = [text for covered, text in narratives[user_of[s["id"]]] if wanted <= covered]
        final = found[0].split("\n\n")[-1].lower() if found else ""
        right = bool(found) and all(c.lower() in final for c in s["current"]) and not any(
            o.lower() in final for o in s["old"])
        rows.append({"id": s["id"], "split": s["split"], "kind": s["kind"],
                     "new_state_last": s["new_state_last"], "merged": bool(found),
                     "right": right, "stated": right and stated(found[0]),
                     "final": final if found else None})
    return {"rows": rows, "summary": summarise(rows)}


#: Briefing budgets (tokens) at which a story's narrative line is cut to fit.
CUT_BUDGETS = (100, 150, 200, 300)


def briefed_cut(rt: Runtime, stories: Sequence[dict[str, Any]],
                state_ids: dict[str, list[str]]) -> dict[str, Any]:
    """After the merges: briefed on "<name> <domain>" at a budget small enough that a
    narrative's line is cut (:data:`CUT_BUDGETS`), does the story's narrative line say every
    ``current`` phrase? The shipped block (a narrative cut by its parts: its current state
    kept) against the same block cut at its opening (``narrative_cuts=False``), same run.
    Counted over the merged stories whose narrative is in the block both ways."""
    user_of = {s["id"]: u for u, mine in users_of(stories).items() for s in mine}
    owner: dict[str, str] = {}  # story -> the live narrative standing for its states
    for user in set(user_of.values()):
        for e in rt.store.entries(UserRef.of(user), Kind.EPISODE):
            if e.deprecated_by is None and e.parent_type == "cluster":
                covered = {x for s in provenance(e).sentences for x in s.sources} | set(e.sources)
                for s in stories:
                    if user_of[s["id"]] == user and set(state_ids[s["id"]]) <= covered:
                        owner[s["id"]] = e.id
    counts: Counter[str] = Counter()
    for budget in CUT_BUDGETS:
        for s in stories:
            if s["id"] not in owner:
                continue
            ref, query = UserRef.of(user_of[s["id"]]), f"{s['name']} {s['domain']}"
            lines, cut = {}, {}
            for flag in (True, False):
                block = build_briefing(rt, ref, query, max_tokens=budget, narrative_cuts=flag)
                lines[flag] = next((i.text.lower() for i in block.items
                                    if i.id == owner[s["id"]]), None)
                cut[flag] = owner[s["id"]] in block.cut_ids
            if lines[True] is None or lines[False] is None:
                continue
            counts[f"{budget}_found"] += 1
            counts[f"{budget}_cut"] += cut[True] and cut[False]
            for flag, name in ((True, "shipped"), (False, "head")):
                counts[f"{budget}_{name}_current"] += all(c.lower() in lines[flag]
                                                         for c in s["current"])
    return dict(counts)


def summarise(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    groups: dict[str, Counter[str]] = defaultdict(Counter)
    for r in rows:
        keys = ["all", r["split"], f"kind:{r['kind']}",
                "new state last" if r["new_state_last"] else "something said after"]
        for key in keys:
            groups[key]["n"] += 1
            groups[key]["merged"] += r["merged"]
            groups[key]["right"] += r["right"]
            groups[key]["stated"] += r.get("stated", False)
    return {k: {"n": c["n"], "merged": c["merged"], "right": c["right"], "stated": c["stated"],
                "merged_share": round(c["merged"] / c["n"], 4),
                "right_among_merged": round(c["right"] / c["merged"], 4) if c["merged"] else None}
            for k, c in groups.items()}


FLOORS = (0.0, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5)


def version_pairs(rt: Runtime, stories: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Pairs of one user's Episodes in the clustering's time window, under its threshold (as
    indexed), that the clustering's join of a fact's newer version may join
    (``tells_newer_version``): per half (both stories in it; "mixed" for a cross-story pair
    of two halves) and cosine floor, same-story and cross-story pairs read so, of all such
    pairs at or above the floor. What ``clustering.online.VERSION_FLOOR`` is chosen on (the
    calibration half)."""
    half_of = {s["id"]: s["split"] for s in stories}
    window = rt.settings.clustering.time_window_days * 86400.0
    threshold = rt.settings.clustering.threshold
    store = MarkdownStore(rt.root)
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for user in users_of(stories):
        ref = UserRef.of(user)
        eps = sorted(store.entries(ref, Kind.EPISODE), key=lambda e: (e.timestamp, e.id))
        vecs = rt.vectors.get_vectors(Kind.EPISODE, ref, [e.id for e in eps])
        unit = {i: np.asarray(v, dtype=np.float64) / np.linalg.norm(v) for i, v in vecs.items()}
        for n, a in enumerate(eps):
            for b in eps[n + 1:]:
                if (b.timestamp - a.timestamp).total_seconds() > window:
                    break
                cos = float(unit[a.id] @ unit[b.id])
                if cos >= threshold:
                    continue
                sa, sb = (e.parent_id.rsplit("_", 1)[0][3:] for e in (a, b))
                half = half_of[sa] if half_of[sa] == half_of[sb] else "mixed"
                kind = "same" if sa == sb else "cross"
                read = tells_change(b.content) and tells_newer_version(a.content, b.content)
                for floor in FLOORS:
                    if cos >= floor:
                        counts[f"{half} {floor:g}"][kind] += 1
                        counts[f"{half} {floor:g}"][f"{kind}_read"] += read
    return {k: dict(v) for k, v in sorted(counts.items())}


def ranking(rt: Runtime, stories: Sequence[dict[str, Any]],
            state_ids: dict[str, list[str]]) -> dict[str, Any]:
    """Before any merge: asked about a story's state ("<name> <domain>", e.g. "Sam car"), does
    the latest state Episode rank above every earlier state Episode of the story? Shipped
    search (latest version first, index/recency.py: by vectors or by words) against its
    plain fused order and against the same rule by the stored vectors alone (``vectors``:
    what search did before it read words), and the briefing's records (``briefing_*``: the
    shipped rule against relevance alone), in the same run. Each count also per half
    (``<name>_<half>_...``)."""
    user_of = {s["id"]: u for u, mine in users_of(stories).items() for s in mine}
    counts: Counter[str] = Counter()
    for s in stories:
        ids = state_ids[s["id"]]
        query = f"{s['name']} {s['domain']}"
        ref = UserRef.of(user_of[s["id"]])
        plain = search(rt, query, top_k=10, user_id=ref.user_id, latest_first_order=False)
        shipped = search(rt, query, top_k=10, user_id=ref.user_id)
        stored = rt.vectors.get_vectors(Kind.EPISODE, ref, [h.id for h in plain])
        by_vectors = latest_first([replace(h) for h in plain],
                                  {recency_key(h): stored[h.id] for h in plain if h.id in stored},
                                  threshold=RECENCY_COSINE)
        told = {flag: [i.id for i in build_briefing(rt, ref, query, max_tokens=MAX_BRIEFING_TOKENS,
                                                    latest_first_order=flag).items]
                for flag in (False, True)}
        for name, order in (("plain", [h.id for h in plain]),
                            ("vectors", [h.id for h in by_vectors]),
                            ("shipped", [h.id for h in shipped]),
                            ("briefing_plain", told[False]), ("briefing_shipped", told[True])):
            if ids[-1] in order:
                first = all(order.index(ids[-1]) < order.index(i) for i in ids[:-1]
                            if i in order)
                for label in (name, f"{name}_{s['split']}"):
                    counts[f"{label}_found"] += 1
                    counts[f"{label}_latest_first"] += first
    counts["n"] = len(stories)
    return dict(counts)


def run(work: Path, versions: Sequence[float], paraphrases: Sequence[float] = (PARAPHRASE_COSINE,),
        member: float | None = None, window: float | None = None) -> dict[str, Any]:
    stories = load()
    base = work / "base"
    base.mkdir(parents=True)
    (base / "ome.toml").write_text(OME, encoding="utf-8")
    state_ids = build(base, stories)
    settings = load_settings(base)
    if member is not None:
        settings = replace(settings, clustering=replace(settings.clustering,
                                                        member_threshold=member))
    if window is not None:
        settings = replace(settings, clustering=replace(settings.clustering,
                                                        time_window_days=window))
    embedder = CachingEmbedder(make_embedder(settings.embedding))
    rt = Runtime(base, settings, embedder=embedder)
    Indexer(rt).scan()
    ranked = ranking(rt, stories, state_ids)
    pairs = version_pairs(rt, stories)
    for key, c in pairs.items():
        print(f"pairs under the threshold, {key}: same-story read as versions "
              f"{c.get('same_read', 0)}/{c.get('same', 0)}, cross-story "
              f"{c.get('cross_read', 0)}/{c.get('cross', 0)}", flush=True)
    rt.close()
    extractive = settings.llm.provider == "extractive"
    points = []
    grid = [(p, v) for p in paraphrases for v in versions] if extractive else \
        [(paraphrases[0], versions[0])]
    for paraphrase, value in grid:
        root = work / f"p{paraphrase:.2f}v{value:.2f}"
        shutil.copytree(base, root)
        llm = ExtractiveLLM(embedder, version=value, paraphrase=paraphrase) \
            if extractive else None
        rt = Runtime(root, settings, embedder=embedder, llm=llm)
        ClusterService(rt).recluster()
        started = time.perf_counter()
        outcome = Engine(rt).trigger("reflect_episodes", force=True, timeout=None)
        seconds = time.perf_counter() - started
        cut = briefed_cut(rt, stories, state_ids)
        rt.close()
        result = score(root, stories, state_ids)
        result["briefed_cut"] = cut
        result.update(version=value, paraphrase=paraphrase, reflect_seconds=round(seconds, 1),
                      counts=outcome.counts, status=outcome.status)
        points.append(result)
        cal, rep = result["summary"]["calibration"], result["summary"]["report"]
        print(f"paraphrase {paraphrase} version {value}: calibration merged "
              f"{cal['merged']}/{cal['n']} right "
              f"{cal['right']}; report merged {rep['merged']}/{rep['n']} right {rep['right']}",
              flush=True)
    best = max(points, key=lambda p: (p["summary"]["calibration"]["right"],
                                      p["summary"]["calibration"]["merged"],
                                      -p["paraphrase"], -p["version"]))
    return {"stories": len(stories), "domains": len({s["domain"] for s in stories}),
            "llm": "extractive" if extractive else f"{settings.llm.provider}:{settings.llm.model}",
            "embedder": embedder.name, "member_threshold": settings.clustering.member_threshold,
            "time_window_days": settings.clustering.time_window_days,
            "points": points, "chosen": [best["paraphrase"], best["version"]],
            "ranking": ranked, "version_pairs": pairs}


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}"


def markdown(result: dict[str, Any]) -> str:
    para, version = result["chosen"]
    chosen = next(p for p in result["points"]
                  if (p["paraphrase"], p["version"]) == (para, version))
    s = chosen["summary"]
    lines = [
        "# Latest-state stories",
        "",
        f"Generated by `python bench/state_stories.py`. {result['stories']} stories, "
        f"{result['domains']} domains, LLM: {result['llm']}, embedder: {result['embedder']}, "
        f"clustering member threshold {result['member_threshold']}, time window "
        f"{result.get('time_window_days', 7.0):g} days. Paraphrase threshold "
        f"{para} and version threshold {version} chosen on the calibration stories; the "
        "*report* row is held out.",
        "",
        "| stories | n | merged | merged % | right among merged % | stated as the current "
        "state among merged % |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for key in ("report", "calibration", "all", "kind:replacement", "kind:number",
                "kind:negation", "kind:reversal", "new state last", "something said after"):
        if key in s:
            g = s[key]
            stated = g["stated"] / g["merged"] if g["merged"] else None
            lines.append(f"| {key} | {g['n']} | {g['merged']} | {_pct(g['merged_share'])} | "
                         f"{_pct(g['right_among_merged'])} | {_pct(stated)} |")
    per_half = s.get("report", {}).get("n", 0)
    lines += ["", "Sweep of the paraphrase and version thresholds (calibration / report: right "
              f"among merged, merged of {per_half}):", "",
              "| paraphrase cosine | version cosine | calibration | report | merged cal / rep "
              "| reflect s |", "|---:|---:|---:|---:|---:|---:|"]
    for p in result["points"]:
        c, r = p["summary"]["calibration"], p["summary"]["report"]
        lines.append(f"| {p['paraphrase']} | {p['version']} | {c['right']}/{c['merged']} | "
                     f"{r['right']}/{r['merged']} | {c['merged']} / {r['merged']} | "
                     f"{p['reflect_seconds']} |")
    r = result.get("ranking")
    if r:
        def told(name: str, half: str = "") -> str:
            label = f"{name}_{half}" if half else name
            return f"{r.get(f'{label}_latest_first', 0)} of {r.get(f'{label}_found', 0)}"

        lines += ["", "Ranking before any merge, asked \"<name> <domain>\" (top 10): the latest "
                  "state Episode ranks above the story's earlier states in "
                  f"{told('shipped')} stories where it is found with the shipped search "
                  f"(report half {told('shipped', 'report')}), against {told('vectors')} "
                  f"(report {told('vectors', 'report')}) with the rule by stored vectors "
                  f"alone and {told('plain')} (report {told('plain', 'report')}) in its plain "
                  "fused order (same run). The briefing's records (same question, whole "
                  f"budget): latest first in {told('briefing_shipped')} stories (report "
                  f"{told('briefing_shipped', 'report')}), against {told('briefing_plain')} "
                  f"(report {told('briefing_plain', 'report')}) by relevance alone (same run)."]
    cut = chosen.get("briefed_cut")
    if cut:
        told = "; ".join(
            f"at {b} tokens {cut.get(f'{b}_shipped_current', 0)} of {cut.get(f'{b}_found', 0)}, "
            f"against {cut.get(f'{b}_head_current', 0)} cut at its opening "
            f"({cut.get(f'{b}_cut', 0)} of them cut both ways)"
            for b in CUT_BUDGETS)
        lines += ["", "After the merges, briefed on \"<name> <domain>\" at a budget that cuts a "
                  "narrative's line: the line says the current value " + told + " (of the "
                  "merged stories, those whose narrative is in the block both ways; same run)."]
    wrong = [r for r in chosen["rows"] if r["merged"] and not r["right"]][:8]
    if wrong:
        lines += ["", "Wrong final paragraphs (first 8):", ""]
        lines += [f"- {r['id']}: {r['final']!r}" for r in wrong]
    return "\n".join(lines) + "\n"


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.replace(",", " ").split()]


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--versions", type=_floats, default=[0.65, 0.7, 0.75])
    parser.add_argument("--paraphrase", type=_floats, default=[0.65, 0.7, 0.8])
    parser.add_argument("--member", type=float,
                        help="clustering.member_threshold (default: the shipped setting)")
    parser.add_argument("--window", type=float,
                        help="clustering.time_window_days (default: the shipped setting)")
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    args = parser.parse_args(list(argv) if argv is not None else None)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    with tempfile.TemporaryDirectory(prefix="everos-stories-") as tmp:
        result = run(Path(tmp), args.versions, args.paraphrase, args.member, args.window)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "state_stories.json").write_text(json.dumps(result, indent=1) + "\n",
                                                 encoding="utf-8")
    (args.out / "state_stories.md").write_text(markdown(result), encoding="utf-8")
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
