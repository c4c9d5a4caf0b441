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
"evidence <id> was edited", naming a record cited) are lifted.

:func:`check` (:func:`invalidate`) applies the rules to one owner and writes the metadata;
the change-event subscriber :func:`on_change` calls it whenever the indexer changes something
of an owner who has derived records, and ``revalidate_insights`` at each run.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from everos_reflect.errors import EverosError
from everos_reflect.index.audit import Derivation, record_derivation
from everos_reflect.markdown.parser import parse_entry_id
from everos_reflect.model import Entry, Kind, UserRef

if TYPE_CHECKING:
    from everos_reflect.index.events import ChangeSet
    from everos_reflect.runtime import Runtime

log = logging.getLogger(__name__)

ACTIVE, STALE, RETIRED = "active", "stale", "retired"
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


def status_of(entry: Entry) -> str:
    value = entry.meta.get("status")
    return str(value).strip() if value is not None else ACTIVE


def evidence_of(entry: Entry) -> list[str]:
    value = entry.meta.get("evidence")
    items = value if isinstance(value, list) else ([] if value is None else [value])
    return [str(v).strip() for v in items if str(v).strip()]


def evidence_hashes(entry: Entry) -> dict[str, str]:
    value = entry.meta.get("evidence_hash")
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


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
        if eid in seen and seen[eid] != cited.text_hash:
            return f"evidence {eid} was edited"
    return None


def _checked(records: Iterable[Entry]) -> list[Entry]:
    """The records whose evidence is checked: active, daemon-derived, citing something."""
    return [e for e in records if e.kind in CHECKED
            and DERIVATION_KEY in e.meta  # written by the daemon, never a person's
            and e.deprecated_by is None and status_of(e) == ACTIVE and evidence_of(e)]


def find_stale(records: Mapping[str, Entry],
               unreadable: Collection[str] = frozenset()) -> dict[str, str]:
    """``{id: stale_reason}`` of every active, daemon-derived record whose evidence no longer
    stands, transitively (a record citing a newly stale record is stale too). Ids in
    ``unreadable`` are in their file but cannot be read now: not deleted, not checked."""
    derived = sorted(_checked(records.values()), key=lambda e: (_depth(e), e.id))
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


def find_restored(records: Mapping[str, Entry], unreadable: Collection[str] = frozenset(),
                  stale: Collection[str] = frozenset()) -> list[str]:
    """Ids of the stale records (:func:`_waiting`) whose every cited record reads again
    exactly as when it was derived or last revalidated: readable, live, not archived, its text
    hash the one ``evidence_hash`` recorded, and, if it is itself derived, active (or lifted
    here too) and shallower than the record. ``stale``: ids being marked stale now, which
    count as stale. A "holds" of ``revalidate_insights`` may deepen a cited insight without
    changing its text: lifted, the record citing it stood at its old depth, past
    ``max_depth`` unseen; it waits for revalidation instead, which recomputes its depth.

    Stale was final: a record marked so by a transient break (a typo fixed since, a log
    briefly unreadable, or the old rule that took an unreadable entry for a deleted one)
    stayed stale for good although nothing it stands on had changed. A citation with no
    recorded hash cannot be shown unchanged, so such a record stays stale."""
    waiting = sorted(_waiting(records.values()), key=lambda e: (_depth(e), e.id))
    lifted: set[str] = set()

    def stands(entry: Entry) -> bool:
        seen = evidence_hashes(entry)
        for eid in evidence_of(entry):
            cited = records.get(eid)
            if (cited is None or eid in unreadable or cited.deprecated_by
                    or seen.get(eid) != cited.text_hash):
                return False
            if eid not in lifted and (eid in stale or status_of(cited) != ACTIVE):
                return False
            if cited.kind.derived and _depth(cited) >= _depth(entry):
                return False  # it stands deeper now than the depth it was written with
        return True

    for _ in range(len(waiting)):  # a pass lifts at least one more, or nothing will
        more = [e.id for e in waiting if e.id not in lifted and stands(e)]
        if not more:
            break
        lifted.update(more)
    return [e.id for e in waiting if e.id in lifted]


