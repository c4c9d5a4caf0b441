"""Measure the fact-coverage guard on the example root: faithful vs deliberately lossy merges.

    python bench/coverage_floor.py [ROOT]      # default: memory_root_example (copied to tmp)

Indexes and clusters a copy of ROOT with the configured embedder (the bundled MiniLM by
default), then for every cluster Reflection would merge builds three drafts and prints the
coverage each gets at several match thresholds:

- faithful: the extractive provider's merge and facts (keeps every sentence);
- lossy:    a narrative stating only the first half (rounded up) of the sources' facts;
- wrong:    the narrative of another cluster of the same user (a merge of the wrong memories).

A good (threshold, floor) accepts every faithful merge and rejects every lossy and wrong one.
The defaults in strategies/reflect.py were chosen from this output (docs/reflection.md).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from everos_reflect.clustering.service import ClusterService
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.llm.prompts import DEFAULT_PROMPTS
from everos_reflect.runtime import Runtime
from everos_reflect.strategies.consolidate import best_matches, draft, select, source_facts
from everos_reflect.strategies.reflect import live_facts

THRESHOLDS = (0.65, 0.7, 0.75, 0.78, 0.8, 0.85)
FLOORS = (0.5, 0.6, 0.7, 0.8, 0.9)


def main() -> None:
    src = Path(sys.argv[1] if len(sys.argv) > 1 else "memory_root_example")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        shutil.copytree(src, root, ignore=shutil.ignore_patterns(".index"))
        rt = Runtime(root)
        Indexer(rt).scan()
        clusters = ClusterService(rt)
        llm = ExtractiveLLM()
        rows = []
        for ref in rt.store.iter_users():
            drafts = []
            for info in clusters.eligible_for_reflection(ref, 100):
                sel = select(rt.store, clusters, info, max_sources=50)
                if sel is not None:
                    drafts.append(draft(sel, llm, DEFAULT_PROMPTS))
            for n, faithful in enumerate(drafts):
                sel = faithful.selection
                facts = live_facts(rt, sel.ref, [e.id for e in sel.replaced])
                wanted = source_facts(sel, {p: [t for _, t in fs] for p, fs in facts.items()})
                half = wanted[: (len(wanted) + 1) // 2]  # keeps the first half of the facts
                lossy = replace(faithful, content=" ".join(half), facts=list(half))
                other = drafts[(n + 1) % len(drafts)] if len(drafts) > 1 else None
                variants = {"faithful": faithful, "lossy": lossy}
                if other is not None and other is not faithful:
                    variants["wrong"] = other
                for name, d in variants.items():
                    best = best_matches(rt.embedder, wanted, d)
                    scores = [float((best >= t).mean()) if len(best) else 1.0
                              for t in THRESHOLDS]
                    rows.append((name, sel.cluster_id, len(wanted), scores))
        print(f"{len(rows)} drafts over {len({r[1] for r in rows})} clusters "
              f"(embedder {rt.embedder.name})\n")
        print("variant    " + "".join(f"  t={t:<5}" for t in THRESHOLDS) + "   (min / mean / max)")
        for name in ("faithful", "lossy", "wrong"):
            sub = [r[3] for r in rows if r[0] == name]
            if not sub:
                continue
            cells = []
            for i in range(len(THRESHOLDS)):
                col = [s[i] for s in sub]
                cells.append(f"{min(col):.2f}/{sum(col) / len(col):.2f}/{max(col):.2f}")
            print(f"{name:<9} " + " ".join(f"{c:>15}" for c in cells))
        print("\nshare of faithful accepted / lossy rejected / wrong rejected, by floor:")
        for floor in FLOORS:
            cells = []
            for i in range(len(THRESHOLDS)):
                rate = {name: [r[3][i] >= floor for r in rows if r[0] == name]
                        for name in ("faithful", "lossy", "wrong")}
                ok = sum(rate["faithful"]) / max(1, len(rate["faithful"]))
                lossy = 1 - sum(rate["lossy"]) / max(1, len(rate["lossy"]))
                wrong = 1 - sum(rate["wrong"]) / max(1, len(rate["wrong"]))
                cells.append(f"{ok:.2f}/{lossy:.2f}/{wrong:.2f}")
            print(f"floor {floor:<4}" + " ".join(f"{c:>15}" for c in cells))


if __name__ == "__main__":
    main()
