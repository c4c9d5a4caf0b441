"""Undo one Reflection merge: its sources and their facts live again, the narrative is archived.

Markdown is the truth, so an undo is two frontmatter patches and nothing else: remove exactly the
``deprecated_entries`` keys that map to the merged narrative (the only way such a key is ever
removed, SPEC §3), then archive the narrative and its atomic facts with the value ``undone``
(archived, replaced by nothing). A rebuild from Markdown therefore agrees with the result. The
audit row becomes ``undone``; the touched files are re-synced through the :class:`Indexer`, whose
clustering hooks put the sources back into their cluster, and an update merge hands the cluster
back to the narrative it had replaced.

Order makes a crash harmless: restoring comes first, so an interrupted undo leaves the sources
*and* the narrative live (duplicates in search, nothing hidden or lost) and running it again
finishes the job. Undo holds the ``reflect_episodes`` strategy lock, so it never races a merge,
and the rebuild lock shared, as a run does, so it never races a ``reindex`` or ``recluster``.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from filelock import Timeout

from everos_reflect import root_lock
from everos_reflect.clustering.service import ClusterService, UnknownCluster
from everos_reflect.engine.engine import lock_path
from everos_reflect.errors import (
    EverosError,
    InvalidId,
    MarkdownError,
    StrategyBusy,
    UndoRefused,
    UnknownEntry,
    describe,
)
from everos_reflect.fileio import denied_folder, os_reason, what_stands
from everos_reflect.index import merge_journal, reads
from everos_reflect.index.audit import (
    follow_moved_merges,
    mark_reflection_redone,
    mark_reflection_undone,
    merge_row,
    merge_sources,
    move_merge,
    reflection_statuses,
)
from everos_reflect.index.db import db_built, transaction
from everos_reflect.index.sync import Indexer
from everos_reflect.markdown.parser import UNDONE, is_entry_id
from everos_reflect.model import Entry, EntryId, Kind, UserRef, log_name_match, not_an_episode_id
from everos_reflect.strategies import journal

if TYPE_CHECKING:
    from everos_reflect.runtime import Runtime

log = logging.getLogger(__name__)

#: The strategy whose runs an undo must never overlap.
REFLECT = "reflect_episodes"
#: Seconds an undo waits for a running merge to release the strategy lock.
LOCK_WAIT_SECONDS = 5.0


@dataclass
class UndoResult:
    """What one undo changed. ``cascaded`` lists the later merges undone first, oldest last."""

    ref: UserRef
    merged_entry_id: str
    cluster_id: str | None
    mode: str  # init | update
    restored: list[str]  # episodes live again (in update mode the previous narrative too)
    restored_facts: list[str]
    archived: list[str]  # the narrative, now deprecated_by "undone"
    archived_facts: list[str]
    previous_narrative: str | None  # the narrative an update merge had replaced
    cluster_narrative: str | None  # the cluster's consolidated narrative after the undo
    reports: list[str]  # reflection_report ids now marked undone
    cascaded: list[UndoResult] = field(default_factory=list)
    #: sources of the merge that could not be restored: their entry is no longer in the logs
    #: (deleted by hand, with its log or alone)
    missing: list[str] = field(default_factory=list)
    #: the archived narrative's Content was edited by hand after the merge: those edits are
    #: archived with it (still in its log), so the person is told, not left to find out
    edited_by_hand: bool = False
    #: the narrative's id holds an entry that is not the merge's narrative (its log replaced
    #: by hand): that entry is left as it is, live; only the merge's own entries are restored
    replaced_by_hand: bool = False
    #: users whose logs hold a copy of the folder, taken by hand while this undo was half
    #: done, in which it was finished too (the undo of an earlier merge a ``--cascade`` goes
    #: on to is finished there as well); not part of the answer
    copied_to: list[UserRef] = field(default_factory=list, repr=False)
    #: the status of each audit row this undo set ``undone``, as it was before: what taking
    #: the undo back sets again (a ``--cascade`` refused at an earlier merge); not part of
    #: the answer
    prior_status: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def status(self) -> str:
        """``partial`` when this undo or one it cascaded to left a source unrestored."""
        steps = [self, *self.cascaded]
        return "partial" if any(step.missing for step in steps) else "ok"

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "app_id": self.ref.app,
            "project_id": self.ref.project,
            "user_id": self.ref.user_id,
            "merged_entry_id": self.merged_entry_id,
            "cluster_id": self.cluster_id,
            "mode": self.mode,
            "restored": self.restored,
            "restored_facts": self.restored_facts,
            "missing": self.missing,
            "edited_by_hand": self.edited_by_hand,
            "replaced_by_hand": self.replaced_by_hand,
            "archived": self.archived,
            "archived_facts": self.archived_facts,
            "previous_narrative": self.previous_narrative,
            "cluster_narrative": self.cluster_narrative,
            "reports": self.reports,
            "cascaded": [c.to_dict() for c in self.cascaded],
        }


def undo_merge(runtime: Runtime, ref: UserRef, merged_id: str, *,
               cascade: bool = False) -> UndoResult:
    """Revert the merge that wrote ``merged_id`` for ``ref``.

    Raises :class:`InvalidId` for a malformed id, :class:`UnknownEntry` when the user has no such
    entry, :class:`UndoRefused` when it is not a merged narrative, was already undone, or a
    later update merge folded it into a newer narrative (unless ``cascade``: the later merges
    are then undone first, newest first, and taken back should this one be refused after
    them, :func:`_cascade_taken_back`), and
    :class:`StrategyBusy` while a Reflection run holds the strategy lock.
    """
    eid = EntryId.parse(merged_id)
    if eid.kind is not Kind.EPISODE:
        raise InvalidId(not_an_episode_id(merged_id))
    _refuse_before_locking(runtime, ref, str(eid))
    with _reflect_lock(runtime), _rebuild_shared(runtime, merged_id):
        # An interrupted merge or undo is settled first (under the same lock), so an undo never
        # races its recovery nor undoes half of it. Undoing again after a crash mid-undo: the
        # finished undo is the answer.
        finished = finish_interrupted(runtime) if _indexed(runtime) else []
        if _indexed(runtime):
            journal.recover(runtime, Indexer(runtime))
        for result in finished:
            if result.ref == ref and result.merged_entry_id == str(eid):
                return result
        return _undo(runtime, ref, str(eid), cascade=cascade, chain=())


def _refuse_before_locking(runtime: Runtime, ref: UserRef, merged_id: str) -> None:
    """Refuse, before any lock file is made, an undo the Markdown alone refuses (no such entry
    and nothing archived toward it; an entry that is no merge): a refused command leaves the
    root as it was, and taking the locks first left ``.index/locks/strategy-….lock`` behind
    (on a root never indexed, ``.index`` itself with the rebuild locks). Not while a crash
    left work to settle: settling it, under the locks, may be what answers the undo."""
    from everos_reflect.engine.recovery import has_interrupted

    if has_interrupted(runtime.root):
        return
    try:
        narrative = runtime.store.get(ref, merged_id)
    except UnknownEntry:
        _refuse_unknown(runtime, ref, merged_id)
        return
    _refuse_not_a_merge(runtime, ref, merged_id, narrative)


def _refuse_unknown(runtime: Runtime, ref: UserRef, merged_id: str) -> None:
    """Raise :class:`UnknownEntry` when ``merged_id`` is not in the user's logs and nothing
    there is archived toward it (else a merge whose narrative was deleted by hand)."""
    if _scan(runtime, ref, merged_id).restore:
        return
    audit = merge_row(runtime.db(), ref, merged_id) if _indexed(runtime) else None
    if audit is None:
        raise UnknownEntry(_not_this_users(runtime, ref, merged_id))
    raise UnknownEntry(
        f"no entry {merged_id} for user {ref}: the narrative of this merge "
        f"({audit[1]} in the audit) is no longer in the logs, and no source is archived "
        "toward it: nothing to undo")


def _refuse_not_a_merge(runtime: Runtime, ref: UserRef, merged_id: str,
                        narrative: Entry) -> None:
    """Raise when ``narrative`` is no merged narrative (another user's, when the id is a merge
    of theirs: ids are per user, so the usual cause is the wrong ``--user``), unless it stands
    where this user's merge wrote its narrative, the merge's entries still archived toward
    it (:func:`_merge_keys`): the undo then restores them and leaves that entry alone."""
    if narrative.parent_type == "cluster" or _merge_keys(runtime, ref, merged_id):
        return
    if _merge_owners(runtime, ref, merged_id):
        raise UnknownEntry(_not_this_users(runtime, ref, merged_id))
    raise UndoRefused(
        f"{merged_id} is not a merged narrative (parent_type: "
        f"{narrative.parent_type or 'none'}); only a Reflection merge can be undone")


def _indexed(runtime: Runtime) -> bool:
    """Whether the root has an index (:func:`db_built`). Without one there is no journal to
    settle, no audit row and no other user's merge to name: an undo refused there (not a
    merge, no such entry) reads only the Markdown, and leaves no ``system.db`` behind, which
    opening it to look made (with empty tables)."""
    return db_built(runtime.root)


@contextmanager
def _reflect_lock(runtime: Runtime) -> Iterator[None]:
    try:  # a root moved away meanwhile is not made again by the lock (RootGone)
        lock = root_lock.take(runtime, lock_path(runtime.root, REFLECT), LOCK_WAIT_SECONDS)
    except Timeout:
        raise StrategyBusy(f"{REFLECT} is running; undo again when the run has finished") from None
    try:
        yield
    finally:
        lock.release()


@contextmanager
def _rebuild_shared(runtime: Runtime, merged_id: str) -> Iterator[None]:
    """Hold the rebuild lock shared, as a Reflection run does (:mod:`index.rebuild`): an undo
    rewrites index rows and, when the online state disagrees, rebuilds the user's clusters,
    which a ``reindex`` or ``recluster`` empties and refills meanwhile. Shared, not exclusive
    like ``recluster``: the Reflection lock held here already keeps every reader of the
    clusters out, and an undo a crash interrupted is also finished by the recovery at the start
    of a Reflection run, which holds this lock shared (an exclusive take there waited on
    itself for ever)."""
    from everos_reflect.index import rebuild

    guard = rebuild.try_shared(runtime.index_dir)
    if guard is None:
        raise StrategyBusy(f"cannot undo {merged_id} now: the index is being rebuilt (reindex "
                           "or recluster), or is about to be; undo again once it is done")
    try:
        yield
    finally:
        rebuild.release(guard)


def _merge_owners(runtime: Runtime, ref: UserRef, merged_id: str) -> list[str]:
    """Other users of the root whose merged narrative has this id (from the index)."""
    if not _indexed(runtime):
        return []
    try:
        return [str(o) for o in reads.narrative_owners_other_than(runtime.db(), merged_id, ref)]
    except sqlite3.Error:
        return []


def _not_this_users(runtime: Runtime, ref: UserRef, merged_id: str) -> str:
    """"no entry X for user U", as every command says an unknown id, and whose merge the id is
    when another user has it (ids are unique per user only, so a wrong ``--user`` is the usual
    cause). It led with "no such entry for this user: ", which the rest of the line said
    again."""
    owners = _merge_owners(runtime, ref, merged_id)
    hint = f" (it is a merge of {', '.join(owners)}: check --user)" if owners else ""
    return f"no entry {merged_id} for user {ref}{hint}"


@dataclass
class _Found:
    """Everything in the user's Markdown that points at one narrative."""

    restore: dict[str, Entry | None] = field(default_factory=dict)  # keys mapping to it
    facts: list[Entry] = field(default_factory=list)  # its live atomic facts


