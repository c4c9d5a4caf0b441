"""Peak memory of `reindex` on one large daily log, under and over `limits.max_file_bytes`.

    python bench/bench_limits.py [--sizes 1,4,15,20] [--entry-kb 2] [--out FILE]
    python bench/bench_limits.py --embed-probe 64,256,600   # the embedder alone, in-process
    python bench/bench_limits.py --append-many 1000,4000,16000,30000   # one batched append

For each size (MiB) a fresh root holds one user's log of that size made of ordinary Episodes of
about ``--entry-kb`` KiB each, next to one small log. `everos-reflect reindex` runs in its own
process (the configured embedder: the bundled MiniLM by default) and its peak RSS and wall time
are read from `/usr/bin/time -v`. A log over the limit (16 MiB by default) is reported and not
read, so its row shows the cost of skipping it. Figures are measured on a shared, loaded machine
unless stated otherwise: compare the rows of one run, not runs of different days.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HEAD = "---\ntype: episode_daily\nschema_version: 1\nuser_id: u_big\ndate: '2026-10-12'\n---\n"
WORDS = ["dog", "walk", "park", "morning", "coffee", "budget", "plan", "trip", "garden",
         "weather", "call", "sister", "report", "meeting", "deadline", "recipe", "bread",
         "train", "ticket", "doctor", "run"]


def entry(n: int, size: int) -> str:
    eid = f"ep_20261012_{n:04d}"
    words = " ".join(WORDS[(n * 7 + i) % len(WORDS)] for i in range(size // 6))
    return (f"<!-- entry:{eid} -->\n---\nowner_id: u_big\ntimestamp: 2026-10-12T09:00:00+00:00\n"
            f"parent_type: memcell\n---\n## Subject\nNote {n}\n\n## Content\n{words}.\n"
            f"<!-- /entry:{eid} -->\n")


def build(root: Path, mib: float, entry_bytes: int) -> int:
    folder = root / "default_app/default_project/users/u_big/episodes"
    folder.mkdir(parents=True)
    (root / "everos.toml").write_text("")
    parts, total, n = [HEAD], len(HEAD), 0
    while total < mib * (1 << 20):
        n += 1
        block = entry(n, entry_bytes)
        parts.append(block)
        total += len(block)
    (folder / "episode-2026-10-12.md").write_text("".join(parts))
    small = root / "default_app/default_project/users/u_small/episodes"
    small.mkdir(parents=True)
    (small / "episode-2026-10-12.md").write_text(
        HEAD.replace("u_big", "u_small") + entry(1, 200).replace("u_big", "u_small"))
    return n


def measure(root: Path) -> tuple[float, float, str]:
    cmd = ["/usr/bin/time", "-v", sys.executable, "-m", "everos_reflect.cli.main", "reindex",
           "--root", str(root)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVEROS_")}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", done.stderr)
    seconds = 0.0
    if wall:
        for part in wall.group(1).split(":"):
            seconds = seconds * 60 + float(part)
    summary = done.stdout.strip().splitlines()[0] if done.stdout.strip() else done.stderr[:200]
    return (int(rss.group(1)) / 1024 if rss else float("nan")), seconds, summary


def embed_probe(counts: list[int], entry_bytes: int) -> None:
    """Peak RSS of the bundled embedder alone after embedding that many ~entry-sized texts, in
    batches of 256 (as the indexer flushes): does it grow with the number of texts?"""
    import resource
    import time

    from everos_reflect.embedding.local import LocalEmbedder

    embedder = LocalEmbedder()
    embedder.load()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"| texts | peak RSS | wall |\n|---|---|---|\n| 0 (model loaded) | {peak:.0f} MiB | |")
    started, done = time.perf_counter(), 0
    for count in sorted(counts):
        texts = [entry(n, entry_bytes).split("## Content\n")[1] for n in range(done, count)]
        for start in range(0, len(texts), 256):
            embedder.embed(texts[start : start + 256])
        done = count
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"| {count} | {peak:.0f} MiB | {time.perf_counter() - started:.1f} s |",
              flush=True)


def append_many_probe(counts: list[int]) -> None:
    """Wall time of one ``MarkdownStore.append_many`` of that many short Episodes into a new
    daily log (in-process, the store alone: no index). Per-entry time stays flat when the
    batch is linear; it grew with the batch while every entry re-copied the log so far."""
    import time
    from datetime import date

    from everos_reflect.markdown.store import MarkdownStore
    from everos_reflect.model import Kind, UserRef
    from everos_reflect.settings import LimitsSettings

    ref, day = UserRef.of("u_big"), date(2026, 10, 12)
    limits = LimitsSettings(max_file_bytes=1 << 30)  # the bound is not what is measured
    print("| entries | log size | append_many | per entry |\n|---|---|---|---|", flush=True)
    for count in counts:
        rows = [({"timestamp": "2026-10-12T09:00:00+00:00", "parent_type": "memcell"},
                 {"Subject": f"Note {n}",
                  "Content": " ".join(WORDS[(n * 7 + i) % len(WORDS)] for i in range(30))})
                for n in range(count)]
        with tempfile.TemporaryDirectory() as tmp:
            store = MarkdownStore(tmp, limits=limits)
            started = time.perf_counter()
            made = store.append_many(ref, Kind.EPISODE, rows, day=day)
            seconds = time.perf_counter() - started
            size = store.log_path(ref, Kind.EPISODE, day).stat().st_size
        assert len(made) == count
        print(f"| {count} | {size / (1 << 20):.1f} MiB | {seconds:.2f} s | "
              f"{seconds / count * 1e6:.0f} us |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,4,15,20", help="log sizes in MiB")
    parser.add_argument("--entry-kb", type=float, default=2.0)
    parser.add_argument("--out", type=Path, default=None, help="also write the table here")
    parser.add_argument("--embed-probe", default=None,
                        help="text counts: measure the embedder alone instead")
    parser.add_argument("--append-many", default=None,
                        help="entry counts: time one batched append of that many instead")
    args = parser.parse_args()
    if args.append_many:
        append_many_probe([int(x) for x in args.append_many.split(",")])
        return
    if args.embed_probe:
        embed_probe([int(x) for x in args.embed_probe.split(",")], int(args.entry_kb * 1024))
        return
    rows = ["| log size | entries | peak RSS | wall | reindex said |", "|---|---|---|---|---|"]
    print(rows[0], rows[1], sep="\n", flush=True)
    for mib in [float(x) for x in args.sizes.split(",")]:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "root"
            n = build(root, mib, int(args.entry_kb * 1024))
            rss, seconds, said = measure(root)
        row = f"| {mib:g} MiB | {n} | {rss:.0f} MiB | {seconds:.1f} s | {said} |"
        rows.append(row)
        print(row, flush=True)
    if args.out:
        args.out.write_text("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
