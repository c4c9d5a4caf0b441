"""Search latency at 10k and 100k entries: hybrid / vector / keyword vs the bare LanceDB query.

    python bench/bench_search.py [--sizes 10000,100000] [--real 1000] [--queries 200]
                                 [--locomo PATH] [--users 50]

The first ``--real`` entries are LoCoMo turns (or synthetic sentences) embedded with the real
ONNX model; the bulk are synthetic sentences with random unit vectors (embedding 100k texts on
2 cores would take most of an hour and does not change search cost). Queries are real sentences
embedded once up front, so the per-mode figures measure the index; the embedder's own per-query
latency is printed separately (a real search pays both). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from everos_reflect.embedding.base import l2_normalize
from everos_reflect.embedding.local import LocalEmbedder
from everos_reflect.index.filters import where_clause
from everos_reflect.index.search import search
from everos_reflect.model import Kind
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings

_VOCAB = (
    "andrew betty dog puppy adopted park walk weekend beach family tax return office project "
    "meeting painting sunrise lake camping guitar lesson support group friend birthday trip "
    "bakery recipe marathon training injury doctor promotion garden tomatoes book club novel "
    "sister brother concert museum hiking vacation kitchen moved apartment job interview car"
)
WORDS = _VOCAB.split()


class CachedQueries:
    """Looks like an embedder; answers from vectors computed before timing starts."""

    def __init__(self, real: LocalEmbedder, queries: list[str]) -> None:
        self.name, self.dim = real.name, real.dim
        self._cache = dict(zip(queries, real.embed(queries), strict=True))

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.stack([self._cache[t] for t in texts])


def sentences(locomo: Path | None, n: int, seed: int) -> list[str]:
    if locomo is not None:
        out: list[str] = []
        for sample in json.loads(locomo.read_text()):
            for key, value in sample["conversation"].items():
                if key.startswith("session_") and isinstance(value, list):
                    out.extend(t["text"] for t in value if t.get("text"))
        random.Random(seed).shuffle(out)
        if len(out) >= n:
            return out[:n]
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(8, 40))) for _ in range(n)]


def rows_for(
    texts: list[str], vectors: np.ndarray, start: int, users: int, model: str
) -> list[dict[str, Any]]:
    rng = random.Random(start)
    out = []
    for n, (text, vector) in enumerate(zip(texts, vectors, strict=True), start=start):
        day = 20250101 + n % 28
        out.append(
            {
                "id": f"ep_{day}_{n:06d}",
                "app_id": "default_app",
                "project_id": "default_project",
                "user_id": f"u{rng.randrange(users):03d}",
                "ts": 1_735_689_600.0 + n * 60,
                "timestamp": "2025-01-01T00:00:00+00:00",
                "subject": " ".join(text.split()[:4]),
                "text": text,
                "parent_type": "memcell",
                "parent_id": f"mc_{n}",
                "session_id": f"s{n // 20}",
                "deprecated_by": "ep_20250201_0001" if n % 10 == 0 else None,
                "embed_model": model,
                "vector": vector,
            }
        )
    return out


def percentiles(fn: Callable[[], object], runs: int) -> tuple[float, float]:
    fn()  # warm caches
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return times[len(times) // 2], times[min(len(times) - 1, int(len(times) * 0.95))]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_size(
    size: int, args: argparse.Namespace, real: LocalEmbedder, real_rows: list[dict[str, Any]]
) -> None:
    root = Path(tempfile.mkdtemp(prefix="everos-bench-"))
    try:
        queries = sentences(args.locomo, args.queries, seed=99)
        embedder = CachedQueries(real, queries)
        rt = Runtime(root, Settings(), embedder=embedder)
        index = rt.vectors

        started = time.perf_counter()
        base = real_rows[: min(len(real_rows), size)]
        index.upsert(Kind.EPISODE, base)
        rng = np.random.default_rng(size)
        chunk = 10_000
        for start in range(len(base), size, chunk):
            n = min(chunk, size - start)
            texts = sentences(None, n, seed=start)
            vectors = l2_normalize(rng.standard_normal((n, real.dim)).astype(np.float32))
            index.upsert(Kind.EPISODE, rows_for(texts, vectors, start, args.users, real.name))
        load_s = time.perf_counter() - started
        started = time.perf_counter()
        index.optimize()
        optimize_s = time.perf_counter() - started
        indices = sorted(ix.name for ix in index._table(Kind.EPISODE).list_indices())

        print(
            f"\n== {size:,} entries ({len(base):,} real-embedded, {size - len(base):,} random "
            f"unit vectors), {args.users} users"
        )
        print(f"load {load_s:.1f} s, optimize {optimize_s:.1f} s, indexes: {', '.join(indices)}")

        table = index._table(Kind.EPISODE)
        qs = iter(queries * 1000)
        user = "u007"
        bare_where = where_clause(user_id=user, include_deprecated=False)
        cases: list[tuple[str, Callable[[], object]]] = [
            (
                "bare LanceDB vector (no filter)",
                lambda: table.search(embedder.embed([next(qs)])[0]).limit(5).to_list(),
            ),
            (
                "bare LanceDB vector (user filter)",
                lambda: (
                    table.search(embedder.embed([next(qs)])[0])
                    .where(bare_where, prefilter=True)
                    .limit(5)
                    .to_list()
                ),
            ),
        ]
        for mode in ("vector", "keyword", "hybrid"):
            cases.append((f"search {mode} (all users)", _searcher(rt, qs, mode, None)))
            cases.append((f"search {mode} (one user)", _searcher(rt, qs, mode, user)))
        for label, fn in cases:
            p50, p95 = percentiles(fn, args.queries)
            print(f"  {label:<36} p50 {p50:6.1f} ms   p95 {p95:6.1f} ms")
        print(f"peak RSS so far {peak_rss_mb():.0f} MB")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _searcher(rt: Runtime, qs: Any, mode: str, user: str | None) -> Callable[[], object]:
    return lambda: search(rt, next(qs), top_k=5, mode=mode, user_id=user)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--real", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--locomo", type=Path)
    args = parser.parse_args()

    real = LocalEmbedder(batch_size=32)
    texts = sentences(args.locomo, args.real, seed=1)
    started = time.perf_counter()
    vectors = real.embed(texts)
    embed_s = time.perf_counter() - started
    real_rows = rows_for(texts, vectors, 0, args.users, real.name)
    lat = [percentiles(lambda t=t: real.embed([t]), 1)[0] for t in texts[:50]]
    lat.sort()
    print(
        f"embedder {real.name}: {len(texts) / embed_s:.1f} sentences/s; "
        f"query embedding p50 {lat[len(lat) // 2]:.1f} ms, p95 {lat[int(len(lat) * 0.95)]:.1f} ms"
        " (add to the search figures below for an end-to-end query)"
    )
    for size in (int(s) for s in args.sizes.split(",")):
        run_size(size, args, real, real_rows)
    print(f"\npeak RSS {peak_rss_mb():.0f} MB")


if __name__ == "__main__":
    main()
