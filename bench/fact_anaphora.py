"""Atomic facts that lean on another sentence: how many of Reflection's live facts open with a
pronoun or point back, on two source trees in one run (issue 10: the briefing and search
serve a fact alone, so "His last day at Lumen is August 14." names nobody).

For each tree (``--before``: a git revision of this repository, exported to a temporary
folder; after: this working tree, or ``--after``, a revision exported too) a child process
with that tree first on ``sys.path`` builds and reflects two roots with the shipped offline
defaults (bundled MiniLM, extractive provider):

- the demo root (``memory_root_example``, as ``everos-reflect demo`` runs it);
- a LoCoMo root (``bench/locomo_root.py``: per-speaker session observations as Episodes, no
  atomic facts of its own), indexed, clustered and reflected in one run.

Counted: the live atomic facts whose parent is a narrative (a merged entry), and of them

- **pronoun**: opening with He, She, They, His, Her, Their, It or Its;
- **points back**: a bare "this"/"that" as an object ("remember this as a standing rule",
  "doesn't want that again") or a reported "it" ("The bot said it is prorated"):
  :data:`POINTS_BACK_RE`, a rough reading of this script's own, not the provider's, in the
  fact's first sentence (a later one points at the fact's own sentence before it).

    python bench/fact_anaphora.py [--before main] [--after REV] [--locomo PATH] [--samples N]
                                  [--show 5]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
LOCOMO = Path("/work/shared/data/locomo/locomo10.json")
PRONOUNS = frozenset(["he", "she", "they", "his", "her", "their", "it", "its"])
POINTS_BACK_RE = re.compile(
    r"\b(?:this|that)\b(?=\s*(?:[.,;:!?]|$)|\s+(?:again|as|too|anymore|either)\b)"
    r"|\b(?:said|says|confirmed|explained|noted|added)\s+(?:that\s+)?it\b"
    r"(?:['’]s|\s+(?:is|was|will|would|has|had|can|could)\b)",
    re.IGNORECASE)
FIRST_SENTENCE_END_RE = re.compile(r"(?<=[.!?])\s+")
OME = """[strategies.reflect_episodes]
enabled = false
max_clusters_per_run = 1000   # the whole backlog in one run
"""
LIVE_NARRATIVE_FACTS = """
SELECT f.text FROM entries f JOIN entries p
  ON p.app_id = f.app_id AND p.project_id = f.project_id AND p.user_id = f.user_id
 AND p.id = f.parent_id
