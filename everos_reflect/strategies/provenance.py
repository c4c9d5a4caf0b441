"""Provenance invalidation (seed 000's "view invalidation", SPEC §10): a derived record whose
evidence was archived, edited or deleted becomes ``status: stale`` with a ``stale_reason``.

The rule is pure (:func:`find_stale`): records in, ``{id: reason}`` out. It walks derived
records shallowest first, so a record citing a record that just went stale is stale too, to any
depth the records have (``max_depth`` bounds how deep they are written). The state lives in each
record's own Markdown metadata, so a rebuild from Markdown reproduces the same active and stale
sets without re-running anything.

An entry still in its file but unreadable now (a hand edit broke its metadata, its closing
marker was lost, its timestamp is refused: ``DailyLog.unreadable``), or any entry of a file that
cannot be read at all (over the size limit, not UTF-8, a symlink leading out of the root:
``DailyLog.unread``), is *unknown*, never deleted: the records citing it keep their status,
and the check resumes once the entry reads again (edited meanwhile: stale; as it was: still
active). Taken as deleted, a typo marked them stale for good, also once it was fixed.

A stale mark is not final: :func:`find_restored` names each stale record whose every cited
record reads again exactly as when it was derived (the hash ``evidence_hash`` recorded, live,
active), and :func:`check` makes it active again with a ``derivation_report`` row (strategy
``provenance``, status ``restored``). A typo fixed, a log readable again, or a mark the old
rule left (it took an unreadable entry for a deleted one) no longer keeps a record stale for
good. Only marks provenance wrote (a ``stale_reason`` worded exactly as it words one, such as
"evidence <id> was edited", naming a record cited) are lifted. A lifted record stands at 1 +
the deepest record it cites (SPEC §10), held to its tier's ``max_depth``: a ``depth`` a hand
edit made unreadable is written back recomputed.

:func:`check` (:func:`invalidate`) applies the rules to one owner and writes the metadata;
the change-event subscriber :func:`on_change` calls it whenever the indexer changes something
of an owner who has derived records, and ``revalidate_insights`` and ``learn_lessons`` at each
run. A lesson's evidence is its tasks, hashed by what it learns from (:func:`cited_hash`).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from filelock import Timeout

from everos_reflect import root_lock
from everos_reflect.errors import EverosError, ProvenanceBusy
from everos_reflect.index import cursors, events
from everos_reflect.index.audit import Derivation, settle_intent
from everos_reflect.markdown.parser import parse_entry_id
from everos_reflect.model import Entry, Kind, UserRef, id_items, id_order
from everos_reflect.procedural.tasks import task_hash
from everos_reflect.strategies.beliefs import status_of

if TYPE_CHECKING:
    from everos_reflect.engine.engine import Engine
    from everos_reflect.index.events import ChangeSet
    from everos_reflect.runtime import Runtime

log = logging.getLogger(__name__)

ACTIVE, STALE, RETIRED = "active", "stale", "retired"
#: A lesson both sides of a contradiction keep until tasks decide it: live (served) like an
#: active one, so its evidence is checked too, and a lifted mark gives it back.
CONTESTED = "contested"
#: The ``derivation_report`` strategy and status of a lifted stale mark (:func:`check`).
NAME, RESTORED = "provenance", "restored"
#: The metadata key every record the daemon derives carries (``belief_store.DERIVATION_KEY``).
DERIVATION_KEY = "derivation"
#: Derived kinds whose ``evidence`` is checked. A relation's ``evidence`` is the two
#: convictions it joins: an edited side makes it stale; a side superseded by a new version is
#: resolved by the belief tiers first (with the reason), so it is no longer active here.
CHECKED = (Kind.INSIGHT, Kind.CONVICTION, Kind.RELATION, Kind.LESSON)
#: Every kind a derived record may cite.
EVIDENCE_KINDS = (Kind.EPISODE, Kind.ATOMIC_FACT, Kind.TASK, Kind.RELATION, *CHECKED)


def evidence_of(entry: Entry) -> list[str]:
    """The ids ``entry`` cites. A hand-garbled ``evidence: {x: 1}`` is no id: read as its
    Python text it made the record stale for "evidence {'x': 1} was deleted" (lint names it)."""
    return id_items(entry.meta.get("evidence"))[0]


def evidence_hashes(entry: Entry) -> dict[str, str]:
    value = entry.meta.get("evidence_hash")
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def cited_hash(entry: Entry) -> str:
    """The hash a derived record keeps in ``evidence_hash`` of a record it cites: of what it
    was derived from. A task's is :func:`~everos_reflect.procedural.tasks.task_hash` (type,
    outcome, goal, steps, errors: what a lesson learns from; its ``text_hash`` is of the goal
    alone), every other record's its ``text_hash``."""
    return task_hash(entry) if entry.kind is Kind.TASK else entry.text_hash


