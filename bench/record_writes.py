"""How much a record write into one growing daily log costs, and how many parses it makes.

    python bench/record_writes.py [--records 300] [--tree PATH ...]

Writes ``--records`` insights into one day's log of one user, one write each (as a tier
appends them), then as many verdicts (``update_meta`` of each, as ``revalidate_insights``
writes a "holds"), then archives each into the next (``deprecate``, one pair a write), each
write followed by the index sync the tiers do (hash embedder, no model). Prints, per phase,
seconds per write (mean, and the last tenth: the log is at its largest there) and the
parses per write: full parses (every entry's YAML) and header parses (frontmatter only).

With ``--tree``, each tree (a checkout with ``everos_reflect/`` in it) runs the same writes in
its own process, one after the other, alternating when given twice (A B A B) so both see
the same machine load; without it, this checkout runs once. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def _one(records: int) -> dict[str, Any]:
    from datetime import date

    import everos_reflect.markdown.parser as parser_module
    from everos_reflect.embedding.base import HashEmbedder
    from everos_reflect.index.sync import Indexer
    from everos_reflect.model import Kind, UserRef
    from everos_reflect.runtime import Runtime

    counts = {"full": 0, "header": 0, "parse_s": 0.0}
    real_parse = parser_module._Parser.parse

    def counted(self: Any, *, entries: bool = True) -> Any:
        counts["full" if entries else "header"] += 1
        began = time.perf_counter()
        try:
            return real_parse(self, entries=entries)
        finally:
            counts["parse_s"] += time.perf_counter() - began

    parser_module._Parser.parse = counted  # type: ignore[method-assign]
    root = Path(tempfile.mkdtemp(prefix="everos-bench-writes-")) / "root"
    (root / ".index").mkdir(parents=True)
    rt = Runtime(root, embedder=HashEmbedder(64))
    ref = UserRef("default_app", "default_project", "u_bench")
    day = date(2026, 10, 12)
    rt.store.append(ref, Kind.EPISODE, {"importance": 5},
                    {"Subject": "seed", "Content": "an Episode the insights cite"}, day=day)
    episode = rt.store.entries(ref, Kind.EPISODE)[0].id
    indexer = Indexer(rt, notify_clusters=False)
    path = rt.store.log_path(ref, Kind.INSIGHT, day)

    def meta(n: int) -> dict[str, Any]:
        return {"importance": 6, "question": f"What does the user care about, {n}?",
                "insight_type": "reflection", "status": "active", "depth": 1,
                "evidence": [episode], "evidence_hash": {episode: f"{n:064x}"}}

    phases: dict[str, dict[str, float]] = {}
    ids: list[str] = []

    def phase(name: str, writes: list[Any]) -> None:
        for key in ("full", "header"):
            counts[key] = 0
        counts["parse_s"] = 0.0
        times = []
        for write in writes:
            began = time.perf_counter()
            write()
            indexer.sync_paths([path])
            times.append(time.perf_counter() - began)
        tail = times[-max(1, len(times) // 10):]
        phases[name] = {"per_write_s": sum(times) / len(times),
                        "last_tenth_s": sum(tail) / len(tail),
                        "full_per_write": counts["full"] / len(times),
                        "header_per_write": counts["header"] / len(times),
                        "parse_share": counts["parse_s"] / sum(times)}

    def add(n: int) -> Any:
        return lambda: ids.append(rt.store.append(
            ref, Kind.INSIGHT, meta(n), {"Insight": f"The user keeps coming back to {n}."},
            day=day, derived=True).id)

    def verdict(n: int) -> Any:
        return lambda: rt.store.update_meta(ref, ids[n], {
            "status": "active", "stale_reason": None, "revalidated_at": f"2026-10-13T0{n % 10}:00"
                                                                      ":00+00:00"})

    def archive(n: int) -> Any:
        return lambda: rt.store.deprecate(ref, {ids[n]: ids[n + 1]})

    phase("append", [add(n) for n in range(records)])
    phase("verdict", [verdict(n) for n in range(records)])
    phase("archive", [archive(n) for n in range(records - 1)])
    rt.close()
    import everos_reflect

    return {"records": records, "log_bytes": path.stat().st_size, "phases": phases,
            "code": str(Path(everos_reflect.__file__).parent.parent)}


def _show(label: str, result: dict[str, Any]) -> None:
    print(f"{label} ({result['code']}): {result['records']} records, final log "
          f"{result['log_bytes']:,} bytes")
    for name, p in result["phases"].items():
        print(f"  {name:8} {p['per_write_s'] * 1000:8.1f} ms/write (last tenth "
              f"{p['last_tenth_s'] * 1000:8.1f} ms), parses/write: full "
              f"{p['full_per_write']:.2f}, header {p['header_per_write']:.2f}; "
              f"{p['parse_share']:.0%} of the time parsing")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=300)
    parser.add_argument("--tree", action="append", default=[],
                        help="a checkout to run (repeat: alternating runs)")
    parser.add_argument("--rounds", type=int, default=1, help="runs per tree, alternating")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one or not args.tree:
        result = _one(args.records)
        if args.one:
            print(json.dumps(result))
        else:
            _show("this checkout", result)
        return
    for n in range(args.rounds):
        for tree in args.tree:
            env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve())}
            out = subprocess.run([sys.executable, __file__, "--one", "--records",
                                  str(args.records)], env=env, check=True,
                                 capture_output=True, text=True, cwd=tree).stdout
            _show(f"{tree} (round {n + 1})", json.loads(out.splitlines()[-1]))


if __name__ == "__main__":
    main()
