"""Memory, speed and vectors of the bundled embedder: this tree's code against an earlier commit's.

Each side runs in its own fresh process (so neither inherits the other's heap) and embeds the
same real text — LoCoMo Episodes (long: most are cut at 256 tokens) and atomic facts (short) —
in the order ``reindex`` does. Reported per side: resident memory after loading the model,
the high-water mark (``VmHWM``) over the embedding, resident memory right after, CPU and wall
seconds; then the cosine between the two sides' vectors for every text (the change must not
move them: min ≥ 0.999).

    python bench/embed_memory.py /path/to/locomo10.json [--before REV] [--episodes 544]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import locomo_episodes as lm
import locomo_root

REPO = Path(__file__).resolve().parents[1]
MODULE = "everos_reflect/embedding/local.py"


def texts(data_path: Path, episodes: int) -> list[str]:
    data = lm.load(data_path)
    eps = lm.episodes(data)[:episodes]
    wanted = {(e.sample_id, e.session, e.speaker) for e in eps}
    facts = [f for key, values in locomo_root.observations(data).items() if key in wanted
             for f in values]
    return [e.text for e in eps] + [getattr(f, "text", f) for f in facts]


def status() -> dict[str, float]:
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(rest.split()[0]) / 1024
    return out


def load_module(rev: str) -> Any:
    """``embedding/local.py`` as in this tree (``rev == "tree"``) or at commit ``rev``."""
    if rev == "tree":
        path = REPO / MODULE
    else:
        source = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:{MODULE}"],
                                capture_output=True, text=True, check=True).stdout
        path = Path(tempfile.mkdtemp(prefix="everos-embed-")) / "local_before.py"
        path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"embed_{rev}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def child(rev: str, data_path: Path, episodes: int, out: Path) -> dict[str, Any]:
    items = texts(data_path, episodes)
    module = load_module(rev)
    embedder = module.LocalEmbedder()  # the defaults reindex uses
    embedder.load()
    loaded = status()
    cpu, wall = time.process_time(), time.perf_counter()
    vectors = np.concatenate([embedder.embed(items[i:i + 256])  # the indexer's batch
                              for i in range(0, len(items), 256)])
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    after = status()
    np.save(out, vectors)
    return {"rev": rev, "texts": len(items), "rss_loaded_mb": round(loaded["VmRSS"]),
            "peak_mb": round(after["VmHWM"]), "rss_after_mb": round(after["VmRSS"]),
            "cpu_s": round(cpu, 2), "wall_s": round(wall, 2)}


def run_child(rev: str, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    cmd = [sys.executable, __file__, str(args.data_path), "--child", rev, "--episodes",
           str(args.episodes), "--vectors", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False,
                          env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    if proc.returncode != 0:
        raise SystemExit(f"{rev} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_path", type=Path)
    parser.add_argument("--before", default="aa9a419",
                        help="commit whose embedder is the baseline (default: before issue 15's "
                             "arena fix)")
    parser.add_argument("--episodes", type=int, default=544)
    parser.add_argument("--out", type=Path, help="write the Markdown table here too")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--vectors", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.data_path, args.episodes, args.vectors)))
        return 0

    with tempfile.TemporaryDirectory(prefix="everos-embed-mem-") as tmp:
        rows = []
        for rev in (args.before, "tree"):
            rows.append(run_child(rev, args, Path(tmp) / f"{rev}.npy"))
            print(rows[-1], flush=True)
        before, now = (np.load(Path(tmp) / f"{r}.npy") for r in (args.before, "tree"))
    cos = (before * now).sum(axis=1)
    lines = [
        "# Embedder memory and speed, before/after",
        "",
        f"`python bench/embed_memory.py locomo10.json --before {args.before} --episodes "
        f"{args.episodes}`: {rows[0]['texts']} LoCoMo texts (Episodes, then their atomic "
        "facts), each side in a fresh process, default `[embedding]` settings.",
        "",
        "| code | RSS after load MB | peak MB | RSS after MB | CPU s | wall s |",
        "|---|---:|---:|---:|---:|---:|",
        *(f"| {r['rev']} | {r['rss_loaded_mb']} | {r['peak_mb']} | {r['rss_after_mb']} | "
          f"{r['cpu_s']} | {r['wall_s']} |" for r in rows),
        "",
        f"Cosine between the two sides' vectors: min {cos.min():.6f}, mean {cos.mean():.6f} "
        f"(target: min ≥ 0.999).",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    return 0 if cos.min() >= 0.999 else 1


if __name__ == "__main__":
    sys.exit(main())
