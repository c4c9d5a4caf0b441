"""Time of ``undo`` for one Reflection merge of N sources, each on a day (a log) of its own.

An undo restores the sources and archives the narrative, then re-indexes the logs it
patched. It synced them one log at a time (a LanceDB version each); session 40 made it two
batches (the sources' logs, then the narrative's). Hash embedder and extractive provider: the
figure is the index work an undo does, not a model's. Run it from two checkouts in turn to
compare (``PYTHONPATH=/path/to/tree python bench/undo_speed.py 150``).

    python bench/undo_speed.py 50 150
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

from everos_reflect.embedding import HashEmbedder
from everos_reflect.engine.registry import RunContext, validate_strategy_settings
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import ClusteringSettings, Settings
from everos_reflect.strategies.reflect import NAME, ReflectEpisodes
from everos_reflect.strategies.undo import undo_merge

REF = UserRef.of("u_bench")


def one(n: int) -> tuple[float, float, int]:
    """(merge seconds, undo seconds, sources restored) for a merge of ``n`` sources."""
    root = Path(tempfile.mkdtemp(prefix="everos-undo-"))
    # threshold 0 and a window longer than the history: the n Episodes are one cluster
    clustering = ClusteringSettings(threshold=0.0, time_window_days=10 * n + 10,
                                    rejoin_threshold=0.0, member_threshold=0.0)
    rt = Runtime(root, Settings(clustering=clustering), embedder=HashEmbedder(64),
                 llm=ExtractiveLLM())
    try:
        start = date(2025, 1, 1)
        for i in range(n):
            day = start + timedelta(days=i)
            meta = {"timestamp": f"{day}T10:00:00+00:00", "parent_type": "memcell"}
            text = f"Walked the dogs on day {i}."
            episode = rt.store.append(REF, Kind.EPISODE, meta,
                                      {"Subject": "Dogs", "Content": text}, day=day)
            rt.store.append(REF, Kind.ATOMIC_FACT,
                            {**meta, "parent_type": "episode", "parent_id": episode.id},
                            {"Fact": text}, day=day)
        Indexer(rt).scan()
        settings = validate_strategy_settings(
            NAME, {"max_sources_per_merge": n, "min_fact_coverage": 0}, "ome.toml")
        started = time.perf_counter()
        ReflectEpisodes().run(RunContext(rt, settings, "run_bench", "manual", force=True))
        merge_s = time.perf_counter() - started
        (narrative,) = [e for e in rt.store.entries(REF, Kind.EPISODE)
                        if e.parent_type == "cluster"]
        started = time.perf_counter()
        result = undo_merge(rt, REF, narrative.id)
        return merge_s, time.perf_counter() - started, len(result.restored)
    finally:
        rt.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sources", type=int, nargs="+", help="sources per merge, e.g. 50 150")
    for n in parser.parse_args().sources:
        merge_s, undo_s, restored = one(n)
        print(f"{n} sources ({restored} restored): merge {merge_s:.1f} s, undo {undo_s:.1f} s")


if __name__ == "__main__":
    main()