def _live(entry: Entry) -> bool:
    """Served as current: active, or a contested lesson (shown to agents as well)."""
    status = status_of(entry)
    return status == ACTIVE or (status == CONTESTED and entry.kind is Kind.LESSON)


def lifted_status(entry: Entry) -> str:
    """The status a lifted stale mark gives back: ``contested`` to a lesson still naming a
    rival (``contested_with``: the contest is decided by tasks, not here), else ``active``."""
    rivals = id_items(entry.meta.get("contested_with"))[0]
    if entry.kind is Kind.LESSON and any(i != entry.id for i in rivals):  # not itself
        return CONTESTED
    return ACTIVE


def _depth(entry: Entry) -> int:
    value = entry.meta.get("depth")
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


def evidence_problem(entry: Entry, records: Mapping[str, Entry],
                     stale: Mapping[str, str],
                     unreadable: Collection[str] = frozenset()) -> str | None:
    """Why ``entry``'s evidence no longer stands (None: it does, as far as can be read).

    A cited id in ``unreadable`` is still in its file: unknown, so it says nothing either way.
    """
    seen = evidence_hashes(entry)
    for eid in evidence_of(entry):
        cited = records.get(eid)
        if cited is None:
            if eid in unreadable:
                continue
            return f"evidence {eid} was deleted"
        if cited.deprecated_by:
            return f"evidence {eid} was archived (replaced by {cited.deprecated_by})"
        if eid in stale or status_of(cited) in (STALE, RETIRED):
            return f"evidence {eid} is {status_of(cited) if eid not in stale else STALE}"
        if eid in seen and seen[eid] != cited_hash(cited):
            return f"evidence {eid} was edited"
    return None


def _checked(records: Iterable[Entry]) -> list[Entry]:
    """The records whose evidence is checked: live (active, or a contested lesson),
    daemon-derived, citing something."""
    return [e for e in records if e.kind in CHECKED
            and DERIVATION_KEY in e.meta  # written by the daemon, never a person's
            and e.deprecated_by is None and _live(e) and evidence_of(e)]


def find_stale(records: Mapping[str, Entry],
               unreadable: Collection[str] = frozenset()) -> dict[str, str]:
    """``{id: stale_reason}`` of every active, daemon-derived record whose evidence no longer
    stands, transitively (a record citing a newly stale record is stale too). Ids in
    ``unreadable`` are in their file but cannot be read now: not deleted, not checked."""
    derived = sorted(_checked(records.values()), key=lambda e: (_depth(e), id_order(e.id)))
    citers: dict[str, list[Entry]] = {}
    for entry in derived:
        for eid in dict.fromkeys(evidence_of(entry)):
            citers.setdefault(eid, []).append(entry)
    stale: dict[str, str] = {}
    # Shallowest first, then from each newly stale record to the records citing it: a record
    # is checked once, and again only when a record it cites has just gone stale. Rescanning
    # everything until nothing changed settled one record per pass when hand-edited depths ran
    # backwards (quadratic: 300 records, 45,000 checks).
    spreading: list[str] = []
    for entry in derived:
        if entry.id not in stale:
            reason = evidence_problem(entry, records, stale, unreadable)
            if reason:
                stale[entry.id] = reason
                spreading.append(entry.id)
        while spreading:
            for citer in citers.get(spreading.pop(), ()):
                if citer.id not in stale:
                    reason = evidence_problem(citer, records, stale, unreadable)
                    if reason:
                        stale[citer.id] = reason
                        spreading.append(citer.id)
    return stale


