"""What the ``_NAMED_ELSEWHERE`` probe costs on the clustering bench's streams (ed19204e: an
Episode founds no cluster id another user's live narrative names, one indexed look-up per new
cluster): ``bench_clustering.py`` run as shipped, the probe's calls counted and timed, or with
the probe answering False without a query (``--off``: the clusters of a root where no
narrative names another user's id, the time without the probe). Compare the two runs'
"per assignment" figures against their spread from one run to the next.

    nice -n 10 .venv/bin/python bench/named_probe_cost.py [--off] LOCOMO_JSON --scales \
        --consolidate-days 0 --vectors-cache v.npy --repeat 7
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_clustering

from everos_reflect.clustering import service


def main(argv: list[str]) -> int:
    off = "--off" in argv
    argv = [a for a in argv if a != "--off"]
    shipped = service._Write.named_elsewhere
    calls, cpu_ns = [0], [0]

    def probe(self: Any, ref: Any, cluster_id: str) -> bool:
        calls[0] += 1
        if off:
            return False
        started = time.process_time_ns()
        try:
            return shipped(self, ref, cluster_id)
        finally:
            cpu_ns[0] += time.process_time_ns() - started

    service._Write.named_elsewhere = probe  # type: ignore[method-assign]
    code = bench_clustering.main(argv)
    print(f"\nprobe {'off' if off else 'on'}: {calls[0]:,} calls in the whole bench"
          + ("" if off else f", {cpu_ns[0] / 1e3:,.0f} CPU-µs in all, "
             f"{cpu_ns[0] / max(calls[0], 1) / 1e3:.2f} CPU-µs per call"))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
