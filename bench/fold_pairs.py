"""Does the extractive merge fold only restatements? Precision of its paraphrase threshold.

The extractive provider keeps one sentence of two that say the same thing (a *fold*, cosine ≥
``paraphrase``); the other's words leave live memory with its archived source. A fold of two
different facts about one subject loses one of them, and neither the coverage guard nor the
quality benchmark's statement-level recall sees it: both count a fact as still stated at the
same cosine. Short sentences about one entity reach it: with all-MiniLM-L6-v2, "Andrew adopted a
dog named Rex." and "Andrew's dog Rex learned to sit and fetch." sit at 0.774, over the 0.75
the provider shipped with, and the narrative kept the first and dropped the tricks.

Data: ``bench/fold_pairs.json`` — per domain, pairs said on two days: ``restates`` (same fact in
other words: one sentence should stay) and ``distinct`` (two facts about the same subject: both
must stay). Each pair is merged by :class:`ExtractiveLLM` (the shipped embedder) as a cluster of
two Episodes; a pair counts as *folded* when the narrative keeps only one of the two sentences,
and a distinct pair as *written as versions* when, both kept, the later one is written as the
"Current state" (a change claimed that never happened); a restatement written so is counted
too (``restates_versioned``). The last eight domains (relatives and
allergies ... family health) pair a person's fact with the same words about someone or something
of theirs ("Mia is allergic to peanuts." / "Mia's brother is allergic to peanuts."), and
restatements through a possessive ("Mia's allergy to peanuts is severe."). Some domains also
hold ``changes``: a fact that really changed ("Leah is vegetarian." / "Leah is vegan."), whose
later sentence must be written as the "Current state" with the earlier kept as history; a fold
drops the change (``changes_folded``).

It also prints the coverage guard's view of the same pairs (``measure_coverage``): with only
the second sentence of a pair written, is the first counted as still stated, per
``fact_match_threshold``? A distinct pair credited is a lost fact the guard cannot see. And,
from ``combined`` (two distinct facts of a domain with one honest sentence stating both, as a
model merging them might write it: "Andrew adopted a dog named Rex, who has since learned to
sit and fetch."), is that sentence counted as stating both? One not counted is an honest merge
the guard scores as lossy.

The threshold is chosen on the *calibration* domains (even positions in the file, unless a
domain names its half: held-out domains written after the rules were final say ``"report"``):
the lowest swept value that folds no distinct pair nor change there; the *report* domains
(odd positions, and the held-out ones) are scored at it. Both halves are printed for every
value, from the same run.

    python bench/fold_pairs.py [--paraphrase 0.7,0.75,0.78,0.8,0.85] [--out bench/results]
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from everos_reflect.embedding import CachingEmbedder, make_embedder
from everos_reflect.llm.base import MergeMember, MergeRequest, Usage
from everos_reflect.llm.extractive import (
    PARAPHRASE_COSINE,
    ExtractiveLLM,
    narrative_sentences,
    plain_sentences,
)
from everos_reflect.model import UserRef
from everos_reflect.settings import Settings
from everos_reflect.strategies.consolidate import Draft, Selection, measure_coverage
from everos_reflect.strategies.reflect import DEFAULT_FACT_MATCH_THRESHOLD

DATA = Path(__file__).resolve().parent / "fold_pairs.json"
HALVES = ("calibration", "report")
LABELS = ("restates", "distinct", "changes")


def load_pairs(path: Path = DATA) -> list[dict[str, Any]]:
    """One row per pair: domain, half (even domain positions calibrate, unless the domain
    names its half), label, the two texts."""
    doc = json.loads(path.read_text("utf-8"))
    rows = []
    for i, domain in enumerate(doc["domains"]):
        for label in LABELS:
            for first, second in domain.get(label, []):
                half = domain.get("half", HALVES[i % 2])
                rows.append({"domain": domain["domain"], "half": half,
                             "label": label, "texts": (first, second)})
    return rows


def load_combined(path: Path = DATA) -> list[dict[str, Any]]:
    """One row per ``combined`` entry: two distinct facts and one sentence stating both."""
    doc = json.loads(path.read_text("utf-8"))
    return [{"domain": domain["domain"], "half": domain.get("half", HALVES[i % 2]),
             "facts": (first, second), "sentence": sentence}
            for i, domain in enumerate(doc["domains"])
            for first, second, sentence in domain.get("combined", [])]


def folded(llm: ExtractiveLLM, texts: tuple[str, str]) -> bool:
    """Merge the two texts as two Episodes a week apart; True when only one of them is left
    (the narrative's sentences, without dates and labels, against each text's own)."""
    return outcome(llm, texts)[0]


def outcome(llm: ExtractiveLLM, texts: tuple[str, str]) -> tuple[bool, bool]:
    """``(folded, versioned)`` of the merge of the two texts as two Episodes a week apart:
    only one of them left (see :func:`folded`), and a "Current state" written (the later
    sentence claimed to replace the earlier: wrong for two distinct facts)."""
    start = datetime(2026, 3, 2, 10, tzinfo=UTC)
    members = [MergeMember(entry_id, start + timedelta(days=7 * i), "Notes", text)
               for i, (entry_id, text) in enumerate(zip(("ep_20260302_0001", "ep_20260309_0001"),
                                                        texts, strict=True))]
    sentences = narrative_sentences(llm.merge(MergeRequest("init", members)).content)
    said = {" ".join(s.text.split()) for s in sentences}
    kept = [all(" ".join(s.split()) in said for s in plain_sentences(text)) for text in texts]
    return sum(kept) < 2, any(s.state for s in sentences)


def sweep(rows: list[dict[str, Any]], thresholds: list[float],
          embedder: Any = None) -> dict[str, Any]:
    """Per threshold and half: distinct pairs folded (facts lost) or written as versions (a
    change claimed), restatements folded or written as versions (a change claimed too),
    changes folded (the change lost) or written as versions (right)."""
    if embedder is None:
        embedder = CachingEmbedder(make_embedder(Settings().embedding))
    table: dict[str, Any] = {}
    for threshold in thresholds:
        llm = ExtractiveLLM(embedder, paraphrase=threshold)
        cell: dict[str, Any] = {}
        for half in HALVES:
            mine = [(r, outcome(llm, r["texts"])) for r in rows if r["half"] == half]
            distinct = [(r, o) for r, o in mine if r["label"] == "distinct"]
            lost = [r for r, (fold, _) in distinct if fold]
            claimed = [r for r, (fold, version) in distinct if version and not fold]
            restates = [(r, o) for r, o in mine if r["label"] == "restates"]
            reworded = [r for r, (fold, version) in restates if version and not fold]
            changes = [(r, o) for r, o in mine if r["label"] == "changes"]
            dropped = [r for r, (fold, _) in changes if fold]
            cell[half] = {
                "distinct": len(distinct),
                "distinct_folded": len(lost),
                "distinct_versioned": len(claimed),
                "restates": len(restates),
                "restates_folded": sum(o[0] for r, o in restates),
                "restates_versioned": len(reworded),
                "lost": [list(r["texts"]) for r in lost],
                "claimed": [list(r["texts"]) for r in claimed],
                "reworded": [list(r["texts"]) for r in reworded],
                "changes": len(changes),
                "changes_folded": len(dropped),
                "changes_versioned": sum(version and not fold for _, (fold, version) in changes),
                "dropped": [list(r["texts"]) for r in dropped],
            }
        table[f"{threshold:g}"] = cell
    return table


def credited(embedder: Any, texts: tuple[str, str], threshold: float) -> bool:
    """Does the coverage guard count the first text as still stated by a narrative holding
    only the second (:func:`measure_coverage`, ``fact_match_threshold`` = ``threshold``)?"""
    return coverage(embedder, [texts[0]], texts[1], threshold) == 1.0


def coverage(embedder: Any, facts: list[str], narrative: str, threshold: float) -> float:
    """The coverage guard's score of ``narrative`` (no extracted facts) for ``facts``."""
    sel = Selection(UserRef.of("u_bench"), "cl_000000000000", "init", (), None, 0)
    draft = Draft(sel, "Notes", narrative, [], "bench", "bench", Usage(), 0.0)
    return measure_coverage(embedder, facts, draft, match_threshold=threshold).score


