"""What the look-ups each owner's call makes once cost, asked per owner as the service asks
them or for every owner of a batch in one statement (issue 15: would batching them across
the owners of one index flush pay?).

Places the first 300 Episodes of the LoCoMo stream (``bench_clustering.py``) as an index
flush does, then times, on that ``system.db``, the statements the next batch of 256 would
run before any is placed: the membership look-up (``ClusterService._member_rows``: an IN
list padded to a power of two, one statement per owner) and the narratives check
(``_Write.named_elsewhere_of``), each per owner, and the membership look-up of every owner
at once (row values against a ``VALUES`` list, and a ``json_each`` join on the primary
key). CPU-µs per owner (the least and the median of ``--repeat`` timings, each over every
owner of the batch).

    python bench/owner_lookup_cost.py LOCOMO_JSON --vectors-cache vecs.npy
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_clustering as bc

from everos_reflect.clustering import service as svcmod
from everos_reflect.clustering.online import cluster_id_for
from everos_reflect.model import UserRef
from everos_reflect.settings import Settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("locomo")
    parser.add_argument("--vectors-cache", type=Path)
    parser.add_argument("--placed", type=int, default=300, help="Episodes placed first")
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args(argv)
    settings = Settings()
    settings = replace(settings, clustering=replace(settings.clustering, member_threshold=0.0))
    items, _ = bc.locomo_stream(args.locomo, args.vectors_cache)
    entries = bc._entries(items)
    with tempfile.TemporaryDirectory() as tmp:
        rt = bc._Runtime(Path(tmp), settings)
        svc = svcmod.ClusterService(rt)  # type: ignore[arg-type]
        refs = {o: UserRef.of(o) for o in {it.owner for it in items}}
        for it in items:
            rt.vectors.data[(refs[it.owner], it.eid)] = it.vector
        bc._index_rows(rt.db(), items, refs)
        placed = items[:args.placed]
        for start in range(0, len(placed), bc.BATCH):
            chunk = placed[start:start + bc.BATCH]
            bc.place_chunk(svc, chunk, bc.by_owner_of(chunk), refs, entries, lone=False)
        conn = rt.db()
        batch = bc.by_owner_of(items[args.placed:args.placed + bc.BATCH])
        owners = [(refs[o], [i.eid for i in owned]) for o, owned in batch.items()]
        print(f"{len(owners)} owners, {sum(len(ids) for _, ids in owners)} Episodes in the "
              f"batch, {args.placed} placed before it")

        def timed(label: str, work: Callable[[], object]) -> None:
            figures = []
            for _ in range(args.repeat):
                t0 = time.process_time_ns()
                work()
                figures.append((time.process_time_ns() - t0) / len(owners) / 1000)
            print(f"  {label}: least {min(figures):.1f}, median "
                  f"{statistics.median(figures):.1f} CPU-µs per owner")

        def padded(ref: UserRef, ids: list[str]) -> tuple[int, tuple[str, ...]]:
            size = 1 << (len(ids) - 1).bit_length()
            return size, (ref.app, ref.project, ref.user_id, *ids,
                          *[ids[-1]] * (size - len(ids)))

        def members_per_owner() -> None:
            for ref, ids in owners:
                size, params = padded(ref, ids)
                conn.execute(svcmod._MEMBERS_IN[size], params).fetchall()

        own = {ref: [cluster_id_for(ref.app, ref.project, ref.user_id, i) for i in ids]
               for ref, ids in owners}

        def named_per_owner() -> None:
            for ref, _ in owners:
                size, params = padded(ref, own[ref])
                conn.execute(svcmod._NAMED_ELSEWHERE_IN[size], params).fetchall()

        keys = [(ref.app, ref.project, ref.user_id, i) for ref, ids in owners for i in ids]
        size = 1 << (len(keys) - 1).bit_length()
        values = ("SELECT * FROM cluster_members WHERE (app_id, project_id, user_id, entry_id)"
                  " IN (VALUES " + ",".join(["(?,?,?,?)"] * size) + ")")
        flat = [x for key in keys + [keys[-1]] * (size - len(keys)) for x in key]
        each = ("SELECT m.* FROM json_each(?) j JOIN cluster_members m ON "
                "m.app_id = j.value->>0 AND m.project_id = j.value->>1 AND "
                "m.user_id = j.value->>2 AND m.entry_id = j.value->>3")
        text = json.dumps(keys)
        timed("membership look-up, one statement per owner (as the service)",
              members_per_owner)
        timed("narratives check, one statement per owner (as the service)", named_per_owner)
        timed("membership look-up of every owner in one statement, row values IN (VALUES …)",
              lambda: conn.execute(values, flat).fetchall())
        timed("membership look-up of every owner in one statement, json_each join",
              lambda: conn.execute(each, (text,)).fetchall())
    return 0


if __name__ == "__main__":
    sys.exit(main())
