"""What a briefing pays to cut a long narrative by its parts (briefing/narrative.py,
``pack.cut_parts``): a generated narrative of ``--lines`` dated lines and a current state,
cut to ``--cap`` tokens. Prints the seconds of each step (best of ``--repeat``) and what the
cut kept. Compare two checkouts by running it under each one's tree:

    PYTHONPATH=TREE python bench/narrative_cut_cost.py --lines 20000 --cap 10000
"""

from __future__ import annotations

import argparse
import time

from everos_reflect.briefing.narrative import narrative_parts
from everos_reflect.briefing.pack import cut_parts
from everos_reflect.briefing.tokens import default_counter


def narrative(lines: int) -> str:
    days = "\n".join(f"2026-01-{1 + i % 28:02d}: Andrew fed dog number {i} today."
                     for i in range(lines))
    return f"{days}\n\nCurrent state: Andrew has many dogs."


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=5000)
    parser.add_argument("--cap", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    counter = default_counter()
    content = narrative(args.lines)
    best_parts = best_cut = float("inf")
    for _ in range(args.repeat):
        started = time.perf_counter()
        parts = ((-1, "Dogs:"), *narrative_parts(content, "dogs"))
        middle = time.perf_counter()
        text = cut_parts(parts, args.cap, counter)
        ended = time.perf_counter()
        best_parts, best_cut = min(best_parts, middle - started), min(best_cut, ended - middle)
    print(f"{args.lines} lines ({len(content.encode()):,} bytes), cap {args.cap} tokens: "
          f"narrative_parts {best_parts:.3f} s, cut_parts {best_cut:.3f} s (best of "
          f"{args.repeat}); the cut holds {counter.count(text)} tokens, "
          f"{text.count(' today.')} days and the current state: "
          f"{text.endswith('Current state: Andrew has many dogs.')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
