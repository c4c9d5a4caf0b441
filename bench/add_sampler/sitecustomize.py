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
    adding = committing = False
    while frame is not None:
        code = frame.f_code
        names.append((code.co_filename, code.co_name, frame.f_lineno))
        if code.co_name in ("index_written", "add_episode"):
            adding = True
        if code.co_name == "sync_paths":
            committing = True
        frame = frame.f_back
    if not (adding or committing):
        return None
    own = [n for n in names if "everos_reflect" in n[0]][:3]
    if committing and not adding:  # a Reflection commit's (or the watcher's) sync: its step
        steps = [n for n in names if n[1] in _STEPS][:1]
        at = next(k for k, n in enumerate(names) if n[1] == "sync_paths")
        caller = names[at + 1: at + 2]  # who syncs: the watcher, a Reflection commit
        own = caller + steps + [n for n in own if n not in steps][:2]
    shown = [f"{os.path.basename(n[0])}:{n[1]}:{n[2]}" for n in own]
    if names[0] not in own:
        shown.insert(0, f"{os.path.basename(names[0][0])}:{names[0][1]}")
    return ("" if adding else "[sync_paths] ") + " <- ".join(shown)


#: The steps of an indexer sync, named in a ``sync_paths`` thread's samples.
_STEPS = frozenset({"_prepare_once", "_settled", "_embed_current", "_write_vectors",
                    "_write_sqlite", "_publish", "_replay", "_sync_written", "acquire"})


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
    atexit.register(lambda: Path(_OUT).write_text(json.dumps(_counts.most_common(120))))
