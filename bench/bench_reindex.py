"""Full reindex throughput vs the raw embedder, unchanged re-scan time, peak RSS.

    python bench/bench_reindex.py 2000                    # synthetic root, real local model
    python bench/bench_reindex.py 100000 --embedder hash  # large N: the fake embedder
    python bench/bench_reindex.py /path/to/root           # an existing memory root (copied)
    python bench/bench_reindex.py 20000 --embedder hash --first-scan
    python bench/bench_reindex.py 20000 --embedder hash --stamped-ahead 86400

``--first-scan`` times what ``serve`` does on a root it has never indexed instead: one
``scan()`` of an empty index, with the change subscribers (clustering, provenance) fed per flush
and each flush's changes noted in ``publish_note`` first (crash safety, session 25). It prints
the scan's rate and the rows that table holds afterwards (0: every note handed over).

A number generates that many synthetic Episodes (``--per-file`` per daily log, ``--users``
users) in a temporary root; a path is copied first, so its own index is never touched. Then it
measures, in the same process:

- raw embedder throughput: ``embed()`` alone over the same texts (all of them, or a sample of
  ``--sample`` for the local model), in the configured batch size;
- full ``reindex()`` throughput (entries/s) and its ratio to the raw figure (target ≥ 80 %);
- an unchanged ``scan()`` (stat only), in ms and as a share of the reindex time
  (target < 1 % at 100k entries);
- peak RSS of the process.

``--stamped-ahead S`` sets every log's mtime S seconds ahead of this clock first (a network
share's clock, ``touch -d tomorrow``) and times two more unchanged scans once the racy window
has passed: their "files re-read" should fall to 0 (each re-read costs a hash of the log).

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from everos_reflect.embedding import HashEmbedder, make_embedder
from everos_reflect.embedding.base import Embedder
from everos_reflect.index import events
from everos_reflect.index.sync import Indexer
from everos_reflect.markdown import settling, writer
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings

_WORDS = (
    "andrew betty dog puppy adopted park walk weekend beach family tax return office project "
    "meeting painting sunrise lake camping guitar lesson support group friend birthday trip "
    "bakery recipe marathon training injury doctor promotion garden tomatoes book club novel "
    "sister brother concert museum hiking vacation kitchen moved apartment job interview car "
    "said planned decided visited started finished bought called shared remembered"
)
_VOCAB = _WORDS.split()


def _sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_VOCAB) for _ in range(words)).capitalize() + "."


def generate_root(root: Path, n: int, *, per_file: int, users: int, seed: int = 7) -> int:
    """Write ``n`` Episodes as daily logs (written whole: generation is not what we measure)."""
    rng = random.Random(seed)
    start = date(2024, 1, 1)
    written = 0
    file_no = 0
    while written < n:
        ref = UserRef.of(f"user_{file_no % users:04d}")
        day = start + timedelta(days=file_no // users)
        path = root / ref.app / ref.project / "users" / ref.user_id / Kind.EPISODE.folder
        path.mkdir(parents=True, exist_ok=True)
        text = writer.new_log_text(Kind.EPISODE, ref.user_id, day)
        for seq in range(1, min(per_file, n - written) + 1):
            entry_id = f"ep_{day.strftime('%Y%m%d')}_{seq:04d}"
            meta = {
                "owner_id": ref.user_id,
                "timestamp": f"{day.isoformat()}T{8 + seq % 12:02d}:00:00+00:00",
                "session_id": f"s_{file_no}_{seq}",
                "parent_type": "memcell",
                "parent_id": f"mc_{file_no}_{seq}",
            }
            sections = {
                "Subject": _sentence(rng, 5),
                "Content": " ".join(_sentence(rng, rng.randint(8, 16)) for _ in range(3)),
            }
            text = writer.append_entry(text, writer.render_entry(entry_id, meta, sections))
            written += 1
        (path / Kind.EPISODE.filename(day)).write_text(text)
        file_no += 1
    return written


class _Timed:
    """The embedder, with the CPU and wall time spent inside ``embed`` counted, so the other
    stages (parse, plan, write, recluster) get a rate of their own."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self.cpu = self.wall = 0.0

    def embed(self, texts: list[str]) -> Any:
        cpu, wall = time.process_time(), time.perf_counter()
        try:
            return self.inner.embed(texts)
        finally:
            self.cpu += time.process_time() - cpu
            self.wall += time.perf_counter() - wall


