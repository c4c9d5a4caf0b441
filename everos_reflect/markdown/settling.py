"""When a daily log may still be in someone else's hands: the one rule the store's writes and
the index's sync share.

An editor saving in place, ``cp backup.md`` over a log, a ``git checkout``: the file is
truncated, then written again, its parts back to back. Whoever reads it in between sees a log
cut short. A log written within :data:`JUST_WRITTEN_NS` of now may be such a log: the reader
waits :data:`SETTLE_SECONDS` and looks again, at most :data:`SETTLE_TRIES` times, before it
takes the log as it is. The same window marks a log synced this close after it was written as
"racy" (a later write may leave its mtime and size as they were: coarse filesystem clocks).

Read through this module (``settling.JUST_WRITTEN_NS``, ``settling.pause``), never copied into
another: the tests set the window and play a writer's progress in :func:`pause` here, once.
"""

from __future__ import annotations

import time

#: A log whose mtime is this close before now may still be being written.
JUST_WRITTEN_NS = 2_000_000_000
#: How long such a log must stand still before it is taken as it is: a rewriter writes its
#: parts far closer together than this.
SETTLE_SECONDS = 0.2
#: Waits of :data:`SETTLE_SECONDS` before a log that keeps moving is taken as it is (the
#: store) or its missing entries are held for a later sync (the index).
SETTLE_TRIES = 10


def pause(seconds: float) -> None:
    """Sleep (a seam: the tests play a writer's progress during the wait)."""
    time.sleep(seconds)


def just_written(mtime_ns: int, now_ns: int) -> bool:
    """Whether a file of mtime ``mtime_ns`` may still be being written at ``now_ns``: written
    within :data:`JUST_WRITTEN_NS`, or stamped ahead of this clock (a network share's clock,
    ``touch -d tomorrow``), whose age cannot be known from its mtime. The reader then waits
    for it to stand still, which says more than any clock."""
    return now_ns - mtime_ns < JUST_WRITTEN_NS
