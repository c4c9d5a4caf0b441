"""Committing a merge, crash-safely: the ``merge_journal`` and recovery.

A merge touches several files (the narrative's episode log, the atomic-fact log, every source's
log) and SQLite; no single write covers them all. So every merge is first written down as a
*plan* (one ``merge_journal`` row holding everything needed to finish or withdraw it), and each
step is idempotent and recorded:

====================  ==========================================================================
step (after it)       what is done
====================  ==========================================================================
``planned``           the journal row exists; nothing in Markdown yet
``narrative``         the narrative is appended to the plan day's episode log, carrying
                      ``reflection: <journal id>`` so it can be found again
``facts``             its facts are appended to the atomic-fact log (same ``reflection`` key)
``archiving``         the sources were checked unchanged: **the point of no return**. Set just
                      before the first ``deprecated_entries`` key toward the narrative is written
``deprecated``        sources, their facts and (update) the old narrative and its facts are
                      archived toward the narrative in their files' ``deprecated_entries``
(row deleted)         files synced into the index, cluster marked consolidated, audit row
                      written and the journal row deleted in one transaction
``abandoning``        set before withdrawing a merge that cannot complete (only ever before
                      ``archiving``)
====================  ==========================================================================

Why this order: ``deprecated_entries`` keys are only ever *added* (SPEC §3: only ``undo``
removes keys). Nothing is archived toward the narrative until every source has been checked,
under the sources' file locks, so a merge is withdrawn only while no source points at it yet:
withdrawing is then one more added key per new entry (``ep_X: ep_X``, "replaced by nothing"),
never a removed one. Once the first source points at the narrative, the merge is committed
and recovery only ever rolls it forward (a source a person edited in the crash window is left
live and unarchived, and reported).

:func:`recover` runs before anything else touches a root that has journal rows: at the start of
every Reflection run, at ``serve``, and before every CLI command that writes — the engine
reaches it through ``ReflectEpisodes.recover`` (:mod:`everos_reflect.engine.recovery`).
Every path is idempotent, so a crash *during* recovery is recovered the same way.

A Reflection run commits its merges in batches (:mod:`journal_batch`): each merge of a batch
has its own row and passes through these steps exactly as above; the batch shares the writes.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from stat import S_ISREG
from typing import TYPE_CHECKING, Any

from everos_reflect.clustering.service import MERGED_AT_KEY, ClusterService, UnknownCluster
from everos_reflect.errors import EverosError, TooLarge, describe
from everos_reflect.index import merge_journal
from everos_reflect.index.audit import insert_reflection_report
from everos_reflect.index.db import transaction, utcnow_iso
from everos_reflect.markdown import writer
from everos_reflect.markdown.parser import MAX_YAML_BYTES
from everos_reflect.model import Entry, EntryId, Kind, UserRef, format_timestamp, meta_text
from everos_reflect.provenance import PROVENANCE_KEY, provenance_meta

if TYPE_CHECKING:
    import sqlite3

    import numpy as np

    from everos_reflect.index.sync import Indexer
    from everos_reflect.markdown.store import MarkdownStore
    from everos_reflect.runtime import Runtime
    from everos_reflect.strategies.consolidate import Draft

log = logging.getLogger(__name__)

#: Metadata key naming the journal row that wrote an entry (narrative and facts).
REFLECTION_KEY = "reflection"

PLANNED, NARRATIVE, FACTS, ARCHIVING, DEPRECATED, ABANDONING = (
    "planned", "narrative", "facts", "archiving", "deprecated", "abandoning")
#: The step of a row ``undo`` writes before its first patch (not a merge; see undo.py):
#: recovery finishes that undo.
UNDOING = "undoing"
#: Steps after which a merge is committed: recovery rolls it forward, never withdraws it.
COMMITTED_STEPS = frozenset({ARCHIVING, DEPRECATED})
#: Not a journal step: the checkpoint between the index sync and the final transaction.
SYNCED = "synced"


def checkpoint(step: str) -> None:
    """Called after each step of a commit. Does nothing; crash-safety tests replace it with a
    function that raises, to stop a merge between any two steps."""


class StaleSources(EverosError):
    """A source changed (or was archived) after Select: the merge must not archive it."""


class UserGone(EverosError):
    """The folder of a merge's user is gone while the merge is committed (renamed, moved to
    another project, or removed by hand): nothing more is written under the old name."""


def refuse_if_gone(runtime: Runtime, plans: Iterable[Plan]) -> None:
    """Raise :class:`UserGone` when the folder of a user of ``plans`` is gone. Asked before
    each write of a commit: the store makes a log's folders as it writes, so a write under
    the old name made the folder again for a user nobody has (a narrative there whose sources
    went with the folder, live; or the merge withdrawn there as stale, its narrative that
    moved with the folder withdrawn, and the next run paid the merge again). Raised, the
    journal row stays, and the merge is settled where its entries went, as after a kill
    (:func:`settle_interrupted`)."""
    gone = sorted({str(p.ref) for p in plans if runtime.store.user_gone(p.ref)})
    if gone:
        raise UserGone(f"the folder of user {gone[0]} was renamed, moved or removed by hand "
                       "while its merge was committed; nothing more is written under that "
                       "name")


class ArchiveTooLarge(EverosError):
    """The ``deprecated_entries`` keys of a merge would push a source's log past
    ``limits.max_file_bytes``: known before the point of no return, so it is withdrawn."""


@dataclass
class Plan:
    """Everything needed to finish or abandon one merge; stored as JSON in ``merge_journal``."""

    id: str
    run_id: str
    app: str
    project: str
    user_id: str
    cluster_id: str
    mode: str
    day: str  # the daily logs that receive the narrative and its facts
    title: str
    content: str
    facts: list[str]
    timestamp: str  # the narrative's: the latest replaced entry's
    sources: list[str]  # new members merged (the audit's source_members)
    existing_id: str | None  # update mode: the narrative folded into
    hashes: dict[str, str]  # content_hash at Select of every episode to archive
    fact_ids: list[str]  # live atomic facts of those episodes, archived too
    provider: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_ms: int = 0
    coverage: float | None = None
    merged_id: str | None = None
    error: str | None = None  # why it is being abandoned
    extra: dict[str, Any] = field(default_factory=dict)
    #: the user the merge was planned for, once recovery followed its folder elsewhere
    #: (:func:`follow_moved_user`): ``hashes`` were taken under that name, so a source whose
    #: ``owner_id`` a person rewrote to the new folder's user is unchanged
    origin_user: str | None = None
    #: when each fact was said (:meth:`Draft.fact_times`), aligned with ``facts``; a row
    #: written before facts had times of their own has none: each takes ``timestamp``
    fact_times: list[str] = field(default_factory=list)
    #: the wall clock (ns) when the row was written, before the merge's first Markdown write:
    #: a log holding anything of the merge (a copy of it too) was written since
    #: (:func:`settle_copies_of`); ``None`` for rows written before it was recorded
    journalled_ns: int | None = None

    @property
    def ref(self) -> UserRef:
        return UserRef(self.app, self.project, self.user_id)

    @property
    def replaced(self) -> list[str]:
        """Episodes the narrative replaces, in the order its ``sources`` metadata lists them."""
        return ([self.existing_id] if self.existing_id else []) + list(self.sources)

    @property
    def day_date(self) -> date:
        return date.fromisoformat(self.day)

    def to_json(self) -> str:
        # the same JSON as asdict() gives, without its deep copy of every list (a batch
        # writes each plan's row at every step)
        return json.dumps({f.name: getattr(self, f.name) for f in fields(self)},
                          ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Plan:
        return cls(**json.loads(text))


def new_plan(
    draft: Draft, *, run_id: str, fact_ids: Iterable[str], day: date | None = None
) -> Plan:
    """The journal plan of a draft that passed the guard."""
    sel = draft.selection
    return Plan(
        id=f"rj_{uuid.uuid4().hex[:16]}",
        run_id=run_id,
        app=sel.ref.app,
        project=sel.ref.project,
        user_id=sel.ref.user_id,
        cluster_id=sel.cluster_id,
        mode=sel.mode,
        day=(day or datetime.now(UTC).date()).isoformat(),
        title=draft.title,
        content=draft.content,
        facts=list(draft.facts),
        fact_times=[format_timestamp(t, fraction=True) for t in draft.fact_times()],
        timestamp=format_timestamp(sel.timestamp, fraction=True),  # the latest source's
        sources=sel.source_ids,
        existing_id=sel.existing.id if sel.existing is not None else None,
        hashes=sel.hashes,
        fact_ids=sorted(set(fact_ids)),
        provider=draft.provider,
        model=draft.model,
        prompt_tokens=draft.usage.prompt_tokens,
        completion_tokens=draft.usage.completion_tokens,
        llm_ms=round(draft.seconds * 1000),
        coverage=draft.coverage.score if draft.coverage is not None else None,
        extra=({"provenance": [list(r) for r in draft.provenance]}
               if draft.provenance is not None else {}),
    )


# --------------------------------------------------------------------------- audit rows


def insert_report(
    conn: sqlite3.Connection,
    *,
    run_id: str | None,
    ref: UserRef,
    cluster_id: str,
    mode: str,
    sources: list[str],
    status: str,
    merged_entry_id: str | None = None,
    deprecated_fact_count: int = 0,
    new_fact_count: int = 0,
    fact_coverage: float | None = None,
    provider: str | None = None,
    model: str | None = None,
    prompt_tokens: int | None = None,
    completion_tokens: int | None = None,
    duration_ms: int | None = None,
    error: str | None = None,
) -> str:
    """One ``reflection_report`` row (SPEC §6); the caller owns the transaction."""
    report_id = f"rr_{uuid.uuid4().hex[:16]}"
    insert_reflection_report(conn, (
        report_id, run_id, ref.app, ref.project, ref.user_id, cluster_id, mode, len(sources),
        json.dumps(sources), merged_entry_id, deprecated_fact_count, new_fact_count,
        None if fact_coverage is None else round(fact_coverage, 4), provider, model,
        prompt_tokens, completion_tokens, duration_ms, status, error, utcnow_iso()))
    return report_id


def plan_report(conn: sqlite3.Connection, plan: Plan, status: str, *, merged: str | None,
                 error: str | None, duration_ms: int) -> None:
    insert_report(
        conn, run_id=plan.run_id, ref=plan.ref, cluster_id=plan.cluster_id, mode=plan.mode,
        sources=plan.sources, status=status, merged_entry_id=merged,
        deprecated_fact_count=len(plan.fact_ids) if status == "ok" else 0,
        new_fact_count=len(plan.facts) if status == "ok" else 0,
        fact_coverage=plan.coverage, provider=plan.provider, model=plan.model,
        prompt_tokens=plan.prompt_tokens, completion_tokens=plan.completion_tokens,
        duration_ms=duration_ms, error=error,
    )


# --------------------------------------------------------------------------- the journal rows


def _insert(conn: sqlite3.Connection, plan: Plan) -> None:
    plan.journalled_ns = time.time_ns()
    merge_journal.insert(conn, plan.id, plan.ref, plan.cluster_id, plan.to_json(), PLANNED)


def _set_step(conn: sqlite3.Connection, plan: Plan, step: str) -> None:
    merge_journal.set_step(conn, plan.id, plan.to_json(), step)


def pending(conn: sqlite3.Connection) -> list[tuple[Plan, str]]:
    """Journal rows left by interrupted merges, oldest first, with the step each reached
    (interrupted undos, at :data:`UNDOING`, are not merges and are left out)."""
    return [(Plan.from_json(plan), step) for plan, step in merge_journal.rows(conn)
            if step != UNDOING]


# --------------------------------------------------------------------------- commit


@dataclass
class Outcome:
    """How one journalled merge ended: ``ok`` (merged), ``stale`` or ``abandoned``."""

    status: str
    plan: Plan
    merged_id: str | None
    error: str | None = None
    #: copies of the merge in other users' folders that could not be settled, each with
    #: why (:func:`settle_copies_of`): the run record counts and names them
    copy_problems: list[str] = field(default_factory=list)


def complete(runtime: Runtime, indexer: Indexer, plan: Plan, started: float, *,
              stale_status: str, committed: bool) -> Outcome:
    """Steps from ``narrative`` on, for one merge whose row exists (recovery; a batch step that
    failed); each one checks what is already done and skips it.

    ``committed``: the merge is past the point of no return (some source may already point at
    the narrative), so it is rolled forward whatever changed meanwhile."""
    store, ref, conn = runtime.store, plan.ref, runtime.db()
    narrative = find_narrative(runtime, plan)
    if narrative is None and committed and archived_toward(runtime, plan):
        return _deleted_after_commit(runtime, indexer, plan, started)
    if narrative is None:
        refuse_if_gone(runtime, [plan])
        try:
            narrative = store.append(ref, Kind.EPISODE, narrative_meta(plan),
                                     {"Subject": plan.title, "Content": plan.content},
                                     day=plan.day_date, withdrawable=True)
        except TooLarge as exc:
            return _refused(runtime, indexer, plan, started, exc, committed=committed)
    _withdraw_strays(runtime, plan, narrative.id)
    plan.merged_id = narrative.id
    _set_step(conn, plan, NARRATIVE)
    checkpoint(NARRATIVE)

    try:
        _write_missing_facts(runtime, plan)
    except TooLarge as exc:
        return _refused(runtime, indexer, plan, started, exc, committed=committed)
    _set_step(conn, plan, FACTS)
    checkpoint(FACTS)

    try:
        left_live = _archive_sources(runtime, plan, committed=committed)
    except StaleSources as exc:
        plan.error = str(exc)
        return abandon(runtime, indexer, plan, started, status=stale_status)
    except ArchiveTooLarge as exc:
        plan.error = str(exc)
        return abandon(runtime, indexer, plan, started, status="rejected")
    if left_live:
        plan.error = ("committed before a crash; left live because " + "; ".join(left_live))
        log.warning("merge %s of cluster %s: %s", plan.id, plan.cluster_id, plan.error)
    _set_step(conn, plan, DEPRECATED)
    checkpoint(DEPRECATED)

    # The cluster holds the narrative before the sources' logs are synced, as a batch's
    # does: the index then finds each source retired already. Synced first, each archived
    # source rebuilt its cluster's centroid from the stored vectors of the members left, one
    # read per source, under the indexer's lock an add waits for.
    refuse_if_gone(runtime, [plan])  # synced under the old name, the index forgot it all
    mark_consolidated(runtime, plan, runtime.embedder.embed([narrative.search_text])[0])
    _sync(indexer, runtime, touched_files(runtime, plan))
    checkpoint(SYNCED)
    # a folder copied while this ran: taken half done
    problems = settle_copies(runtime, indexer, plan)
    note_copy_problems(plan, problems)
    with transaction(conn):
        plan_report(conn, plan, "ok", merged=plan.merged_id, error=plan.error,
                    duration_ms=plan.llm_ms + ms_since(started))
        merge_journal.delete(conn, plan.id)
    return Outcome("ok", plan, plan.merged_id, copy_problems=problems)


def _write_missing_facts(runtime: Runtime, plan: Plan) -> None:
    """Write the plan's facts its narrative does not have yet (a crash may have come before,
    or after, some of them), in one atomic write: not one rewrite and two fsyncs per fact."""
    written = Counter(f.content for f in find_facts(runtime, plan))
    missing = []
    for n, fact in enumerate(plan.facts):
        if written[fact] > 0:
            written[fact] -= 1
            continue
        missing.append((fact_meta(plan, n), {"Fact": fact}))
    if missing:
        refuse_if_gone(runtime, [plan])
    runtime.store.append_many(plan.ref, Kind.ATOMIC_FACT, missing, day=plan.day_date,
                              withdrawable=True)


def settle_copies(runtime: Runtime, indexer: Indexer, plan: Plan, *,
                  withdraw: bool = False) -> list[str]:
    """Settle the merge in every other user's folder that holds a copy of it half done: its
    narrative (the entry naming this row in its ``reflection`` key) live there, the user's
    folder copied by hand while the merge was interrupted, or while it ran. Settled only where
    it began, the copy kept the narrative live beside its live sources for good: an update
    merge's are its previous narrative and one new Episode, which no run selects to fold it
    in. Each copy is settled by its own logs, as recovery settles a merge: rolled forward (its
    facts written, its unchanged sources archived toward it), or, nothing archived toward it
    yet and a source changed there (or ``withdraw``: the merge is being abandoned), withdrawn.
    Markdown and the index only: the clusters and the audit rows stay the first user's (the
    narrative names the first user's cluster). Called before the merge itself is settled,
    which deletes the row: a kill in between leaves the row, and the next start settles the
    copies again (each step checks what is done). Returns the copies that could not be
    settled, each with why (:func:`note_copy_problems`)."""
    return settle_copies_of(runtime, indexer, [plan], withdraw=withdraw).get(plan.id, [])


def note_copy_problems(plan: Plan, problems: list[str]) -> None:
    """Add the copies of ``plan`` that could not be settled to its ``error``, which its audit
    row keeps (the merge itself is settled: its row goes)."""
    if problems:
        plan.error = "; ".join([*([plan.error] if plan.error else []), *problems])


#: Slack for a file system's coarse clock when a log's mtime is compared with the time a
#: batch began (:func:`settle_copies_of`).
MTIME_SLACK_NS = 2_000_000_000


def settle_copies_of(runtime: Runtime, indexer: Indexer, plans: list[Plan], *,
                     withdraw: bool = False,
                     written_since_ns: int | None = None) -> dict[str, list[str]]:
    """:func:`settle_copies` for every merge of ``plans`` (a batch's), the users listed once
    and each other user's log of a plan day read once for all of its merges' ids: a merge
    committed live settles its copies too (a folder copied while it ran was taken half done),
    and a batch paid a listing and a read per merge. Most users hold no log of that day, or
    none naming a row: not parsed.

    A log last modified before the merges' rows were written (``written_since_ns``, else
    the earliest :attr:`Plan.journalled_ns` of ``plans``, less :data:`MTIME_SLACK_NS`) is not
    read. A copy of a narrative can only have been written after the narrative was, and a
    copy keeps that time (``cp -a``, ``copytree``: the source's mtime, no older than the
    narrative's write) or takes its own. Without it every other user's log of the day was
    read once per batch, whoever wrote it and whenever, and an abandoned merge (recovery's
    included) read them all again (``bench/copy_settle_cost.py`` times both ways on one root).
    Each plan's user is built once and each user's path once, as text: building them per
    user and plan (a ``UserRef`` validated per plan, a ``Path`` per log) was most of the
    time of a look-up at 2,000 users, not the file checks. Besides the narrative's log, the
    facts' and the sources' logs are looked at (:func:`_copy_looks`): a copy taken while
    several writes of the merge ran may hold a part of it without the narrative.

    Returns, per plan id, the copies that could not be settled, each with why (a copy whose
    narrative's id another entry holds there, say): logged alone, a run said nothing of them.
    """
    problems: dict[str, list[str]] = {}
    if written_since_ns is None:
        written_since_ns = journalled_since(plans)
    own: dict[UserRef, set[str]] = {}  # the ids of each plan's own user: not copies there
    for plan in plans:
        own.setdefault(plan.ref, set()).add(plan.id)
    store = runtime.store
    real_root, root = os.path.realpath(store.root), os.fspath(store.root)
    looks = _copy_looks(plans)
    needles: dict[str, set[str]] = {}  # per log: the ids any merge is told by there
    for plan in plans:
        for rel in looks[plan.id].logs:
            needles.setdefault(rel, set()).update(
                [plan.id, *([plan.merged_id] if plan.merged_id else [])])
    rels, sep = list(needles), os.sep
    for ref in store.iter_users():
        # the store's layout (MarkdownStore.log_path), joined as text: the listing's refs are
        # validated names, and a Path and three name checks per user were a third of the
        # look-up (os.path.join per log, a sixth of what was left)
        folder = f"{root}{sep}{ref.app}{sep}{ref.project}{sep}users{sep}{ref.user_id}"
        if written_since_ns is not None and not _written_since(folder + sep, rels,
                                                               written_since_ns):
            continue  # most users: none of those logs written since the rows
        mine = own.get(ref, set())
        theirs = [plan for plan in plans if plan.id not in mine]
        if not theirs:
            continue
        # per log: what it names, or None when it was not read (written before the rows)
        named: dict[str, set[str] | None] = {}

        def names(rel: str, any_time: bool = False, folder: str = folder,
                  named: dict[str, set[str] | None] = named) -> set[str]:
            """What the log ``rel`` of this user names, looked at once (``any_time``: read
            however long ago it was written)."""
            if rel not in named or (any_time and named[rel] is None):
                named[rel] = _named_since(store, os.path.join(folder, rel), needles[rel],
                                          real_root, None if any_time else written_since_ns)
            return named[rel] or set()

        if not any(names(rel) for rel in needles):  # most users: no log names any of them
            continue
        for plan in theirs:
            if _holds_part(plan, looks[plan.id], names):
                problem = _settle_copy(runtime, indexer, plan, ref, withdraw=withdraw)
                if problem is not None:
                    problems.setdefault(plan.id, []).append(problem)
    return problems


def _written_since(prefix: str, rels: list[str], since_ns: int) -> bool:
    """Whether one of the logs ``rels`` (each after ``prefix``, the user's folder) was last
    modified at ``since_ns`` or later, or cannot be looked at (:func:`_named_since` says
    why): the first test :func:`_named_since` makes of each, without its read or the
    per-log bookkeeping, for the users (most) none of whose logs was written since. The same
    file times, so a copy found before is found still: a folder's time was no substitute
    (a log written over in place, as ``cp`` does into a folder that exists, leaves it)."""
    for rel in rels:
        try:
            if os.stat(prefix + rel).st_mtime_ns >= since_ns:
                return True
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError:
            return True
    return False


def _holds_part(plan: Plan, looks: _Looks, names: Callable[..., set[str]]) -> bool:
    """Whether a user's logs (what each names: ``names``) hold a part of ``plan``'s merge to
    settle: its narrative's or facts' log names its row, or, its narrative's log not naming
    the narrative's id (read however long ago it was written: ids are unique per user only,
    and another user who merged that day holds a narrative of that id, and sources of the
    same ids archived toward it; nor could the narrative be written there under its id), a
    source's log names the narrative.

    Its narrative's log naming the narrative's id but not the row, the facts' log naming the
    row still tells a copy (another user who merged that day wrote facts naming a row of
    their own): its narrative's entry changed there by hand, or another entry holding that
    id. :func:`_copy_narrative` tells which; without this, neither was looked at again."""
    if plan.id in names(looks.narrative):
        return True
    found = looks.facts is not None and plan.id in names(looks.facts)
    if plan.merged_id is not None and plan.merged_id in names(looks.narrative):
        return found
    found = found or any(plan.merged_id in names(rel) for rel in looks.sources)
    if not found or plan.merged_id is None:
        return found
    return plan.merged_id not in names(looks.narrative, True)


def _named_since(store: MarkdownStore, path: str, needles: set[str], real_root: str,
                 written_since_ns: int | None) -> set[str] | None:
    """Those of ``needles`` the log at ``path`` holds; none when it cannot be looked at (a
    folder this account may not enter, a FIFO) or is not there; ``None``, not read, when it
    was last modified before ``written_since_ns``."""
    try:
        st = os.stat(path)
        if not S_ISREG(st.st_mode):
            return set()
        if written_since_ns is not None and st.st_mtime_ns < written_since_ns:
            return None
        return _named_in(Path(path), sorted(needles), real_root)
    except (FileNotFoundError, NotADirectoryError):  # no log of that day: most users
        return set()
    except OSError as exc:
        log.info("cannot read %s for copies of merges: %s", store.rel(path), describe(exc))
        return set()


@dataclass
class _Looks:
    """Where in a user's folder a copy of one merge can be told (:func:`_copy_looks`), each
    log relative to the user's folder."""

    narrative: str  # the narrative's log
    facts: str | None  # the facts' log, if the merge has facts
    sources: list[str]  # the logs of the entries it archives, once it has a narrative

    @property
    def logs(self) -> list[str]:
        return [self.narrative, *([self.facts] if self.facts else []), *self.sources]


def _copy_looks(plans: Iterable[Plan]) -> dict[str, _Looks]:
    """Per plan id, where in a user's folder a copy of the merge can be told: the narrative's
    and the facts' logs name the journal row (their ``reflection`` key); the sources' logs
    name the narrative (their ``deprecated_entries``). A copy taken while several writes of
    the merge ran may hold any of them without the rest: its episode log copied before the
    narrative was written and a source's log after it was archived toward it (the source
    hidden behind an id no entry of that user holds), or the facts' log after the facts were
    written (live facts of a narrative it does not hold); the narrative's log alone missed
    both."""
    def rel(kind: Kind, day: date) -> str:
        return os.path.join(kind.folder, kind.filename(day))

    looks = {}
    for plan in plans:
        sources = sorted({rel(eid.kind, eid.day) for eid in map(
            EntryId.parse, [*plan.replaced, *plan.fact_ids])}) if plan.merged_id else []
        looks[plan.id] = _Looks(rel(Kind.EPISODE, plan.day_date),
                                rel(Kind.ATOMIC_FACT, plan.day_date) if plan.facts else None,
                                sources)
    return looks


def journalled_since(plans: Iterable[Plan]) -> int | None:
    """The wall clock (ns) before which no log holds anything of ``plans``: the earliest
    time their rows were written, less :data:`MTIME_SLACK_NS`; ``None`` when a row does not
    say (written before rows recorded it)."""
    times = [plan.journalled_ns for plan in plans]
    if not times or any(t is None for t in times):
        return None
    return min(t for t in times if t is not None) - MTIME_SLACK_NS


def _named_in(path: Path, ids: list[str], real_root: str) -> set[str]:
    """Those of ``ids`` the file's bytes contain, read once in pieces (as
    :meth:`MarkdownStore.mentions` reads for one); ``real_root``: the root's real path."""
    from everos_reflect.fileio import open_regular

    needles = {i: i.encode() for i in ids}
    keep = max(len(n) for n in needles.values()) - 1
    found: set[str] = set()
    tail = b""
    with open_regular(path, within=real_root) as fh:
        while len(found) < len(needles) and (chunk := fh.read(1 << 20)):
            window = tail + chunk
            found.update(i for i, n in needles.items() if i not in found and n in window)
            tail = window[-keep:] if keep else b""
    return found


def _settle_copy(runtime: Runtime, indexer: Indexer, plan: Plan, ref: UserRef, *,
                 withdraw: bool) -> str | None:
    """Settle ``plan``'s copy in ``ref``'s logs (:func:`settle_copies`); why it could not
    be, else ``None``."""
    copy = replace(plan, app=ref.app, project=ref.project, user_id=ref.user_id,
                   merged_id=None, extra={})
    origin = plan.origin_user or plan.user_id  # whose entries the hashes are of
    try:
        narrative = find_narrative(runtime, copy)
        if narrative is None:
            narrative, conflict = _copy_narrative(runtime, plan, copy)
            if conflict is not None:
                return conflict
        if narrative is None or narrative.deprecated_by is not None:
            return None
        copy.merged_id = narrative.id
        if not archived_toward(runtime, copy) and (
                withdraw or changed_sources(runtime, copy, copied_from=origin)):
            runtime.store.deprecate(ref, {narrative.id: narrative.id, **{
                f.id: narrative.id for f in find_facts(runtime, copy)}})
            how = "withdrawn"
        else:
            _write_missing_facts(runtime, copy)
            _archive_sources(runtime, copy, committed=True, copied_from=origin)
            how = "finished"
        _sync(indexer, runtime, touched_files(runtime, copy))
    except Exception as exc:  # that copy's alone: the merge itself is settled still
        if runtime.root_gone():
            raise
        log.error("merge %s of cluster %s: cannot settle its copy in the logs of %s: %s",
                  plan.id, plan.cluster_id, ref, describe(exc),
                  exc_info=not isinstance(exc, EverosError))
        return f"its copy in the logs of {ref} was not settled: {describe(exc)}"
    log.warning("merge %s of cluster %s: the folder of user %s was copied by hand into "
                "%s's while the merge was under way; %s there too", plan.id,
                plan.cluster_id, plan.ref, ref, how)
    return None


def _copy_narrative(runtime: Runtime, plan: Plan,
                    copy: Plan) -> tuple[Entry | None, str | None]:
    """The merge's narrative in the logs of ``copy``'s user under its own id, when they hold
    a part of the merge without it (:func:`_copy_looks`): its facts, or a source archived
    toward it, the rest of the copy taken before the narrative was written. Then the copy is
    settled as one that holds the narrative (rolled forward, or withdrawn), so it reads as a
    copy of the finished merge: left, a source stayed hidden behind an id no entry of that
    user holds, or facts live of a narrative that is not there.

    Returns ``(narrative, None)``: written there, or an entry of that id there already that
    IS the copy (the narrative's text, and its ``reflection`` key this row's or gone: a hand
    edit, or an earlier copy, left it without the key the look-up tells it by);
    ``(None, None)`` when the copy holds none of it (ids are unique per user only: a source
    archived toward that id counts only with the text the merge saw); ``(None, why)`` when
    it cannot be written there: the id is another entry's there, or named there by no entry
    (its narrative deleted by hand: an id is never written twice), or the narrative is gone
    from the first folder too. Nothing is written over it, and ``why`` goes to the run
    record and the merge's audit row: only logged, a person was never told."""
    if plan.merged_id is None:
        return None, None
    held = replace(copy, merged_id=plan.merged_id)
    origin = plan.origin_user or plan.user_id
    if not find_facts(runtime, held) and not (
            archived_toward(runtime, held) and _holds_sources(runtime, held, origin)):
        return None, None
    source = find_narrative(runtime, plan)
    path = runtime.store.path_for_id(held.ref, plan.merged_id)
    there = next((e for e in (runtime.store.read(path).entries if path.is_file() else [])
                  if e.id == plan.merged_id), None)
    if there is not None and _is_copy_of(there, plan, source):
        log.warning("merge %s of cluster %s: %s in the logs of %s is its narrative (the same "
                    "text) without its reflection key; settled as the merge's copy", plan.id,
                    plan.cluster_id, plan.merged_id, held.ref)
        return there, None
    made = None
    if there is None and source is not None and source.id == plan.merged_id:
        made = runtime.store.append_copy(held.ref, source)
    if made is not None:
        return made, None
    why = ("it is gone from the first folder too" if source is None
           else f"the id is another entry's there ({runtime.store.rel(path)})"
           if there is not None
           else f"{runtime.store.rel(path)} names the id with no entry holding it (deleted "
                "by hand?), and an id is never written twice")
    # what and why first: a run record quotes the first 200 characters of each failure
    problem = (f"narrative {plan.merged_id} cannot be written in its copy in the logs of "
               f"{held.ref}: {why}; that copy (the folder of {plan.ref} copied while the "
               "merge was under way) holds part of the merge without it; nothing written "
               f"there: undo {plan.merged_id} as {held.ref} brings back what is archived "
               "toward it")
    log.error("merge %s of cluster %s: %s", plan.id, plan.cluster_id, problem)
    return None, problem


def _is_copy_of(entry: Entry, plan: Plan, source: Entry | None) -> bool:
    """Whether ``entry``, holding the narrative's id in another user's log, is the merge's
    narrative: its sections those of the narrative (as the plan wrote it, or as the first
    folder holds it now), and no other row's ``reflection`` key (another user who merged
    that day holds a narrative of that id, of the same text when their Episodes are)."""
    key = entry.meta.get(REFLECTION_KEY)
    if key is not None and str(key) != plan.id:
        return False
    written = {"Subject": plan.title, "Content": plan.content}
    return entry.sections == written or (source is not None
                                         and entry.sections == source.sections)


def _holds_sources(runtime: Runtime, copy: Plan, origin: str) -> bool:
    """Whether ``copy``'s user holds one of the merge's sources with the text the merge saw
    (its ``owner_id`` read as ``origin``'s): a copy, not another user's entry of that id."""
    found = runtime.store.get_many(copy.ref, copy.hashes)
    for entry_id, planned in copy.hashes.items():
        entry = found.get(entry_id)
        if entry is not None and planned in (entry.content_hash, replace(
                entry, meta={**entry.meta, "owner_id": origin}).content_hash):
            return True
    return False


def _deleted_after_commit(runtime: Runtime, indexer: Indexer, plan: Plan,
                          started: float) -> Outcome:
    """Settle a merge whose narrative was deleted by hand (or its log replaced) after some
    source was archived toward it, while a crash had left it unfinished: nothing is written.
    Written again under a new id, it stood live beside sources still archived toward the old
    one (``deprecated_entries`` keys are never re-pointed, SPEC §3), hidden behind an id no
    narrative holds; left as a finished merge whose narrative was deleted by hand, ``undo``
    of that id brings them back. The sources not archived yet stay live.

    Its copies in other users' folders are settled here too, and what cannot be settled is
    kept (the audit row, the run record), as at the end of :func:`complete` and
    :func:`abandon`: this path returned without it, so a copy left half done (its narrative
    gone from the first folder too, say) was said only in the log."""
    plan.error = (f"committed before a crash, then narrative {plan.merged_id} was deleted by "
                  "hand (or its log replaced): not written again; undo "
                  f"{plan.merged_id} brings back the sources archived toward it")
    log.warning("merge %s of cluster %s: %s", plan.id, plan.cluster_id, plan.error)
    _sync(indexer, runtime, touched_files(runtime, plan))
    problems = settle_copies(runtime, indexer, plan)
    note_copy_problems(plan, problems)
    conn = runtime.db()
    with transaction(conn):
        plan_report(conn, plan, "ok", merged=plan.merged_id, error=plan.error,
                    duration_ms=plan.llm_ms + ms_since(started))
        merge_journal.delete(conn, plan.id)
    return Outcome("ok", plan, plan.merged_id, plan.error, copy_problems=problems)


def _refused(runtime: Runtime, indexer: Indexer, plan: Plan, started: float, exc: TooLarge, *,
             committed: bool) -> Outcome:
    """A size limit refused the narrative or its facts: such a write fails the same way every
    time, so a merge not yet committed is withdrawn (``rejected``) instead of staying
    interrupted and failing each run (a log outgrown by the merges of one batch together,
    or by appends since :func:`overfull` measured it). Past the point of no return it cannot
    be withdrawn: raised, the row stays for a person to make room."""
    if committed:
        raise exc
    plan.error = f"{exc}; not written"
    return abandon(runtime, indexer, plan, started, status="rejected")


def narrative_meta(plan: Plan) -> dict[str, Any]:
    meta = {
        "owner_id": plan.user_id,
        "timestamp": plan.timestamp,
        "parent_type": "cluster",
        "parent_id": plan.cluster_id,
        "sources": plan.replaced,
        REFLECTION_KEY: plan.id,
        # when the merge happened, for the cluster's consolidated_at, online and rebuilt
        MERGED_AT_KEY: datetime.now(UTC).isoformat(timespec="seconds"),
    }
    recorded = {**meta, **_provenance_meta(plan)}
    # A record the parser would not read back (its metadata cap) made the narrative one the
    # store refuses to write: the merge stayed "interrupted" and recovery retried it every
    # run. Without it every sentence credits the entry-level sources (as after a hand edit).
    if writer.metadata_bytes(recorded) > MAX_YAML_BYTES["metadata"]:
        return meta
    return recorded


def _provenance_meta(plan: Plan) -> dict[str, Any]:
    """The narrative's sentence-level provenance (see everos_reflect.provenance), if known."""
    rows = plan.extra.get("provenance")
    if not rows:
        return {}
    try:
        return {PROVENANCE_KEY: provenance_meta(plan.content, rows)}
    except ValueError:  # rows that no longer line up with the text: keep entry-level sources
        return {}


def oversized(runtime: Runtime, plan: Plan) -> str | None:
    """Why the narrative or one of its facts could never be written, else ``None``.

    An entry over ``limits.max_entry_bytes`` is refused by the store, so such a merge must be
    turned down before its journal row exists: committed, it stopped half-way and recovery,
    retrying the same write each run, could never finish it (the merge stayed "interrupted").
    Measured as the store renders it, with ids never shorter than the ones the commit would
    allocate now (:func:`_widest`), so the measure only errs by a few bytes on the safe side.
    """
    from everos_reflect.markdown.writer import render_entry
    from everos_reflect.model import EntryId

    limit = runtime.store.limits.max_entry_bytes
    widest = _widest(runtime, plan)
    placeholder = str(EntryId(Kind.EPISODE, plan.day_date, widest))
    sized = replace(plan, merged_id=placeholder)
    narrative = len(render_entry(placeholder, narrative_meta(sized),
                                 {"Subject": plan.title, "Content": plan.content}).encode("utf-8"))
    fact_id = str(EntryId(Kind.ATOMIC_FACT, plan.day_date, widest))
    fact = max((len(render_entry(fact_id, fact_meta(sized, n), {"Fact": f}).encode("utf-8"))
                for n, f in enumerate(plan.facts)), default=0)
    size = max(narrative, fact)
    if size <= limit:
        return None
    what = "narrative" if narrative == size else "a fact of the narrative"
    return (f"the {what} would be a {size:,}-byte entry, over limits.max_entry_bytes "
            f"({limit:,}); not written")


def _widest(runtime: Runtime, plan: Plan) -> int:
    """An all-nines sequence number at least as wide as the narrative's and facts' ids would
    be if written now (seven digits at least). A fixed seven digits measured a day whose log
    holds an eight-digit id (a hand-written ``…_12345678``) a byte short per mention: a merge
    found to fit was then refused at its write."""
    from everos_reflect.markdown.store import widest_seq
    from everos_reflect.model import EntryId

    store, ref, day = runtime.store, plan.ref, plan.day_date
    last = [EntryId(Kind.EPISODE, day, store.next_free_seq(ref, Kind.EPISODE, day))]
    if plan.facts:
        first = store.next_free_seq(ref, Kind.ATOMIC_FACT, day, len(plan.facts))
        last.append(EntryId(Kind.ATOMIC_FACT, day, first + len(plan.facts) - 1))
    return widest_seq(str(i) for i in last)


def overfull(runtime: Runtime, plan: Plan) -> str | None:
    """Why a log the merge writes would outgrow ``limits.max_file_bytes``, else ``None``.

    A commit appends the narrative and its facts to the plan day's logs and adds
    ``deprecated_entries`` keys to every source's log; a write past the file limit is refused,
    so, like :func:`oversized`, this must be known before the journal row exists (committed,
    the merge stopped at that write and recovery retried it every run, for ever). Each log
    is measured as the commit would change it now, with ids never shorter than the real ones
    (:func:`_widest`, so only ever a few bytes on the safe side), the narrative's and facts'
    logs with the room their appends keep for withdrawing them; the sizes of merges of the
    same batch are not added up: :func:`complete` turns such a late refusal down as well.
    """
    from everos_reflect.model import EntryId

    store = runtime.store
    widest = _widest(runtime, plan)
    narrative_id = str(EntryId(Kind.EPISODE, plan.day_date, widest))
    sized = replace(plan, merged_id=narrative_id)
    fact_ids = [str(EntryId(Kind.ATOMIC_FACT, plan.day_date, widest - n))
                for n in range(len(plan.facts))]
    changes: dict[Path, list[Any]] = {}

    def appending(kind: Kind, blocks: list[str], ids: list[str]) -> None:
        def change(text: str | None) -> str:
            text = text or writer.new_log_text(kind, plan.user_id, plan.day_date)
            for block in blocks:
                text = writer.append_entry(text, block)
            # the room the append keeps for the keys withdrawing them (withdrawable=True)
            return writer.add_deprecations(text, dict.fromkeys(ids, narrative_id))
        changes.setdefault(store.log_path(plan.ref, kind, plan.day_date), []).append(change)

    appending(Kind.EPISODE, [writer.render_entry(
        narrative_id, narrative_meta(sized), {"Subject": plan.title, "Content": plan.content})],
        [narrative_id])
    if plan.facts:
        appending(Kind.ATOMIC_FACT, [writer.render_entry(i, fact_meta(sized, n), {"Fact": f})
                                     for n, (i, f) in enumerate(zip(fact_ids, plan.facts,
                                                                    strict=True))],
                  fact_ids)
    archived = dict.fromkeys([*plan.replaced, *plan.fact_ids], narrative_id)
    for path, pairs in archive_by_log(runtime, plan.ref, archived).items():
        changes.setdefault(path, []).append(
            lambda text, pairs=pairs: None if text is None
            else writer.add_deprecations(text, pairs))

    for path, steps in sorted(changes.items()):
        def all_steps(text: str | None, steps: list[Any] = steps) -> str | None:
            for step in steps:
                text = step(text)
            return text
        if (why := over_file_limit(runtime, path, store.size_after(path, all_steps))):
            return why
    return None


def archive_by_log(runtime: Runtime, ref: UserRef,
                   pairs: Mapping[str, str]) -> dict[Path, dict[str, str]]:
    """``old id -> narrative`` pairs grouped by the daily log that holds each old id: the
    ``deprecated_entries`` keys each log would get, as the file-limit checks measure them."""
    by_log: dict[Path, dict[str, str]] = {}
    for old, new in pairs.items():
        by_log.setdefault(runtime.store.path_for_id(ref, old), {})[old] = new
    return by_log


def archive_refusal(runtime: Runtime, path: Path, pairs: Mapping[str, str],
                    why: str = "") -> str | None:
    """Why adding ``pairs`` to the ``deprecated_entries`` of ``path`` would be refused, else
    ``None``: over ``limits.max_file_bytes`` (``why`` says what else is counted), or keys its
    frontmatter cannot take (at the YAML value bound). Measured before ``archiving`` is
    recorded; :meth:`MarkdownStore.size_after` alone answers ``None`` for an edit that raises,
    so such a log passed, the write then failed past the point of no return and the merge
    stayed committed, its narrative live beside its sources, failing every recovery."""
    refused: list[EverosError] = []

    def change(text: str | None) -> str | None:
        if text is None:
            return None
        try:
            return writer.add_deprecations(text, pairs)
        except EverosError as exc:
            refused.append(exc)
            return None

    size = runtime.store.size_after(path, change)
    if refused:
        return (f"{runtime.store.rel(path)} cannot take the merge's deprecated_entries keys "
                f"({refused[0]}); not written")
    return over_file_limit(runtime, path, size, why)


def over_file_limit(runtime: Runtime, path: Path, size: int | None, why: str = "") -> str | None:
    """The refusal to record when a log would hold ``size`` bytes, over
    ``limits.max_file_bytes`` (``why`` says what else is counted), else ``None``."""
    limit = runtime.store.limits.max_file_bytes
    if size is None or size <= limit:
        return None
    return (f"{runtime.store.rel(path)} would grow to {size:,} bytes, over "
            f"limits.max_file_bytes ({limit:,}){why}; not written")


def fact_meta(plan: Plan, n: int) -> dict[str, Any]:
    """The metadata of the plan's ``n``-th fact: its own time when the plan has one."""
    return {
        "owner_id": plan.user_id,
        "timestamp": plan.fact_times[n] if n < len(plan.fact_times) else plan.timestamp,
        "parent_type": "episode",
        "parent_id": plan.merged_id,
        REFLECTION_KEY: plan.id,
    }


def _entries_with_key(runtime: Runtime, plan: Plan, kind: Kind) -> list[Entry]:
    path = runtime.store.log_path(plan.ref, kind, plan.day_date)
    if not path.is_file():
        return []
    return [e for e in runtime.store.read(path).entries
            if str(e.meta.get(REFLECTION_KEY)) == plan.id]


def find_narrative(runtime: Runtime, plan: Plan) -> Entry | None:
    """The narrative this plan wrote, if it reached Markdown."""
    found = [e for e in _entries_with_key(runtime, plan, Kind.EPISODE)
             if e.parent_type == "cluster"]
    return found[0] if found else None


def _withdraw_strays(runtime: Runtime, plan: Plan, narrative_id: str | None) -> None:
    """Withdraw (archive toward themselves) the live facts this merge wrote for a narrative
    other than ``narrative_id``: one deleted by hand while the merge was interrupted. Written
    again under a new id (or the merge abandoned), it left them live, each fact twice in
    search, pointing at a narrative no log holds."""
    strays = {f.id: f.id for f in _entries_with_key(runtime, plan, Kind.ATOMIC_FACT)
              if f.parent_id != narrative_id and f.deprecated_by is None}
    if strays:
        runtime.store.deprecate(plan.ref, strays)


def find_facts(runtime: Runtime, plan: Plan) -> list[Entry]:
    return [e for e in _entries_with_key(runtime, plan, Kind.ATOMIC_FACT)
            if plan.merged_id is not None and e.parent_id == plan.merged_id]


@contextmanager
def locked(runtime: Runtime, paths: Iterable[Path]) -> Iterator[None]:
    """Hold the write locks of ``paths`` (sorted, so two holders never deadlock)."""
    with ExitStack() as stack:
        for path in sorted(set(paths)):
            stack.enter_context(runtime.store.lock(path))
        yield


def check_sources(runtime: Runtime, plan: Plan) -> None:
    """Raise :class:`StaleSources` unless every episode to archive still has the text the merge
    saw (or is already archived toward this merge's narrative)."""
    changed = changed_sources(runtime, plan)
    if changed:
        raise StaleSources("sources changed after Select: " + "; ".join(changed.values()))


def changed_sources(runtime: Runtime, plan: Plan, *,
                    copied_from: str | None = None) -> dict[str, str]:
    """``{episode id: why}`` of the episodes to archive that no longer have the text the merge
    saw (edited, deleted, or archived toward anything but this merge's narrative).
    ``copied_from``: the user the merge began for, whose folder ``plan.ref``'s is a copy of:
    an ``owner_id`` naming ``plan.ref`` is read as that user's (a copy made the new user's
    rewrites it, and every source counted as edited). The same for a folder renamed
    (``plan.origin_user``): a rewritten ``owner_id`` is no change to the sources."""
    copied_from = copied_from or plan.origin_user
    changed: dict[str, str] = {}
    found = runtime.store.get_many(plan.ref, plan.hashes)
    for entry_id, planned in plan.hashes.items():
        entry = found.get(entry_id)
        if entry is None:
            changed[entry_id] = f"{entry_id} was deleted"
            continue
        if plan.merged_id is not None and entry.deprecated_by == plan.merged_id:
            continue
        if entry.deprecated_by is not None:
            changed[entry_id] = f"{entry_id} was archived toward {entry.deprecated_by}"
        elif entry.content_hash != planned and not (
                copied_from is not None and meta_text(entry.meta.get("owner_id")) == plan.user_id
                and replace(entry, meta={**entry.meta, "owner_id": copied_from}).content_hash
                == planned):
            changed[entry_id] = f"{entry_id} was edited"
    return changed


def archived_toward(runtime: Runtime, plan: Plan) -> bool:
    """True when some episode or fact of the plan already points at its narrative: the merge
    passed its point of no return (whatever step the journal row recorded)."""
    if plan.merged_id is None:
        return False
    ids = [*plan.replaced, *plan.fact_ids]
    return any(e.deprecated_by == plan.merged_id
               for e in existing_entries(runtime, plan.ref, ids))


def _archive_sources(runtime: Runtime, plan: Plan, *, committed: bool,
                     copied_from: str | None = None) -> list[str]:
    """The stale check and the archiving, under the sources' file locks, so a cooperating
    writer (API, another process) cannot slip an edit in between.

    Not yet committed: any changed source raises :class:`StaleSources`, and keys that would
    push a log past ``limits.max_file_bytes`` raise :class:`ArchiveTooLarge`, before anything
    is archived (the batch path measured that; this one, which recovery takes, did not: the
    refused write came after ``archiving`` was recorded, so the merge counted as committed and
    recovery retried it every run, for ever). Committed (recovery after the point of no
    return): the unchanged entries are archived and the changed ones left live; returns why
    each was left. ``copied_from``: as for :func:`changed_sources`."""
    assert plan.merged_id is not None
    store, ref = runtime.store, plan.ref
    with locked(runtime, [store.path_for_id(ref, i) for i in plan.hashes]):
        refuse_if_gone(runtime, [plan])  # its sources are not "deleted": they went with it
        changed = changed_sources(runtime, plan, copied_from=copied_from)
        if changed and not committed:
            raise StaleSources("sources changed after Select: " + "; ".join(changed.values()))
        facts = [f for f in existing_entries(runtime, ref, plan.fact_ids)
                 if f.parent_id not in changed]
        mapping = {i: plan.merged_id for i in plan.replaced if i not in changed}
        mapping.update({f.id: plan.merged_id for f in facts})
        if not committed:
            for path, pairs in sorted(archive_by_log(runtime, ref, mapping).items()):
                if (why := archive_refusal(runtime, path, pairs)):
                    raise ArchiveTooLarge(why)
            _set_step(runtime.db(), plan, ARCHIVING)
            checkpoint(ARCHIVING)
        refuse_if_gone(runtime, [plan])
        conflicts = store.deprecate(ref, mapping)
    for old, new in sorted(conflicts.items()):
        log.warning("%s: %s was already archived toward %s; left as it is", ref, old, new)
    return list(changed.values())


def existing_entries(runtime: Runtime, ref: UserRef, ids: Iterable[str]) -> list[Entry]:
    """Those of ``ids`` still present in Markdown (a fact deleted by hand is simply skipped)."""
    by_path: dict[Path, list[str]] = {}
    for entry_id in ids:
        by_path.setdefault(runtime.store.path_for_id(ref, entry_id), []).append(entry_id)
    found = []
    for path, wanted in by_path.items():
        if path.is_file():
            present = {e.id: e for e in runtime.store.read(path).entries}
            found += [present[i] for i in wanted if i in present]
    return found


def touched_files(runtime: Runtime, plan: Plan) -> list[Path]:
    """Files a commit or abandon changed: the narrative's logs first (so the index knows the
    narrative before its sources point at it), then the archived entries' logs."""
    store, ref = runtime.store, plan.ref
    first = [store.log_path(ref, Kind.EPISODE, plan.day_date),
             store.log_path(ref, Kind.ATOMIC_FACT, plan.day_date)]
    rest = sorted({store.path_for_id(ref, i) for i in [*plan.replaced, *plan.fact_ids]})
    return first + [p for p in rest if p not in first]


def _sync(indexer: Indexer, runtime: Runtime, paths: Iterable[Path]) -> None:
    indexer.sync_paths(paths)


def mark_consolidated(runtime: Runtime, plan: Plan, vector: np.ndarray | None = None) -> None:
    """The cluster now holds the narrative. Clusters are derived: a cluster gone meanwhile is
    logged, not fatal (the indexer already attached the narrative by its ``parent_id``).
    ``vector``: the narrative's, when the caller has already read it from the index."""
    assert plan.merged_id is not None
    if vector is None:
        vectors = runtime.vectors.get_vectors(Kind.EPISODE, plan.ref, [plan.merged_id])
        vector = vectors.get(plan.merged_id)
    if vector is None:
        log.warning("no vector for narrative %s; cluster %s left to the indexer",
                    plan.merged_id, plan.cluster_id)
        return
    try:
        ClusterService(runtime).mark_consolidated(plan.cluster_id, plan.merged_id, vector,
                                                  plan.replaced)
    except UnknownCluster:
        log.warning("cluster %s is gone; narrative %s kept", plan.cluster_id, plan.merged_id)


def ms_since(started: float) -> int:
    return round((time.perf_counter() - started) * 1000)


# --------------------------------------------------------------------------- abandon


def abandon(runtime: Runtime, indexer: Indexer, plan: Plan, started: float, *,
             status: str) -> Outcome:
    """Withdraw the narrative and its facts. Only ever called before the point of no return,
    so nothing points at the narrative yet and nothing needs restoring: the withdrawal adds
    ``deprecated_entries`` keys and removes none."""
    conn, store, ref = runtime.db(), runtime.store, plan.ref
    _set_step(conn, plan, ABANDONING)
    narrative = find_narrative(runtime, plan)
    withdrawn = None
    if narrative is not None:
        withdrawn = narrative.id
        plan.merged_id = withdrawn
        mapping = {withdrawn: withdrawn}
        mapping.update({f.id: withdrawn for f in find_facts(runtime, plan)})
        store.deprecate(ref, mapping)
        checkpoint(ABANDONING)
    else:
        _withdraw_strays(runtime, plan, None)
    _sync(indexer, runtime, touched_files(runtime, plan))
    problems = settle_copies(runtime, indexer, plan, withdraw=True)  # copied while under way
    reason = plan.error or "interrupted"
    if withdrawn:
        reason += f" (narrative {withdrawn} withdrawn)"
    if problems:
        reason = "; ".join([reason, *problems])
    with transaction(conn):
        plan_report(conn, plan, status, merged=None, error=reason,
                    duration_ms=plan.llm_ms + ms_since(started))
        merge_journal.delete(conn, plan.id)
    log.warning("cluster %s: merge %s %s: %s", plan.cluster_id, plan.id, status, reason)
    return Outcome(status, plan, None, reason, copy_problems=problems)


# --------------------------------------------------------------------------- recovery


def resume(runtime: Runtime, plan: Plan, step: str) -> bool:
    """Where an interrupted merge picks up: its narrative found again from what reached the
    disk (``plan.merged_id``), and whether it is past the point of no return (some source may
    point at the narrative), so it must be rolled forward whatever changed meanwhile."""
    if plan.merged_id is None:
        found = find_narrative(runtime, plan)
        plan.merged_id = found.id if found is not None else None
    return step in COMMITTED_STEPS or archived_toward(runtime, plan)


def follow_moved_user(runtime: Runtime, indexer: Indexer, plan: Plan) -> bool:
    """Point ``plan`` at the user whose folder holds its narrative now, when its own user's
    folder is gone or holds none of it (:func:`_holds_merge`): a folder renamed (or moved to
    another project) by hand while the merge was interrupted took the narrative and the
    sources with it, and the merge is finished there. Finished under the old name, it wrote a
    new folder for a user nobody has (a narrative whose sources are elsewhere, left live) and
    left the moved narrative live beside its live sources. A folder of the old name made
    again since (the application appending to the old user's log) holds none of it: finished
    there, a narrative of sources it does not hold was written in it (and merged with the
    person's new Episode), or the merge was abandoned there while the moved narrative stayed
    live beside a second merge of the same sources. The index learns of the move first (a
    scan), so the finished narrative joins the cluster its sources are in now, as a
    ``reindex`` would place it.
    A narrative deleted by hand as well leaves a source archived toward it to tell the
    folder by (one user so found, not guessed among several): the merge then ends as one
    whose narrative a person deleted (:func:`_deleted_after_commit`), not ``abandoned``
    under the old name while its sources stay archived toward it. A merge killed before its
    narrative was written is told by its sources, unchanged (every one with the text the
    merge saw), and finished there as it would have been in place. Returns False when the
    folder is gone and no user holds the merge: nothing of it is left to finish, and nothing
    may be written for it; True, the plan unchanged, when the folder is there and no other
    user holds any of it (settled in place, as before)."""
    store = runtime.store
    here = not store.user_gone(plan.ref)
    if here and _holds_merge(runtime, plan):
        return True
    origin = plan.origin_user or plan.user_id
    moves = {ref: replace(plan, app=ref.app, project=ref.project, user_id=ref.user_id,
                          origin_user=origin)
             for ref in store.iter_users() if ref != plan.ref}
    found = next((ref for ref, moved in moves.items()
                  if find_narrative(runtime, moved) is not None), None)
    if found is None:  # the narrative deleted by hand too: a source archived toward it tells
        # (ids are unique per user only: a user found by that alone, or none)
        held = [ref for ref, moved in moves.items() if archived_toward(runtime, moved)]
        found = held[0] if len(held) == 1 else None
    if found is None and plan.merged_id is None:  # killed before its narrative was written:
        # its sources, each with the text the merge saw, tell (abandoned under the old name,
        # its row named a user nobody has, and the next run paid the merge again)
        held = [ref for ref, moved in moves.items()
                if moved.hashes and not changed_sources(runtime, moved)]
        found = held[0] if len(held) == 1 else None
    if found is None:
        return here
    log.warning("merge %s of cluster %s: the folder of user %s is gone or holds none of it; "
                "its entries are in %s's logs, so the merge is finished there", plan.id,
                plan.cluster_id, plan.ref, found)
    plan.app, plan.project, plan.user_id = found.app, found.project, found.user_id
    plan.origin_user = origin
    indexer.scan()
    return True


def _holds_merge(runtime: Runtime, plan: Plan) -> bool:
    """Whether the plan's user's logs hold anything of the merge: its narrative, an entry
    archived toward it, or a source with the text the merge saw (ids are unique per user
    only: a source id alone, held by a new Episode of a folder made again, does not count)."""
    if find_narrative(runtime, plan) is not None or archived_toward(runtime, plan):
        return True
    return any(e.content_hash == plan.hashes.get(e.id)
               for e in existing_entries(runtime, plan.ref, plan.hashes))


#: The status of an interrupted merge :func:`recover` could not settle yet (its row stays).
UNRECOVERED = "unrecovered"


def recover(runtime: Runtime, indexer: Indexer) -> list[Outcome]:
    """Finish or abandon every merge a crash interrupted, then finish every interrupted undo.
    Call it under the strategy lock (a Reflection run does, before anything else). Safe to
    call any number of times, and to be killed at any point: the next call picks up from what
    reached the disk. A merge that cannot be settled yet (e.g. a log broken by hand) keeps its
    row and is returned as :data:`UNRECOVERED` with the reason, so the run can say so."""
    outcomes = []
    for plan, step in pending(runtime.db()):
        started = time.perf_counter()
        try:
            outcome = settle_interrupted(runtime, indexer, plan, step, started)
        except Exception as exc:  # a log broken by hand, an OSError writing one: this
            if runtime.root_gone():  # merge's alone (the others are settled), retried next run
                raise
            log.error("cannot recover merge %s of cluster %s yet: %s", plan.id,
                      plan.cluster_id, describe(exc), exc_info=not isinstance(exc, EverosError))
            outcomes.append(Outcome(UNRECOVERED, plan, None, describe(exc)))
            continue
        log.info("recovered merge %s of cluster %s: %s", plan.id, plan.cluster_id,
                 outcome.status)
        outcomes.append(outcome)
    # copies of merges settled since, finished after their rows went (nothing else knows them)
    outcomes += settle_copies_left(runtime, indexer)
    from everos_reflect.strategies.undo import finish_interrupted  # undo imports this module

    finish_interrupted(runtime)
    return outcomes


def settle_interrupted(runtime: Runtime, indexer: Indexer, plan: Plan, step: str,
                       started: float, *, stale_status: str = "abandoned") -> Outcome:
    """Finish or abandon one merge whose row reached ``step`` and whose commit stopped: a kill
    (:func:`recover`), or its user's folder renamed or removed by hand while it was committed
    (:class:`UserGone`, a batch's merge finished alone). Its folder followed first
    (:func:`follow_moved_user`), its copies settled (:func:`settle_copies`); a changed source
    withdraws it as ``stale_status`` while nothing is archived toward it yet."""
    if not follow_moved_user(runtime, indexer, plan):
        plan.error = (f"interrupted, then the folder of user {plan.user_id} was "
                      "removed or renamed by hand")
        return abandon(runtime, indexer, plan, started, status="abandoned")
    if step == ABANDONING:  # abandon withdraws the copies too
        return abandon(runtime, indexer, plan, started, status="abandoned")
    settle_copies(runtime, indexer, plan)  # what cannot be settled is said once, at the end
    committed = resume(runtime, plan, step)
    changed = {} if committed else changed_sources(runtime, plan)
    if changed:
        plan.error = ("interrupted, then sources changed after Select: "
                      + "; ".join(changed.values()))
        return abandon(runtime, indexer, plan, started, status=stale_status)
    return complete(runtime, indexer, plan, started, stale_status=stale_status,
                    committed=committed)


# --------------------------------------------------------------------------- copies left


def copy_checkpoint(step: str) -> None:
    """Called after each write of :func:`settle_copies_left` on one copy. Does nothing; the
    crash-safety tests replace it to stop there (as :func:`checkpoint` for a merge)."""


#: The steps :func:`copy_checkpoint` reports, in the order they are written.
COPY_FACTS, COPY_ARCHIVED, COPY_NARRATIVE = "copy_facts", "copy_archived", "copy_narrative"


def settle_copies_left(runtime: Runtime, indexer: Indexer) -> list[Outcome]:
    """Settle the copies of merges whose journal row is gone: a folder copied by hand while
    a merge ran, the copy finished after the merge deleted its row (the look-up for copies,
    :func:`settle_copies_of`, runs just before that). Such a copy holds a part of the merge
    without its narrative: sources archived toward an id no entry of its user holds, or the
    merge's facts live of that missing narrative; or the narrative without the rest: live
    beside its live sources (copied after the narrative was written, before the sources were
    archived), of a merge withdrawn or undone since in the first folder. Nothing knew it, and
    it stayed so for good. (Of a merge finished there, the next run folds such a narrative
    into its merge of those sources, :mod:`everos_reflect.strategies.reflect`'s
    ``beside``: the same Markdown as a copy whose sources a person made live again.)

    Told from the index, in the logs synced since the last look (what ``status`` and
    ``lint`` report as entries archived toward a missing id, facts missing their Episode,
    and live narratives beside live sources; asked of every log, that took seconds at every
    run): each such id is looked up among the other users' narratives, and one whose
    ``reflection`` names no journal row (a merge settled), and whose sources or facts the
    copy holds (:func:`_copy_narrative`'s test), or whose narrative it holds under that
    row's key with nothing archived toward it, is the merge the copy is of. The copy is
    brought to the state the merge has in the first folder, from that folder's Markdown:

    - finished: its facts written, its unchanged sources archived (only those archived in
      the first folder), and its narrative written last (a kill between two of these writes
      leaves a part without the narrative, found again by the next recovery);
    - withdrawn there (or, nothing archived yet, a source changed in the copy): its facts
      withdrawn, then its narrative;
    - undone there since: its facts archived ``undone``, the entries archived toward the
      narrative restored, and its narrative, when the copy holds it, archived ``undone``
      last, as ``undo`` leaves them (the copy held the merge half done for good, or the
      narrative live beside its sources, which the first folder's undo had taken back).

    A narrative merged again since (an update merge folded it in) is left: the copy is of
    neither state. Called by every recovery and by a Reflection run right after its scan (a
    copy the index did not know at its recovery: no sync since it was made). Not on a root
    whose index this process cannot write: nothing there could be settled, nor the look
    recorded (the write failed the call)."""
    from everos_reflect.index import copies_left, reads
    from everos_reflect.markdown.parser import UNDONE

    if runtime.read_only:  # nothing could be settled nor recorded: nothing is written
        log.info("%s cannot be written here: copies of settled merges are not looked for "
                 "(nothing is written)", runtime.index_dir)
        return []
    conn = runtime.db()
    began = (datetime.now(UTC) - timedelta(seconds=MTIME_SLACK_NS / 1e9)).isoformat(
        timespec="microseconds")
    try:
        since = copies_left.synced_since(conn)
        wanted = {(ref, i, False) for ref, ids in copies_left.ids_without_their_entry(
            conn, exempt=UNDONE, synced_since=since).items() for i in ids}
        wanted |= {(ref, i, True) for ref, ids in copies_left.narratives_beside_their_sources(
            conn, synced_since=since).items() for i in ids}
        rows = {plan.id for plan, _step in pending(conn)}
    except Exception as exc:  # an index that cannot be read now: looked at next time
        if runtime.root_gone():
            raise
        log.error("cannot look for copies of settled merges yet: %s", describe(exc),
                  exc_info=not isinstance(exc, EverosError))
        return []
    outcomes: list[Outcome] = []
    failed = False
    for ref, narrative_id, beside in sorted(wanted, key=lambda w: (str(w[0]), w[1], w[2])):
        if not _is_episode_id(narrative_id):
            continue
        for origin in reads.narrative_owners_other_than(conn, narrative_id, ref):
            try:
                found = _settled_merge(runtime, origin, narrative_id, rows)
                if found is None:
                    continue
                plan, state = found
                outcome = _settle_copy_left(runtime, indexer, plan, ref, state=state,
                                            beside=beside)
            except Exception as exc:  # that copy's alone: looked at again next time
                if runtime.root_gone():
                    raise
                failed = True
                log.error("cannot settle %s's copy of narrative %s of %s: %s", ref,
                          narrative_id, origin, describe(exc),
                          exc_info=not isinstance(exc, EverosError))
                continue
            if outcome is not None:
                outcomes.append(outcome)
                break
    if not failed:
        copies_left.set_synced_since(conn, began, previous=since)
    return outcomes


def _is_episode_id(text: str) -> bool:
    try:
        return EntryId.parse(text).kind is Kind.EPISODE
    except EverosError:
        return False


#: What became of a settled merge in its first folder (:func:`_settled_merge`).
FINISHED, WITHDRAWN, UNDONE_SINCE = "finished", "withdrawn", "undone"


def _settled_merge(runtime: Runtime, origin: UserRef, narrative_id: str,
                   rows: set[str]) -> tuple[Plan, str] | None:
    """The plan of the settled merge that wrote ``narrative_id`` for ``origin``, rebuilt
    from ``origin``'s Markdown, and what became of it there (:data:`FINISHED`,
    :data:`WITHDRAWN`, :data:`UNDONE_SINCE`); ``None`` when no merge did (no
    ``reflection`` key: written by hand), its row is still in the journal (its own recovery
    settles its copies), or the narrative was merged again since (left as it is: the copy
    is of neither state)."""
    from everos_reflect.markdown.parser import UNDONE

    store = runtime.store
    narrative = store.get_many(origin, [narrative_id]).get(narrative_id)
    if narrative is None or narrative.parent_type != "cluster" or (
            narrative.deprecated_by not in (None, narrative_id, UNDONE)):
        return None  # merged again since: no one state to bring the copy to
    row = meta_text(narrative.meta.get(REFLECTION_KEY))
    if not row or row in rows:
        return None
    sources = narrative.meta.get("sources")
    replaced = [s for s in sources if isinstance(s, str)] if isinstance(sources, list) else []
    held = store.get_many(origin, replaced)
    eid = EntryId.parse(narrative_id)
    plan = Plan(
        id=row, run_id="", app=origin.app, project=origin.project, user_id=origin.user_id,
        cluster_id=str(narrative.parent_id or ""), mode="init", day=eid.day.isoformat(),
        title=narrative.sections.get("Subject", ""),
        content=narrative.sections.get("Content", ""), facts=[],
        timestamp=meta_text(narrative.meta.get("timestamp")) or "",
        sources=replaced, existing_id=None,
        hashes={i: e.content_hash for i, e in held.items()},
        fact_ids=[], provider="", model="", merged_id=narrative_id)
    facts = sorted(find_facts(runtime, plan), key=lambda f: f.id)
    plan.facts = [f.sections.get("Fact", "") for f in facts]
    plan.fact_times = [meta_text(f.meta.get("timestamp")) or plan.timestamp for f in facts]
    plan.fact_ids = sorted(
        f.id for path in store.iter_files(origin, kinds=[Kind.ATOMIC_FACT])
        for f in store.read(path).entries
        if f.deprecated_by == narrative_id and f.parent_id in held
        and meta_text(f.meta.get(REFLECTION_KEY)) != row)
    state = {None: FINISHED, narrative_id: WITHDRAWN}.get(narrative.deprecated_by,
                                                          UNDONE_SINCE)
    if state == FINISHED:  # the copy is brought to this folder's state: only the sources
        # archived here are archived there (one left live here, edited in a crash window,
        # stays live there too)
        plan.sources = [i for i in replaced
                        if i in held and held[i].deprecated_by == narrative_id]
        plan.hashes = {i: plan.hashes[i] for i in plan.sources}
    return plan, state


def _settle_copy_left(runtime: Runtime, indexer: Indexer, plan: Plan, ref: UserRef, *,
                      state: str, beside: bool) -> Outcome | None:
    """Settle ``plan``'s copy in ``ref``'s logs, its row gone (:func:`settle_copies_left`),
    to ``state``, the merge's in its first folder; ``None`` when those logs hold no part of
    it. ``beside``: found as a live narrative beside live sources, so a copy only when
    ``ref`` holds the narrative under this row's key with nothing archived toward it
    (another user who merged the same sources that day holds a narrative of that id too),
    and the merge was withdrawn or undone there since.

    A user with an audit row of its own for the narrative is the first folder, never a
    copy (the other is the copy of it): its narrative deleted by hand was written there
    again from the copy, a source made live by hand archived again."""
    from everos_reflect.index.audit import merge_row

    assert plan.merged_id is not None
    store = runtime.store
    copy = replace(plan, app=ref.app, project=ref.project, user_id=ref.user_id, extra={})
    origin = plan.user_id
    if merge_row(runtime.db(), ref, plan.merged_id) is not None:
        return None
    there = find_narrative(runtime, copy)
    if there is not None and there.id != plan.merged_id:
        there = None  # a narrative of this row under another id: no copy of this one
    if beside:
        # finished in the first folder: left to the next run, which folds such a narrative
        # into its merge of those sources (as one whose sources a person made live again
        # by hand in a copy: the same Markdown, and archiving them again undid the edit)
        if there is None or there.deprecated_by is not None or state == FINISHED:
            return None
    elif not find_facts(runtime, copy) and not (
            archived_toward(runtime, copy) and _holds_sources(runtime, copy, origin)):
        return None
    problems: list[str] = []
    if state == UNDONE_SINCE:
        _undo_copy(runtime, copy, there)
        how = "undone there too, as it was in the first folder since"
    elif state == WITHDRAWN or (not archived_toward(runtime, copy)
                                and changed_sources(runtime, copy, copied_from=origin)):
        live = there is not None and there.deprecated_by is None
        toward = plan.merged_id if live else None
        store.deprecate(ref, {f.id: toward or f.id for f in find_facts(runtime, copy)
                              if f.deprecated_by is None})
        copy_checkpoint(COPY_FACTS)
        if live:  # last: a kill before leaves it beside its live sources, found again
            store.deprecate(ref, {plan.merged_id: plan.merged_id})
        copy_checkpoint(COPY_NARRATIVE)
        how = "withdrawn there"
    else:
        _write_missing_facts(runtime, copy)
        copy_checkpoint(COPY_FACTS)
        _archive_sources(runtime, copy, committed=True, copied_from=origin)
        copy_checkpoint(COPY_ARCHIVED)
        made = there
        if made is None:
            made, conflict = _copy_narrative(runtime, plan, copy)
            if conflict is not None:
                problems.append(conflict)
        copy_checkpoint(COPY_NARRATIVE)
        how = "finished there" if made is not None else "left without its narrative"
    _sync(indexer, runtime, touched_files(runtime, copy))
    log.warning("merge %s of cluster %s (settled, its row gone): the folder of user %s was "
                "copied by hand into %s's while it was under way, the copy finished after; "
                "%s", plan.id, plan.cluster_id, plan.ref, ref, how)
    return Outcome("copy_settled", copy, plan.merged_id, "; ".join(problems) or None,
                   copy_problems=problems)


def _undo_copy(runtime: Runtime, copy: Plan, there: Entry | None) -> None:
    """Bring ``copy`` (a merge's copy in another user's logs) to the state ``undo`` left the
    merge in, in its first folder: its live facts archived ``undone``, every entry archived
    toward the narrative restored (only ``undo`` removes keys: this is that undo, owed in
    the copy), and the narrative there (``there``), live, archived ``undone`` last. Each
    write removes what the look-up finds the copy by (live facts of a missing narrative,
    entries archived toward it, a live narrative beside live sources) for itself only, so a
    kill between two leaves the rest to be found again."""
    from everos_reflect.markdown.parser import UNDONE

    store, ref, merged_id = runtime.store, copy.ref, copy.merged_id
    assert merged_id is not None
    facts = {f.id: UNDONE for f in find_facts(runtime, copy) if f.deprecated_by is None}
    if facts:
        store.deprecate(ref, facts)
    copy_checkpoint(COPY_FACTS)
    replaced = existing_entries(runtime, ref, copy.replaced)
    days = sorted({EntryId.parse(e.id).day for e in replaced})
    restore = [e.id for e in replaced if e.deprecated_by == merged_id]
    restore += [f.id for day in days
                for f in existing_facts_of_day(runtime, ref, day)
                if f.deprecated_by == merged_id]
    if restore:
        removed = store.undeprecate(ref, restore)
        foreign = {old: new for old, new in removed.items() if new != merged_id}
        if foreign:  # re-mapped by hand between the read and the write: put those back
            store.deprecate(ref, foreign)
    copy_checkpoint(COPY_ARCHIVED)
    if there is not None and there.deprecated_by is None:
        store.deprecate(ref, {merged_id: UNDONE})
    copy_checkpoint(COPY_NARRATIVE)


def existing_facts_of_day(runtime: Runtime, ref: UserRef, day: date) -> list[Entry]:
    """The atomic facts of ``ref``'s log of ``day`` (none when there is none)."""
    path = runtime.store.log_path(ref, Kind.ATOMIC_FACT, day)
    return runtime.store.read(path).entries if path.is_file() else []


def has_pending(root: Path) -> bool:
    """Whether ``root``'s journal holds interrupted merges, read without creating or migrating
    anything (cheap enough to ask before every command)."""
    return merge_journal.has_rows(root)


__all__ = [
    "COMMITTED_STEPS",
    "COPY_ARCHIVED",
    "COPY_FACTS",
    "COPY_NARRATIVE",
    "REFLECTION_KEY",
    "UNRECOVERED",
    "Outcome",
    "Plan",
    "StaleSources",
    "UserGone",
    "abandon",
    "archived_toward",
    "changed_sources",
    "check_sources",
    "checkpoint",
    "complete",
    "copy_checkpoint",
    "existing_entries",
    "fact_meta",
    "find_facts",
    "find_narrative",
    "has_pending",
    "insert_report",
    "journalled_since",
    "locked",
    "mark_consolidated",
    "ms_since",
    "narrative_meta",
    "new_plan",
    "note_copy_problems",
    "pending",
    "plan_report",
    "recover",
    "refuse_if_gone",
    "resume",
    "settle_copies",
    "settle_copies_left",
    "settle_copies_of",
    "settle_interrupted",
    "touched_files",
]