class _TimedRebuilds:
    """Times what ``reindex`` runs after the entries are written: the derived rebuilds
    (``recluster`` among them). The issue's rate is for parse + plan + write; the rebuilds get
    a figure of their own, so both are printed."""

    def __init__(self) -> None:
        self.cpu = self.wall = 0.0
        self._real = events.rebuilders

    def __enter__(self) -> _TimedRebuilds:
        def timed() -> dict[str, Any]:
            return {name: self._wrap(fn) for name, fn in self._real().items()}
        events.rebuilders = timed  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        events.rebuilders = self._real  # type: ignore[assignment]

    def _wrap(self, fn: Any) -> Any:
        def run(rt: Runtime) -> Any:
            cpu, wall = time.process_time(), time.perf_counter()
            try:
                return fn(rt)  # the paths a rebuilder wrote (provenance's stale marks)
            finally:
                self.cpu += time.process_time() - cpu
                self.wall += time.perf_counter() - wall
        return run


def raw_throughput(embedder: Embedder, texts: list[str], batch: int) -> tuple[float, float]:
    """(texts per wall second, texts per CPU second) of ``embed()`` alone, in ``batch``es.

    CPU seconds (all threads of this process) stay meaningful on a shared machine, where wall
    time also counts other people's load."""
    embedder.embed(texts[:batch])  # warm-up (model load, first-call allocations)
    wall, cpu = time.perf_counter(), time.process_time()
    for i in range(0, len(texts), batch):
        embedder.embed(texts[i : i + batch])
    return (len(texts) / (time.perf_counter() - wall),
            len(texts) / (time.process_time() - cpu))


def _first_scan(rt: Runtime, timed: _Timed, entries: int) -> None:
    """Time one ``scan()`` of a root whose index is empty (what ``serve`` starts with)."""
    indexer = Indexer(rt)
    cpu = time.process_time()
    report = indexer.scan()
    cpu = time.process_time() - cpu
    left = rt.db().execute("SELECT COUNT(*) FROM publish_note").fetchone()[0] \
        if _has_table(rt, "publish_note") else "no such table"
    rest_wall, rest_cpu = report.seconds - timed.wall, cpu - timed.cpu
    print(f"first scan:    {report.entries_upserted / report.seconds:10.1f} entries/s wall, "
          f"{report.entries_upserted / cpu:10.1f} per CPU-s ({report.entries_upserted} "
          f"entries in {report.files_seen} files, {report.seconds:.2f} s; embed took "
          f"{timed.wall:.1f} s wall)")
    print(f"without embed: {report.entries_upserted / rest_wall:10.1f} entries/s wall, "
          f"{report.entries_upserted / rest_cpu:10.1f} per CPU-s (parse + plan + write + "
          f"clustering + provenance subscribers)")
    print(f"publish_note rows left: {left} (of {entries} entries)")
    print(f"peak RSS:      {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:10.1f} MB")
    rt.close()


