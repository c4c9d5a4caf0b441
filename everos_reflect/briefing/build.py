"""Gather a briefing's candidates from every tier and pack them (the I/O half of the briefing).

Priority (SPEC §10): current convictions, then the lessons of the task type ranked by
confirmations, then — in the order the question's route asks for — the insights relevant to the
query and the Episodes, facts and task records that answer it. Nothing archived
(``deprecated_by``) or stale/retired is offered. Relevance is the cosine similarity between the
query and each record's vector; records below ``min_similarity`` are not offered at all, so a
large budget is not filled with noise. A later version of a record ranks above it, as in
search (:mod:`everos_reflect.index.recency`): "Sam now drives a Tesla" (June) before "Sam drives
a Honda Civic" (March) though the question's words match the older one better, so a block the
budget cuts keeps the current state. A narrative cut to fit keeps its current state and the day
the question points at, not its oldest days (:mod:`everos_reflect.briefing.narrative`).
Records of one kind whose lines say the same (a task recorded again) take one line, which says
how many it stands for ("or more" when the kind's search was cut at :data:`EVIDENCE_K`:
copies past it are not counted).

Derived records (convictions, lessons, insights) are read from their Markdown, the truth, for
their status and evidence; parsed files are cached by size and stamps (see :class:`_LogCache`)
so a briefing re-reads only what changed.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from everos_reflect.briefing.narrative import narrative_parts
from everos_reflect.briefing.pack import (
    Briefing,
    Item,
    Section,
    fold_repeats,
    line_key,
    pack,
    repeat_note,
)
from everos_reflect.briefing.routing import route as route_of
from everos_reflect.briefing.tokens import TokenCounter, default_counter
from everos_reflect.embedding.base import embed_query
from everos_reflect.errors import EverosError, InvalidRequest
from everos_reflect.index import reads
from everos_reflect.index.filters import where_clause
from everos_reflect.index.recency import RECENCY_COSINE, latest_first
from everos_reflect.index.recency import key as recency_key
from everos_reflect.model import (
    MAX_BRIEFING_QUERY_CHARS,
    MAX_BRIEFING_TOKENS,
    DailyLog,
    Entry,
    Kind,
    UserRef,
    blank,
    format_timestamp,
    id_items,
    json_got,
    must_not_be_empty,
    query_control_problem,
    query_length_problem,
    served_status,
    surrogate_problem,
)
from everos_reflect.problem_words import shown_number
from everos_reflect.procedural.lessons import Lesson, ranked, read_lesson
from everos_reflect.procedural.tasks import read_task
from everos_reflect.strategies import beliefs
from everos_reflect.typed_numbers import whole_value_problem

if TYPE_CHECKING:
    from everos_reflect.runtime import Runtime

MIN_SIMILARITY = 0.30  # MiniLM cosine below which a record rarely answers the query
EVIDENCE_K = 12  # candidates fetched per instance kind
INSIGHT_K = 8
LIVE = ("active", "contested")
#: The most of a briefing's budget the worldview takes while lessons, insights or records
#: want the room (:attr:`Section.share`): a person's worldview of thousands of words, each
#: conviction cut to a third of the budget, took it all and left the query unanswered.
WORLDVIEW_SHARE = 1 / 3
#: A lesson's score is its confirmations, saturated here: a person may write any YAML int
#: (400 digits is valid), which ``float()`` cannot hold; below this every count is exact.
MAX_SCORED_CONFIRMATIONS = 2**53


#: Most bytes of log files the briefing keeps parsed between calls. A parsed log takes about six
#: times its size; bounded by count alone (512 logs) the cache of a long-running ``serve`` held
#: every derived and task log a briefing had read, up to 512 × 16 MiB (a 15 MB lesson log
#: alone took 94 MB, kept for good).
CACHE_BYTES = 8 << 20


#: How long after a file's last change its cached parse is checked again by reading it. A
#: file system stamps times at some granularity (a few milliseconds on Linux, 2 s on FAT), so
#: an edit that keeps the size and lands in the same tick as the write before it keeps every
#: stamp: for this long after a change, a stamp match proves nothing (git's "racily clean").
RACY_NS = 2_000_000_000


def file_key(st: os.stat_result) -> tuple[int, ...]:
    """What must match for a cached parse to be reused: size and every stamp (``ctime`` moves
    on any change, even one whose ``mtime`` was set back with ``touch -r`` or ``os.utime``;
    the inode on a file replaced by a rename)."""
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


@dataclass
class _Parsed:
    key: tuple[int, ...]
    checked_ns: int  # the clock just before the stat that the parse matched
    log: DailyLog
    lessons: list[tuple[Lesson, str | None]] | None = None  # (lesson, stamp), read once


class _LogCache:
    """Parsed daily logs keyed by path, re-read when the file's size or any stamp changes, or
    when it changed less than :data:`RACY_NS` before it was last read; the least recently
    used are dropped past ``size`` logs or ``max_bytes`` bytes of files (a log larger than
    that is parsed for the call and not kept)."""

    def __init__(self, size: int = 512, max_bytes: int = CACHE_BYTES) -> None:
        self._size = size
        self._max_bytes = max_bytes
        self._bytes = 0
        self._logs: OrderedDict[Path, _Parsed] = OrderedDict()
        self._lock = threading.Lock()

    def parsed(self, runtime: Runtime, path: Path) -> _Parsed | None:
        now = time.time_ns()
        try:
            st = path.stat()
        except FileNotFoundError:
            return None
        key = file_key(st)
        with self._lock:
            hit = self._logs.get(path)
            if hit and hit.key == key and hit.checked_ns - max(
                    st.st_mtime_ns, st.st_ctime_ns) > RACY_NS:
                self._logs.move_to_end(path)
                return hit
        fresh = _Parsed(key, now, runtime.store.read(path))
        if st.st_size > self._max_bytes:
            return fresh
        with self._lock:
            old = self._logs.pop(path, None)
            if old is not None:
                self._bytes -= old.key[0]
            self._logs[path] = fresh
            self._bytes += st.st_size
            while len(self._logs) > self._size or self._bytes > self._max_bytes:
                _, dropped = self._logs.popitem(last=False)
                self._bytes -= dropped.key[0]
        return fresh

    def read(self, runtime: Runtime, path: Path) -> DailyLog | None:
        got = self.parsed(runtime, path)
        return got.log if got is not None else None

    def entries(self, runtime: Runtime, ref: UserRef, kind: Kind) -> list[Entry]:
        out: list[Entry] = []
        for path in runtime.store.iter_files(ref, [kind]):
            log = self.read(runtime, path)
            if log is not None:
                out.extend(log.entries)
        return out

    def lessons(self, runtime: Runtime, ref: UserRef) -> list[tuple[Lesson, str | None]]:
        """Every lesson of ``ref`` with its timestamp as written out, each log's read once per
        parse: reading and formatting 20,000 lessons took 0.7 s a briefing."""
        out: list[tuple[Lesson, str | None]] = []
        for path in runtime.store.iter_files(ref, [Kind.LESSON]):
            got = self.parsed(runtime, path)
            if got is None:
                continue
            if got.lessons is None:
                got.lessons = [(x, x.stamp) for x in map(read_lesson, got.log.entries)]
            out.extend(got.lessons)
        return out

    def entry(self, runtime: Runtime, ref: UserRef, entry_id: str) -> Entry | None:
        try:
            log = self.read(runtime, runtime.store.path_for_id(ref, entry_id))
        except EverosError:
            return None
        return next((e for e in log.entries if e.id == entry_id), None) if log else None


_CACHE = _LogCache()
_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="everos-briefing")


def _status(entry: Entry) -> str:
    return served_status(entry.meta)


def _ids(value: Any) -> list[str]:
    return id_items(value)[0]


def convictions(runtime: Runtime, ref: UserRef) -> list[Item]:
    """The current worldview as ``worldview`` shows it: the newest live conviction of each
    key, by key. An older version still live (its archive key not yet written when a run
    stopped, or a version added by hand) is no longer current: offered too, it put "Bob is
    a baker" and "Bob is a pilot" side by side as what the agent holds now. One whose text
    a hand edit left empty says nothing: it is not offered (it took a line of only its tags)."""
    entries = _CACHE.entries(runtime, ref, Kind.CONVICTION)
    by_id = {e.id: e for e in entries}
    view = beliefs.current_worldview(beliefs.Conviction.of(e) for e in entries)
    return [Item(c.id, "conviction", by_id[c.id].content, _stamp(by_id[c.id]),
                 _ids(by_id[c.id].meta.get("evidence")), note=_short_key(key))
            for key, c in sorted(view.current.items()) if not blank(by_id[c.id].content)]


#: The most characters of a conviction's key its note shows (a key the daemon writes has at
#: most 64, :data:`~everos_reflect.strategies.beliefs.KEY_RE`; a person's may be longer).
MAX_NOTE_KEY_CHARS = 200


def _short_key(key: str) -> str:
    """A conviction's key as its note: a hand-written key of 3,600 characters took 400 tokens
    of a 600-token briefing, and a longer one left the conviction out for want of room."""
    return key if len(key) <= MAX_NOTE_KEY_CHARS else f"{key[:MAX_NOTE_KEY_CHARS - 1]}…"


def lessons(runtime: Runtime, ref: UserRef, task_type: str) -> list[Item]:
    """The live lessons of ``task_type``, most confirmed first; not one whose text a hand
    edit left empty (it took a line of only its tags: "(do, confirmed 1x)")."""
    found = _CACHE.lessons(runtime, ref)
    stamps = {x.id: stamp for x, stamp in found}  # ranked serves copies (procedural.served)
    items = []
    for x in ranked([x for x, _ in found], task_type):
        if blank(x.text):
            continue
        note = f"{x.lesson_type}, confirmed {shown_number(x.confirmations)}x"
        if x.status == "contested":
            note += ", contested"
        items.append(Item(x.id, "lesson", x.text, stamps[x.id], list(x.evidence),
                          float(min(x.confirmations, MAX_SCORED_CONFIRMATIONS)), note))
    return items


def lesson_task_types(runtime: Runtime, ref: UserRef) -> list[str]:
    """The task types ``ref`` has live lessons of, sorted: what a briefing without a task
    type leaves out (lessons are learned and served per task type, seed 002)."""
    return sorted({x.task_type for x, _ in _CACHE.lessons(runtime, ref) if x.live})


def _stamp(entry: Entry) -> str | None:
    """``entry``'s timestamp as the index and every other item has it (ISO 8601): the YAML
    datetime's ``str`` served each conviction as "2026-10-08 10:00:00+00:00"."""
    if entry.timestamp is not None:
        return format_timestamp(entry.timestamp, fraction=True)
    value = entry.meta.get("timestamp")
    return str(value) if value is not None else None