#: Every reason :func:`evidence_problem` gives, whole: a ``stale_reason`` worded otherwise was
#: not written by provenance (a person's own, "evidence looks thin" too), and is never lifted
#: here. Matching the prefix "evidence " alone lifted a person's mark so worded.
_OWN_REASON = re.compile(r"evidence (\S+) (?:was deleted|was edited|is stale|is retired"
                         r"|was archived \(replaced by \S+\))")


def _marked_by_provenance(entry: Entry) -> bool:
    """Whether ``entry``'s ``stale_reason`` is one provenance wrote, naming a record it cites."""
    found = _OWN_REASON.fullmatch(str(entry.meta.get("stale_reason") or ""))
    return found is not None and found.group(1) in evidence_of(entry)


def _waiting(records: Iterable[Entry]) -> list[Entry]:
    """The records a restore may lift: stale by provenance's own hand, daemon-derived, live,
    citing something."""
    return [e for e in records if e.kind in CHECKED and DERIVATION_KEY in e.meta
            and e.deprecated_by is None and status_of(e) == STALE and evidence_of(e)
            and _marked_by_provenance(e)]


def written_depth(entry: Entry) -> int | None:
    """A derived record's ``depth`` as written when it is a count of at least 1, else None: a
    person may have edited it into anything ("deep", a list, 0)."""
    value = entry.meta.get("depth")
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    return None


def writer_of(entry: Entry) -> str:
    """The strategy that writes derived records like ``entry``, whose ``max_depth`` holds it."""
    if entry.kind is Kind.INSIGHT:
        return "reconcile" if entry.meta.get("insight_type") == "reconciliation" \
            else "reflect_insights"
    return {Kind.CONVICTION: "update_worldview", Kind.RELATION: "detect_contradictions",
            Kind.LESSON: "learn_lessons"}[entry.kind]


def find_restored(records: Mapping[str, Entry], unreadable: Collection[str] = frozenset(),
                  stale: Collection[str] = frozenset(),
                  cap: Callable[[Entry], int] | None = None) -> dict[str, int]:
    """``{id: depth}`` of the stale records (:func:`_waiting`) whose every cited record reads
    again exactly as when it was derived or last revalidated: readable, live, not archived,
    its text hash the one ``evidence_hash`` recorded, and, if it is itself derived, active (or
    lifted here too). ``stale``: ids being marked stale now, which count as stale.

    ``depth`` is the one the record stands at once lifted: SPEC §10's 1 + the deepest record
    it cites now. A record written deeper keeps its own. One written shallower (a "holds" of
    ``revalidate_insights`` deepened a cited insight without changing its text) or whose
    ``depth`` a person made unreadable ("deep", a list) takes the recomputed value, when
    ``cap(entry)`` (the ``max_depth`` of the tier that writes it) allows it; past it, it stays
    stale (an insight is then revalidated, and held to the same cap). Without ``cap`` no
    record is lifted to a depth other than the one it was written with. A record whose
    depth could not be read stayed stale for good: read as 1, it stood no deeper than the
    insight it cites, and offline nothing else lifts it.

    Stale was final: a record marked so by a transient break (a typo fixed since, a log
    briefly unreadable, or the old rule that took an unreadable entry for a deleted one)
    stayed stale for good although nothing it stands on had changed. A citation with no
    recorded hash cannot be shown unchanged, so such a record stays stale."""
    waiting = sorted(_waiting(records.values()), key=lambda e: (_depth(e), id_order(e.id)))
    lifted: dict[str, int] = {}

    def stands(entry: Entry) -> int | None:
        seen = evidence_hashes(entry)
        deepest = 0
        for eid in evidence_of(entry):
            cited = records.get(eid)
            if (cited is None or eid in unreadable or cited.deprecated_by
                    or seen.get(eid) != cited_hash(cited)):
                return None
            if eid not in lifted and (eid in stale or status_of(cited) != ACTIVE):
                return None
            if cited.kind.derived:
                deepest = max(deepest, lifted.get(eid) or written_depth(cited) or 1)
        own, depth = written_depth(entry), 1 + deepest
        if own is not None and own >= depth:
            return own
        if cap is None or depth > cap(entry):
            return None  # it stands deeper now than it may be written
        return depth

    for _ in range(len(waiting)):  # a pass lifts at least one more, or nothing will
        more = {e.id: d for e in waiting if e.id not in lifted and (d := stands(e)) is not None}
        if not more:
            break
        lifted.update(more)
    return {e.id: lifted[e.id] for e in waiting if e.id in lifted}