def _undo(runtime: Runtime, ref: UserRef, merged_id: str, *, cascade: bool,
          chain: tuple[str, ...]) -> UndoResult:
    store = runtime.store
    try:
        narrative = store.get(ref, merged_id)
    except UnknownEntry:
        return _undo_deleted(runtime, ref, merged_id)
    _refuse_not_a_merge(runtime, ref, merged_id, narrative)
    if narrative.parent_type != "cluster":  # the narrative's log replaced by hand: an entry
        # that is not the merge's stands under its id, the merge's entries archived toward it
        return _restore_only(runtime, ref, merged_id, replaced=True)
    if _indexed(runtime):
        _follow_moved_merge(runtime, ref, narrative)
    if narrative.deprecated_by == UNDONE:
        if _indexed(runtime):
            _mark_reports_undone(runtime, ref, merged_id)  # heals a crash right after the Markdown
        if not _scan(runtime, ref, merged_id).restore:
            raise UndoRefused(f"the merge that wrote {merged_id} was already undone")
        # archived `undone` by hand with its sources still archived toward it: they stayed
        # hidden for good behind "already undone"; restore them, nothing left to archive
        return _restore_only(runtime, ref, merged_id)
    if narrative.deprecated_by == merged_id:
        raise UndoRefused(f"{merged_id} was withdrawn by an interrupted merge that never "
                          "completed; its sources were never archived, so there is nothing to undo")
    _refuse_if_journaled(runtime, ref, merged_id)

    cascaded: list[UndoResult] = []
    copied: list[UserRef] = []  # copies of the folder the later undo was finished in too
    later = narrative.deprecated_by
    if later is not None:
        _refuse_archived_by_hand(runtime, ref, merged_id, later)
        if not cascade:
            raise UndoRefused(
                f"a later merge built on {merged_id}: it was folded into {later}; undo {later} "
                "first, or cascade to undo both (newest first)")
        if later in chain:
            raise EverosError(f"deprecated_entries of {merged_id} loop back through {later}")
        # this undo's logs checked before the later merge's undo writes any: refused after
        # it, the cascade stopped half-way
        _refuse_unwritable(runtime, ref, merged_id, _scan(runtime, ref, merged_id))
        newer = _undo(runtime, ref, later, cascade=True, chain=(*chain, merged_id))
        cascaded = [*newer.cascaded, _flat(newer)]
        copied = newer.copied_to
    row_id: str | None = None
    try:
        if cascaded:
            if cascaded[-1].ref != ref:  # the folder renamed or moved by hand while that
                # undo ran, which was finished where it went (_apply_here): so is this one.
                # Looked up under the old name, it failed ("no entry"), this narrative live
                # beside what it restored
                ref = cascaded[-1].ref
                if _indexed(runtime):
                    _follow_moved_merge(runtime, ref, store.get(ref, merged_id))
            narrative = store.get(ref, merged_id)
            if narrative.deprecated_by is not None:
                raise EverosError(f"{merged_id} is still archived (deprecated_by "
                                  f"{narrative.deprecated_by}) after undoing {later}")
        found = _scan(runtime, ref, merged_id)
        _refuse_unwritable(runtime, ref, merged_id, found)
        restore_ids = sorted(found.restore)
        previous = _previous_narrative(found, narrative.parent_id)
        intent = _Intent(app=ref.app, project=ref.project, user_id=ref.user_id,
                         undo=merged_id, cluster_id=narrative.parent_id, restore=restore_ids,
                         archived_facts=sorted(e.id for e in found.facts),
                         previous=previous.id if previous is not None else None,
                         sources=_sources(runtime, ref, merged_id, narrative),
                         prior_status=_audit_before(runtime, ref, merged_id))
        # Written before the first patch: a kill from here on is finished by the next start.
        row_id = f"ru_{uuid.uuid4().hex[:16]}"
        merge_journal.insert(runtime.db(), row_id, ref, narrative.parent_id or "",
                             json.dumps(asdict(intent), sort_keys=True), journal.UNDOING)
        result = _applied(runtime, intent, row_id)
    except Exception as exc:
        if not cascaded or runtime.root_gone() or (
                row_id is not None and _row_kept(runtime, row_id)):
            raise  # nothing cascaded to, or this undo is left for the next start to finish
        raise _cascade_taken_back(runtime, merged_id, cascaded, copied, exc) from exc
    if result.ref != ref:  # finished where the folder went, with its row
        result.cascaded = cascaded
        return result
    copies = _copies_finished(runtime, intent, also=copied)
    result.copied_to = [c.ref for c in copies.finished]
    result.cascaded = cascaded
    if not copies.failed:  # else its row stays: the next start finishes those copies
        with transaction(runtime.db()):
            merge_journal.delete(runtime.db(), row_id)
    return result


