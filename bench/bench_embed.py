"""Raw throughput of the bundled embedder: sentences/s at batch 32, single-sentence latency.

    python bench/bench_embed.py [--n 2000] [--threads 0] [--locomo PATH]

Sentences come from LoCoMo turns when ``--locomo`` is given (realistic lengths), else from a
synthetic generator. Prints figures; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import time
from pathlib import Path

from everos_reflect.embedding.local import LocalEmbedder

_VOCAB = (
    "andrew betty dog puppy adopted park walk weekend beach family tax return office project "
    "meeting painting sunrise lake camping guitar lesson support group friend birthday trip "
    "bakery recipe marathon training injury doctor promotion garden tomatoes book club novel"
)
WORDS = _VOCAB.split()


def locomo_sentences(path: Path, n: int) -> list[str]:
    data = json.loads(path.read_text())
    out: list[str] = []
    for sample in data:
        for key, value in sample["conversation"].items():
            if key.startswith("session_") and isinstance(value, list):
                out.extend(turn["text"] for turn in value if turn.get("text"))
    random.Random(0).shuffle(out)
    return out[:n]


def synthetic_sentences(n: int) -> list[str]:
    rng = random.Random(0)
    return [" ".join(rng.choices(WORDS, k=rng.randint(8, 40))) for _ in range(n)]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--locomo", type=Path)
    args = parser.parse_args()

    texts = locomo_sentences(args.locomo, args.n) if args.locomo else synthetic_sentences(args.n)
    source = f"LoCoMo turns ({args.locomo.name})" if args.locomo else "synthetic sentences"
    embedder = LocalEmbedder(batch_size=32, threads=args.threads)

    started = time.perf_counter()
    embedder.load()
    load_s = time.perf_counter() - started
    embedder.embed(texts[:32])  # warm-up

    started = time.perf_counter()
    embedder.embed(texts)
    bulk_s = time.perf_counter() - started

    latencies = []
    for text in texts[:200]:
        t0 = time.perf_counter()
        embedder.embed([text])
        latencies.append((time.perf_counter() - t0) * 1000)
    latencies.sort()

    words = statistics.mean(len(t.split()) for t in texts)
    print(f"embedder            {embedder.name} (threads={args.threads or 'auto'})")
    print(f"input               {len(texts)} {source}, mean {words:.1f} words")
    print(f"model load          {load_s * 1000:.0f} ms (incl. sha256 checks)")
    print(f"throughput (b=32)   {len(texts) / bulk_s:.1f} sentences/s")
    print(
        f"single sentence     p50 {latencies[len(latencies) // 2]:.1f} ms, "
        f"p95 {latencies[int(len(latencies) * 0.95)]:.1f} ms"
    )
    print(f"peak RSS            {peak_rss_mb():.0f} MB")


if __name__ == "__main__":
    main()