WHERE f.kind = 'atomic_fact' AND f.deprecated_by IS NULL AND p.sources != '[]'
ORDER BY f.app_id, f.project_id, f.user_id, f.id
"""


def leans(fact: str) -> tuple[bool, bool]:
    """``(opens with a pronoun, points back)`` of one fact. Only its first sentence can point
    back out of it: in "Sam asked whether the credit carries over. The bot said it is
    prorated." the pointer has what it points at in the fact itself (the provider joins a
    pointer to the sentence before it)."""
    words = fact.split(" ", 1)
    first = FIRST_SENTENCE_END_RE.split(fact, maxsplit=1)[0]
    return words[0].lower().strip(",") in PRONOUNS, POINTS_BACK_RE.search(first) is not None


def tally(facts: list[str], show: int) -> dict[str, Any]:
    pronoun = [f for f in facts if leans(f)[0]]
    back = [f for f in facts if leans(f)[1]]
    either = [f for f in facts if any(leans(f))]
    return {"facts": len(facts), "pronoun": len(pronoun), "points_back": len(back),
            "either": len(either), "examples": either[:show]}


def live_facts(root: Path) -> list[str]:
    db = sqlite3.connect(root / ".index" / "sqlite" / "system.db")
    try:
        return [row[0] for row in db.execute(LIVE_NARRATIVE_FACTS)]
    finally:
        db.close()


def child(work: Path, locomo: Path, samples: int | None, show: int) -> dict[str, Any]:
    """Build and reflect both roots with the ``everos_reflect`` first on the path."""
    # an editable install's finder maps the package to its own checkout, whatever the path
    sys.meta_path[:] = [f for f in sys.meta_path
                        if not getattr(f, "__module__", "").startswith("__editable__")]
    sys.path.insert(0, str(HERE))
    import locomo_episodes as lm
    import locomo_root

    from everos_reflect.cli.demo_cmds import example_root, run_demo
    from everos_reflect.clustering.service import ClusterService
    from everos_reflect.engine.engine import Engine
    from everos_reflect.index.sync import Indexer
    from everos_reflect.runtime import Runtime
    from everos_reflect.settings import load_settings

    demo = work / "demo"
    shutil.copytree(example_root(), demo, ignore=shutil.ignore_patterns(".index", "*.tmp"))
    run_demo(demo)
    out = {"tree": str(Path(sys.modules["everos_reflect"].__file__).parent.parent),
           "demo": tally(live_facts(demo), show)}
    data = lm.load(locomo)[:samples] if samples else lm.load(locomo)
    base = work / "locomo"
    base.mkdir()
    (base / "ome.toml").write_text(OME, encoding="utf-8")
    locomo_root.write_root(base, lm.episodes(data), None, bulk=True)
    rt = Runtime(base, load_settings(base, env={}))
    try:
        Indexer(rt).scan()
        ClusterService(rt).recluster()
        outcome = Engine(rt).trigger("reflect_episodes", force=True, timeout=None)
    finally:
        rt.close()
    out["locomo"] = tally(live_facts(base), show) | {"reflect": outcome.status}
    return out


def run_tree(tree: Path, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    env = {k: v for k, v in env.items() if not k.startswith("EVEROS_")}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(work),
           "--locomo", str(args.locomo), "--show", str(args.show)]
    if args.samples:
        cmd += ["--samples", str(args.samples)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"the run on {tree} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def export(revision: str, into: Path) -> str:
    """``revision``'s package and example root, written under ``into``; its commit."""
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", revision],
                            capture_output=True, text=True, check=True).stdout.strip()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, "everos_reflect",
                              "memory_root_example"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return commit


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", default="main", help="git revision of the before tree")
    ap.add_argument("--after", default=None,
                    help="git revision of the after tree (default: this working tree)")
    ap.add_argument("--locomo", type=Path, default=LOCOMO, help="locomo10.json")
    ap.add_argument("--samples", type=int, default=None, help="first N conversations only")
    ap.add_argument("--show", type=int, default=5, help="examples printed per root")
    ap.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.locomo, args.samples, args.show)))
        return
    with tempfile.TemporaryDirectory(prefix="fact-anaphora-") as tmp:
        before_tree = Path(tmp) / "before"
        before_tree.mkdir()
        commit = export(args.before, before_tree)
        after_tree = REPO
        if args.after is not None:
            after_tree = Path(tmp) / "after"
            after_tree.mkdir()
            after_name = f"{args.after} ({export(args.after, after_tree)})"
        else:
            head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                                  capture_output=True, text=True, check=True).stdout.strip()
            dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain",
                                    "everos_reflect"], capture_output=True, text=True,
                                   check=True).stdout.strip()
            after_name = f"this tree ({head}{' + uncommitted changes' if dirty else ''})"
        results = {}
        for name, tree in (("before", before_tree), ("after", after_tree)):
            work = Path(tmp) / f"work-{name}"
            work.mkdir()
            results[name] = run_tree(tree, work, args)
    print(f"before: {args.before} ({commit}); after: {after_name}; "
          f"LoCoMo: {args.samples or 'all'} conversations")
    print("| root | tree | live narrative facts | open with a pronoun | point back | either |")
    print("|---|---|---:|---:|---:|---:|")
    for root in ("demo", "locomo"):
        for name in ("before", "after"):
            t = results[name][root]
            print(f"| {root} | {name} | {t['facts']} | {t['pronoun']} | {t['points_back']} | "
                  f"{t['either']} |")
    for root in ("demo", "locomo"):
        for name in ("before", "after"):
            print(f"\n{root}, {name}: first facts that lean on another sentence")
            for fact in results[name][root]["examples"]:
                print(f"  - {fact}")


if __name__ == "__main__":
    main()