def _search(runtime: Runtime, kind: Kind, vector: np.ndarray, ref: UserRef, k: int,
            min_similarity: float) -> tuple[list[dict[str, Any]], bool]:
    """The ``kind`` records nearest ``vector``, at most ``k``, none below ``min_similarity``;
    and whether the search was cut at ``k`` (more records of the kind may lie past it)."""
    where = where_clause(app_id=ref.app, project_id=ref.project, user_id=ref.user_id,
                         include_deprecated=False)
    rows = runtime.vectors.search_vector(kind, vector, k=k, where=where, with_vectors=True)
    for row in rows:
        row["_similarity"] = 1.0 - float(row["_distance"])
    return [r for r in rows if r["_similarity"] >= min_similarity], len(rows) >= k


@dataclass
class _RowHit:
    """A search row as :func:`latest_first` reads a hit (its owner, id, date and score)."""

    row: dict[str, Any]
    id: str
    app_id: str
    project_id: str
    user_id: str
    kind: str
    timestamp: str | None
    score: float


def latest_rows_first(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` (best first, each with its stored ``vector``) with every later version of a
    record moved just above it, by search's rule and threshold (:data:`RECENCY_COSINE`).

    Relevance alone put a superseded statement first whenever the question's words match the
    old wording better, and a block the budget cuts then kept the old state and dropped the
    current one. Each row keeps its own ``_similarity``: only the order changes."""
    hits = [_RowHit(r, str(r["id"]), str(r.get("app_id") or ""), str(r.get("project_id") or ""),
                    str(r.get("user_id") or ""), str(r.get("kind") or ""), r.get("timestamp"),
                    float(r["_similarity"])) for r in rows]
    vectors = {recency_key(h): np.asarray(h.row["vector"], dtype=np.float32) for h in hits
               if h.row.get("vector") is not None}
    texts = {recency_key(h): str(h.row.get("text") or "") for h in hits}
    return [h.row for h in latest_first(hits, vectors, threshold=RECENCY_COSINE, texts=texts)]


def _row_item(runtime: Runtime, ref: UserRef, row: dict[str, Any],
              query: str | None = None) -> Item | None:
    """``row`` as a briefing item, None when its Markdown says it is stale or retired. Given
    ``query``, a narrative Episode comes with its parts (:func:`narrative_parts`): cut to
    fit, it keeps its current state and the day the query points at, not its oldest days."""
    kind = str(row.get("kind") or "episode")
    text = str(row.get("text") or "")
    evidence: list[str] = list(row.get("sources") or [])
    if kind == "atomic_fact" and row.get("parent_id"):
        evidence = [str(row["parent_id"])]
    elif kind == Kind.TASK.value:
        entry = _CACHE.entry(runtime, ref, row["id"])
        if entry is None:
            return None
        text = read_task(entry).text()
    elif Kind(kind).derived:
        entry = _CACHE.entry(runtime, ref, row["id"])
        if entry is None or entry.deprecated_by or _status(entry) not in LIVE:
            return None  # stale or retired in its Markdown, whatever the index says
        evidence = _ids(entry.meta.get("evidence"))
    subject = str(row.get("subject") or "")
    parts: tuple[tuple[int, str], ...] = ()
    if kind == "episode" and query is not None:
        day = str(row.get("timestamp") or "")[:10] or None
        if found := narrative_parts(text, query, date=day):
            parts = ((-1, f"{subject}:"), *found) if subject else found
    if subject and kind == "episode":
        text = f"{subject}: {text}"
    return Item(row["id"], kind, text, row.get("timestamp"), evidence,
                round(float(row["_similarity"]), 4), parts=parts)


#: The most copies of a folded line :func:`newest_copy` reads, newest first, for one that
#: still reads as that line (a task's line holds its steps and outcome, which its embedded
#: text, the goal, does not).
MAX_COPIES_READ = 64


def newest_copy(runtime: Runtime, ref: UserRef, item: Item,
                repeats: dict[str, list[str]]) -> Item:
    """``item``, a line :func:`fold_repeats` made of copies of a kind whose search was cut at
    :data:`EVIDENCE_K`, as its newest live copy in the index. The search fetched copies of one
    text in no order of time (equal vectors tie), so the line "recorded 12x or more" showed the
    newest of the twelve fetched: a task recorded daily for a month was briefed with the id and
    date of its twelfth day. ``repeats`` is updated to name the copy shown. ``item`` as it is
    when it is not folded, or no newer copy reads as its line."""
    if item.id not in repeats:
        return item
    try:
        rows = reads.newer_live_copies(runtime.db(), ref, item.id, MAX_COPIES_READ)
        if rows is None:
            return item
    except sqlite3.Error:
        return item  # the index unreadable: the copy the search found is shown
    for row in rows:
        try:
            sources = json.loads(row[6] or "[]")
        except ValueError:
            sources = []
        newer = _row_item(runtime, ref, {
            "id": row[0], "kind": row[1], "timestamp": row[2], "subject": row[3],
            "text": row[4], "parent_id": row[5], "sources": sources,
            "_similarity": item.score or 0.0})
        if newer is not None and line_key(newer) == line_key(item):
            others = [item.id, *(i for i in repeats.pop(item.id) if i != newer.id)]
            repeats[newer.id] = others
            # the same text, so the same parts
            return replace(newer, score=item.score, note=repeat_note(len(others) + 1, True),
                           parts=item.parts)
    return item


def build_briefing(
    runtime: Runtime,
    ref: UserRef,
    query: str,
    *,
    task_type: str | None = None,
    max_tokens: int = 1000,
    min_similarity: float = MIN_SIMILARITY,
    counter: TokenCounter | None = None,
    latest_first_order: bool = True,
    narrative_cuts: bool = True,
) -> Briefing:
    """One bounded briefing for ``query`` over ``ref``'s memory (see the module docstring).
    ``latest_first_order`` off ranks the records by relevance alone, ``narrative_cuts`` off
    cuts a narrative at its opening like any text (what a benchmark compares the shipped
    block with)."""
    # in the words of the API's schema and the CLI's options, as search() says them
    if not isinstance(query, str):
        raise InvalidRequest(f"query: must be a string, got {json_got(query)}")
    if blank(query):  # U+200B alone is no query either
        raise InvalidRequest(f"query: {must_not_be_empty()}")
    if (problem := surrogate_problem(query) or query_control_problem(query)) is not None:
        raise InvalidRequest(f"query: {problem}")
    if (problem := query_length_problem(query, MAX_BRIEFING_QUERY_CHARS)) is not None:
        raise InvalidRequest(problem)
    if (problem := whole_value_problem(max_tokens, 1, MAX_BRIEFING_TOKENS)) is not None:
        raise InvalidRequest(f"max_tokens: {problem}")
    counter = counter or default_counter()
    route = route_of(query)
    vector = embed_query(runtime.embedder, query)
    instance_kinds = (Kind.EPISODE, Kind.ATOMIC_FACT, Kind.TASK)
    futures = {
        kind: _POOL.submit(_search, runtime, kind, vector, ref,
                           INSIGHT_K if kind is Kind.INSIGHT else EVIDENCE_K, min_similarity)
        for kind in (*instance_kinds, Kind.INSIGHT)
    }
    found = {kind: f.result() for kind, f in futures.items()}
    rows = {kind: kept for kind, (kept, _) in found.items()}
    evidence_rows = sorted((r for k in instance_kinds for r in rows[k]),
                           key=lambda r: -r["_similarity"])
    if latest_first_order:
        evidence_rows = latest_rows_first(evidence_rows)
    insight_items = [i for r in rows[Kind.INSIGHT] if (i := _row_item(runtime, ref, r))]
    # a kind whose search was cut at EVIDENCE_K may hold more copies of a line than it
    # fetched: its counts are "or more" (a task recorded 40 times said "recorded 12x")
    cut_kinds = {k.value for k in instance_kinds if found[k][1]}
    evidence_items, repeats = fold_repeats(
        [i for r in evidence_rows
         if (i := _row_item(runtime, ref, r, query if narrative_cuts else None))],
        cut_kinds=cut_kinds)
    evidence_items = [newest_copy(runtime, ref, i, repeats) if i.kind in cut_kinds else i
                      for i in evidence_items]

    sections = [Section("Current convictions", convictions(runtime, ref), share=WORLDVIEW_SHARE)]
    if task_type:
        sections.append(Section(f"Lessons for {task_type}", lessons(runtime, ref, task_type)))
    insights = Section("Insights", insight_items)
    records = Section("Episodes, facts and tasks", evidence_items)
    sections += [insights, records] if route == "pattern" else [records, insights]
    header = f"Memory briefing ({route} question" + (
        f", task type {task_type})" if task_type else ")")
    briefing = pack(sections, max_tokens, counter, header=header, route=route)
    briefing.repeated_ids = [other for i in briefing.items for other in repeats.get(i.id, [])]
    return briefing