def credit(rows: list[dict[str, Any]], combined: list[dict[str, Any]],
           thresholds: list[float]) -> dict[str, Any]:
    """The coverage guard's view of the same pairs, per threshold and half: a distinct pair
    credited is a lost fact the guard does not see (an LLM merge that wrote one sentence
    for both passes); a restatement not credited, or a ``combined`` sentence that does not
    count as stating both its facts, is an honest merge the guard counts as lossy."""
    embedder = CachingEmbedder(make_embedder(Settings().embedding))
    table: dict[str, Any] = {}
    for threshold in thresholds:
        cell: dict[str, Any] = {}
        for half in HALVES:
            mine = [(r, credited(embedder, r["texts"], threshold))
                    for r in rows if r["half"] == half and r["label"] != "changes"]
            both = [coverage(embedder, list(c["facts"]), c["sentence"], threshold) == 1.0
                    for c in combined if c["half"] == half]
            cell[half] = {
                label: sum(r["label"] == label for r, _ in mine) for label in ("distinct",
                                                                                "restates")}
            cell[half]["distinct_credited"] = sum(ok for r, ok in mine
                                                  if r["label"] == "distinct")
            cell[half]["restates_credited"] = sum(ok for r, ok in mine
                                                  if r["label"] == "restates")
            cell[half]["combined"] = len(both)
            cell[half]["combined_credited"] = sum(both)
        table[f"{threshold:g}"] = cell
    return table