def settle(records: Mapping[str, Entry], unreadable: Collection[str] = frozenset(),
           cap: Callable[[Entry], int] | None = None) -> tuple[dict[str, str], dict[str, int]]:
    """What one check changes, settled: ``({id: stale_reason}, {id: depth})``, the active
    records to mark stale (:func:`find_stale`) and the stale ones to lift
    (:func:`find_restored`), applied to ``records`` until neither finds more.

    One pass of each did not settle: a record marked stale for citing a record that is
    stale now, while the same check lifted that record, was left stale (it was active and
    nothing it stands on had changed), and only the owner's next check, whenever a record of
    theirs changed again, lifted it. A record marked and lifted here is left as it was."""
    current = dict(records)
    for _ in range(len(records) + 1):  # a round only lifts what the last one marked
        stale = find_stale(current, unreadable)
        lifted = find_restored(current, unreadable, stale, cap)
        if not stale and not lifted:
            break
        for entry_id, reason in stale.items():
            entry = current[entry_id]
            current[entry_id] = replace(entry, meta={
                **entry.meta, "status": STALE, "stale_reason": reason})
        for entry_id, depth in lifted.items():
            entry = current[entry_id]
            current[entry_id] = replace(entry, meta={
                **entry.meta, "status": lifted_status(entry), "stale_reason": None,
                "depth": depth})
    marked = {i: str(current[i].meta["stale_reason"]) for i, e in records.items()
              if _live(e) and status_of(current[i]) == STALE}
    restored = {i: current[i].meta["depth"] for i, e in records.items()
                if status_of(e) == STALE and _live(current[i])}
    return marked, restored


def depth_caps(runtime: Runtime, given: Engine | None = None) -> Callable[[Entry], int]:
    """``cap`` for :func:`find_restored`: the ``max_depth`` of the tier that writes a record,
    from ``ome.toml`` (read once, when first asked) or ``given``'s settings (the daemon's,
    which keeps its last good file); a broken file reads as the tier's default."""
    from everos_reflect.engine.engine import Engine
    from everos_reflect.engine.registry import get_strategy

    caps: dict[str, int] = {}
    engine: list[Engine] = [given] if given is not None else []

    def cap(entry: Entry) -> int:
        name = writer_of(entry)
        if name not in caps:
            try:
                engine[:] = engine or [Engine(runtime, recover=False)]
                caps[name] = int(engine[0].settings_for(name)["max_depth"])
            except (EverosError, KeyError):  # ConfigError among them
                caps[name] = int(get_strategy(name).all_settings()["max_depth"].default)
        return caps[name]

    return cap


def load_records(runtime: Runtime, ref: UserRef,
                 unreadable: set[str] | None = None) -> dict[str, Entry]:
    """Every entry of ``ref`` a derived record may cite, from the Markdown (the truth); the
    ids present but unreadable are added to ``unreadable`` when given, and so is every id a
    record cites in a log that cannot be read whole (``DailyLog.whole``: over the size
    limit, not UTF-8, a symlink out of the root, which the listing skips; its frontmatter
    broken; its text ending inside an entry), whose entries are unknown, not deleted."""
    records: dict[str, Entry] = {}
    listed: dict[Path, bool] = {}  # path -> unread
    for path in runtime.store.iter_files(ref, EVIDENCE_KINDS):
        log = runtime.store.read(path)
        records.update((e.id, e) for e in log.entries)
        # broken frontmatter, text ending inside an entry: not read whole
        listed[Path(path)] = not log.whole
        if unreadable is not None:
            unreadable |= log.unreadable
    if unreadable is not None:
        cited_in: dict[Path, set[str]] = {}
        for entry in records.values():
            for eid in evidence_of(entry):
                path = _path_of(runtime, ref, eid) if eid not in records else None
                if path is not None:
                    cited_in.setdefault(path, set()).add(eid)
        for path, ids in cited_in.items():
            unread = listed.get(path)
            if unread is None:  # not listed: absent, or a link the listing skips
                unread = os.path.lexists(path) and _unread(runtime, path)
            if unread:
                unreadable |= ids
        unreadable -= records.keys()
    return records