def _has_table(rt: Runtime, name: str) -> bool:
    return rt.db().execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?",
                           (name,)).fetchone() is not None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root_or_size", help="an existing memory root, or a number of entries")
    parser.add_argument("--embedder", choices=["local", "hash"], default="local")
    parser.add_argument("--per-file", type=int, default=10, help="entries per daily log")
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--sample", type=int, default=500,
                        help="texts for the raw local-model figure (hash: all)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary root")
    parser.add_argument("--stamped-ahead", type=float, default=0.0, metavar="S",
                        help="stamp every log S seconds ahead of this clock")
    parser.add_argument("--first-scan", action="store_true",
                        help="time the first scan of an empty index (as serve's start) only")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="everos-bench-reindex-"))
    root = tmp / "root"
    try:
        t0 = time.perf_counter()
        if args.root_or_size.isdigit():
            n = generate_root(root, int(args.root_or_size), per_file=args.per_file,
                              users=args.users)
            print(f"generated {n} episodes in {time.perf_counter() - t0:.1f} s")
        else:
            shutil.copytree(args.root_or_size, root, ignore=shutil.ignore_patterns(".index"))
            print(f"copied {args.root_or_size}")

        if args.stamped_ahead:
            ahead = time.time_ns() + int(args.stamped_ahead * 1e9)
            for log in root.rglob("*.md"):
                os.utime(log, ns=(ahead, ahead))
        settings = Settings()
        embedder = make_embedder(settings.embedding) if args.embedder == "local" \
            else HashEmbedder(settings.embedding.dimensions)
        timed = _Timed(embedder)
        rt = Runtime(root, settings, embedder=timed)  # type: ignore[arg-type]
        rt.vectors  # noqa: B018 - import LanceDB before the clock starts
        texts = [e.search_text for p in rt.store.iter_files() for e in rt.store.read(p).entries]
        files = sum(1 for _ in rt.store.iter_files())
        print(f"root: {len(texts)} entries in {files} files; embedder {embedder.name} "
              f"(dim {embedder.dim})")

        if args.first_scan:
            _first_scan(rt, timed, len(texts))
            return
        batch = settings.embedding.batch_size
        sample = texts if args.embedder == "hash" else texts[: args.sample]
        before = raw_throughput(embedder, sample, batch)

        indexer = Indexer(rt)
        timed.cpu = timed.wall = 0.0
        cpu = time.process_time()
        with _TimedRebuilds() as rebuilds:
            report = indexer.reindex()
        cpu = time.process_time() - cpu
        rest_cpu, rest_wall = cpu - timed.cpu, report.seconds - timed.wall
        after = raw_throughput(embedder, sample, batch)
        # the faster of the two raw runs: the comparison never flatters the indexer
        raw_wall, raw_cpu = max(before[0], after[0]), max(before[1], after[1])
        print(f"raw embedder:  {raw_wall:10.1f} entries/s wall, {raw_cpu:10.1f} per CPU-s "
              f"({len(sample)} texts, batch {batch}, best of before/after)")
        rate, rate_cpu = report.entries_embedded / report.seconds, report.entries_embedded / cpu
        print(f"full reindex:  {rate:10.1f} entries/s wall, {rate_cpu:10.1f} per CPU-s "
              f"({report.entries_embedded} embedded in {report.seconds:.2f} s, clusters "
              f"rebuilt) = {rate / raw_wall:.0%} wall, {rate_cpu / raw_cpu:.0%} CPU of raw "
              f"(target >= 80%)")

        print(f"without embed: {report.entries_embedded / rest_wall:10.1f} entries/s wall, "
              f"{report.entries_embedded / rest_cpu:10.1f} per CPU-s (parse + plan + write + "
              f"recluster; embed took {timed.wall:.1f} s wall, {timed.cpu:.1f} CPU-s; "
              f"target >= 5000/s)")
        written = report.entries_embedded
        print(f"parse + plan + write: {written / (rest_wall - rebuilds.wall):10.1f} entries/s "
              f"wall, {written / (rest_cpu - rebuilds.cpu):10.1f} per CPU-s (the line above "
              f"without the rebuilds after it: recluster etc. took {rebuilds.wall:.1f} s wall, "
              f"{rebuilds.cpu:.1f} CPU-s = {written / rebuilds.cpu:.0f} entries per CPU-s; "
              f"target >= 5000/s)")
        labels = ["unchanged scan #1", "unchanged scan #2"]
        if args.stamped_ahead:
            labels += ["after the racy window #3", "after the racy window #4"]
        for label in labels:
            if label.endswith("#3"):
                time.sleep(settling.JUST_WRITTEN_NS / 1e9)
            scan = indexer.scan()
            changed = scan.entries_upserted + scan.entries_deleted
            print(f"{label}: {scan.seconds * 1000:8.1f} ms = "
                  f"{scan.seconds / report.seconds:.3%} of reindex (target < 1%), "
                  f"{scan.files_seen} files stat'ed, {scan.files_synced} files re-read, "
                  f"{changed} entries changed")

        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"peak RSS:      {peak_mb:10.1f} MB")
        rt.close()
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
