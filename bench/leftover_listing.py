"""What looking for killed writes' temp files costs each write of a daily log, in a folder of
N logs (``store._remove_leftovers``, called under the log's lock before every write).

It listed the log's folder at every write: 3,650 logs in a folder (ten years of one user's
Episodes) cost ~1.4 ms a write. Session 41 lists a folder at most once a minute (and again
once a scan saw a temp file there). Run it from two checkouts in turn to compare
(``PYTHONPATH=/path/to/tree python bench/leftover_listing.py``).

    python bench/leftover_listing.py 365 3650 --writes 2000
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

from everos_reflect.markdown import store


def per_write(n: int, writes: int) -> float:
    """Seconds per look for leftovers before a write of one log among ``n``."""
    folder = Path(tempfile.mkdtemp(prefix="everos-leftovers-")) / "episodes"
    folder.mkdir()
    first = date(2016, 1, 1)
    for day in range(n):
        (folder / f"episode-{first + timedelta(days=day)}.md").write_bytes(b"")
    path = folder / f"episode-{first + timedelta(days=n - 1)}.md"
    store._remove_leftovers(path)  # the first write of the process, as every one was
    started = time.perf_counter()
    for _ in range(writes):
        store._remove_leftovers(path)
    return (time.perf_counter() - started) / writes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", nargs="*", type=int, default=[3650])
    parser.add_argument("--writes", type=int, default=2000)
    args = parser.parse_args()
    for n in args.logs:
        print(f"{n:,} logs in the folder: {per_write(n, args.writes) * 1e6:,.1f} µs a write")


if __name__ == "__main__":
    main()