def _path_of(runtime: Runtime, ref: UserRef, entry_id: str) -> Path | None:
    """The log ``entry_id`` names (None for an id that names none)."""
    try:
        return runtime.store.path_for_id(ref, entry_id)
    except EverosError:
        return None


def _unread(runtime: Runtime, path: Path) -> bool:
    """Whether the log at ``path`` is there but cannot be read at all."""
    try:
        return runtime.store.read(path).unread
    except OSError:  # gone meanwhile, or not a regular file: no log, nothing in it
        return False


def cited_records(runtime: Runtime, ref: UserRef, derived: Mapping[str, Entry],
                  unreadable: set[str] | None = None) -> dict[str, Entry]:
    """``derived`` plus the entries its checked records cite — all :func:`find_stale` looks at;
    the cited ids still in their file but unreadable now are added to ``unreadable``.

    Reads the derived logs' citations only (each cited file parsed once), not every log of the
    owner: invalidation runs after each synced file, and re-reading a year of Episodes per file
    made a bulk scan quadratic. An id that is malformed, of a kind that cannot be evidence, or
    absent from its file is left out, so :func:`find_stale` reports it deleted, as before.
    """
    wanted: set[str] = set()
    for entry in [*_checked(derived.values()), *_waiting(derived.values())]:
        for eid in evidence_of(entry):
            if eid in derived:
                continue
            try:
                if parse_entry_id(eid).kind in EVIDENCE_KINDS:
                    wanted.add(eid)
            except EverosError:
                continue
    return {**runtime.store.get_many(ref, wanted, unreadable), **derived}


def has_derived(runtime: Runtime, ref: UserRef) -> bool:
    """Whether the user has a folder of derived records; not one this process may not
    enter (no record of it can be read: ``lint`` names the folder). That raised, and
    ``reindex`` logged a traceback."""
    user = runtime.store.user_dir(ref)
    try:
        return any((user / kind.folder).is_dir() for kind in CHECKED)
    except PermissionError:
        return False


@dataclass
class Checked:
    """What one :func:`check` of an owner did: the ids marked stale (with why), the ids whose
    stale mark was lifted, and the files written."""

    stale: dict[str, str] = field(default_factory=dict)
    restored: list[str] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)


#: How long a check waits for another one to finish (:func:`check`): ``revalidate_insights``,
#: ``learn_lessons`` and the check after ``reindex``. Past it, :class:`ProvenanceBusy`.
CHECK_WAIT_SECONDS = 300.0
#: How long the indexer's check waits (:func:`on_changes`): it holds the indexer's lock
#: meanwhile, so every sync, scan and search of the root waits with it. Past it, the change is
#: put off to the indexer's next sync (a file event, the reconcile scan), never dropped.
INDEXER_WAIT_SECONDS = 5.0


def check(runtime: Runtime, ref: UserRef, touched: set[str] | None = None, *,
          wait: float | None = None) -> Checked:
    """Mark stale every record of ``ref`` :func:`find_stale` names, and make active again
    every one :func:`find_restored` names, settled (:func:`settle`: one check does what a
    second would add) (one ``derivation_report`` row each lifted, strategy ``provenance``,
    status ``restored``: the record in ``outputs``, what it cites in ``inputs``). A lesson
    marked stale gets a row too (status ``stale``, the reason in ``error``): no revalidation
    pass writes one for it later, as ``revalidate_insights`` does for an insight, so the
    audit would not say why a lesson left the briefings. Lessons written before lessons kept
    ``evidence_hash`` get the hashes of what they cite as it reads now (:func:`unhashed`).

    With ``touched`` (the ids the indexer just changed), nothing is read beyond the derived
    logs unless a derived record cites one of them: only those can change a record's status.
    The rows a killed check left unwritten are written first (:func:`recover_rows`).

    Waits at most ``wait`` seconds (:data:`CHECK_WAIT_SECONDS`) for a check under way (in
    another thread or process), then raises :class:`ProvenanceBusy`, having changed nothing.
    """
    with _one_check_at_a_time(runtime, CHECK_WAIT_SECONDS if wait is None else wait):
        return _check(runtime, ref, touched)


