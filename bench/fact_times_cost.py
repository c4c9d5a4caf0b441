"""What dating a narrative's facts costs a merge (``strategies/consolidate.py`` ``said_when``):
a generated narrative of ``--sentences`` dated sentences and one fact per sentence, each with
its subject reworded (as the offline fact extraction resolves a pronoun), so no fact is its
sentence word for word. Prints the seconds (best of ``--repeat``) and how many facts took the
day of their own line. Compare two checkouts by running it under each one's tree:

    PYTHONPATH=TREE python bench/fact_times_cost.py --sentences 3000
"""

from __future__ import annotations

import argparse
import time
from datetime import datetime

from everos_reflect.strategies.consolidate import said_when


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    lines = [f"2026-01-{1 + n % 28:02d}: Andrew fed dog number {n + 10} in the park today."
             for n in range(args.sentences)]
    facts = [line.split(": ", 1)[1].replace("Andrew", "He") for line in lines]
    content = "\n".join(lines)
    latest = datetime.fromisoformat("2026-02-01T00:00:00+00:00")
    best = float("inf")
    for _ in range(args.repeat):
        started = time.perf_counter()
        got = said_when(facts, content, [], latest)
        best = min(best, time.perf_counter() - started)
    right = sum(t.day == 1 + n % 28 for n, t in enumerate(got))
    print(f"{args.sentences} sentences and facts ({len(content.encode()):,} bytes): said_when "
          f"{best:.3f} s (best of {args.repeat}); {right} of {len(facts)} facts dated by "
          "their own line")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
