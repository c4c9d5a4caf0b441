"""Committing several planned merges together: :mod:`journal`'s protocol, run a step at a time
for a whole batch.

Every merge keeps its own ``merge_journal`` row, and each row passes through the same steps, in
the same order and with the same Markdown written before each, as a merge committed alone
(the table in :mod:`journal`). A crash anywhere in a batch therefore leaves every row in a
state :func:`journal.recover` already finishes or withdraws, one row at a time, exactly as
before. What the merges of a batch share is the work:

- the rows are inserted, and each step recorded for all of them, in one SQLite transaction;
- each daily log is written once per step: the narratives of one user and day in one atomic
  write, their facts in another, and each source log archived into once, whichever merges
  archive entries of it; each file is fsynced before its rename, as always (the temp files of
  one step are written and fsynced together, then renamed one by one in the usual order), and
  each folder once per step (not once per file), before the step is recorded;
- the sources of every merge are locked together (sorted), and each merge's stale-source check
  runs under those locks before anything of it is archived: a merge whose sources changed is
  withdrawn alone, the rest of the batch commits;
- the index is synced once for all the files (one embedding call, one LanceDB write per table,
  one SQLite transaction), and the audit rows and journal deletions go in one transaction.

If a step fails (a file made unwritable meanwhile, the index unreachable), each merge of the
batch is then finished on its own by :func:`journal.complete`, which picks up from what reached
the disk: one bad file interrupts only the merges that touch it, as in a serial run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from everos_reflect.errors import EverosError, describe
from everos_reflect.index import merge_journal
from everos_reflect.index.db import transaction
from everos_reflect.markdown.store import durable_group
from everos_reflect.model import Entry, Kind, UserRef
from everos_reflect.strategies import journal
from everos_reflect.strategies.journal import Outcome, Plan

if TYPE_CHECKING:
    import sqlite3

    import numpy as np

    from everos_reflect.index.sync import Indexer
    from everos_reflect.runtime import Runtime

log = logging.getLogger(__name__)

#: Status of a merge whose commit failed and whose journal row stays for recovery.
INTERRUPTED = "interrupted"


def commit_many(runtime: Runtime, indexer: Indexer, plans: Iterable[Plan]) -> list[Outcome]:
    """Commit planned merges (each past the guard and the pre-check), one :class:`Outcome` per
    plan, in order: ``ok``, ``stale`` (a source changed; the narrative is withdrawn),
    ``rejected`` (its archiving would push a source log past the file limit; withdrawn) or
    ``interrupted`` (the row stays in the journal; the next run recovers it).

    Plans that share an entry (never two clusters of one run) are committed in separate
    batches, so no batch archives one entry toward two narratives."""
    outcomes: dict[str, Outcome] = {}
    plans = list(plans)
    for batch in disjoint_batches(plans):
        for outcome in _commit_batch(runtime, indexer, batch):
            outcomes[outcome.plan.id] = outcome
    return [outcomes[p.id] for p in plans]


def disjoint_batches(plans: list[Plan]) -> list[list[Plan]]:
    """``plans`` in order, cut into runs whose merges touch no entry in common."""
    batches: list[list[Plan]] = []
    taken: set[tuple[UserRef, str]] = set()
    for plan in plans:  # entry ids are per user
        ids = {(plan.ref, i) for i in (*plan.replaced, *plan.fact_ids, plan.cluster_id)}
        if not batches or ids & taken:
            batches.append([])
            taken = set()
        batches[-1].append(plan)
        taken |= ids
    return batches


def _commit_batch(runtime: Runtime, indexer: Indexer, plans: list[Plan]) -> list[Outcome]:
    started = time.perf_counter()
    now = time.time_ns()  # before the first Markdown write (journal.settle_copies_of)
    for plan in plans:
        plan.journalled_ns = now
    merge_journal.insert_many(runtime.db(), [
        (p.id, p.ref, p.cluster_id, p.to_json(), journal.PLANNED) for p in plans])
    steps = {p.id: journal.PLANNED for p in plans}
    outcomes: dict[str, Outcome] = {}
    journal.checkpoint(journal.PLANNED)
    try:
        _steps(runtime, indexer, plans, steps, outcomes, started)
    except Exception as exc:  # an OSError writing one user's log, a bug one record trips
        if runtime.root_gone():  # every merge would fail: the engine says what happened
            raise
        log.warning("committing %d merges together failed (%s); finishing each on its own",
                    len(plans), describe(exc), exc_info=not isinstance(exc, EverosError))
        for plan in plans:
            if plan.id not in outcomes:
                outcomes[plan.id] = _finish_alone(runtime, indexer, plan, steps[plan.id],
                                                  started)
    return [outcomes[p.id] for p in plans]


def _steps(runtime: Runtime, indexer: Indexer, plans: list[Plan], steps: dict[str, str],
           outcomes: dict[str, Outcome], started: float) -> None:
    """The journal's steps for the whole batch; ``steps`` and ``outcomes`` say how far each
    merge got, should one of them fail."""
    conn = runtime.db()
    # a log holding a copy of these narratives is written after them (settle_copies_of)
    written_since_ns = time.time_ns() - journal.MTIME_SLACK_NS
    journal.refuse_if_gone(runtime, plans)  # a folder renamed meanwhile: each finished alone
    with durable_group():  # each step's logs durable before the step is recorded
        narratives = _write_narratives(runtime, plans)
    _record(conn, plans, journal.NARRATIVE, steps)
    journal.checkpoint(journal.NARRATIVE)

    journal.refuse_if_gone(runtime, plans)
    with durable_group():
        _write_facts(runtime, plans)
    _record(conn, plans, journal.FACTS, steps)
    journal.checkpoint(journal.FACTS)

    # the narratives' vectors first (a model call, maybe a wait for a model slot), so that
    # each cluster is marked consolidated as its sources are archived (:func:`_archive`)
    vectors = _narrative_vectors(runtime, plans, narratives)
    live, stale = _archive(runtime, plans, steps, vectors)
    _record(conn, live, journal.DEPRECATED, steps)
    journal.checkpoint(journal.DEPRECATED)

    if live:
        # renamed once archived: synced under the old name, the index forgot the narrative
        # and the audit row stayed the old name's (nothing left to tell the move by)
        journal.refuse_if_gone(runtime, live)
        touched = [journal.touched_files(runtime, p) for p in live]
        # every narrative's and facts' log first, as for one merge: the index knows each
        # narrative before the sources pointing at it
        indexer.sync_paths([*(path for t in touched for path in t[:2]),
                            *(path for t in touched for path in t[2:])])
        journal.checkpoint(journal.SYNCED)
        # a folder copied while the batch ran was taken half done: settled before the rows go
        problems = journal.settle_copies_of(runtime, indexer, live,
                                            written_since_ns=written_since_ns)
        for plan in live:
            journal.note_copy_problems(plan, problems.get(plan.id, []))
        with transaction(conn):
            for plan in live:
                journal.plan_report(conn, plan, "ok", merged=plan.merged_id, error=plan.error,
                                    duration_ms=plan.llm_ms + journal.ms_since(started))
                merge_journal.delete(conn, plan.id)
        outcomes.update({p.id: Outcome("ok", p, p.merged_id,
                                       copy_problems=problems.get(p.id, [])) for p in live})
    for plan, why, status in stale:
        plan.error = why
        outcomes[plan.id] = journal.abandon(runtime, indexer, plan, started, status=status)


def _record(conn: sqlite3.Connection, plans: list[Plan], step: str, steps: dict[str, str]) -> None:
    if plans:
        merge_journal.set_steps(conn, [(p.id, p.to_json()) for p in plans], step)
    steps.update({p.id: step for p in plans})


def _by_log(plans: list[Plan]) -> dict[tuple[UserRef, date], list[Plan]]:
    """Plans grouped by the daily logs that receive their narrative and facts."""
    groups: dict[tuple[UserRef, date], list[Plan]] = {}
    for plan in plans:
        groups.setdefault((plan.ref, plan.day_date), []).append(plan)
    return groups


def _write_narratives(runtime: Runtime, plans: list[Plan]) -> dict[str, Entry]:
    """Every narrative of one user and day in one atomic write (each with its own
    ``reflection`` key, so recovery finds each one alone); ``{plan id: narrative}``."""
    written: dict[str, Entry] = {}
    groups = _by_log(plans)
    # each log keeps room for the keys that would withdraw them (journal.abandon)
    made = runtime.store.append_to_logs(
        [(ref, Kind.EPISODE, day,
          [(journal.narrative_meta(p), {"Subject": p.title, "Content": p.content})
           for p in group])
         for (ref, day), group in groups.items()], withdrawable=True)
    for group, entries in zip(groups.values(), made, strict=True):
        for plan, entry in zip(group, entries, strict=True):
            plan.merged_id = entry.id
            written[plan.id] = entry
    return written


def _write_facts(runtime: Runtime, plans: list[Plan]) -> None:
    """Every fact of the merges of one user and day in one atomic write: all of a merge's
    facts or none, as when it commits alone."""
    runtime.store.append_to_logs(
        [(ref, Kind.ATOMIC_FACT, day,
          [(journal.fact_meta(p, n), {"Fact": fact}) for p in group
           for n, fact in enumerate(p.facts)])
         for (ref, day), group in _by_log(plans).items()], withdrawable=True)


def _archive(runtime: Runtime, plans: list[Plan], steps: dict[str, str],
             vectors: dict[str, np.ndarray]) -> tuple[list[Plan], list[tuple[Plan, str, str]]]:
    """The point of no return, for the whole batch at once: under the locks of every source's
    log, each merge's sources are checked (a changed one makes that merge stale), the others
    reach ``archiving`` in one transaction, then each source log gets one write archiving
    the entries of every merge toward their narratives. Returns (committed, withdrawn with
    why and status: ``stale``, or ``rejected`` when the archiving would outgrow a log)."""
    store = runtime.store
    paths = {store.path_for_id(p.ref, i) for p in plans for i in p.hashes}
    live: list[Plan] = []
    stale: list[tuple[Plan, str, str]] = []  # withdrawn: why, and as what
    # each source log is parsed once for all the reads below (whatever the bytes, a read sees
    # the file as it is now); the archiving writes change them, so those parse anew
    with journal.locked(runtime, paths), store.reusing_parses():
        journal.refuse_if_gone(runtime, plans)  # sources gone with a folder are not stale
        for plan in plans:
            changed = journal.changed_sources(runtime, plan)
            if changed:
                stale.append((plan, "sources changed after Select: "
                              + "; ".join(changed.values()), "stale"))
            else:
                live.append(plan)
        live, refused = _within_file_limit(runtime, live)
        stale += refused
        if not live:
            return live, stale
        _record(runtime.db(), live, journal.ARCHIVING, steps)
        journal.checkpoint(journal.ARCHIVING)
        journal.refuse_if_gone(runtime, live)
        mappings: dict[UserRef, dict[str, str]] = {}
        for plan in live:
            mappings.setdefault(plan.ref, {}).update(_archive_pairs(runtime, plan))
        conflicts: dict[str, str] = {}
        with durable_group():
            for ref, mapping in mappings.items():
                found = store.deprecate(ref, mapping)
                conflicts.update({f"{ref}: {old}": new for old, new in found.items()})
        # Each cluster holds its narrative before the sources' logs are let go, with the
        # vector the index sync will store for it: the sync then finds each narrative its
        # cluster's and each source retired toward it, no centroid rebuilt from stored
        # vectors (the same clusters as a merge finished alone leaves). Marked after the
        # locks (and the narratives' embedding), an add to one of these logs let in between
        # synced the archive marks itself and rebuilt the centroid once per archived source,
        # reading the cluster's stored vectors each time, before it answered.
        for plan in live:
            journal.mark_consolidated(runtime, plan, vectors[plan.id])
    for old, new in sorted(conflicts.items()):
        log.warning("%s was already archived toward %s; left as it is", old, new)
    return live, stale


def _archive_pairs(runtime: Runtime, plan: Plan) -> dict[str, str]:
    """``old id -> narrative`` for every entry ``plan`` archives (its facts still present)."""
    assert plan.merged_id is not None
    pairs = {i: plan.merged_id for i in plan.replaced}
    facts = journal.existing_entries(runtime, plan.ref, plan.fact_ids)
    pairs.update({f.id: plan.merged_id for f in facts})
    return pairs


def _within_file_limit(runtime: Runtime, plans: list[Plan],
                       ) -> tuple[list[Plan], list[tuple[Plan, str, str]]]:
    """``plans`` split into those whose archiving keeps every source log within
    ``limits.max_file_bytes`` and those refused (``rejected``, with why), measured together
    in order: the archiving writes every kept merge's ``deprecated_entries`` keys into a
    shared log at once. :func:`journal.overfull` measures each merge alone when it is
    planned, so two merges whose sources share one log nearly full each passed, and their
    keys together pushed it past the limit: from then on it was "not read" (its other
    entries vanished from every read and search). Called under the sources' locks, before
    ``archiving`` (nothing pointing at a refused merge's narrative yet, so it is withdrawn)."""
    added: dict[Path, dict[str, str]] = {}  # what the merges kept so far add to each log
    kept: list[Plan] = []
    refused: list[tuple[Plan, str, str]] = []
    for plan in plans:
        by_path = journal.archive_by_log(runtime, plan.ref, _archive_pairs(runtime, plan))
        why = None
        for path, pairs in sorted(by_path.items()):
            why = journal.archive_refusal(runtime, path, {**added.get(path, {}), **pairs},
                                          ", with the merges committed alongside")
            if why is not None:
                break
        if why is not None:
            refused.append((plan, why, "rejected"))
            continue
        for path, pairs in by_path.items():
            added.setdefault(path, {}).update(pairs)
        kept.append(plan)
    return kept, refused


def _narrative_vectors(runtime: Runtime, plans: list[Plan],
                       narratives: dict[str, Entry]) -> dict[str, np.ndarray]:
    """Each plan's narrative's vector, by plan id, embedded in one call (the text the index
    embeds for it, already in the embedding cache: the guard embedded it)."""
    vectors = runtime.embedder.embed([narratives[p.id].search_text for p in plans])
    return {plan.id: vector for plan, vector in zip(plans, vectors, strict=True)}


def _finish_alone(runtime: Runtime, indexer: Indexer, plan: Plan, step: str,
                  started: float) -> Outcome:
    """After a failed batch step: finish (or withdraw) one merge from what reached the disk,
    as recovery would, but reporting a changed source as ``stale``."""
    try:
        if runtime.store.user_gone(plan.ref):  # renamed or moved by hand while committed:
            # settled where its entries went, as after a kill (never under the old name)
            return journal.settle_interrupted(runtime, indexer, plan, step, started,
                                              stale_status="stale")
        committed = journal.resume(runtime, plan, step)
        return journal.complete(runtime, indexer, plan, started, stale_status="stale",
                                committed=committed)
    except Exception as exc:  # this merge's alone: the others of the batch go on
        if runtime.root_gone():
            raise
        error = describe(exc)
        log.error("cluster %s of %s: commit interrupted: %s", plan.cluster_id, plan.ref, error,
                  exc_info=not isinstance(exc, EverosError))
        return Outcome(INTERRUPTED, plan, None, error)


__all__ = ["INTERRUPTED", "commit_many", "disjoint_batches"]