@contextmanager
def _one_check_at_a_time(runtime: Runtime, wait: float) -> Iterator[None]:
    """Hold the root's provenance lock (across threads and processes). Checks run from the
    indexer's change events and from ``revalidate_insights``/``learn_lessons`` runs, in other
    threads of a daemon or in a CLI process; two checks of one owner at once both read a
    record as active, both mark it and both write its audit row (19 of 20 tries wrote the
    lesson's ``stale`` row twice). One check after another, the second reads the mark.

    At most ``wait`` seconds: the wait had no end, and the indexer waits holding its own lock
    (lock order: indexer, provenance, a log's write lock), so a long check elsewhere held up
    every sync of ``serve``'s watcher, and a hung one held it up for good."""
    path = runtime.index_dir / "locks" / "provenance.lock"
    try:
        # a root moved away meanwhile is not made again by the lock (RootGone instead)
        lock = root_lock.take(runtime, path, wait)
    except Timeout:
        raise ProvenanceBusy(
            f"another provenance check has held {path} for over {wait:g} s; nothing was "
            "checked: try again once it has finished") from None
    try:
        yield
    finally:
        lock.release()


def _check(runtime: Runtime, ref: UserRef, touched: set[str] | None) -> Checked:
    done = Checked()
    recover_rows(runtime, ref)
    if not has_derived(runtime, ref):
        return done
    derived = {e.id: e for kind in CHECKED for e in runtime.store.entries(ref, kind)}
    if touched is not None:
        cited = {eid for e in [*_checked(derived.values()), *_waiting(derived.values())]
                 for eid in evidence_of(e)}
        if touched.isdisjoint(cited):
            return done
    unreadable: set[str] = set()
    records = cited_records(runtime, ref, derived, unreadable)
    marked, restored = settle(records, unreadable, depth_caps(runtime))
    # Each mark that gets an audit row is noted first: killed between its Markdown write and
    # its row, the record was stale (or active again) with no row, for good, since no later
    # check marks it again (:func:`recover_rows`).
    cursors.begin_intents(runtime.db(), NAME, ref, {
        **{i: {"status": STALE, "reason": r} for i, r in marked.items()
           if records[i].kind is Kind.LESSON},
        **{i: {"status": RESTORED} for i in restored}})
    for entry_id, reason in marked.items():
        row = None
        if records[entry_id].kind is Kind.LESSON:
            row = Derivation(NAME, ref, STALE, inputs=evidence_of(records[entry_id]),
                             outputs=[entry_id], error=reason)
        try:
            runtime.store.update_meta(ref, entry_id, {"status": STALE, "stale_reason": reason})
        except EverosError:  # its file is unparseable or it vanished: reported by lint, left
            if row is not None:  # alone (and its note dropped)
                settle_intent(runtime.db(), NAME, ref, entry_id, None)
            continue
        done.stale[entry_id] = reason
        done.written.append(runtime.store.path_for_id(ref, entry_id))
        if row is not None:
            log.info("provenance: %s: lesson %s is stale: %s", ref, entry_id, reason)
            settle_intent(runtime.db(), NAME, ref, entry_id, row)
    for entry_id, depth in restored.items():
        entry = records[entry_id]
        status = lifted_status(entry)
        updates: dict[str, Any] = {"status": status, "stale_reason": None}
        if written_depth(entry) != depth:
            updates["depth"] = depth  # recomputed (SPEC §10): see find_restored
        try:
            runtime.store.update_meta(ref, entry_id, updates)
        except EverosError:
            settle_intent(runtime.db(), NAME, ref, entry_id, None)
            continue
        log.info("provenance: %s: %s is %s again: every record it cites reads as when it "
                 "was derived (it was stale: %s)%s", ref, entry_id, status,
                 entry.meta.get("stale_reason"),
                 f"; depth {entry.meta.get('depth')!r} -> {depth}" if "depth" in updates else "")
        settle_intent(runtime.db(), NAME, ref, entry_id, Derivation(
            NAME, ref, RESTORED, inputs=evidence_of(records[entry_id]), outputs=[entry_id]))
        done.restored.append(entry_id)
        done.written.append(runtime.store.path_for_id(ref, entry_id))
    for entry_id, hashes in unhashed(records, unreadable, set(marked) | (touched or set())
                                     ).items():
        try:
            runtime.store.update_meta(ref, entry_id, {"evidence_hash": hashes})
        except EverosError:
            continue
        log.info("provenance: %s: lesson %s kept no evidence_hash for %s (written before "
                 "lessons kept one): recorded as they read now", ref, entry_id,
                 ", ".join(sorted(set(hashes) - set(evidence_hashes(records[entry_id])))))
        done.written.append(runtime.store.path_for_id(ref, entry_id))
    return done


