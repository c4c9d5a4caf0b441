"""Parses of daily logs remembered by their text, so one record write parses its log once.

A record written into a daily log (a tier's verdict, an archive mark, an add) read the whole
log again at every step: the write's edit, the writer's check before and after, the entry read
back, the index's sync, the provenance check after it. Six full parses, mostly YAML, of a log
that only grows: 317 s of 380 s for 300 insight verdicts written into one day's log.

:func:`parse_log` is pure (text in, log out), so the same text always parses to the same log.
The memo keeps the last parse of each log (per memory root, log label and entry limit) with
the exact text it came from, and answers a parse of that very text from it. Nothing is keyed
on a clock or a file's stats: a text that differs by one byte (a hand edit, a log torn while
read) is a miss and is parsed. Every caller still reads the file itself, with every
settle and torn-read check it makes; only the parse of what it read is shared.

Each answer is a copy (the log, its entries, their metadata and sections): a caller that
changes what it was given (``entry.line``, ``meta``) never changes what another one is given.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

from everos_reflect.markdown.parser import MAX_ENTRY_BYTES, parse_log
from everos_reflect.model import DailyLog

#: Characters of log text the memo holds at most (all roots of the process together); a
#: parse holds about three times that (the text, each entry's ``raw``, the values).
MAX_HELD_CHARS = 16 << 20
#: Logs the memo holds at most.
MAX_HELD_LOGS = 64
#: Logs it holds at most inside :func:`holding_more` (the characters stay under
#: ``MAX_HELD_CHARS``): a Reflection run reads each merge's sources' logs to select them, to
#: check them and to archive into them, and with one user's long history its clusters span
#: hundreds of day logs; at 64 each was parsed again at every step (3,857 parses for 20
#: merges over 16,000 Episodes, against 696 held this way; bench/place_after_merges_cost.py).
MAX_HELD_LOGS_WIDE = 4096
_wide = 0  # the holding_more blocks open (of any thread)

_Key = tuple[str, str, bool, int]
_held: OrderedDict[_Key, tuple[str, DailyLog]] = OrderedDict()
_held_chars = 0
_guard = threading.Lock()
#: Parses made and answered from the memo since the process started (for the benches).
counts = {"parsed": 0, "reused": 0}


def parse(text: str, path: str, *, scope: str, entries: bool = True,
          max_entry_bytes: int = MAX_ENTRY_BYTES) -> DailyLog:
    """:func:`~everos_reflect.markdown.parser.parse_log` of ``text``, answered from the last
    parse of the log ``path`` of the root ``scope`` when that was of this very text."""
    key = (scope, path, entries, max_entry_bytes)
    with _guard:
        seen = _held.get(key)
        if seen is not None and seen[0] == text:
            _held.move_to_end(key)
            counts["reused"] += 1
            return _copy(seen[1])
    log = parse_log(text, path, entries=entries, max_entry_bytes=max_entry_bytes)
    _keep(key, text, _copy(log))
    with _guard:
        counts["parsed"] += 1
    return log


@contextmanager
def holding_more() -> Iterator[None]:
    """Inside the block the memo holds up to ``MAX_HELD_LOGS_WIDE`` logs (still at most
    ``MAX_HELD_CHARS`` characters); when the last such block ends it is trimmed back to
    ``MAX_HELD_LOGS``, so a long-lived process (``serve``) keeps its usual size between
    runs."""
    global _wide
    with _guard:
        _wide += 1
    try:
        yield
    finally:
        with _guard:
            _wide -= 1
            _trim()


def held_logs() -> int:
    """How many parses the memo holds now."""
    with _guard:
        return len(_held)


def forget(scope: str | None = None) -> None:
    """Drop every parse held (of the root ``scope`` only, when given)."""
    global _held_chars
    with _guard:
        for key in [k for k in _held if scope is None or k[0] == scope]:
            _held_chars -= len(_held.pop(key)[0])


def _keep(key: _Key, text: str, log: DailyLog) -> None:
    global _held_chars
    if len(text) > MAX_HELD_CHARS // 4:  # one huge log would push out every other
        return
    with _guard:
        old = _held.pop(key, None)
        if old is not None:
            _held_chars -= len(old[0])
        _held[key] = (text, log)
        _held_chars += len(text)
        _trim()


def _trim() -> None:
    """Drop the oldest parses past the limits (``_guard`` held)."""
    global _held_chars
    most = MAX_HELD_LOGS_WIDE if _wide else MAX_HELD_LOGS
    while _held and (_held_chars > MAX_HELD_CHARS or len(_held) > most):
        _held_chars -= len(_held.popitem(last=False)[1][0])


def _copy(log: DailyLog) -> DailyLog:
    """``log`` with its own containers: entries, their ``meta`` and ``sections``, the
    frontmatter, diagnostics and ids (values inside them are shared, never changed)."""
    return replace(
        log,
        frontmatter=dict(log.frontmatter),
        entries=[replace(e, meta=dict(e.meta), sections=dict(e.sections))
                 for e in log.entries],
        diagnostics=list(log.diagnostics),
        unreadable=set(log.unreadable),
    )