def load_records(runtime: Runtime, ref: UserRef,
                 unreadable: set[str] | None = None) -> dict[str, Entry]:
    """Every entry of ``ref`` a derived record may cite, from the Markdown (the truth); the
    ids present but unreadable are added to ``unreadable`` when given, and so is every id a
    record cites in a log that cannot be read at all (``DailyLog.unread``: over the size
    limit, not UTF-8, a symlink out of the root, which the listing skips), whose entries are
    unknown, not deleted."""
    records: dict[str, Entry] = {}
    listed: dict[Path, bool] = {}  # path -> unread
    for path in runtime.store.iter_files(ref, EVIDENCE_KINDS):
        log = runtime.store.read(path)
        records.update((e.id, e) for e in log.entries)
        listed[Path(path)] = log.unread
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
    user = runtime.store.user_dir(ref)
    return any((user / kind.folder).is_dir() for kind in CHECKED)


@dataclass
class Checked:
    """What one :func:`check` of an owner did: the ids marked stale (with why), the ids whose
    stale mark was lifted, and the files written."""

    stale: dict[str, str] = field(default_factory=dict)
    restored: list[str] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)


def check(runtime: Runtime, ref: UserRef, touched: set[str] | None = None) -> Checked:
    """Mark stale every record of ``ref`` :func:`find_stale` names, and make active again
    every one :func:`find_restored` names (one ``derivation_report`` row each, strategy
    ``provenance``, status ``restored``: the record in ``outputs``, what it cites in
    ``inputs``).

    With ``touched`` (the ids the indexer just changed), nothing is read beyond the derived
    logs unless a derived record cites one of them: only those can change a record's status.
    """
    done = Checked()
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
    for entry_id, reason in find_stale(records, unreadable).items():
        try:
            runtime.store.update_meta(ref, entry_id, {"status": STALE, "stale_reason": reason})
        except EverosError:
            continue  # its file is unparseable or it vanished: reported by lint, left alone
        done.stale[entry_id] = reason
        done.written.append(runtime.store.path_for_id(ref, entry_id))
    for entry_id in find_restored(records, unreadable, done.stale):
        was = records[entry_id].meta.get("stale_reason")
        try:
            runtime.store.update_meta(ref, entry_id, {"status": ACTIVE, "stale_reason": None})
        except EverosError:
            continue
        log.info("provenance: %s: %s is active again: every record it cites reads as when it "
                 "was derived (it was stale: %s)", ref, entry_id, was)
        record_derivation(runtime.db(), Derivation(
            NAME, ref, RESTORED, inputs=evidence_of(records[entry_id]), outputs=[entry_id]))
        done.restored.append(entry_id)
        done.written.append(runtime.store.path_for_id(ref, entry_id))
    return done


def invalidate(runtime: Runtime, ref: UserRef, touched: set[str] | None = None) -> list[Path]:
    """:func:`check`; the files written."""
    return check(runtime, ref, touched).written


def on_changes(runtime: Runtime, changes: Iterable[ChangeSet]) -> list[Path]:
    """Change-event batch subscriber: re-check each owner once per indexer flush, when a
    record a derived record may cite changed (all of the owner's derived records when one of
    them changed itself)."""
    touched: dict[UserRef, set[str] | None] = {}
    for change in changes:
        if change.kind not in EVIDENCE_KINDS:
            continue
        if change.kind in CHECKED:
            touched[change.ref] = None  # a derived record changed: check them all
            continue
        ids = touched.setdefault(change.ref, set())
        if ids is not None:
            ids |= {e.id for e in change.upserted} | set(change.archived) | set(change.deleted)
    written: list[Path] = []
    for ref, ids in touched.items():
        try:
            written += invalidate(runtime, ref, ids)
        except Exception:  # an OSError writing one owner's log, a bug a record trips: that
            if runtime.root_gone():  # owner's alone; the owners after it are still checked
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
