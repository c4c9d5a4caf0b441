"""Reading the belief tiers for people and agents, and resolving an edge by hand.

The CLI (``worldview``, ``relations``, ``resolve``) and the HTTP API (``GET
/api/v1/memory/worldview``, ``GET /api/v1/memory/relations``, ``POST
/api/v1/memory/relations/{id}/resolve``) both call these, so they answer the same shapes. They
read the Markdown directly: the answer is what the files say now, not what the index last saw.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from everos_reflect.errors import EverosError, InvalidEpisode, ResolveRefused, UnknownEntry
from everos_reflect.model import (
    MAX_LISTED_EVIDENCE,
    Entry,
    EntryId,
    Kind,
    UserRef,
    blank,
    control_problem,
    format_timestamp,
    id_order,
    meta_text,
)
from everos_reflect.problem_words import one_of
from everos_reflect.strategies import beliefs

if TYPE_CHECKING:
    from everos_reflect.runtime import Runtime

#: Longest note a person may attach when resolving an edge.
MAX_NOTE = 2000
RELATION_STATUSES = (beliefs.ACTIVE, beliefs.RESOLVED, beliefs.STALE, beliefs.RETIRED)


def _stamp(entry: Entry) -> str | None:
    ts = entry.timestamp
    return format_timestamp(ts) if ts else None


def _listed_evidence(entry: Entry) -> dict[str, Any]:
    """A record's evidence as the answers list it: each id once, the first
    :data:`~everos_reflect.model.MAX_LISTED_EVIDENCE` of them, and ``evidence_count`` of all
    (``explain ID`` gives the tree), as insights and lessons list theirs. Every id was listed:
    a hand-written conviction citing 3,000 records made ``worldview`` one row of 3,000 ids, in
    the answer of every API call and the prompt of an agent reading it."""
    ids = list(dict.fromkeys(beliefs.id_list(entry.meta.get("evidence"))))
    return {"evidence": ids[:MAX_LISTED_EVIDENCE], "evidence_count": len(ids)}


def conviction_dict(entry: Entry) -> dict[str, Any]:
    return {
        "id": entry.id, "kind": Kind.CONVICTION.value, "key": beliefs.key_of(entry) or None,
        "text": entry.content, "timestamp": _stamp(entry),
        **_listed_evidence(entry),
        "depth": beliefs.depth_of(entry), "status": beliefs.status_of(entry),
        # one id, as the tiers read it: a list or mapping by hand is none (lint names it)
        "supersedes": meta_text(entry.meta.get("supersedes")),
        "deprecated_by": entry.deprecated_by,
        "live": beliefs.is_live(entry),
        **_why_not_standing(entry),
    }


def _why_not_standing(entry: Entry) -> dict[str, str]:
    """``{"stale_reason": …}`` for a stale or retired record, as ``insights`` lists an
    insight's: ``worldview --history`` and ``relations`` said "stale" and not why (a cited
    insight revised, an edge's conviction edited), which only ``explain`` told."""
    reason = meta_text(entry.meta.get("stale_reason"))
    if reason and beliefs.status_of(entry) in (beliefs.STALE, beliefs.RETIRED):
        return {"stale_reason": reason}
    return {}


def relation_dict(entry: Entry) -> dict[str, Any]:
    return {
        "id": entry.id, "kind": Kind.RELATION.value,
        "relation_type": meta_text(entry.meta.get("relation_type")),
        "between": beliefs.id_list(entry.meta.get("between")), "text": entry.content,
        "status": beliefs.status_of(entry), "timestamp": _stamp(entry),
        "depth": beliefs.depth_of(entry),
        **_listed_evidence(entry),
        # one piece of text: a list or mapping by hand is none (lint names it)
        "resolution": meta_text(entry.meta.get("resolution")),
        "resolved_at": (format_timestamp(ts) if isinstance(ts := entry.meta.get("resolved_at"),
                                                            datetime)
                        else beliefs.plain(ts) if meta_text(ts) is not None else None),
        **_why_not_standing(entry),
    }


def worldview(runtime: Runtime, ref: UserRef, *, history: bool = False) -> list[dict[str, Any]]:
    """The current convictions (one per key, sorted by key); with ``history`` every version,
    newest first within each key."""
    entries = runtime.store.entries(ref, Kind.CONVICTION)
    if not history:
        view = beliefs.current_worldview(beliefs.Conviction.of(e) for e in entries)
        by_id = {e.id: e for e in entries}
        return [conviction_dict(by_id[c.id]) for _, c in sorted(view.current.items())]
    when = {e.id: beliefs.instant(e.timestamp) for e in entries}
    rows = [conviction_dict(e) for e in entries]
    rows.sort(key=lambda r: (str(r["key"] or ""), when[r["id"]], id_order(r["id"])))
    out: list[dict[str, Any]] = []
    for key in dict.fromkeys(r["key"] for r in rows):
        out += reversed([r for r in rows if r["key"] == key])
    return out