def choose(table: dict[str, Any]) -> str | None:
    """The lowest threshold that folds no distinct pair nor change of the calibration half."""
    ok = [t for t, cell in table.items() if cell["calibration"]["distinct_folded"] == 0
          and cell["calibration"].get("changes_folded", 0) == 0]
    return min(ok, key=float) if ok else None


def markdown(table: dict[str, Any], chosen: str | None,
             credits: dict[str, Any] | None = None) -> str:
    lines = ["# Fold precision of the extractive merge (bench/fold_pairs.py)", "",
             f"Shipped paraphrase threshold: {PARAPHRASE_COSINE:g}. Chosen on the calibration "
             f"half: {chosen or 'none (every value folds a distinct pair)'}.", "",
             "| paraphrase | half | distinct pairs folded (a fact lost) | distinct pairs "
             "written as versions (a change claimed) | restatements folded | restatements "
             "written as versions (a change claimed) | changes folded (the change lost) | "
             "changes written as versions (right) |",
             "|---:|---|---:|---:|---:|---:|---:|---:|"]
    for threshold, cell in table.items():
        for half in HALVES:
            c = cell[half]
            lines.append(f"| {threshold} | {half} | {c['distinct_folded']} / {c['distinct']} | "
                         f"{c.get('distinct_versioned', 0)} / {c['distinct']} | "
                         f"{c['restates_folded']} / {c['restates']} | "
                         f"{c.get('restates_versioned', 0)} / {c['restates']} | "
                         f"{c.get('changes_folded', 0)} / {c.get('changes', 0)} | "
                         f"{c.get('changes_versioned', 0)} / {c.get('changes', 0)} |")
    for title, key in (("Distinct pairs folded", "lost"),
                       ("Distinct pairs written as versions", "claimed"),
                       ("Restatements written as versions", "reworded"),
                       ("Changes folded", "dropped")):
        lines += ["", f"{title}:", ""]
        for threshold, cell in table.items():
            for half in HALVES:
                for first, second in cell[half].get(key, []):
                    lines.append(f"- {threshold}, {half}: \"{first}\" / \"{second}\"")
    if credits:
        lines += ["", "## Coverage credit (the guard's view of the same pairs)", "",
                  "A narrative holds only the second sentence of a pair; is the first counted as "
                  "still stated? Shipped `fact_match_threshold`: "
                  f"{DEFAULT_FACT_MATCH_THRESHOLD:g}.", "",
                  "| fact_match_threshold | half | distinct pairs credited (a loss unseen) | "
                  "restatements credited | two facts in one sentence: both credited |",
                  "|---:|---|---:|---:|---:|"]
        for threshold, cell in credits.items():
            for half in HALVES:
                c = cell[half]
                lines.append(f"| {threshold} | {half} | {c['distinct_credited']} / "
                             f"{c['distinct']} | {c['restates_credited']} / {c['restates']} | "
                             f"{c['combined_credited']} / {c['combined']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paraphrase", default="0.7,0.75,0.78,0.8,0.85",
                        help="paraphrase cosines to sweep, comma-separated")
    parser.add_argument("--out", type=Path, default=None,
                        help="write fold_pairs.md and fold_pairs_result.json here")
    args = parser.parse_args(argv)
    thresholds = [float(t) for t in args.paraphrase.replace(",", " ").split()]
    rows = load_pairs()
    table = sweep(rows, thresholds)
    chosen = choose(table)
    credits = credit(rows, load_combined(), thresholds)
    text = markdown(table, chosen, credits)
    sys.stdout.write(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "fold_pairs.md").write_text(text, "utf-8")
        (args.out / "fold_pairs_result.json").write_text(
            json.dumps({"chosen": chosen, "table": table, "credit": credits}, indent=1) + "\n",
            "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