def _row_kept(runtime: Runtime, row_id: str) -> bool:
    """Whether the undo's journal row is still there: the undo is left half done for the next
    start to finish (an I/O error), not refused nor rolled back."""
    return any(r == row_id for r, _ in merge_journal.rows_at(runtime.db(), journal.UNDOING))


def _cascade_taken_back(runtime: Runtime, merged_id: str, cascaded: list[UndoResult],
                        copied: list[UserRef], exc: BaseException) -> BaseException:
    """An undo of ``--cascade`` refused (or rolled back) after the later merges' undos were
    done (``cascaded``, in the order undone): those are taken back, the last undone first
    (:func:`_take_back`), in the folder and in the copies of it they were finished in too
    (``copied``), so the cascade leaves the logs as before it. It left the later merges
    undone and this one not, the error saying only that this one was refused ("the logs are
    as before it"). Returns what to raise: ``exc``'s type, its message saying what became of
    each later undo; one that cannot be taken back (a log refusing that too) is named, with
    what to do to finish the cascade instead."""
    said, kept = [], []
    left: str | None = None  # a take-back stopped half-way, its row kept for the next start
    for step in reversed(cascaded):
        try:
            _take_back(runtime, step)
            for ref in copied:
                _take_back_in_copy(runtime, step, ref)
        except _TakeBackLeft as half:
            left = (f"; taking back the undo of {step.merged_entry_id} this --cascade did "
                    f"first stopped half-way ({describe(half.error)}): the next start (a "
                    "command that writes, a run, serve) finishes taking it back")
            break
        except Exception as again:
            if runtime.root_gone():
                raise
            same = (isinstance(again, MarkdownError) and isinstance(exc, MarkdownError)
                    and again.path == exc.path)
            kept.append(f"by the same log, {again.path}" if same  # type: ignore[union-attr]
                        else describe(again))
            break  # an older one cannot be taken back over a newer one still undone
        said.append(step.merged_entry_id)
    note = ""
    if said:
        note += (f"; the undo of {', '.join(said)} this --cascade did first is taken back "
                 f"({'each' if len(said) > 1 else 'it'} live again, its sources archived "
                 "toward it)")
    if kept:
        done = [s.merged_entry_id for s in cascaded if s.merged_entry_id not in said]
        note += (f"; the undo of {', '.join(done)} this --cascade did first stays done: "
                 f"taking it back was refused too ({kept[0]}); fix what is named, then undo "
                 f"{merged_id} again to finish the cascade")
    if left is not None:
        note += left
    log.info("undo --cascade of %s refused after undoing %s%s", merged_id,
             ", ".join(s.merged_entry_id for s in cascaded), note)
    if isinstance(exc, EverosError):
        return _said_also(exc, note)
    return EverosError(f"{describe(exc)}{note}")


def take_back_checkpoint(step: str) -> None:
    """Called after each step of a take-back (:func:`_take_back`, :func:`_finish_take_back`):
    ``journaled``, ``live_again``, ``archived_again``, ``audit``, ``indexed``. Does nothing;
    crash-safety tests replace it with a function that raises, a kill at that step."""


class _TakeBackLeft(Exception):
    """A take-back stopped half-way (an I/O error, or a log refused and putting the undo back
    whole failed too): its journal row stays, and the next start finishes taking it back."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


def _take_back(runtime: Runtime, done: UndoResult) -> None:
    """Take back an undo just done (``done``): its narrative and the facts it archived
    ``undone`` are live again, then the entries it restored are archived toward the narrative
    again; its audit rows are as before it again; the logs it writes are re-indexed and the
    user's clusters placed as a ``reindex`` places them. Every log it writes is checked first
    (:meth:`MarkdownStore.refuse_unarchivable`), so a refusal writes nothing.

    A journal row (step ``undoing``, :attr:`_Intent.taking_back`) is written before the first
    patch and dropped after the last step, as for the undo itself: a kill at any step is
    finished by the next start (:func:`_finish_take_back`), the logs as before the cascade.
    Without it a kill between the two patches left the later merge's narrative live beside
    its sources for good, and one after them its audit rows ``undone``. A log refusing the
    second patch puts the undo back whole (the narrative ``undone`` again) and drops the row;
    an I/O error, or a refusal that cannot be put back, keeps the row
    (:class:`_TakeBackLeft`)."""
    store, ref, merged_id = runtime.store, done.ref, done.merged_entry_id
    intent = _Intent(app=ref.app, project=ref.project, user_id=ref.user_id, undo=merged_id,
                     cluster_id=done.cluster_id,
                     restore=[*done.restored, *done.restored_facts],
                     archived_facts=list(done.archived_facts), previous=None,
                     narrative_gone=not done.archived, prior_status=dict(done.prior_status),
                     taking_back=True)
    live_again = _live_again(intent)
    store.refuse_unarchivable(ref, [*live_again, *intent.restore],
                              f"taking back the undo of {merged_id} in")
    row_id = f"ru_{uuid.uuid4().hex[:16]}"
    merge_journal.insert(runtime.db(), row_id, ref, intent.cluster_id or "",
                         json.dumps(asdict(intent), sort_keys=True), journal.UNDOING)
    take_back_checkpoint("journaled")
    try:
        _take_back_logs(runtime, intent)
    except EverosError as exc:  # a log refused: put the narrative back as undone, whole
        if runtime.root_gone():
            raise
        try:
            if live_again:
                store.deprecate(ref, dict.fromkeys(live_again, UNDONE))
        except Exception as again:
            if runtime.root_gone():
                raise
            raise _TakeBackLeft(exc) from again
        _drop_row(runtime, row_id)
        raise
    except Exception as exc:  # an I/O error: the row stays, the next start finishes it
        if runtime.root_gone():
            raise
        raise _TakeBackLeft(exc) from exc
    _take_back_index(runtime, intent)
    _drop_row(runtime, row_id)


def _live_again(intent: _Intent) -> list[str]:
    """What a take-back makes live again: the narrative (unless the undo archived none) and
    the facts the undo archived ``undone``."""
    return [*([] if intent.narrative_gone else [intent.undo]), *intent.archived_facts]


def _drop_row(runtime: Runtime, row_id: str) -> None:
    with transaction(runtime.db()):
        merge_journal.delete(runtime.db(), row_id)


def _take_back_logs(runtime: Runtime, intent: _Intent) -> None:
    """A take-back's two patches, in the order a kill leaves harmless (the narrative live
    beside its sources: duplicates in search, nothing hidden, until they are archived again).
    Idempotent: run again by a start, it finishes them. Only keys the undo wrote (``undone``)
    are taken out: one a person wrote meanwhile is put back."""
    store, ref = runtime.store, intent.ref
    live_again = _live_again(intent)
    if live_again:
        removed = store.undeprecate(ref, live_again)
        foreign = {old: new for old, new in removed.items() if new != UNDONE}
        if foreign:
            store.deprecate(ref, foreign)
    take_back_checkpoint("live_again")
    if intent.restore:
        store.deprecate(ref, dict.fromkeys(intent.restore, intent.undo))
    take_back_checkpoint("archived_again")


def _take_back_index(runtime: Runtime, intent: _Intent) -> None:
    """After a take-back's patches: the audit rows as before the undo, the logs re-indexed,
    the user's clusters placed as a ``reindex`` places them. The logs are taken back: an index
    not written now is said, not a failed take-back (the next scan brings it up to date)."""
    ref, merged_id = intent.ref, intent.undo
    if intent.prior_status and _indexed(runtime):
        conn = runtime.db()
        with transaction(conn):
            mark_reflection_redone(conn, intent.prior_status)
    take_back_checkpoint("audit")
    try:
        _resync(runtime, ref, first=_live_again(intent), then=intent.restore)
        ClusterService(runtime).recluster(ref)
    except Exception as exc:
        if runtime.root_gone():
            raise
        log.warning("the undo of %s (%s) is taken back; re-indexing its logs failed (%s): the "
                    "next scan brings the index up to date", merged_id, ref, describe(exc))
    take_back_checkpoint("indexed")


def _finish_take_back(runtime: Runtime, row_id: str, intent: _Intent) -> None:
    """Finish, at a start, a take-back a kill (or an I/O error) interrupted: the logs as
    before the refused ``--cascade``, its row dropped. A log that refuses it now keeps the row
    (said, the next start tries again). The user's folder gone (renamed, moved or removed by
    hand since): the row is dropped, saying where the merge may stand half taken back."""
    store, ref = runtime.store, intent.ref
    if store.user_gone(ref):
        log.warning("the interrupted take-back of the undo of %s (%s) is dropped: the user's "
                    "folder was renamed, moved or removed by hand; where its logs are now, "
                    "that narrative may be live beside the entries the undo restored "
                    "(undo %s again there to settle it)", intent.undo, ref, intent.undo)
        _drop_row(runtime, row_id)
        return
    try:
        _take_back_logs(runtime, intent)
        _take_back_index(runtime, intent)
    except Exception as exc:
        if runtime.root_gone():
            raise
        log.error("cannot finish taking back the undo of %s (%s) yet: %s; the next start "
                  "tries again", intent.undo, ref, describe(exc),
                  exc_info=not isinstance(exc, EverosError))
        return
    _drop_row(runtime, row_id)
    log.warning("the undo of %s (%s), which a refused --cascade was taking back when it was "
                "interrupted, is taken back: the narrative is live again, the entries it had "
                "restored archived toward it", intent.undo, ref)


def _take_back_in_copy(runtime: Runtime, done: UndoResult, ref: UserRef) -> None:
    """:func:`_take_back` in a copy of the folder the undo was finished in too, where its
    narrative is ``undone`` still; the audit rows are the first user's."""
    try:
        if runtime.store.get(ref, done.merged_entry_id).deprecated_by != UNDONE:
            return
    except UnknownEntry:
        return
    _take_back(runtime, UndoResult(**{**done.__dict__, "ref": ref, "reports": [],
                                      "prior_status": {}}))