def relations(runtime: Runtime, ref: UserRef, *, status: str | None = None
              ) -> list[dict[str, Any]]:
    """Every relation of the owner (newest first), optionally only those of ``status``."""
    if status is not None and status not in RELATION_STATUSES:
        raise EverosError(f"status {one_of(RELATION_STATUSES, status)}")
    entries = [e for e in runtime.store.entries(ref, Kind.RELATION) if e.deprecated_by is None]
    when = {e.id: beliefs.instant(e.timestamp) for e in entries}
    rows = [relation_dict(e) for e in entries]
    if status is not None:
        rows = [r for r in rows if r["status"] == status]
    rows.sort(key=lambda r: (when[r["id"]], id_order(r["id"])), reverse=True)
    return rows


def check_relation_id(rel_id: str) -> None:
    """Refuse an id of another kind before any lookup, saying what it is and what ``resolve``
    takes: an Episode id that named nothing was told "no relation ep_…"."""
    problem = other_kind_problem(rel_id, EntryId.parse(rel_id).kind)
    if problem is not None:
        raise ResolveRefused(problem)


def other_kind_problem(rel_id: str, kind: Kind) -> str | None:
    """What :func:`check_relation_id` says of ``rel_id``, an id of ``kind``; ``None`` for a
    relation's. The API's ``/relations/{rel_id}/resolve`` says it too: it said "invalid
    relation id 'ep_…': expected e.g. rel_…" where ``resolve`` named the kind given."""
    if kind is Kind.RELATION:
        return None
    return (f"{rel_id} is {_a(kind)} id, not a relation id: resolve marks a self-contradiction "
            f"edge resolved, and takes its {Kind.RELATION.prefix}_ id (see `relations`)")


def _a(kind: Kind) -> str:
    name = kind.value.replace("_", " ")
    return ("an " if name[0] in "aeiou" else "a ") + name


class InvalidNote(InvalidEpisode):
    """A resolution's note is unusable (blank, too long, a control character): a bad request,
    said as the API's request model says it (422 ``note: must not be empty``). A blank note
    was a 409 "a resolution needs a non-empty note", the conflict of an edge already
    resolved, while an empty one was that 422."""


def checked_note(note: str) -> str:
    """A resolution's ``note`` as it is written (white space runs made one space), or
    :class:`InvalidNote` saying why not. Checked before the relation is looked up, at every
    edge: ``resolve REL --note ''`` of a relation that did not exist was told "no relation",
    then, once it did, that its note was empty; the API says the note first."""
    problem = control_problem(str(note))  # before split(), which drops U+001C-U+001F
    if problem is not None:
        raise InvalidNote("note", problem)
    note = " ".join(str(note).split())
    if blank(note):  # "\u200b" too: a resolution no one can read
        raise InvalidNote("note", "must not be empty")
    if len(note) > MAX_NOTE:
        raise InvalidNote("note", f"must be at most {MAX_NOTE:,} characters, got {len(note):,}")
    return note


def resolve_relation(runtime: Runtime, ref: UserRef, rel_id: str, note: str) -> dict[str, Any]:
    """Mark an active edge ``resolved`` with a person's note (its own metadata; the
    convictions it joins are not touched). Raises :class:`UnknownEntry`,
    :class:`InvalidNote` or :class:`ResolveRefused`."""
    check_relation_id(rel_id)
    note = checked_note(note)
    entry = runtime.store.get(ref, rel_id)  # an unknown id is refused before any lock file
    # read again and written under the relations log's lock, which the worldview's repair
    # holds to resolve edges: a repair between a read and a write outside it was overwritten
    with runtime.store.lock(runtime.store.path_for_id(ref, rel_id)):
        entry = runtime.store.get(ref, rel_id)
        status = beliefs.status_of(entry)
        if entry.deprecated_by:  # `relations` lists it no more, nor does the census count it
            raise ResolveRefused(f"{rel_id} is archived (replaced by {entry.deprecated_by}): "
                                 "nothing to resolve")
        if status != beliefs.ACTIVE:
            raise ResolveRefused(f"{rel_id} is {status}, not active: nothing to resolve")
        updated = runtime.store.update_meta(ref, rel_id, {
            "status": beliefs.RESOLVED, "resolved_at": datetime.now(UTC), "resolution": note})
    from everos_reflect.strategies.belief_store import sync

    sync(runtime, [runtime.store.path_for_id(ref, rel_id)])
    return relation_dict(updated)


def owners_of(runtime: Runtime, rel_id: str, refs: list[UserRef]) -> list[UserRef]:
    """The users among ``refs`` holding an entry ``rel_id`` (ids are unique per user only)."""
    found = []
    for ref in refs:
        try:
            runtime.store.get(ref, rel_id)
        except UnknownEntry:
            continue
        found.append(ref)
    return found


__all__ = ["InvalidNote", "ResolveRefused", "check_relation_id", "checked_note",
           "other_kind_problem", "owners_of",
           "relations", "resolve_relation", "worldview"]
