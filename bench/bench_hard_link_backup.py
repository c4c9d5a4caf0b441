"""What a hard-link backup beside the root (``cp -al``, rsnapshot) costs reads and writes.

    python bench/bench_hard_link_backup.py [USERS] [DAYS]     # default 300 users x 20 days

Every log of a backed-up root has a second link, and a log with one must be looked for under
the root's other names (another user's, day's or kind's log that is the same file). Builds a
temporary root of USERS x DAYS episode logs, then prints the time of a ``reindex`` alone and
beside a ``cp -al`` copy, of one write to each user's first log (the first after the backup:
it still has the second link) and of one more (it has one link again), and how many listings
of the root the store made. Prints figures; asserts nothing.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path

from everos_reflect.embedding import HashEmbedder
from everos_reflect.index.sync import Indexer
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings

FIRST = date(2026, 1, 1)


def _timed(label: str, work: Callable[[], object]) -> None:
    started = time.perf_counter()
    work()
    print(f"{label}: {time.perf_counter() - started:.3f} s")


def main() -> None:
    users = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    days = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    base = Path(tempfile.mkdtemp())
    try:
        rt = Runtime(base / "root", Settings(), embedder=HashEmbedder(16))
        refs = [UserRef.of(f"u{n}") for n in range(users)]
        for ref in refs:
            for n in range(days):
                day = FIRST + timedelta(days=n)
                rt.store.append(ref, Kind.EPISODE, {"timestamp": f"{day}T09:00:00+00:00",
                                                    "parent_type": "memcell"},
                                {"Subject": "Day", "Content": f"{ref.user_id} {n}"}, day=day)
        print(f"{users} users x {days} days = {users * days:,} logs")
        _timed("reindex, no backup", lambda: Indexer(rt).reindex())
        subprocess.run(["cp", "-al", str(base / "root"), str(base / "backup")], check=True)
        time.sleep(2.5)  # past the filesystem's timestamp granularity: the listing is kept
        _timed("reindex beside a cp -al backup", lambda: Indexer(rt).reindex())

        def write_each() -> None:
            for ref in refs:
                rt.store.append(ref, Kind.EPISODE, {"timestamp": f"{FIRST}T10:00:00+00:00"},
                                {"Subject": "More", "Content": "later"}, day=FIRST)

        _timed(f"{users} writes, first after the backup", write_each)
        _timed(f"{users} writes, again", write_each)
        print(f"listings of the root made: {rt.store._same_files.listings}")
        rt.close()
    finally:
        shutil.rmtree(base)


if __name__ == "__main__":
    main()