def recover_rows(runtime: Runtime, ref: UserRef | None = None) -> int:
    """Write the audit row of every mark (of ``ref``, else of every owner) a kill left between
    its Markdown write and its row (:func:`check` notes each first): the record reads as the
    mark left it → its row; it does not (the write never happened) → the note is dropped,
    and the record, still as it was, is marked again by the next check. Returns the rows
    written. Without it a lesson went stale, or a record active again, with no row for good:
    no later check marks it again.

    A note whose user's folder is gone (renamed or moved by hand before the restart) is
    settled by any check, and its row follows the folder (:func:`_mark_holder`), as the rows
    of merges and derivations do; settled under the old name, the note found no record and
    was dropped, and the lesson stood stale in the renamed folder with no row."""
    conn, done = runtime.db(), 0
    for owner, entry_id, items in cursors.intents(conn, NAME):
        if ref is not None and owner != ref and not runtime.store.user_gone(owner):
            continue
        holder, entry = owner, _record(runtime, owner, entry_id)
        if entry is None:  # its folder renamed or moved by hand: the row follows it
            holder, entry = _mark_holder(runtime, owner, entry_id, items)
        row = None
        if entry is not None and _marked_as_noted(entry, items):
            row = Derivation(NAME, holder, items["status"], inputs=evidence_of(entry),
                             outputs=[entry_id],
                             error=items.get("reason") if items["status"] == STALE else None)
        settle_intent(runtime.db(), NAME, owner, entry_id, row)
        if row is not None:
            done += 1
            log.warning("provenance: %s: the %s mark of %s was interrupted before its audit "
                        "row: recorded now%s", holder, row.status, entry_id,
                        f" (noted for {owner}, whose folder holds it no more)"
                        if holder != owner else "")
    return done


def _record(runtime: Runtime, ref: UserRef, entry_id: str) -> Entry | None:
    try:
        return runtime.store.get(ref, entry_id)
    except EverosError:
        return None


def _marked_as_noted(entry: Entry, items: Mapping[str, str]) -> bool:
    """Whether ``entry`` reads as the noted mark left it: stale for the noted reason, or
    live again."""
    if items.get("status") == STALE:
        return status_of(entry) == STALE and entry.meta.get("stale_reason") == items.get(
            "reason")
    return items.get("status") == RESTORED and _live(entry)


def _mark_holder(runtime: Runtime, owner: UserRef, entry_id: str,
                 items: Mapping[str, str]) -> tuple[UserRef, Entry | None]:
    """Where a noted mark's row goes when ``owner``'s logs hold no ``entry_id`` (its folder
    renamed or moved by hand): the one other user whose logs hold it as the mark left it,
    with it. Several (a copied folder): ``owner``, the old name, as the audit moves no row
    to one of two holders; none: no record."""
    holders = [(other, entry) for other in runtime.store.iter_users() if other != owner
               and (entry := _record(runtime, other, entry_id)) is not None
               and _marked_as_noted(entry, items)]
    if len(holders) == 1:
        return holders[0]
    return (owner, holders[0][1]) if holders else (owner, None)