def _refuse_unwritable(runtime: Runtime, ref: UserRef, merged_id: str, found: _Found, *,
                       narrative: bool = True) -> None:
    """Refuse, before the first write, an undo a log it writes would refuse half-way: an id
    twice in a sources' log or the narrative's (archive writers never touch such a log), one
    over the size limit. Found at the narrative's log, the sources were restored already: the
    undo said "refused" of a folder half undone (the narrative live beside its sources), its
    journal row stayed, and every start logged it could not be finished yet. ``narrative``:
    its log is written too (not when it is gone or archived already)."""
    ids = [*found.restore, *(e.id for e in found.facts), *([merged_id] if narrative else [])]
    runtime.store.refuse_unarchivable(ref, ids, f"undoing {merged_id} in")


class _RolledBack(Exception):
    """An undo's Markdown write was refused, and what it had written is taken back
    (:func:`_roll_back`): ``error`` says both; the caller drops the journal row."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


def _applied(runtime: Runtime, intent: _Intent, row_id: str) -> UndoResult:
    """:func:`_apply_here`; an undo rolled back (:class:`_RolledBack`) has its journal row
    dropped, nothing being left to finish, and raises the error that says so."""
    try:
        return _apply_here(runtime, intent)
    except _RolledBack as back:
        with transaction(runtime.db()):
            merge_journal.delete(runtime.db(), row_id)
        raise back.error from back.__cause__


def _roll_back(runtime: Runtime, intent: _Intent, exc: EverosError) -> Exception:
    """Take back an undo's restore once a later write of it was refused (a log changed by
    hand since the undo checked it: an id pasted twice, its frontmatter broken): every entry
    it restores that is live now is archived toward the narrative again, so the logs are as
    before the undo, not half undone (the sources live beside a live narrative) with the
    undo reported "refused".
    Returns what to raise: :class:`_RolledBack` with ``exc`` saying what was taken back; when
    taking back fails too, an :class:`EverosError` naming the entries left restored (the
    journal row stays, and the next start finishes the undo once the log is fixed)."""
    store, ref, merged_id = runtime.store, intent.ref, intent.undo
    back: list[str] = []
    try:
        live = store.get_many(ref, intent.restore)
        back = sorted(i for i, e in live.items() if e.deprecated_by is None)
        if back:
            store.deprecate(ref, dict.fromkeys(back, merged_id))
    except Exception as again:
        if runtime.root_gone():
            raise
        return EverosError(
            f"the undo of {merged_id} ({ref}) is half done: {describe(exc)}; taking back what "
            f"it restored failed too ({describe(again)}), so {', '.join(back) or 'its sources'} "
            f"stay live beside the narrative: fix the log named, and the next start finishes "
            "the undo")
    if back:
        _reindex_rolled_back(runtime, ref, back)
    note = (f"; the undo of {merged_id} is rolled back ({', '.join(back)} archived toward it "
            "again): the logs are as before it" if back
            else f"; the undo of {merged_id} changed no log")
    # info: the error raised says it (a warning too printed it twice on the CLI's stderr)
    log.info("undo of %s (%s) refused: %s%s", merged_id, ref, describe(exc), note)
    return _RolledBack(_said_also(exc, note))


def _reindex_rolled_back(runtime: Runtime, ref: UserRef, back: list[str]) -> None:
    """Re-index the logs a roll back wrote (``back``: the entries archived again), as the
    forward path does (:func:`_resync`): the index was left to the watcher, so a ``search`` or
    ``status`` before it ran (or with none: the CLI alone) still read the sources as restored
    (an interrupted undo's, synced before the start that rolled it back). The logs are rolled
    back already: an index that cannot be written now is said, not raised over the refusal
    (the next scan brings it up to date)."""
    try:
        _resync(runtime, ref, first=(), then=back)
    except Exception as exc:
        if runtime.root_gone():
            raise
        log.warning("undo of entries of %s rolled back; re-indexing them failed (%s): the "
                    "next scan brings the index up to date", ref, describe(exc))


def _said_also(exc: EverosError, note: str) -> EverosError:
    """``exc`` of the same type (so the API answers the same code), its message ending with
    ``note``."""
    if isinstance(exc, MarkdownError):
        return MarkdownError(exc.path, exc.line, f"{exc.reason}{note}")
    said = Exception.__new__(type(exc))  # its __init__ takes other arguments (TooLarge)
    said.__dict__.update(exc.__dict__)
    said.args = (f"{exc}{note}",)
    return said


def _apply_here(runtime: Runtime, intent: _Intent) -> UndoResult:
    """:func:`_apply`, its journal row written. The user's folder renamed or moved by hand
    while it ran (a write found the entries gone): the undo failed with "no entry …" of the
    old name (entries that were only elsewhere), its row kept, and the moved folder held the
    narrative live beside the sources already restored until the next start. It is now
    finished where the folder went, as that start would (:func:`finish_interrupted`, which
    also ends its row); the result names that user. Several folders holding it (a copy
    too): raised, the row stays for the next start to say so."""
    try:
        return _apply(runtime, intent)
    except Exception:
        if runtime.root_gone() or not runtime.store.user_gone(intent.ref):
            raise
        log.warning("the folder of user %s was renamed, moved or removed by hand while its "
                    "undo of %s ran; the undo is finished where its entries are",
                    intent.ref, intent.undo)
    for result in finish_interrupted(runtime):
        if result.merged_entry_id == intent.undo and result.ref != intent.ref:
            return result
    raise EverosError(f"the undo of {intent.undo} is not finished: the folder of user "
                      f"{intent.ref} was renamed, moved or removed by hand while it ran, and no "
                      "one user's logs hold that merge now (the log above says what became of "
                      "it)")


def _copies_finished(runtime: Runtime, intent: _Intent,
                     also: Iterable[UserRef] = ()) -> _Copies:
    """Finish the undo, just done in ``intent``'s folder, in every copy of that folder taken
    half done while it ran (by hand, between its restore and its archive: the narrative live
    beside the entries it restores, for good, once the row was gone), and in the users of
    ``also`` (:func:`_finish_copies`), saying each copy's outcome. A copy that could not be
    finished now (an I/O error) is in :attr:`_Copies.failed`: the undo itself is done, and
    its row is kept for the next start. A copy whose log refused it is rolled back there."""
    copies = _finish_copies(runtime, intent, also)
    _say_copies(intent, copies, interrupted=False)
    return copies


def _refuse_archived_by_hand(runtime: Runtime, ref: UserRef, merged_id: str,
                             later: str) -> None:
    """Raise :class:`UndoRefused` when ``later``, what the narrative is archived toward, is no
    merge that folded it in: a person archived it by hand (``deprecated_entries: {narrative:
    archived}``, or toward an Episode of theirs). The refusal named ``later`` as "a later
    merge built on" it, to undo first: a merge that does not exist, and cascading to it
    failed. A merge it was folded into is one whose narrative, in the logs, names it among
    its ``sources``, or, that narrative deleted by hand, one the user's audit holds."""
    try:
        entry: Entry | None = runtime.store.get(ref, later)
    except (UnknownEntry, InvalidId):
        entry = None
    except MarkdownError:  # there, but unreadable now: the cascade's undo says why
        return
    if entry is not None and entry.parent_type == "cluster" and merged_id in entry.sources:
        return
    if entry is None and _indexed(runtime) and merge_row(runtime.db(), ref, later) is not None:
        return
    if entry is None:
        what = (f"{later!r}, which is no entry id" if not is_entry_id(later)
                else f"{later}, which no entry of user {ref} holds")
    elif entry.parent_type == "cluster":
        what = f"{later}, a merged narrative whose sources do not name {merged_id}"
    else:
        what = f"{later}, an entry that is no merge (parent_type: {entry.parent_type or 'none'})"
    log_path = runtime.store.rel(runtime.store.path_for_id(ref, merged_id))
    raise UndoRefused(
        f"{merged_id} was archived by hand, not by a later merge: deprecated_entries in "
        f"{log_path} map it to {what}; to undo its merge, remove the key {merged_id} from "
        f"that frontmatter (it is live again), then undo {merged_id}")


def _undo_deleted(runtime: Runtime, ref: UserRef, merged_id: str) -> UndoResult:
    """Undo a merge whose narrative a person deleted by hand: its sources stayed archived
    toward an id no entry holds, hidden from search for good, and ``undo`` refused them as
    "no such entry" (with a hint to check ``--user``). Keys mapping to the id are restored and
    its live facts archived, as for any undo; there is no narrative left to archive."""
    _refuse_unknown(runtime, ref, merged_id)
    return _restore_only(runtime, ref, merged_id)


def _restore_only(runtime: Runtime, ref: UserRef, merged_id: str, *,
                  replaced: bool = False) -> UndoResult:
    """An undo that only restores: the entries archived toward ``merged_id`` come back and
    its live facts are archived; the narrative is not archived (gone, or ``undone`` already).
    ``replaced``: another entry stands under the narrative's id (its log replaced by hand):
    only the merge's own entries come back (:func:`_merge_keys`), the rest stay as the person
    archived them, and that entry is left live."""
    found = _scan(runtime, ref, merged_id)
    if replaced:
        found.restore = _merge_keys(runtime, ref, merged_id, found)
    _refuse_unwritable(runtime, ref, merged_id, found, narrative=False)
    audit = merge_row(runtime.db(), ref, merged_id)
    _refuse_if_journaled(runtime, ref, merged_id)
    narrative: Entry | None = None
    if not replaced:
        try:
            narrative = runtime.store.get(ref, merged_id)
        except (UnknownEntry, MarkdownError):
            narrative = None
    previous = _previous_narrative(found, None)
    intent = _Intent(app=ref.app, project=ref.project, user_id=ref.user_id, undo=merged_id,
                     cluster_id=audit[0] if audit else None,
                     restore=sorted(found.restore),
                     archived_facts=sorted(e.id for e in found.facts),
                     previous=previous.id if previous is not None else None,
                     narrative_gone=True, sources=_sources(runtime, ref, merged_id, narrative),
                     prior_status=_audit_before(runtime, ref, merged_id))
    row_id = f"ru_{uuid.uuid4().hex[:16]}"
    merge_journal.insert(runtime.db(), row_id, ref, intent.cluster_id or "",
                         json.dumps(asdict(intent), sort_keys=True), journal.UNDOING)
    result = _applied(runtime, intent, row_id)
    if result.ref != ref:  # finished where the folder went, with its row
        return result
    with transaction(runtime.db()):
        merge_journal.delete(runtime.db(), row_id)
    log.info("undo: %s of %s was %s by hand; its sources are restored", merged_id, ref,
             "replaced by another entry" if replaced else "deleted or archived")
    return result


def _merge_keys(runtime: Runtime, ref: UserRef, merged_id: str,
                found: _Found | None = None) -> dict[str, Entry | None]:
    """Of the keys archived toward ``merged_id`` (``found``, else scanned), those this user's
    merge that wrote it archived (its audit row, not undone, says which): its sources, the
    narrative an update merge replaced (a narrative of the same cluster) and their atomic
    facts. Empty without an index (no audit to tell them by).

    A person who replaced the narrative's log with one holding an entry of their own under
    that id left the merge's sources archived toward an entry that is not the merge's:
    hidden behind it for good, while ``undo`` refused it as "not a merged narrative". Keys a
    person wrote toward their own entry are not the merge's, and stay."""
    if not _indexed(runtime):
        return {}
    audit = merge_row(runtime.db(), ref, merged_id)
    if audit is None or audit[1] == UNDONE:
        return {}
    sources = set(_sources(runtime, ref, merged_id, None))
    found = found if found is not None else _scan(runtime, ref, merged_id)
    episodes = {i for i, e in found.restore.items()
                if i in sources or (e is not None and e.parent_type == "cluster"
                                    and audit[0] is not None and e.parent_id == audit[0])}
    return {i: e for i, e in found.restore.items()
            if i in episodes or (e is not None and e.kind is Kind.ATOMIC_FACT
                                 and e.parent_id in episodes)}


@dataclass
class _Intent:
    """Everything an undo writes, decided before its first write (stored in its journal row,
    so recovery can finish it after a crash)."""

    app: str
    project: str
    user_id: str
    undo: str  # the narrative
    cluster_id: str | None
    restore: list[str]  # ids whose key toward the narrative is removed
    archived_facts: list[str]  # its live facts, archived as undone
    previous: str | None  # the narrative an update merge had replaced
    narrative_gone: bool = False  # deleted or archived by hand: nothing to archive
    #: every episode the merge replaced, as the narrative's ``sources`` and the audit name
    #: them: those no longer in the logs are reported, not silently left out
    sources: list[str] = field(default_factory=list)
    #: the status of each audit row of the merge before the undo, read before its first
    #: write: what taking the undo back sets again. Read when the rows were set ``undone``
    #: instead, an undo a start finished after that (a kill, or the folder renamed by hand
    #: while it ran) kept none, and taking it back left its rows ``undone``
    prior_status: dict[str, str] = field(default_factory=dict)
    #: the row is the take-back of this undo (:func:`_take_back`, a ``--cascade`` refused at
    #: an earlier merge), not the undo: ``restore`` lists the entries it archives toward the
    #: narrative again, ``archived_facts`` (and the narrative, unless ``narrative_gone``)
    #: those it makes live again; a start finishes it (:func:`_finish_take_back`)
    taking_back: bool = False

    @property
    def ref(self) -> UserRef:
        return UserRef(self.app, self.project, self.user_id)


def _apply(runtime: Runtime, intent: _Intent) -> UndoResult:
    """The undo's writes. Idempotent: run again after a crash at any point, it finishes them."""
    store, ref, merged_id = runtime.store, intent.ref, intent.undo
    restore_ids = intent.restore
    episodes = [i for i in restore_ids if EntryId.parse(i).kind is Kind.EPISODE]
    facts = [i for i in restore_ids if EntryId.parse(i).kind is not Kind.EPISODE]
    # The narrative or its facts deleted by hand (an entry, or a log) while the undo was
    # interrupted: archiving them failed at every start ("no entry"), the undo never
    # finished; a log replaced by hand may hold another entry under such an id now (a
    # person's Episode was archived `undone`). Only what is still the merge's is archived.
    unreadable: set[str] = set()  # there, but not readable now: the write says why, later
    found = store.get_many(ref, [merged_id, *intent.archived_facts], unreadable)
    replaced = merged_id in found and found[merged_id].parent_type != "cluster"

    def still(eid: str, its: Callable[[Entry], bool]) -> bool:
        return eid in unreadable or (eid in found and its(found[eid]))

    if not intent.narrative_gone and not still(merged_id, lambda e: e.parent_type == "cluster"):
        intent.narrative_gone = True
    archived_facts = [i for i in intent.archived_facts
                      if still(i, lambda e: e.parent_id == merged_id)]
    # Markdown first (restore, then archive), then the audit, then the derived indexes. A
    # write a log refuses (changed by hand since the undo checked it) is rolled back
    # (:func:`_roll_back`), unless the user's folder went (:func:`_apply_here` finishes the
    # undo where it went); an I/O error keeps the journal row, the next start finishing it
    archive = dict.fromkeys(archived_facts, UNDONE)
    if not intent.narrative_gone:
        archive[merged_id] = UNDONE
    try:
        if restore_ids:
            removed = store.undeprecate(ref, restore_ids)
            foreign = {old: new for old, new in removed.items() if new != merged_id}
            if foreign:  # re-mapped by hand between the scan and the patch: put those back
                store.deprecate(ref, foreign)
        if archive:
            store.deprecate(ref, archive)
    except EverosError as exc:  # refused by a log (an I/O error, a kill: finished later)
        if runtime.root_gone() or store.user_gone(ref):
            raise
        raise _roll_back(runtime, intent, exc) from exc
    prior = dict(intent.prior_status)  # as before the undo, rows set `undone` since too
    reports, mode = _mark_reports_undone(runtime, ref, merged_id, prior)
    mode = mode or ("update" if intent.previous is not None else "init")

    _resync(runtime, ref, first=restore_ids, then=[merged_id, *archived_facts])
    previous = None
    if intent.previous is not None:
        try:
            previous = store.get(ref, intent.previous)
        except (UnknownEntry, MarkdownError):  # files are changed already: finish the undo
            previous = None
    missing = _missing(runtime, ref, [*intent.sources, *episodes])
    episodes = [i for i in episodes if i not in missing]
    cluster_narrative = _restore_cluster(runtime, ref, intent.cluster_id, episodes, previous)
    edited = not intent.narrative_gone and _edited_by_hand(runtime, ref, merged_id)
    result = UndoResult(
        ref=ref, merged_entry_id=merged_id, cluster_id=intent.cluster_id, mode=mode,
        restored=episodes, restored_facts=facts,
        archived=[] if intent.narrative_gone else [merged_id],
        archived_facts=archived_facts, previous_narrative=intent.previous,
        cluster_narrative=cluster_narrative, reports=reports, missing=missing,
        edited_by_hand=edited, replaced_by_hand=replaced, prior_status=prior)
    log.info("undid merge %s of %s: %d episodes and %d facts restored, %d facts archived",
             merged_id, ref, len(episodes), len(facts), len(archived_facts))
    if missing:  # the answer names them too: not a warning twice on the CLI's stderr
        log.info("undo of %s (%s): could not restore %s: no longer in the logs",
                 merged_id, ref, ", ".join(missing))
    return result


def _edited_by_hand(runtime: Runtime, ref: UserRef, merged_id: str) -> bool:
    """Whether the narrative just archived holds hand edits made after its merge."""
    from everos_reflect.provenance import edited_since_merge

    try:
        return edited_since_merge(runtime.store.get(ref, merged_id))
    except (UnknownEntry, MarkdownError):  # gone meanwhile: nothing left to tell about
        return False


def _sources(runtime: Runtime, ref: UserRef, merged_id: str,
             narrative: Entry | None) -> list[str]:
    """Every episode the merge replaced: the narrative's ``sources`` and the audit's
    ``source_members`` (the one a hand edit or deletion left, or both)."""
    named = narrative.sources if narrative is not None else []
    try:
        audited = merge_sources(runtime.db(), ref, merged_id)
    except sqlite3.Error:
        audited = []
    return list(dict.fromkeys(i for i in [*named, *audited] if i != merged_id))


def _missing(runtime: Runtime, ref: UserRef, ids: Iterable[str]) -> list[str]:
    """Those of ``ids`` no entry holds now: a source whose log, or entry, was deleted by hand
    cannot come back, and the undo said "restored 1" of a merge of two without a word."""
    gone = []
    for eid in dict.fromkeys(ids):
        try:
            runtime.store.get(ref, eid)
        except UnknownEntry:
            gone.append(eid)
        except (MarkdownError, OSError, ValueError):  # there, but unreadable now: not gone
            continue
    return sorted(gone)


def finish_interrupted(runtime: Runtime) -> list[UndoResult]:
    """Finish every undo a crash interrupted (its journal row is still there): an interrupted
    undo leaves sources live beside a still-live narrative. Called by journal recovery, under
    the Reflection lock. Returns what each finished undo did (all of it, not only the rest)."""
    conn = runtime.db()
    done: list[UndoResult] = []
    for row_id, plan in merge_journal.rows_at(conn, journal.UNDOING):
        try:
            intent = _Intent(**json.loads(plan))
            if intent.taking_back:
                _finish_take_back(runtime, row_id, intent)
                continue
            holders = _holders_if_moved(runtime, intent)
            if holders is not None and len(holders) != 1:
                if holders:
                    raise UndoRefused(
                        f"the folder of user {intent.user_id} is gone or holds none of it, and "
                        f"narrative "
                        f"{intent.undo} of those sources is in the logs of "
                        f"{', '.join(map(str, holders))}: undo it there by hand")
                log.warning("the interrupted undo of %s (%s) is dropped: the user's folder "
                            "was removed by hand, and no user's logs hold that narrative or "
                            "its sources", intent.undo, intent.ref)
                with transaction(conn):
                    merge_journal.delete(conn, row_id)
                continue
            if holders:
                log.warning("the interrupted undo of %s: the folder of user %s is gone or "
                            "holds none of it now; its entries are in %s's logs, so the undo "
                            "is finished there", intent.undo, intent.ref, holders[0])
                with transaction(conn):  # the audit follows the folder (a deleted
                    # narrative leaves the index nothing to tell the move by)
                    move_merge(conn, intent.undo, intent.ref, holders[0])
                intent.app, intent.project, intent.user_id = (
                    holders[0].app, holders[0].project, holders[0].user_id)
                Indexer(runtime).scan()  # the index learns of the move before the undo's sync
            result = _apply(runtime, intent)
        except _RolledBack as back:  # said once, not "cannot finish … yet" at every start
            log.warning("the interrupted undo of %s (%s) cannot be finished: %s", intent.undo,
                        intent.ref, back.error)
            with transaction(conn):
                merge_journal.delete(conn, row_id)
            continue
        except Exception as exc:  # a log broken by hand, an OSError writing one: this
            if runtime.root_gone():  # undo's alone (the others are finished), kept for later
                raise
            log.error("cannot finish the interrupted undo %s yet: %s", row_id, describe(exc),
                      exc_info=not isinstance(exc, EverosError))
            continue
        done.append(result)
        # the undo is finished where it began: its copies are another matter, said apart,
        # each copy's outcome named (one failing on I/O keeps the row for it alone)
        copies = _finish_copies(runtime, intent)
        if not copies.failed:
            with transaction(conn):
                merge_journal.delete(conn, row_id)
            log.info("finished the interrupted undo of %s (%s)", intent.undo, intent.ref)
        for finished in [result, *copies.results]:
            _say_edited(intent, finished)
        _say_copies(intent, copies, interrupted=True)
        done.extend(copies.results)
    return done


def _say_edited(intent: _Intent, finished: UndoResult) -> None:
    """Warn when an undo a start finished archived a narrative a person had edited: the
    command that would have said so was killed."""
    if finished.edited_by_hand:
        log.warning("the interrupted undo of %s (%s) archived the narrative with the edits a "
                    "person made to its Content after the merge (still in its log, archived "
                    "`undone`): add them again as an Episode to keep them searchable",
                    intent.undo, finished.ref)


@dataclass
class _Copies:
    """What became of an undo in the copies of its folder taken half done
    (:func:`_finish_copies`): those it was finished in (with what each undo did) and those
    whose undo a log refused and was rolled back (with the error saying so)."""

    finished: list[_Intent] = field(default_factory=list)
    results: list[UndoResult] = field(default_factory=list)
    rolled_back: list[tuple[_Intent, BaseException]] = field(default_factory=list)
    #: copies the undo could not be finished in now (an I/O error writing a log): the undo's
    #: journal row stays, and the next start finishes them
    failed: list[tuple[_Intent, BaseException]] = field(default_factory=list)


def _finish_copies(runtime: Runtime, intent: _Intent,
                   also: Iterable[UserRef] = ()) -> _Copies:
    """Finish the undo in every copy of it half done (:func:`_half_undone_copies`), once it is
    finished where it began. Looked for after the undo's own writes, so a folder copied while
    they ran (not only while a kill interrupted them) is found too. ``also``: users whose logs
    hold a copy of the merge whole, in which a cascade's later undo was just finished (the
    folder copied during that undo, :func:`_cascade_copies`): the undo is finished there too.
    Each copy's outcome is kept apart (:class:`_Copies`): one whose log refuses the undo has
    it rolled back there (its logs as before it: a whole merge of that user's); one failing
    on I/O is in :attr:`_Copies.failed` (the caller keeps the undo's row, the next start
    finishes it), and the copies after it are still finished. The first failure was raised:
    the copies finished before it were said of no one, those after it not tried."""
    copies = _half_undone_copies(runtime, intent)
    copies += _cascade_copies(runtime, intent, [c.ref for c in copies], also)
    done = _Copies()
    try:
        if copies:  # the index learns of the copies before their undo's sync
            Indexer(runtime).scan()
    except Exception as exc:
        if runtime.root_gone():
            raise
        done.failed = [(copy, exc) for copy in copies]
        return done
    for copy in copies:
        try:
            done.results.append(_apply(runtime, copy))
            done.finished.append(copy)
        except _RolledBack as back:
            done.rolled_back.append((copy, back.error))
        except Exception as exc:  # an OSError writing the copy's log: finished later
            if runtime.root_gone():
                raise
            done.failed.append((copy, exc))
    return done


def _cascade_copies(runtime: Runtime, intent: _Intent, found: list[UserRef],
                    also: Iterable[UserRef]) -> list[_Intent]:
    """The undo to finish in each user of ``also`` (not ``found`` already) whose logs hold the
    merge whole: its narrative live, of the cluster the undo names, and an entry it restores
    still archived toward it. A folder copied by hand while the later undo of a ``--cascade``
    ran had that undo finished in the copy, then the earlier one finished only where it began:
    the copy stopped between the two undos, for good (the earlier narrative live, restored by
    the later undo, its sources archived toward it)."""
    if intent.cluster_id is None:
        return []
    out = []
    for ref in dict.fromkeys(also):
        if ref == intent.ref or ref in found or not _holds_narrative(
                runtime, ref, intent, live=True, cluster_id=intent.cluster_id):
            continue
        try:
            held = runtime.store.get_many(ref, intent.restore)
        except (MarkdownError, OSError, ValueError):
            continue
        if any(e.deprecated_by == intent.undo for e in held.values()):
            out.append(_Intent(**{**asdict(intent), "app": ref.app, "project": ref.project,
                                  "user_id": ref.user_id, "cluster_id": None,
                                  "prior_status": {}}))
    return out


def _say_copies(intent: _Intent, copies: _Copies, *, interrupted: bool) -> None:
    """Log what became of the undo in the copies of its folder: finished there too, or rolled
    back there (the copy's logs as before the undo), each said of that copy alone."""
    what = "interrupted undo" if interrupted else "undo"
    for copy in copies.finished:
        log.warning("the %s of %s (%s) is finished in the logs of %s too: its folder was "
                    "copied there by hand while the undo was half done (the narrative live "
                    "beside the entries it restores)", what, intent.undo, intent.ref, copy.ref)
    for copy, error in copies.rolled_back:
        log.warning("the %s of %s (%s) is finished there, but not in the logs of %s, a copy "
                    "of its folder taken by hand while the undo was half done: %s; that copy "
                    "holds the merge whole, as before the undo (undo it there with --user %s)",
                    what, intent.undo, intent.ref, copy.ref, describe(error),
                    copy.ref.user_id)
    for copy, error in copies.failed:
        log.error("the %s of %s (%s) is finished; a copy of its folder taken by hand while it "
                  "was half done cannot be finished yet: the logs of %s (%s): the next start "
                  "finishes it there", what, intent.undo, intent.ref, copy.ref,
                  describe(error),
                  exc_info=None if isinstance(error, EverosError) else error)


def _half_undone_copies(runtime: Runtime, intent: _Intent) -> list[_Intent]:
    """The undo to finish in each other user whose logs hold a copy of it half done: the
    narrative live, a merge of the undo's sources, beside an entry the undo restores, live
    again (the user's folder copied by hand while the undo was interrupted). Finished only in
    the folder it began in, the copy kept a live narrative beside its live sources for good:
    an update merge's restored sources are its previous narrative and one new Episode, a
    cluster of one that no run selects, so no merge ever folded the copy's narrative in. A
    copy made before the undo began (the sources still archived toward the narrative) is a
    merge of that user's, and stays. The copy's ``cluster_id`` names a cluster of the first
    user's: none is handed back there; naming it tells a copy from another user's merge that
    has the same ids (ids are unique per user only)."""
    restore = [i for i in intent.restore if EntryId.parse(i).kind is Kind.EPISODE]
    if intent.cluster_id is None or not restore:
        return []
    copies = []
    for ref in runtime.store.iter_users():
        if ref == intent.ref or not _holds_narrative(runtime, ref, intent, live=True,
                                                     cluster_id=intent.cluster_id):
            continue
        try:
            found = runtime.store.get_many(ref, restore)
        except (MarkdownError, OSError, ValueError):
            continue
        if any(e.deprecated_by is None for e in found.values()):
            copies.append(_Intent(**{**asdict(intent), "app": ref.app, "project": ref.project,
                                     "user_id": ref.user_id, "cluster_id": None,
                                     "prior_status": {}}))
    return copies


def _holders_if_moved(runtime: Runtime, intent: _Intent) -> list[UserRef] | None:
    """None while the undo's user folder holds it; else the users whose logs now hold its
    narrative with the same sources, or (the narrative deleted by hand too) show the undo
    (:func:`_holds_undo`): a folder renamed or moved by hand while the undo was interrupted.
    Finished under the old name, the undo failed at every start, for ever, leaving the
    narrative live beside its restored sources. A folder of the old name made again since
    (by hand, or an Episode added) holds none of it: the undo goes where its entries are; it
    is finished in place only when no other user's logs hold anything of it."""
    store = runtime.store
    here = not store.user_gone(intent.ref)
    if here and (_holds_narrative(runtime, intent.ref, intent)
                 or _holds_undo(runtime, intent.ref, intent)):
        return None
    others = [ref for ref in store.iter_users() if ref != intent.ref]
    holders = [ref for ref in others if _holds_narrative(runtime, ref, intent)]
    if not holders:  # the narrative deleted by hand too: the logs that show the undo
        holders = [ref for ref in others if _holds_undo(runtime, ref, intent)]
    return None if here and not holders else holders


def _holds_narrative(runtime: Runtime, ref: UserRef, intent: _Intent, *,
                     live: bool = False, cluster_id: str | None = None) -> bool:
    """Whether ``ref``'s logs hold the undo's narrative: a merge of its sources (``live``:
    and not archived; ``cluster_id``: of that cluster)."""
    try:
        entry = runtime.store.get(ref, intent.undo)
    except (UnknownEntry, MarkdownError):
        return False
    return entry.parent_type == "cluster" and bool(entry.sources) \
        and set(entry.sources) <= set(intent.sources) \
        and not (live and entry.deprecated_by is not None) \
        and (cluster_id is None or entry.parent_id == cluster_id)


def _holds_undo(runtime: Runtime, ref: UserRef, intent: _Intent) -> bool:
    """Whether ``ref``'s logs show this undo: one of the entries it restores still archived
    toward its narrative, or one of the narrative's facts (ids are unique per user only:
    another user's entries with the same ids show neither). A source deleted by hand as well
    does not hide the others, which the undo then restores."""
    try:
        found = runtime.store.get_many(ref, [*intent.restore, *intent.archived_facts])
    except (MarkdownError, OSError, ValueError):
        return False
    return any(i in found and found[i].deprecated_by == intent.undo for i in intent.restore) \
        or any(i in found and found[i].parent_id == intent.undo for i in intent.archived_facts)


def _flat(result: UndoResult) -> UndoResult:
    return UndoResult(**{**result.__dict__, "cascaded": []})


def _scan(runtime: Runtime, ref: UserRef, merged_id: str) -> _Found:
    """Find the keys mapping to ``merged_id`` and its live facts, before anything is written.

    Only files whose bytes mention the id are parsed; the bytes are searched piece by piece
    (read whole, one huge or endless log held the undo's whole memory). A file among them that
    cannot be parsed, or is over ``limits.max_file_bytes``, stops the undo here, while nothing
    has changed yet; so does a FIFO, device or folder named like a log (it was skipped, and the
    undo reported done while the keys of that log, once back, still pointed at the narrative).
    """
    store = runtime.store
    needle = merged_id.encode()
    found = _Found()
    irregular: list[str] = []
    for path in store.iter_files(ref, [Kind.EPISODE, Kind.ATOMIC_FACT], irregular=irregular):
        try:
            if not store.mentions(path, needle):
                continue
            daily = store.read(path)
        except FileNotFoundError:
            continue
        except OSError as exc:  # replaced by a FIFO or a device meanwhile
            raise MarkdownError(store.rel(path), 0, f"cannot undo {merged_id}: "
                                f"{os_reason(exc)}") from None
        fatal = next((d for d in daily.diagnostics if d.severity == "fatal"), None)
        if fatal is not None:
            raise MarkdownError(fatal.path, fatal.line,
                                f"cannot undo {merged_id} while this file does not parse: "
                                f"{fatal.message}")
        by_id = {e.id: e for e in daily.entries}
        for old, new in daily.deprecated_entries.items():
            if new == merged_id:
                found.restore[old] = by_id.get(old)
        located = store.ref_for_path(path)
        if located is not None and located[1] is Kind.ATOMIC_FACT:
            found.facts += [e for e in daily.entries
                            if e.parent_id == merged_id and e.deprecated_by is None]
    if irregular:  # it may hold keys toward the narrative: undone without them, they stay
        # archived toward an undone narrative, hidden for good once the log is back
        denied = denied_folder(store.root / irregular[0])
        if denied is not None:  # a folder of the user's logs this account may not open
            raise MarkdownError(irregular[0], 0, f"cannot undo {merged_id}: {denied}: this "
                                "folder of logs may not be opened; undo again once its "
                                "permissions let this account in")
        what = what_stands(store.root / irregular[0], store.root)
        slot = ("this log" if log_name_match(Path(irregular[0]).name)
                else f"the {Path(irregular[0]).name} folder")
        raise MarkdownError(irregular[0], 0, f"cannot undo {merged_id}: {what} stands where "
                            f"{slot} goes; move it away or put {slot} back, then undo again")
    return found


def _previous_narrative(found: _Found, cluster_id: str | None) -> Entry | None:
    """The narrative an update merge replaced: a restored episode made by Reflection."""
    candidates = [e for e in found.restore.values()
                  if e is not None and e.kind is Kind.EPISODE and e.parent_type == "cluster"
                  and (cluster_id is None or e.parent_id == cluster_id)]
    if not candidates:
        return None
    return max(candidates, key=lambda e: (e.timestamp is not None, e.timestamp, e.id))


def _refuse_if_journaled(runtime: Runtime, ref: UserRef, merged_id: str) -> None:
    """A merge interrupted mid-commit may still be rolled forward; undoing under it would race
    that recovery, so wait for it."""
    row_id = merge_journal.row_mentioning(runtime.db(), ref, merged_id,
                                          except_step=journal.UNDOING)
    if row_id is not None:
        raise EverosError(f"an interrupted merge involving {merged_id} awaits recovery "
                          f"(journal {row_id}); run {REFLECT} once, then undo")


def _follow_moved_merge(runtime: Runtime, ref: UserRef, narrative: Entry) -> None:
    """Give ``ref`` the merge's audit rows that still name a user whose folder is gone (a
    folder renamed by hand, not scanned since: :func:`~everos_reflect.index.audit.
    follow_moved_merges`): undone as the new name, they stayed ``ok``."""
    conn = runtime.db()
    with transaction(conn):
        follow_moved_merges(conn, [(ref, narrative)], [], runtime.store.user_gone)


def _mark_reports_undone(runtime: Runtime, ref: UserRef, merged_id: str,
                         prior: dict[str, str] | None = None) -> tuple[list[str], str | None]:
    """Set the merge's audit rows to ``undone``; returns their ids and the merge's mode.
    ``prior`` gets each row's status before (:func:`_take_back` sets it again)."""
    conn = runtime.db()
    with transaction(conn):
        if prior is not None:
            prior.update(reflection_statuses(conn, ref, merged_id))
        return mark_reflection_undone(conn, ref, merged_id)


def _audit_before(runtime: Runtime, ref: UserRef, merged_id: str) -> dict[str, str]:
    """The status of each audit row of the merge that is not ``undone`` yet, read before the
    undo's first write and kept in its journal row (:attr:`_Intent.prior_status`)."""
    try:
        return reflection_statuses(runtime.db(), ref, merged_id)
    except sqlite3.Error:  # no audit to set back: the take-back leaves the rows as they are
        return {}


def _resync(runtime: Runtime, ref: UserRef, *, first: Iterable[str],
            then: Iterable[str]) -> None:
    """Sync the restored entries' files before the archived ones': sources rejoin their cluster
    before the narrative leaves it, so the cluster never runs empty (which would delete it).
    Each group is one batch (one embedding call, one index write per kind): a log at a time
    wrote a LanceDB version per source log, and undoing a merge of 150 sources took ~25 s."""
    indexer = Indexer(runtime)
    seen: set[Path] = set()
    for ids in (first, then):
        paths = sorted({runtime.store.path_for_id(ref, i) for i in ids} - seen)
        if paths:
            indexer.sync_paths(paths)
        seen.update(paths)


def _restore_cluster(runtime: Runtime, ref: UserRef, cluster_id: str | None,
                     episodes: list[str], previous: Entry | None) -> str | None:
    """Make the cluster hold the restored episodes again, consolidated by ``previous`` (update
    merge) or by nothing (init merge); returns the cluster's narrative afterwards.

    The indexer's hooks have revived the sources and retired the narrative; the replaced
    narrative is then re-attached as the cluster's narrative. Should the online state still
    disagree (e.g. the cluster vanished meanwhile), the user's clusters are rebuilt from the
    index, which is what a ``reindex`` would give.
    """
    service = ClusterService(runtime)
    if previous is not None:
        # handed over as it stands: a narrative, none of it unparented (the exact answer;
        # None made clustering read the member row by a rule of thumb). One a person made
        # plain meanwhile was placed by its own sync (:func:`_resync`) and is left there.
        now = runtime.store.get(ref, previous.id)
        if now.parent_type == "cluster":
            service.on_entries_indexed(ref, [now], {}, unparented=())
    service.place_after_undo(ref)
    if not _cluster_agrees(service, ref, cluster_id, episodes, previous):
        log.info("undo: rebuilding the clusters of %s", ref)
        service.recluster(ref)
    if cluster_id is None:
        return None
    try:
        return service.cluster(cluster_id).consolidated_entry_id
    except UnknownCluster:
        return None


def _cluster_agrees(service: ClusterService, ref: UserRef, cluster_id: str | None,
                    episodes: list[str], previous: Entry | None) -> bool:
    live: set[str] = set()
    for cid in {service.cluster_of(ref, e) for e in episodes}:
        if cid is None:
            return False
        live.update(m.entry_id for m in service.members(cid))
    if not live.issuperset(episodes):
        return False
    if previous is None or cluster_id is None:
        return True
    try:
        return service.cluster(cluster_id).consolidated_entry_id == previous.id
    except UnknownCluster:
        return False


__all__ = ["LOCK_WAIT_SECONDS", "REFLECT", "UndoResult", "undo_merge"]
