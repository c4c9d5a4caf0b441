"""What the reconcile scan after a ``cp -al`` backup (or a ``chmod``/``chown`` of every log)
costs: each log's ctime moved, nothing else did.

    python bench/ctime_rescan.py [LOGS] [--users N] [--repeat R]   # default 3,650 logs, 1 user

Builds a temporary root of LOGS episode logs (one Episode each, spread over ``--users``
users), indexes it, then times: a scan of the unchanged root; the scan after every log's
ctime moved (``cp -al`` of the root beside it: one more link; or ``chmod`` to the same mode);
and the scan after that (nothing moved). Prints the times (wall and this process's CPU: the
CPU figure says more on a loaded machine) and how many logs each scan read again. Asserts
nothing. Run it from two checkouts in turn to compare
(``PYTHONPATH=/path/to/tree python bench/ctime_rescan.py``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

from everos_reflect.embedding import HashEmbedder
from everos_reflect.index.sync import Indexer, ScanReport
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings

FIRST = date(2016, 1, 1)


def _scan(rt: Runtime, label: str, repeat: int) -> None:
    best, cpu, report = float("inf"), float("inf"), ScanReport()
    for _ in range(repeat):
        started, used = time.perf_counter(), time.process_time()
        report = Indexer(rt).scan()
        best = min(best, time.perf_counter() - started)
        cpu = min(cpu, time.process_time() - used)
    print(f"{label}: {best * 1000:,.1f} ms wall, {cpu * 1000:,.1f} ms CPU (logs read again: "
          f"{report.files_synced}, unchanged bytes: {report.files_unchanged}, upserted: "
          f"{report.entries_upserted})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", nargs="?", type=int, default=3650)
    parser.add_argument("--users", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="everos-ctime-"))
    try:
        rt = Runtime(base / "root", Settings(), embedder=HashEmbedder(16))
        refs = [UserRef.of(f"u{n}") for n in range(args.users)]
        for n in range(args.logs):
            day = FIRST + timedelta(days=n // args.users)
            ref = refs[n % args.users]
            rt.store.append(ref, Kind.EPISODE, {"timestamp": f"{day}T09:00:00+00:00",
                                                "parent_type": "memcell"},
                            {"Subject": "Day", "Content": f"{ref.user_id} on day {n}."},
                            day=day)
        print(f"{args.logs:,} logs, {args.users} user(s)")
        Indexer(rt).scan()
        time.sleep(2.2)  # past the racy window: the next scans find every log still
        Indexer(rt).scan()
        _scan(rt, "scan, nothing moved", args.repeat)
        logs = sorted((base / "root").rglob("episode-*.md"))

        subprocess.run(["cp", "-al", str(base / "root"), str(base / "backup")], check=True)
        _scan(rt, "first scan after cp -al (every ctime moved)", 1)
        _scan(rt, "scan after that", args.repeat)

        for path in logs:
            os.chmod(path, os.stat(path).st_mode)
        _scan(rt, "first scan after a chmod of every log", 1)
        _scan(rt, "scan after that", args.repeat)
        rt.close()
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
