"""``revalidate_insights`` (seed 000, SPEC §10): re-check each stale insight against its evidence
as it is now, and keep, revise or retire it.

Per stale, daemon-written insight: every cited record is followed to its current form — an
archived one through ``deprecated_by`` to the narrative that replaced it, an edited one as it
reads now, a deleted one dropped. With fewer than two records left the insight is retired (no
model needed: the citation floor no longer holds). Otherwise the model answers the
``revalidation`` task: **holds** → ``status: active`` again with the evidence re-pointed
(and ``depth`` recomputed from it, held to the tier's ``max_depth``: :func:`depth_problem`);
**revise** → a new insight archives the old one through ``deprecated_entries`` (when a live
insight already states the revision, the old one is archived into it: :func:`successor`,
counted ``merged``); **retire** →
``status: retired``. A revise writes twice (the new insight, then the old one's archive key); a
crash between the two is finished by the next run (:func:`written_revision`), which archives
the old one toward the revision already written, with no model call. The extractive
provider cannot judge a text, so offline the insight stays stale and the run reports
``needs_llm``. One ``derivation_report`` row per insight. A call the server refuses for good
(HTTP 400, 413, 422) sets the insight aside, still stale: it is not sent again until it or its
evidence is edited, or the ``revalidation`` prompt or the ``[llm]`` model changes
(:func:`aside_key`, kept in the changes cursor), where it was asked about again every run.
Each run first lifts, with no model, the stale mark of every insight whose cited records all
read again as when it was derived (:func:`provenance.check`; the stale mark of a transient
break was final). An insight citing a record still in its log but unreadable now (a hand edit
broke it: ``DailyLog.unreadable``) waits, stale, until it reads again (:func:`cites_unreadable`),
as provenance treats such a record: unknown, never deleted. An insight citing a stale
insight not judged yet waits for its verdict (:func:`held_by_cited`, counted
``waiting_on_cited``) instead of counting it gone.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from everos_reflect.engine.limits import Budget
from everos_reflect.engine.registry import RunContext, Strategy
from everos_reflect.engine.triggers import CountTrigger
from everos_reflect.errors import EverosError, ProvenanceBusy, ProviderUnavailable
from everos_reflect.index import audit, cursors
from everos_reflect.index.audit import (
    Derivation,
    settle_intent,
)
from everos_reflect.index.db import transaction
from everos_reflect.llm.task_catalog import MIN_CITATIONS
from everos_reflect.markdown.parser import UNDONE
from everos_reflect.model import Entry, Kind, UserRef, id_order
from everos_reflect.problem_words import counted
from everos_reflect.strategies import beliefs, provenance
from everos_reflect.strategies.aside import SentWith, prompt_budget, tier_prompts
from everos_reflect.strategies.belief_store import (
    NEEDS_LLM,
    llm_provider,
    note_clipped,
    owner_failed,
    set_aside_error,
    sync,
    tier_settings,
)

if TYPE_CHECKING:
    from everos_reflect.engine.engine import Engine
    from everos_reflect.runtime import Runtime

log = logging.getLogger(__name__)

NAME = "revalidate_insights"
MAX_HOPS = 20  # a deprecated_by chain longer than this is a hand-made loop


def current_form(eid: str, records: dict[str, Entry]) -> Entry | None:
    """The live record ``eid`` stands for now: itself, or where its archive chain ends."""
    seen = set()
    entry = records.get(eid)
    while entry is not None and entry.deprecated_by and len(seen) < MAX_HOPS:
        seen.add(entry.id)
        entry = records.get(entry.deprecated_by)
        if entry is not None and entry.id in seen:
            return None
    return entry


def current_forms(eid: str, records: dict[str, Entry]) -> list[Entry]:
    """The live records ``eid`` stands for now: :func:`current_form`, except that a merged
    narrative whose merge was undone (``deprecated_by: undone``, where its archive chain
    may end too) stands for its ``sources``, each followed to its own current forms: the
    undo restored them. Dropped like a deleted record instead, an insight citing the
    narrative and one other record was retired with no model asked ("fewer than 2 cited
    records remain"), though every Episode the narrative summed up was live again. Each
    record is visited once, so a hand-made loop of sources ends."""
    out: list[Entry] = []
    seen: set[str] = set()
    todo = [eid]
    while todo:
        start = todo.pop()
        if start in seen:
            continue
        seen.add(start)
        entry = records.get(start)
        hops = 0
        while entry is not None and entry.deprecated_by and entry.deprecated_by != UNDONE \
                and hops < MAX_HOPS:
            hops += 1
            seen.add(entry.id)
            entry = records.get(entry.deprecated_by)
            if entry is not None and entry.id in seen:
                entry = None
        if entry is None:
            continue
        if entry.deprecated_by == UNDONE and entry.kind is Kind.EPISODE:
            todo.extend(reversed([s for s in entry.sources if s not in seen]))
            continue
        out.append(entry)
    return out


def current_evidence(insight: Entry, records: dict[str, Entry]) -> list[Entry]:
    """The insight's evidence re-pointed to its current forms (:func:`current_forms`),
    usable ones only, in order."""
    out: list[Entry] = []
    ids: set[str] = set()
    for eid in provenance.evidence_of(insight):
        for entry in current_forms(eid, records):
            if entry.deprecated_by:
                continue
            if entry.kind.derived and provenance.status_of(entry) != provenance.ACTIVE:
                continue
            if entry.id not in ids:
                ids.add(entry.id)
                out.append(entry)
    return out


def written_revision(insight: Entry, records: dict[str, Entry]) -> Entry | None:
    """The live revision this strategy already wrote of ``insight``, if any.

    "revise" makes two writes: the new insight (``derivation: rv_<old id>``, ``revises``),
    then the old one's archive key. A crash between them leaves the new one standing and the
    old one stale and live; finding the first write lets the next run finish the second
    instead of asking the model again and writing a second revision."""
    key = f"rv_{insight.id}"
    found = [e for e in records.values() if e.kind is Kind.INSIGHT and e.deprecated_by is None
             and e.meta.get(provenance.DERIVATION_KEY) == key
             and e.meta.get("revises") == insight.id]
    return min(found, key=lambda e: id_order(e.id)) if found else None


#: The ``commit_intent`` item naming the verdict being written (:meth:`RevalidateInsights.recover`).
VERDICT = "verdict"
#: The verdict noted for a "revise" whose text a live insight states: the stale insight is
#: archived into that one (:meth:`RevalidateInsights._archive_into`), nothing is written.
MERGED = "merged"


def _shown(records: Mapping[str, Entry], insight_id: str, verdict: str) -> bool:
    """Whether ``records`` (one user's insights) show the Markdown write of ``verdict`` on
    ``insight_id``: a merge's archive key, a revise's revision, a keep's ``active`` or a
    retire's ``retired``."""
    insight = records.get(insight_id)
    if insight is None:
        return False
    if verdict == MERGED:
        return insight.deprecated_by is not None
    if verdict == "revise":
        return written_revision(insight, dict(records)) is not None
    wanted = {"holds": provenance.ACTIVE, "retire": provenance.RETIRED}.get(verdict)
    return wanted is not None and insight.meta.get("status") == wanted


def _written(rt: Runtime, ref: UserRef, insight_id: str, verdict: str) -> list[str]:
    """What an interrupted ``verdict`` on ``insight_id`` wrote (its row's ``outputs``), the
    revise finished and the files indexed; ``[]``: nothing was written."""
    records = {e.id: e for e in rt.store.entries(ref, Kind.INSIGHT)}
    if not _shown(records, insight_id, verdict):
        return []
    insight = records[insight_id]
    if verdict == MERGED:
        sync(rt, {rt.store.path_for_id(ref, insight_id)})
        return [str(insight.deprecated_by)]
    if verdict == "revise":
        revision = written_revision(insight, records)
        assert revision is not None
        if insight.deprecated_by is None:
            rt.store.deprecate(ref, {insight_id: revision.id})
        sync(rt, {rt.store.path_for_id(ref, insight_id), rt.store.path_for_id(ref, revision.id)})
        return [revision.id]
    sync(rt, {rt.store.path_for_id(ref, insight_id)})
    return [insight_id]


def _verdict_holder(rt: Runtime, ref: UserRef, insight_id: str, verdict: str) -> UserRef:
    """The user whose logs hold the insight an interrupted verdict of ``ref`` was about:
    ``ref``, unless its logs hold no such insight (its folder renamed or moved by hand before
    the restart) and exactly one other user's logs show the verdict's write on it (ids are
    per user: not guessed among several). Settled under the old name, the verdict found
    nothing written and was dropped: a revision stood with no row (its old insight live and
    stale beside it, when the kill came before its archive key), a keep or retire too."""
    if not rt.store.user_gone(ref) and any(
            e.id == insight_id for e in rt.store.entries(ref, Kind.INSIGHT)):
        return ref
    holders = [other for other in rt.store.iter_users() if other != ref and _shown(
        {e.id: e for e in rt.store.entries(other, Kind.INSIGHT)}, insight_id, verdict)]
    return holders[0] if len(holders) == 1 else ref


def _aside_with_row(rt: Runtime, ref: UserRef, aside: Mapping[str, str], row: Derivation,
                    run_id: str) -> None:
    """Set ``aside`` (insight id → set-aside key) in the changes cursor and record ``row``,
    in one transaction. In two, a kill between them left an insight set aside, not asked
    about again until edited, with no row saying it was refused or why."""
    conn = rt.db()
    with transaction(conn):
        if aside:
            cursors.advance(conn, NAME, ref, dict(aside), run_id)
        audit.insert_derivation(conn, row)


#: The tasks a revalidation sends (their templates are part of a set-aside key).
TASKS = ("revalidation",)


def aside_key(insight: Entry, evidence: list[Entry], sent: SentWith,
              cap: int | None = None) -> str:
    """What a revalidation refused for good was asked about: the insight's text and its
    evidence as they read now, and what the settings send with them (``sent``: the prompts
    and the model). A change of any brings the insight back. ``cap``: a verdict refused as
    deeper than the ``max_depth`` of the tier that writes the insight is kept under that
    cap too, so raising it brings the insight back (under the key without it, a person who
    raised ``max_depth`` to keep such an insight saw it stay stale, never asked again)."""
    digest = hashlib.sha256(insight.text_hash.encode())
    for entry in evidence:
        digest.update(f"\n{entry.id}:{entry.text_hash}".encode())
    if cap is not None:
        digest.update(f"\nmax_depth:{cap}".encode())
    return sent.key(digest.hexdigest())


def is_aside(insight: Entry, records: dict[str, Entry], aside: set[tuple[str, str]],
             sent: SentWith, caps: Callable[[Entry], int] | None = None) -> bool:
    """Whether ``insight`` is set aside (``aside``: the ``(id, key)`` pairs of the changes
    cursor) under its :func:`aside_key` as it reads now, or, ``caps`` given (the
    ``max_depth`` of the tier that writes a record, :func:`provenance.depth_caps`), under the
    key of a verdict refused as too deep for the cap in force now."""
    evidence = current_evidence(insight, records)
    if (insight.id, aside_key(insight, evidence, sent)) in aside:
        return True
    return caps is not None and (
        insight.id, aside_key(insight, evidence, sent, caps(insight))) in aside


@dataclass(frozen=True)
class TooDeep:
    """A stale insight a revalidation left stale because its verdict would stand it deeper
    than ``max_depth`` of the tier that writes it (``tier``): it is not asked about again
    until that cap is raised, or it or its evidence is edited, or the prompts or model
    change. For ``status``: set aside in silence, nothing but an old ``derivation_report``
    row said why an insight stayed stale for good."""

    ref: UserRef
    insight_id: str
    tier: str
    max_depth: int
    #: The stale insights that wait for this one to be judged first, directly or through
    #: others (:func:`held_by_cited`), by id: held as long as it is, and listed nowhere else.
    waiting: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {"app_id": self.ref.app, "project_id": self.ref.project,
                "user_id": self.ref.user_id, "insight_id": self.insight_id,
                "tier": self.tier, "max_depth": self.max_depth,
                "waiting": list(self.waiting),
                "reason": (f"a verdict would stand it deeper than max_depth {self.max_depth} "
                           f"({self.tier}); it stays stale and is not revalidated"),
                "remedy": (f"raise [strategies.{self.tier}] max_depth in ome.toml past "
                           f"{self.max_depth}, or edit the insight or its evidence")}


def held_too_deep(runtime: Runtime, engine: Engine | None = None,
                  ref: UserRef | None = None) -> list[TooDeep]:
    """Every stale insight (of ``ref``, else of the root) set aside now as deeper than its
    tier's ``max_depth`` (:meth:`RevalidateInsights._refuse` with a cap), by owner then id:
    one whose key under the cap in force now (``engine``'s settings, the daemon's; else
    ``ome.toml`` as a run reads it), the prompts and the model still matches. Only the logs
    of owners with an insight set aside are read."""
    return [h for h in set_aside_insights(runtime, engine, ref) if isinstance(h, TooDeep)]


def set_aside_insights(runtime: Runtime, engine: Engine | None = None,
                       ref: UserRef | None = None) -> list[TooDeep | tuple[UserRef, str]]:
    """Every stale insight (of ``ref``, else of the root) a revalidation set aside and does
    not send again as things stand: a :class:`TooDeep`, or ``(owner, id)`` for one set aside
    otherwise (the server refused its call for good, or a verdict was refused), by owner then
    id. :func:`held_too_deep` says how."""
    from everos_reflect.engine.engine import Engine
    from everos_reflect.engine.registry import get_strategy

    engine = engine or Engine(runtime, recover=False)
    try:
        settings: Mapping[str, Any] = engine.settings_for(NAME)
    except EverosError:  # ConfigError among them: a run takes the defaults
        settings = {k: spec.default for k, spec in get_strategy(NAME).all_settings().items()}
    by_owner: dict[UserRef, set[str]] = {}
    for owner, row_id, _key, _run in cursors.rows(runtime.db(), NAME, ref):
        if ":" not in row_id:  # needs_llm:/waiting_on_cited: rows are not set aside
            by_owner.setdefault(owner, set()).add(row_id)
    if not by_owner:
        return []
    sent = SentWith.tasks(runtime, settings, TASKS)
    caps = provenance.depth_caps(runtime, engine)
    out: list[TooDeep | tuple[UserRef, str]] = []
    for owner in sorted(by_owner, key=str):
        records = provenance.load_records(runtime, owner)
        aside = cursors.consumed(runtime.db(), NAME, owner)
        waits: dict[str, tuple[str, ...]] | None = None  # worked out for the first TooDeep
        for insight_id in sorted(by_owner[owner], key=id_order):
            insight = records.get(insight_id)
            if insight is None or not stale_insights({insight_id: insight}):
                continue
            cap = caps(insight)
            evidence = current_evidence(insight, records)
            if (insight_id, aside_key(insight, evidence, sent, cap)) in aside:
                waits = waiters(held_by_cited(records)) if waits is None else waits
                out.append(TooDeep(owner, insight_id, provenance.writer_of(insight), cap,
                                   waits.get(insight_id, ())))
            elif (insight_id, aside_key(insight, evidence, sent)) in aside:
                out.append((owner, insight_id))
    return out


def waiters(held: Mapping[str, Sequence[str]]) -> dict[str, tuple[str, ...]]:
    """For each insight others wait for (``held``: :func:`held_by_cited`, a waiting id → the
    ids it waits for), every insight that waits for it, directly or through another that
    waits, sorted by id. An insight held too deep is never judged, so all of these stay
    stale with it; ``status`` listed only the one held, and the run only counted the rest."""
    direct: dict[str, set[str]] = {}
    for waiting_id, cited in held.items():
        for cited_id in cited:
            direct.setdefault(cited_id, set()).add(waiting_id)
    out: dict[str, tuple[str, ...]] = {}
    for start in direct:
        seen: set[str] = set()
        todo = list(direct[start])
        while todo:  # iterative: a chain of thousands is no recursion
            nxt = todo.pop()
            if nxt in seen or nxt == start:
                continue
            seen.add(nxt)
            todo.extend(direct.get(nxt, ()))
        out[start] = tuple(sorted(seen, key=id_order))
    return out


def cites_unreadable(insight: Entry, records: dict[str, Entry],
                     unreadable: Collection[str]) -> bool:
    """Whether a record ``insight`` cites, or one its archive chain leads to, is still in its
    log but cannot be read now (``unreadable``, see :func:`provenance.load_records`).

    Such a record is unknown, as it is to provenance: dropped like a deleted one, it left the
    insight "fewer than 2 cited records" and retired it for good, or a "holds" re-pointed the
    evidence without it, for a typo fixed the next minute."""
    for eid in provenance.evidence_of(insight):
        seen: set[str] = set()
        current: str | None = eid
        while current is not None and current not in seen and len(seen) < MAX_HOPS:
            if current in unreadable:
                return True
            seen.add(current)
            entry = records.get(current)
            current = entry.deprecated_by if entry is not None else None
    return False


def held_by_cited(records: dict[str, Entry]) -> dict[str, list[str]]:
    """The stale insights that wait for a stale insight they cite to be judged first (id →
    the cited ids, in citation order): a cited record is followed to its current form, and
    one this strategy will judge (:func:`stale_insights`) is not judged yet while it is stale.

    Dropped as if gone, it left the citing insight "fewer than 2 cited records" and retired
    it for good when the cited one could not be judged (offline, or its call failed), which
    a later "holds" of the cited one could not undo. In a citation ring (only a hand edit
    makes one) the insight judged first (:func:`stale_insights`' order) waits for no other
    of the ring: each waiting for the other, none was ever judged."""
    stale = stale_insights(records)
    order = {e.id: n for n, e in enumerate(stale)}
    held: dict[str, list[str]] = {}
    rings: dict[str, int] | None = None  # made once, when first needed
    for insight in stale:
        cited: list[str] = []
        for eid in provenance.evidence_of(insight):
            entry = current_form(eid, records)
            if (entry is None or entry.id not in order or entry.id == insight.id
                    or entry.id in cited):
                continue
            if order[entry.id] > order[insight.id]:
                if eid == entry.id:  # cited as it is: a ring iff they share a loop
                    rings = citation_rings(records) if rings is None else rings
                    ring = rings.get(entry.id)
                    if ring is not None and ring == rings.get(insight.id):
                        continue  # a ring: this one is judged first
                elif depends_on(entry, insight.id, records):  # cited through an archive
                    continue
            cited.append(entry.id)
        if cited:
            held[insight.id] = cited
    return held


def citation_rings(records: dict[str, Entry]) -> dict[str, int]:
    """The strongly connected components of the citations among ``records`` (a derived
    record → each id it cites, as :func:`depends_on` follows them): two ids with the same
    number cite each other, directly or through others. One pass over every citation; asked
    of each pair with :func:`depends_on` instead, :func:`held_by_cited` walked the whole chain
    below each insight, every round: 2.2 s a round for 5,000 insights in chains of 500.
    Iterative (Tarjan's algorithm): a chain of thousands is no recursion."""
    cites: dict[str, list[str]] = {
        i: list(provenance.evidence_of(e)) for i, e in records.items() if e.kind.derived}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    ring: dict[str, int] = {}
    rings = 0
    for start in cites:
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            node, at = work.pop()
            if at == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            out = cites.get(node, [])
            while at < len(out):
                nxt = out[at]
                at += 1
                if nxt not in index:
                    work.append((node, at))
                    work.append((nxt, 0))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                if low[node] == index[node]:
                    rings += 1
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        ring[member] = rings
                        if member == node:
                            break
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
    return ring


def waiting(records: dict[str, Entry], aside: set[tuple[str, str]], sent: SentWith,
            unreadable: Collection[str] = frozenset(),
            caps: Callable[[Entry], int] | None = None) -> list[Entry]:
    """:func:`stale_insights` but those set aside (``aside``: the ``(id, key)`` pairs whose
    call the server refused for good, unchanged since, under the settings ``sent``), those
    citing a record that cannot be read now (``unreadable``): they wait, stale, until it reads
    again, and those citing a stale insight not judged yet (:func:`held_by_cited`): they
    are judged once it is."""
    held = held_by_cited(records)
    ids = {i for i, _ in aside}  # a key is worked out only for an insight set aside once
    return [e for e in stale_insights(records)
            if e.id not in held
            and not cites_unreadable(e, records, unreadable)
            and not (e.id in ids and is_aside(e, records, aside, sent, caps))]


#: Cursor rows ``needs_llm:<insight id>`` under :func:`aside_key`: the stale insights the last
#: run could not judge (the extractive provider), as they and their evidence read then. The
#: data poll does not count them again (:func:`new_to_judge`); an edit of one or its
#: evidence, or another provider or model, makes it count. Each offline run reported
#: ``needs_llm`` and the poll, seeing the same stale insight, fired the next run once the
#: cooldown was over, for ever.
WAITS_FOR_LLM = "needs_llm:"
#: Cursor rows ``waiting_on_cited:<insight id>``: the stale insights an offline run left
#: waiting for a stale insight they cite (:func:`held_by_cited`), which only a model can
#: judge first. Counted with :data:`WAITS_FOR_LLM` by ``status`` (:meth:`unavailable`): it
#: said "1 stale insight waits for a language model" while the run counted two.
WAITS_ON_CITED = "waiting_on_cited:"


def new_to_judge(records: dict[str, Entry], consumed: set[tuple[str, str]], sent: SentWith,
                 unreadable: Collection[str] = frozenset(),
                 caps: Callable[[Entry], int] | None = None) -> list[Entry]:
    """:func:`waiting` but those a run already found it could not judge, unchanged since under
    the settings ``sent`` (:data:`WAITS_FOR_LLM`): what a run could do something new about."""
    return [e for e in waiting(records, consumed, sent, unreadable, caps)
            if (WAITS_FOR_LLM + e.id, aside_key(e, current_evidence(e, records), sent))
            not in consumed]


def _note_needs_llm(rt: Runtime, ref: UserRef, noted: Mapping[str, str], run_id: str,
                    *, complete: bool, held: Mapping[str, str] | None = None) -> None:
    """Keep ``noted`` (insight id → :func:`aside_key`) as the owner's :data:`WAITS_FOR_LLM`
    rows and ``held`` (the same, of insights waiting on a cited one) as its
    :data:`WAITS_ON_CITED` rows; ``complete`` (the run looked at every stale insight of the
    owner): drop the rows of insights it did not find waiting for a model any more."""
    conn = rt.db()
    rows = {(WAITS_FOR_LLM + i, key) for i, key in noted.items()}
    rows |= {(WAITS_ON_CITED + i, key) for i, key in (held or {}).items()}
    with transaction(conn):
        if complete:
            old = {row for row in cursors.consumed(conn, NAME, ref)
                   if row[0].startswith((WAITS_FOR_LLM, WAITS_ON_CITED))}
            cursors.forget(conn, NAME, ref, old - rows)
        cursors.advance(conn, NAME, ref, dict(rows), run_id)


def revision_depth(cited: list[Entry]) -> int:
    """The ``depth`` of a revision, or of an insight kept with its evidence re-pointed: 1 +
    the deepest record it cites now (SPEC §10), as ``reflect_insights`` computes it on write.
    A "holds" verdict re-points an insight to the current forms of its evidence, which may
    sit deeper (a revised insight) or shallower (a retired one dropped) than what it cited."""
    return 1 + max((_depth(e) if e.kind.derived else 0 for e in cited), default=0)


def revision_cap(runtime: Runtime, insight: Entry) -> tuple[str, int]:
    """The tier that writes insights of ``insight``'s type and its ``max_depth``: a revision is
    held to the cap its original was written under (``reconcile``'s for a reconciliation,
    ``reflect_insights``' else). Without a cap a revision citing the newer, deeper version of
    a record climbed one level per revise, past the bound that ends the belief loop. A broken
    ``ome.toml`` (the daemon keeps its last good one) reads as the tier's default."""
    from everos_reflect.engine.engine import Engine
    from everos_reflect.engine.registry import get_strategy
    from everos_reflect.strategies.insights import NAME as INSIGHTS
    from everos_reflect.strategies.reconcile import NAME as RECONCILE

    kind = insight.meta.get("insight_type")
    name = RECONCILE if kind == beliefs.RECONCILIATION else INSIGHTS
    try:
        return name, int(Engine(runtime, recover=False).settings_for(name)["max_depth"])
    except (EverosError, KeyError):  # ConfigError among them
        return name, int(get_strategy(name).all_settings()["max_depth"].default)


def repeated(insight: Entry, text: str, records: dict[str, Entry]) -> Entry | None:
    """The live insight other than ``insight`` that already states ``text`` (ignoring case,
    spacing and a final full stop, as ``reflect_insights`` compares), the lowest id first."""
    key = beliefs.text_key(text)
    found = [e for e in records.values()
             if e.kind is Kind.INSIGHT and e.id != insight.id and beliefs.is_live(e)
             and beliefs.text_key(e.content) == key]
    return min(found, key=lambda e: id_order(e.id)) if found else None


def depends_on(entry: Entry, target: str, records: dict[str, Entry]) -> bool:
    """Whether ``entry`` cites ``target``, directly or through the records it cites.

    Archiving ``target`` into such an entry would make the entry cite its own successor: a
    loop provenance and :func:`current_form` could only break by dropping the citation."""
    todo, seen = list(provenance.evidence_of(entry)), set()
    while todo:
        eid = todo.pop()
        if eid == target:
            return True
        if eid in seen:
            continue
        seen.add(eid)
        cited = records.get(eid)
        if cited is not None and cited.kind.derived:
            todo += provenance.evidence_of(cited)
    return False


def successor(insight: Entry, verdict: dict[str, Any],
              records: dict[str, Entry]) -> Entry | None:
    """The live insight a "revise" verdict of ``insight`` repeats, when ``insight`` may be
    archived into it (it does not stand on ``insight``): the revision exists already, so
    the old insight is archived toward it, as a Reflection merge archives its sources.
    Refused and left stale, it waited for an edit that the live insight made unneeded."""
    if verdict["verdict"] != "revise":
        return None
    live = repeated(insight, verdict["insight"], records)
    if live is None or depends_on(live, insight.id, records):
        return None
    return live


def repeat_problem(insight: Entry, text: str, records: dict[str, Entry]) -> str | None:
    """Why a "revise" of ``insight`` into ``text`` may not be written, as ``reflect_insights``
    refuses an insight: ``text`` repeats a live insight (written again, it was a second copy,
    and one more for ``update_worldview``'s trigger; one that does not stand on ``insight``
    takes it instead, :func:`successor`). A revision deeper than :func:`revision_cap`
    allows is :func:`depth_problem`'s. None: it may."""
    same = repeated(insight, text, records)
    if same is not None:
        return f"a 'revise' verdict repeating {same.id}, which cites {insight.id}"
    return None


def depth_problem(runtime: Runtime, insight: Entry, verdict: str,
                  cited: list[Entry]) -> str | None:
    """Why ``insight`` may not stand on ``cited`` after a ``verdict`` ("holds" or "revise"):
    it would be deeper than :func:`revision_cap` allows, and the tier that writes insights of
    its type refuses one that deep. A "holds" re-pointed to a deeper current form (a revised
    insight) would otherwise stand past the bound the tier keeps. None: it may."""
    depth = revision_depth(cited)
    tier, cap = revision_cap(runtime, insight)
    if depth > cap:
        return f"a {verdict!r} verdict of depth {depth} > max_depth {cap} ({tier})"
    return None


def needs_model(insight: Entry, records: dict[str, Entry], revised: Collection[str]) -> bool:
    """Whether settling ``insight`` asks the model: not when a revise of it interrupted
    between its two writes is to be finished (``revised``: the ids a live revision names,
    :func:`written_revision`), nor when fewer than two records it cites are left (retired by
    the citation floor)."""
    if insight.id in revised and written_revision(insight, records) is not None:
        return False
    return len(current_evidence(insight, records)) >= MIN_CITATIONS


def next_affordable(ctx: RunContext, todo: list[Entry],
                    records: dict[str, Entry]) -> tuple[Entry | None, str | None]:
    """The first of ``todo`` (in judging order) the run's limits still allow, or ``(None,
    the limit)``. The limits bound what costs: an insight that needs the model is held to
    ``max_llm_calls``, ``max_tokens`` and the wall time; one settled without a call (finished,
    or retired by the citation floor; offline, every one) to the wall time alone. Each was
    charged as a record against ``max_records`` (what one call shows, docs/limits.md), so a
    run stopped after 50 insights of which none needed the model, and a backlog of 5,000
    took a hundred runs; once the calls were spent, those needing none waited too."""
    revised: set[str] | None = None  # made once, when first needed
    blocked: str | None = None
    for insight in todo:
        if ctx.llm.metered:
            if revised is None:
                revised = {str(e.meta.get("revises")) for e in records.values()
                           if e.kind is Kind.INSIGHT and e.deprecated_by is None
                           and "revises" in e.meta}
            if needs_model(insight, records, revised):
                if blocked is None:
                    blocked = ctx.limit_reached(calls_ahead=1)
                if blocked is None:
                    return insight, None
                if blocked.startswith("max_wall_seconds"):
                    return None, blocked
                continue  # calls or tokens spent: look for one that needs no model
        hit = ctx.budget.time_up()
        return (None, hit) if hit else (insight, None)
    return None, blocked


def stale_insights(records: dict[str, Entry]) -> list[Entry]:
    return sorted((e for e in records.values() if e.kind is Kind.INSIGHT
                   and provenance.DERIVATION_KEY in e.meta and e.deprecated_by is None
                   and provenance.status_of(e) == provenance.STALE),
                  key=lambda e: (_depth(e), id_order(e.id)))


def _depth(entry: Entry) -> int:
    """A derived record's ``depth``, 1 unless written as a count of at least 1: a person may
    have edited it into anything ("one", a list), which compared with an integer in the sort
    above (TypeError) and failed the data poll and every run, for every user."""
    return max(1, beliefs.depth_of(entry))


class RevalidateInsights(Strategy):
    name = NAME
    description = "Keep, revise or retire insights whose evidence changed (seed 000)."
    default_cron = "15 * * * *"
    data_trigger = CountTrigger(n=1)
    settings = tuple(s for s in tier_settings(cooldown=120.0) if s.name != "max_depth")
    #: One unit per stale insight looked at: without them the engine could not tell that
    #: every one failed, and a run whose every call failed was recorded ``partial`` (exit 3).
    unit_counts = ("kept", "revised", "merged", "retired", "refused", "recovered", "restored",
                   "failed")

    def observe(self, runtime: Runtime, since: datetime | None,
                settings: Mapping[str, Any] | None = None) -> float:
        """Stale insights waiting (the data trigger fires at one), 0 while the cooldown since
        the last run lasts (``cooldown_seconds``, as the other tiers wait it out): ignored
        here, a stale insight the model could not settle (a server down, offline) had the
        strategy run again at every data poll, every 30 s."""
        from everos_reflect.engine.engine import Engine

        if settings is None:
            settings = Engine(runtime, recover=False).settings_for(NAME)
        cooldown = timedelta(seconds=float(settings.get("cooldown_seconds", 0.0)))
        if not beliefs.cooldown_over(since, datetime.now(UTC), cooldown):
            return 0.0
        sent = SentWith.tasks(runtime, settings, TASKS)
        caps = provenance.depth_caps(runtime)
        total = 0
        for ref in runtime.store.iter_users():
            try:
                if provenance.has_derived(runtime, ref):
                    unreadable: set[str] = set()
                    records = provenance.load_records(runtime, ref, unreadable)
                    total += len(new_to_judge(records,
                                              cursors.consumed(runtime.db(), NAME, ref),
                                              sent, unreadable, caps))
            except Exception:  # one owner's broken records must not hide the others' news;
                # the run that follows reports the owner (the poll only logs it)
                log.warning("%s: cannot read %s to see what is stale", NAME, ref, exc_info=True)
        return float(total)

    def unavailable(self, runtime: Runtime) -> str | None:
        """Offline, with stale insights the last run could not judge: it needs an LLM (the
        runs keep saying ``needs_llm``, but the data trigger no longer fires them)."""
        from everos_reflect.index.db import db_built

        if llm_provider(runtime) != "extractive" or not db_built(runtime.root):
            return None  # an unbuilt index is not created to answer (status would count it)
        # per owner (ids are unique per user only), an insight once however many keys it
        # was noted under; those waiting on a cited insight wait for the model too
        judged: set[tuple[UserRef, str]] = set()
        held: set[tuple[UserRef, str]] = set()
        for ref, row_id, _, _ in cursors.rows(runtime.db(), NAME):
            if row_id.startswith(WAITS_FOR_LLM):
                judged.add((ref, row_id.removeprefix(WAITS_FOR_LLM)))
            elif row_id.startswith(WAITS_ON_CITED):
                held.add((ref, row_id.removeprefix(WAITS_ON_CITED)))
        held -= judged
        if not judged and not held:
            return None
        behind = (f" ({len(held)} of them until a stale insight they cite is judged)"
                  if held else "")
        waiting = len(judged) + len(held)
        return (f"{NEEDS_LLM}: {counted(waiting, 'stale insight')} "
                f"{'waits' if waiting == 1 else 'wait'} for a language model to keep, revise "
                f"or retire {'it' if waiting == 1 else 'them'}{behind}; the extractive provider "
                "cannot judge a text (set [llm] provider = \"openai\" with a base_url/api_key)")

    def idle_reason(self, runtime: Runtime, settings: Mapping[str, Any],
                    counts: Mapping[str, int]) -> str | None:
        """Offline with stale insights to judge (:meth:`unavailable`), or none waits
        (:meth:`Strategy.idle_reason`)."""
        if counts.get("needs_llm"):
            return self.unavailable(runtime) or f"{NEEDS_LLM} to judge the stale insights"
        aside = set_aside_insights(runtime)
        if aside:
            # they are stale: "no stale insight to judge" sent a person looking for none
            deep = [h for h in aside if isinstance(h, TooDeep)]
            parts = [f"{len(deep)} held as deeper than max_depth "
                     f"({', '.join(sorted({f'{h.tier} {h.max_depth}' for h in deep}))}: "
                     "raise it in ome.toml to revalidate them)"] if deep else []
            if len(aside) > len(deep):
                parts.append(f"{len(aside) - len(deep)} set aside after a refusal (asked "
                             "again once they or their evidence are edited, or the prompts "
                             "or model change)")
            return (f"no stale insight to judge now: {counted(len(aside), 'stale insight')} "
                    f"{'is' if len(aside) == 1 else 'are'} set aside: {'; '.join(parts)} "
                    "(`status` lists those held too deep)")
        return ("no stale insight to judge: no record an insight cites was archived, edited "
                "or deleted since it was last judged")

    def run(self, ctx: RunContext) -> dict[str, int]:
        rt, counts = ctx.runtime, Counter[str]()
        sent = SentWith.tasks(rt, ctx.settings, TASKS)
        for ref in rt.store.iter_users():
            if ctx.should_stop():
                break
            # one owner's unexpected error (an OSError writing its log, a hand-edited record
            # that trips a bug) fails that owner alone, as a failed LLM call fails its
            # insight: the owners after it are still revalidated
            looking_at: list[str] = []  # the insight the owner was at, for its failed row
            try:
                # the owner's logs are read again after each verdict: parsed again only
                # where their bytes changed (each round parsed every log of the owner)
                with rt.store.reusing_parses():
                    if not self._owner(ctx, ref, sent, counts, looking_at):
                        break  # a run limit was reached
            except Exception as exc:
                if rt.root_gone() or isinstance(exc, ProvenanceBusy):
                    raise  # not this owner's fault: the engine says what happened (busy:
                    # every owner after it would wait as long, each)
                owner_failed(ctx, NAME, ref, exc, counts, inputs=looking_at)
        return dict(counts)

    def _owner(self, ctx: RunContext, ref: UserRef, sent: SentWith, counts: Counter[str],
               looking_at: list[str]) -> bool:
        """Every stale insight of ``ref``, shallowest first; False when a run limit stopped
        the run. An insight's counts are added once it is recorded (an insight whose
        bookkeeping raises is counted failed by the run, not both done and failed);
        ``looking_at`` holds the insight being revalidated meanwhile."""
        rt, budget = ctx.runtime, ctx.budget  # the engine's run limits (engine/limits.py)
        if not provenance.has_derived(rt, ref):
            return True
        # Stale marks no change event would lift (a typo fixed without a text change, a
        # mark left by a transient break): an insight whose every cited record reads as
        # when it was derived is active again, no model needed (provenance.find_restored).
        checked = provenance.check(rt, ref)
        if checked.written:
            sync(rt, set(checked.written))
        restored = [i for i in checked.restored if i.startswith(f"{Kind.INSIGHT.prefix}_")]
        if restored:
            counts["restored"] += len(restored)
        done: set[str] = set()
        noted: dict[str, str] = {}  # the insights only a model could judge
        caps = provenance.depth_caps(rt)
        while True:  # shallowest first, re-reading after each: a kept insight counts
            unreadable: set[str] = set()  # as evidence for the next one
            records = provenance.load_records(rt, ref, unreadable)
            aside = cursors.consumed(rt.db(), NAME, ref)
            todo = [e for e in waiting(records, aside, sent, unreadable, caps)
                    if e.id not in done]
            if not todo:
                held = held_by_cited(records)
                if held:  # said, or they were left stale with no word of why
                    counts["waiting_on_cited"] += len(held)
                    ctx.log.info("%s: %s: %s for the stale insights they cite to be judged "
                                 "first: %s", NAME, ref,
                                 counted(len(held), "stale insight")
                                 + (" waits" if len(held) == 1 else " wait"),
                                 "; ".join(f"{i} (cites {', '.join(c)})"
                                           for i, c in list(held.items())[:10]))
                # offline, what they wait for is a model's verdict on the cited one
                waits = ({e.id: aside_key(e, current_evidence(e, records), sent)
                          for e in stale_insights(records) if e.id in held}
                         if rt.llm.provider == "extractive" else {})
                _note_needs_llm(rt, ref, noted, ctx.run_id, complete=True, held=waits)
                return True
            if ctx.should_stop():  # per insight: a long backlog settled free holds up no shutdown
                _note_needs_llm(rt, ref, noted, ctx.run_id, complete=False)
                return False
            nxt, hit = next_affordable(ctx, todo, records)
            if nxt is None:
                # the first time a limit stops work, said once however many owners it stops
                counts["limit_reached"] = 1
                ctx.log.info("%s: %s: stopping early: %s", NAME, ref, hit)
                _note_needs_llm(rt, ref, noted, ctx.run_id, complete=False)
                # calls or tokens spent: the next owners' insights needing no model are
                # still settled; out of wall time, nothing more is
                return budget.time_up() is None
            done.add(nxt.id)
            looking_at[:] = [nxt.id]
            mine = Counter[str]()
            self._one(ctx, ref, nxt, records, budget, mine)
            if mine["needs_llm"]:
                noted[nxt.id] = aside_key(nxt, current_evidence(nxt, records), sent)
            counts.update(mine)
            looking_at.clear()

    def _one(self, ctx: RunContext, ref: UserRef, insight: Entry, records: dict[str, Entry],
             budget: Budget, counts: Counter[str]) -> None:
        rt, started = ctx.runtime, time.monotonic()
        row = Derivation(NAME, ref, "ok", run_id=ctx.run_id, inputs=[insight.id])
        revision = written_revision(insight, records)
        if revision is not None:  # a revise interrupted between its two writes: finish it
            rt.store.deprecate(ref, {insight.id: revision.id})
            sync(rt, {rt.store.path_for_id(ref, insight.id)})
            ctx.log.info("%s: %s: finished the revise of %s into %s (interrupted)", NAME,
                         ref, insight.id, revision.id)
            counts["recovered"] += 1
            row.outputs = [revision.id]
            row.duration_ms = int((time.monotonic() - started) * 1000)
            settle_intent(rt.db(), NAME, ref, insight.id, row)
            return
        evidence = current_evidence(insight, records)
        verdict: dict[str, Any]
        if len(evidence) < 2:
            verdict = {"verdict": "retire", "insight": "", "evidence": []}
            reason = "fewer than 2 cited records remain"
        elif rt.llm.provider == "extractive":
            counts["needs_llm"] += 1
            return
        else:
            before = budget.token_counts()
            try:
                verdict = self._ask(ctx, insight, evidence, budget, row, counts)
            except (ProviderUnavailable, EverosError) as exc:
                row.status, row.error = "failed", str(exc)
                aside: dict[str, str] = {}
                if isinstance(exc, ProviderUnavailable) and exc.permanent:
                    # refused for good (HTTP 400, 413, 422): asked again it is refused again,
                    # so it waits, stale, until it or its evidence, or the settings, change
                    row.error = set_aside_error(
                        row.error, [insight.id], back="once it or its evidence is edited, "
                        "or the prompts or model change")
                    aside = {insight.id: aside_key(
                        insight, evidence, SentWith.tasks(rt, ctx.settings, TASKS))}
                    counts["set_aside"] += 1
                prompt, completion = budget.token_counts()  # refused replies were paid for
                row.prompt_tokens = prompt - before[0]
                row.completion_tokens = completion - before[1]
                row.provider = row.provider or rt.llm.provider
                row.model = row.model or rt.llm.model
                counts["failed"] += 1
                row.duration_ms = int((time.monotonic() - started) * 1000)
                _aside_with_row(rt, ref, aside, row, ctx.run_id)
                ctx.note_failure(str(ref), f"{insight.id}: {row.error}")
                return
            reason = "the model judged it unsupported"
            if verdict["verdict"] == "revise" and not verdict["insight"]:
                self._refuse(ctx, ref, insight, evidence, verdict, row, counts, started,
                             "a 'revise' verdict without a revised text")
                return
            if verdict["verdict"] == "revise" and (
                    problem := beliefs.text_problem(verdict["insight"])) is not None:
                self._refuse(ctx, ref, insight, evidence, verdict, row, counts, started,
                             f"a 'revise' verdict: {problem}")
                return
            if verdict["verdict"] != "retire" and len(verdict["evidence"]) < MIN_CITATIONS:
                self._refuse(ctx, ref, insight, evidence, verdict, row, counts, started)
                return
        by_id = {e.id: e for e in evidence}
        # at most MAX_CITATIONS, the most recent: a "holds" or "revise" citing the thousand
        # records max_records lets a call show could not be written (over 64 KiB of
        # metadata), and the insight failed the same way on every run
        usable = {i for i in verdict["evidence"] if i in by_id}
        cited = [by_id[i] for i in beliefs.most_recent(
            (i for i in verdict["evidence"] if i in by_id),
            {i: e.timestamp for i, e in by_id.items()})]
        live = successor(insight, verdict, records)
        if live is not None:
            self._archive_into(ctx, ref, insight, live, row, counts, started)
            return
        problem, cap = None, None
        if verdict["verdict"] == "revise":
            problem = repeat_problem(insight, verdict["insight"], records)
        if problem is None and verdict["verdict"] in ("holds", "revise"):
            problem = depth_problem(rt, insight, verdict["verdict"], cited)
            cap = revision_cap(rt, insight)[1] if problem else None
        if problem:
            self._refuse(ctx, ref, insight, evidence, verdict, row, counts, started, problem,
                         cap=cap)
            return
        if len(cited) < len(usable):  # said in the row, as the other tiers say it
            row.error = beliefs.citations_kept(f"the {verdict['verdict']!r} verdict",
                                               len(usable))
            counts["citations_cut"] += 1
        touched = {rt.store.path_for_id(ref, insight.id)}
        # noted before the Markdown write, as a tier's commit is: killed between the write
        # and the row, the next start's recover() finds what was written and records it
        cursors.begin_intent(rt.db(), NAME, ref, insight.id, {VERDICT: verdict["verdict"]},
                             ctx.run_id)
        if verdict["verdict"] == "holds":
            rt.store.update_meta(ref, insight.id, {
                "status": provenance.ACTIVE, "stale_reason": None,
                "evidence": [e.id for e in cited],
                "evidence_hash": {e.id: e.text_hash for e in cited},
                "depth": revision_depth(cited),
                "revalidated_at": datetime.now(UTC)})
            row.outputs = [insight.id]
        elif verdict["verdict"] == "revise":
            meta = {k: v for k, v in insight.meta.items()
                    if k not in ("owner_id", "timestamp", "stale_reason")}
            # the store stamps it, from the clock read that names its log's day
            meta.update({"timestamp": None, "status": provenance.ACTIVE,
                         "evidence": [e.id for e in cited],
                         "evidence_hash": {e.id: e.text_hash for e in cited},
                         "depth": revision_depth(cited),
                         "derivation": f"rv_{insight.id}", "revises": insight.id})
            # the revision is the model's text: copied, the old insight's ``provider`` said
            # an offline topic insight revised by a model was still an offline count
            meta["provider"] = row.provider or rt.llm.provider
            new = rt.store.append(ref, Kind.INSIGHT, meta, {"Insight": verdict["insight"]},
                                  derived=True)
            rt.store.deprecate(ref, {insight.id: new.id})
            touched.add(rt.store.path_for_id(ref, new.id))
            row.outputs = [new.id]
        else:
            rt.store.update_meta(ref, insight.id, {
                "status": provenance.RETIRED,
                "stale_reason": f"{insight.meta.get('stale_reason') or 'stale'}; retired: "
                                f"{reason}"})
            row.outputs = [insight.id]
        counts[{"holds": "kept", "revise": "revised", "retire": "retired"}[verdict["verdict"]]] += 1
        sync(rt, touched)
        row.duration_ms = int((time.monotonic() - started) * 1000)
        settle_intent(rt.db(), NAME, ref, insight.id, row)

    def recover(self, runtime: Runtime) -> dict[str, int]:
        """Settle every verdict a kill interrupted between its Markdown write and its
        ``derivation_report`` row (the engine calls this under the strategy's lock): what the
        verdict wrote is found in the Markdown (a revise's revision, finished if the old
        insight was not archived yet; a keep's ``active``, a retire's ``retired``; the
        archive key of one archived into a live insight stating its revision) → indexed
        and recorded; nothing was → the intent is dropped (not counted) and the insight, still
        stale, waits for the next run. Without it the revision stood with no row, and no run
        looked at the archived insight again to write one. Idempotent."""
        conn, counts = runtime.db(), Counter[str]()
        for ref, insight_id, items in cursors.intents(conn, NAME):
            verdict = items.get(VERDICT, "")
            try:
                holder = _verdict_holder(runtime, ref, insight_id, verdict)
                outputs = _written(runtime, holder, insight_id, verdict)
            except Exception:
                if runtime.root_gone():
                    raise
                log.exception("%s: %s: the interrupted verdict on %s could not be settled; "
                              "left to the next start", NAME, ref, insight_id)
                continue
            if holder != ref:
                log.warning("%s: the interrupted verdict on %s of %s is finished in %s's "
                            "folder, which holds it now", NAME, insight_id, ref, holder)
            row = Derivation(NAME, holder, "ok", inputs=[insight_id], outputs=outputs,
                             error="recovered: the verdict was interrupted after its write")
            settle_intent(runtime.db(), NAME, ref, insight_id, row if outputs else None)
            if outputs:
                counts["recovered"] += 1
            else:  # not counted: the insight, still stale, is simply asked about again
                log.info("%s: %s: the interrupted verdict on %s wrote nothing: withdrawn",
                         NAME, ref, insight_id)
        return dict(counts)

    def _archive_into(self, ctx: RunContext, ref: UserRef, insight: Entry, live: Entry,
                      row: Derivation, counts: Counter[str], started: float) -> None:
        """A "revise" whose text ``live`` already states: ``insight`` is archived toward
        ``live`` (``deprecated_by``, as a revise archives toward the revision it writes),
        nothing new is written, counted ``merged``. The records citing ``insight`` then
        follow it to ``live`` when they are revalidated."""
        rt = ctx.runtime
        # noted before the write, as the other verdicts are: killed between the archive key
        # and the row, the insight stood archived with no row, and no run looked at it again
        cursors.begin_intent(rt.db(), NAME, ref, insight.id, {VERDICT: MERGED}, ctx.run_id)
        rt.store.deprecate(ref, {insight.id: live.id})
        sync(rt, {rt.store.path_for_id(ref, insight.id)})
        ctx.log.info("%s: %s: %s archived into %s, which states its revision", NAME, ref,
                     insight.id, live.id)
        counts["merged"] += 1
        row.outputs = [live.id]
        row.error = (f"merged: the revision of {insight.id} repeats {live.id}; "
                     f"{insight.id} archived into it")
        row.duration_ms = int((time.monotonic() - started) * 1000)
        settle_intent(rt.db(), NAME, ref, insight.id, row)

    def _refuse(self, ctx: RunContext, ref: UserRef, insight: Entry, evidence: list[Entry],
                verdict: dict[str, Any], row: Derivation, counts: Counter[str],
                started: float, problem: str | None = None, *, cap: int | None = None
                ) -> None:
        """A "holds" or "revise" citing fewer records than the citation floor, a "revise"
        without text, or a verdict
        the other tiers would not write either (``problem``: :func:`revision_problem`,
        :func:`depth_problem`): that
        verdict alone is refused (counted ``refused``), as the other tiers refuse one item.
        The insight stays stale, and is not asked about again until it or its evidence is
        edited, or the prompts or model change (kept in the changes cursor, as a call refused
        for good is): asked again, a model that said it once says it again, where the call
        failed and was retried every run."""
        rt = ctx.runtime
        problem = problem or (f"a {verdict['verdict']!r} verdict citing "
                              f"{counted(len(verdict['evidence']), 'record')}, at least "
                              f"{MIN_CITATIONS} needed")
        ctx.log.info("%s: %s: %s refused: %s", NAME, ref, insight.id, problem)
        counts["refused"] += 1
        again = ("it or its evidence is edited, or the prompts or model change"
                 + (f", or that max_depth is raised past {cap}" if cap is not None else ""))
        row.error = f"refused: {problem}; {insight.id} stays stale (asked again once {again})"
        row.duration_ms = int((time.monotonic() - started) * 1000)
        _aside_with_row(rt, ref, {insight.id: aside_key(
            insight, evidence, SentWith.tasks(rt, ctx.settings, TASKS), cap)}, row, ctx.run_id)

    def _ask(self, ctx: RunContext, insight: Entry, evidence: list[Entry], budget: Budget,
             row: Derivation, counts: Counter[str]) -> dict[str, Any]:
        from everos_reflect.llm.tasks import Record, fit_request

        prompts = tier_prompts(ctx.settings)
        # a hand-edited evidence list may name any number of records: the model sees at most
        # max_records of them (it can keep, and re-point the insight to, only those)
        shown = evidence[: int(ctx.settings.get("max_records", 50))]
        records = tuple(Record(e.id, e.kind.value.replace("atomic_fact", "fact"),
                               f"{e.subject}: {e.content}" if e.subject else e.content,
                               e.timestamp) for e in shown)
        # the evidence in the insight's order: what passes [llm] max_prompt_tokens is left out
        # (the verdict can cite only what is shown); two at least, or it is refused unsent
        limit = prompt_budget(ctx.runtime)
        request, left_out = fit_request(TASKS[0], records, {"insight": insight.content},
                                        budget=limit, prompts=prompts,
                                        min_records=MIN_CITATIONS)
        if left_out:
            ctx.log.warning("%s: %s: %s left out to fit llm.max_prompt_tokens (%s): "
                            "%s", NAME, insight.id, counted(len(left_out), "record"),
                            f"{limit:,}",
                            ", ".join(left_out))
            counts["left_out_over_budget"] += len(left_out)
        note_clipped(ctx, f"{NAME}: {insight.id}", request)
        if request.clipped:
            counts["clipped"] += len(request.clipped)
        result = ctx.llm.run_task(TASKS[0], request)  # charged to the run's budget
        row.provider, row.model = result.provider, result.model
        row.prompt_tokens += result.usage.prompt_tokens
        row.completion_tokens += result.usage.completion_tokens
        return result.value


__all__ = ["NAME", "RevalidateInsights", "TooDeep", "current_evidence", "current_form",
           "held_too_deep", "set_aside_insights", "written_revision"]
