"""Stack sampler for ``bench/add_during_reflect.py --sample`` (loaded into ``serve`` through
``PYTHONPATH``; does nothing unless ``EVEROS_BENCH_SAMPLES`` names a file).

Every 10 ms, for each thread answering an add (a frame of ``index_written`` or ``add_episode``
on its stack), counts where it is: the innermost frame, then the three innermost frames of
the product's own code. Written as JSON to that file when the process
exits (``serve`` ends on SIGTERM through its own shutdown)."""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
import time
from collections import Counter
from pathlib import Path

_OUT = os.environ.get("EVEROS_BENCH_SAMPLES")


def _where(frame) -> str | None:  # type: ignore[no-untyped-def]
    names = []
    adding = False
    while frame is not None:
        code = frame.f_code
        names.append((code.co_filename, code.co_name, frame.f_lineno))
        if code.co_name in ("index_written", "add_episode"):
            adding = True
        frame = frame.f_back
    if not adding:
        return None
    own = [n for n in names if "everos_reflect" in n[0]][:3]
    shown = [f"{os.path.basename(n[0])}:{n[1]}:{n[2]}" for n in own]
    if names[0] not in own:
        shown.insert(0, f"{os.path.basename(names[0][0])}:{names[0][1]}")
    return " <- ".join(shown)


def _run(counts: Counter[str]) -> None:
    me = threading.get_ident()
    while True:
        time.sleep(0.01)
        for ident, frame in sys._current_frames().items():
            if ident != me and (where := _where(frame)) is not None:
                counts[where] += 1


if _OUT:
    _counts: Counter[str] = Counter()
    threading.Thread(target=_run, args=(_counts,), daemon=True, name="bench-sampler").start()
    atexit.register(lambda: Path(_OUT).write_text(json.dumps(_counts.most_common(40))))