def unhashed(records: Mapping[str, Entry], unreadable: Collection[str] = frozenset(),
             skip: Collection[str] = frozenset()) -> dict[str, dict[str, str]]:
    """``{lesson id: its whole evidence_hash}`` for each live lesson ``learn_lessons`` wrote
    that keeps no hash for a task it cites: one written before lessons kept them. What the
    task said when the lesson was learned is not known; taken as it reads now, an edit from
    then on makes the lesson stale. Marked stale for it, every such lesson would have left
    the briefings at once, though nothing may have changed. A cited task unreadable now,
    archived, deleted or in ``skip`` (the ids just changed, and lessons just marked stale)
    waits for a later check: its current text may be the very edit to catch."""
    out: dict[str, dict[str, str]] = {}
    for entry in _checked(records.values()):
        kept = entry.meta.get("evidence_hash")
        if (entry.kind is not Kind.LESSON or entry.id in skip
                or entry.meta.get("created_by") != writer_of(entry)
                or (kept is not None and not isinstance(kept, dict))):  # a hand edit's
            continue
        seen = evidence_hashes(entry)
        new = {eid: cited_hash(cited) for eid in evidence_of(entry)
               if eid not in seen and eid not in unreadable and eid not in skip
               and (cited := records.get(eid)) is not None and cited.kind is Kind.TASK
               and cited.deprecated_by is None}
        if new:
            out[entry.id] = {**seen, **new}
    return out


def invalidate(runtime: Runtime, ref: UserRef, touched: set[str] | None = None, *,
               wait: float | None = None) -> list[Path]:
    """:func:`check`; the files written."""
    return check(runtime, ref, touched, wait=wait).written


def on_changes(runtime: Runtime, changes: Iterable[ChangeSet]) -> list[Path]:
    """Change-event batch subscriber: re-check each owner once per indexer flush, when a
    record a derived record may cite changed (all of the owner's derived records when one of
    them changed itself).

    Waits :data:`INDEXER_WAIT_SECONDS` at most for a check under way elsewhere; the owners it
    could not check then are put off (:class:`events.Deferred`): the indexer hands the
    changes over again at its next sync."""
    touched: dict[UserRef, set[str] | None] = {}
    for change in changes:
        if change.kind not in EVIDENCE_KINDS:
            continue
        if change.kind in CHECKED or change.recheck:
            # a derived record changed, or a log whose problem kept entries out of the index
            # reads again (or went): which of them are gone is not known: check them all
            touched[change.ref] = None
            continue
        ids = touched.setdefault(change.ref, set())
        if ids is not None:
            ids |= {e.id for e in change.upserted} | set(change.archived) | set(change.deleted)
    written: list[Path] = []
    busy: ProvenanceBusy | None = None
    for ref, ids in touched.items():
        if busy is not None:
            break  # the lock is held elsewhere: the others would wait as long, each
        try:
            written += invalidate(runtime, ref, ids, wait=INDEXER_WAIT_SECONDS)
        except ProvenanceBusy as exc:
            busy = exc
        except Exception:  # an OSError writing one owner's log, a bug a record trips: that
            if runtime.root_gone():  # owner's alone; the owners after it are still checked
                # moved or deleted meanwhile: the changes wait for the next sync, once back
                raise events.Deferred(f"the memory root {runtime.root} was moved or "
                                      "deleted", written) from None
            log.exception("provenance: cannot check the records of %s", ref)
    if busy is not None:
        raise events.Deferred(str(busy), written)
    return written


def check_all(runtime: Runtime) -> list[Path]:
    """:func:`invalidate` every owner with derived records, whole (after a ``reindex``, which
    publishes no change); the files written. One owner's failure is logged, as in
    :func:`on_changes`, and the others are still checked."""
    written: list[Path] = []
    for ref in runtime.store.iter_users():
        if not has_derived(runtime, ref):
            continue
        try:
            written += invalidate(runtime, ref)
        except ProvenanceBusy:  # the next owner would wait as long: said once, by the caller
            raise
        except Exception:
            if runtime.root_gone():
                raise
            log.exception("provenance: cannot check the records of %s", ref)
    return written


def on_change(runtime: Runtime, change: ChangeSet) -> Iterable[Path]:
    """:func:`on_changes` for one change."""
    return on_changes(runtime, [change])


def stale_summary(records: Iterable[Entry]) -> dict[str, Any]:
    """Counts by status, for ``status`` and tests."""
    out: dict[str, int] = {}
    for e in records:
        out[status_of(e)] = out.get(status_of(e), 0) + 1
    return out
