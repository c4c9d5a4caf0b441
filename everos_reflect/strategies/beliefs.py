"""The belief tiers' rules (seed 004), as pure functions over plain values.

Three strategies stand on these rules — ``update_worldview``, ``detect_contradictions`` and
``reconcile`` — and none of the rules reads a file, a database or the clock, so every one of
them is tested with literals:

- **Trigger arithmetic**: a count trigger (3 new insights), an on-write trigger (any changed
  conviction) and a census trigger (≥ 2 standing self-contradictions *when a new one lands*),
  each behind the tier's cooldown.
- **Changes cursor**: a tier's input window is what changed since the last *committed* run
  (an entry id with the text hash it had); the window is fixed when the run starts and the
  cursor moves by exactly that window after the run commits, so a crash re-reads it and
  entries written meanwhile wait for the next run.
- **Slot versioning**: one live conviction per key; only a key whose text genuinely shifted
  gets a new version, which archives the previous one of that key — never another key's, so a
  new strategy cannot quietly overwrite a commitment.
- **Edge validity**: an edge cites exactly two convictions, both live now, at least one of them
  just changed, and the pair has no standing edge yet; an edge whose conviction is superseded
  is resolved, with the reason.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from everos_reflect.model import (
    CONVICTION_KEY_RE,
    SELF_CONTRADICTION,
    Entry,
    Kind,
    control_problem,
    id_items,
    id_order,
    normalize_text,
    quoted_value,
    served_status,
)

#: The conviction slots of seed 004 (``keys`` setting of ``update_worldview``).
DEFAULT_KEYS: tuple[str, ...] = ("identity", "strategy", "commitments", "risks", "principles")
#: Slots that hold promises: the prompt tells the model they stay in force until the evidence
#: says they were fulfilled or cancelled (a strategy shift is no such evidence).
BINDING_KEYS: frozenset[str] = frozenset({"commitments"})
#: What a conviction key may look like (it is written as metadata and shown in prompts).
KEY_RE = CONVICTION_KEY_RE

#: The most records one derived record may cite: each citation costs its ``evidence`` id and
#: its ``evidence_hash`` (some 70 bytes), and a record citing a thousand passed the 64 KiB a
#: metadata block may hold. Written, it was refused, and the owner's window failed on every
#: run. Every tier keeps the most recent ones (:func:`most_recent`) and says so in its
#: ``derivation_report`` row (:func:`citations_kept`); lessons, whose evidence grows with
#: each confirmation, count them all in ``confirmations``.
MAX_CITATIONS = 200


def citations_kept(what: str, cited: int) -> str:
    """The note a ``derivation_report`` row carries when ``what`` cited ``cited`` records,
    more than :data:`MAX_CITATIONS`: which were kept."""
    return f"{what} cites {cited:,} records: the {MAX_CITATIONS} most recent kept"


def most_recent(ids: Iterable[str], stamps: Mapping[str, datetime | None],
                most: int = MAX_CITATIONS) -> list[str]:
    """``ids`` without repeats and, past ``most``, cut to the ``most`` records written last
    (``stamps``: id → timestamp; ties and ids without one by :func:`id_order`), the order
    given kept. What a verdict cites (``reconcile``, ``revalidate_insights``): a reply may
    cite every record it was shown, up to ``max_records`` (1,000), and past some 900 the
    record's ``evidence`` and ``evidence_hash`` outgrew the 64 KiB a metadata block may
    hold: it could not be written, and the tier failed the same way on every run."""
    unique = list(dict.fromkeys(ids))
    if len(unique) <= most:
        return unique
    kept = set(sorted(unique, key=lambda i: (instant(stamps.get(i)), id_order(i)))[-most:])
    return [i for i in unique if i in kept]

RECONCILIATION = "reconciliation"
ACTIVE, RESOLVED, STALE, RETIRED = "active", "resolved", "stale", "retired"


# -- reading entries as beliefs ----------------------------------------------------------------


def status_of(entry: Entry) -> str:
    """A derived record's ``status`` (``active`` when absent or blank: a hand-written record
    counts), as :func:`~everos_reflect.model.served_status` reads it for every reader."""
    return served_status(entry.meta)


def is_live(entry: Entry) -> bool:
    """Not archived and still ``active``: the only records a tier may build on."""
    return entry.deprecated_by is None and status_of(entry) == ACTIVE


def id_list(value: object) -> list[str]:
    """A metadata id list (``evidence``, ``between``), tolerant of a hand-written scalar. A
    mapping or set there (``evidence: {x: 1}``) gives no id, not its Python text (lint names
    it): that made-up id was shown and cited as if written."""
    return id_items(value)[0]


def plain(value: object) -> object:
    """A metadata value as JSON carries it: null, text, numbers, booleans, and lists and
    mappings of them as they are; anything else YAML can build as its text (dates in ISO
    form). A person may write ``!!binary`` (bytes, which JSON cannot encode: the insights and
    worldview routes answered 500) or ``!!set`` into any record."""
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, datetime | date):
        return value.isoformat()
    return str(value)


def key_of(entry: Entry) -> str:
    """A conviction's ``key`` as text ("" when absent), whatever a hand edit made of it: a
    key is a string (SPEC §9), so anything else there is no key: a list or mapping was read
    as its Python text (``"['a', 'b']"``), ``key: true`` as "True" and ``key: 12`` as "12",
    slots nobody wrote (lint names each)."""
    key = entry.meta.get("key")
    return key.strip() if isinstance(key, str) else ""


def depth_of(entry: Entry) -> int:
    """``depth`` as written; Episodes, facts and tasks are 0, a derived record without one 1."""
    value = entry.meta.get("depth")
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return 1 if entry.kind.derived else 0


def derived_depth(cited: Iterable[int]) -> int:
    """SPEC §10: a record is 1 + the deepest record it cites."""
    return 1 + max(cited, default=0)


@dataclass(frozen=True)
class Conviction:
    """One version of one slot of the worldview."""

    id: str
    key: str
    text: str
    evidence: tuple[str, ...] = ()
    depth: int = 2
    timestamp: datetime | None = None
    live: bool = True

    @classmethod
    def of(cls, entry: Entry) -> Conviction:
        return cls(entry.id, key_of(entry), entry.content.strip(),
                   tuple(id_list(entry.meta.get("evidence"))), depth_of(entry),
                   entry.timestamp, is_live(entry))


@dataclass(frozen=True)
class Edge:
    """One ``self_contradiction`` relation between two convictions."""

    id: str
    between: tuple[str, ...]
    status: str
    text: str = ""
    archived: bool = False

    @classmethod
    def of(cls, entry: Entry) -> Edge:
        return cls(entry.id, tuple(id_list(entry.meta.get("between"))), status_of(entry),
                   entry.content.strip(), entry.deprecated_by is not None)

    @property
    def standing(self) -> bool:
        """Counted by the census: active and not archived."""
        return self.status == ACTIVE and not self.archived

    @property
    def pair(self) -> frozenset[str]:
        return frozenset(self.between)


# -- trigger arithmetic ------------------------------------------------------------------------


def cooldown_over(last_run: datetime | None, now: datetime, cooldown: timedelta) -> bool:
    """True when no run happened yet or ``cooldown`` has passed since the last one, or the
    wall clock went back past the last run (as
    :meth:`everos_reflect.engine.triggers.DataTrigger.next_due` reads it)."""
    return last_run is None or now < last_run or now >= last_run + cooldown


def count_due(new_items: int, threshold: int) -> bool:
    """``update_worldview``: at least ``threshold`` new active insights since the last run."""
    return new_items >= threshold


def on_write_due(changed: int) -> bool:
    """``detect_contradictions``: any conviction written or changed since the last run."""
    return changed > 0


def census_due(new_edges: int, standing: int, threshold: int) -> bool:
    """``reconcile``: a new edge landed *and* at least ``threshold`` stand now.

    A census is a standing count, not a delta; but it only fires on news, so two old edges do
    not fire again every poll.
    """
    return new_edges > 0 and standing >= threshold


# -- the changes cursor ------------------------------------------------------------------------

#: An input as the cursor knows it: the entry id and the hash of the text the tier saw.
Seen = tuple[str, str]


def window(candidates: Mapping[str, str], consumed: Iterable[Seen],
           aside: Callable[[str], str] | None = None) -> list[str]:
    """The ids of ``candidates`` (id → text hash) not yet consumed in that exact text, oldest
    first (:func:`~everos_reflect.model.id_order`: ``…_9999`` before ``…_10000``).

    An entry whose text changed since it was consumed (a hand edit) is new again. With
    ``aside`` (text hash → set-aside key, :meth:`~everos_reflect.strategies.aside.SentWith.key`)
    an entry set aside under the key its text has now is consumed too: one set aside under
    other prompts or another model is new again.
    """
    done = set(consumed)
    return sorted((i for i, h in candidates.items() if (i, h) not in done
                   and (aside is None or (i, aside(h)) not in done)), key=id_order)


def window_key(strategy: str, owner: str, items: Mapping[str, str]) -> str:
    """A stable id for one run's input window: the same window always gives the same key, so a
    run re-done after a crash finds the records it already wrote instead of writing twice."""
    h = hashlib.sha256(f"{strategy}\n{owner}\n".encode())
    for entry_id in sorted(items):
        h.update(f"{entry_id}:{items[entry_id]}\n".encode())
    return f"dw_{h.hexdigest()[:16]}"


# -- slot versioning ---------------------------------------------------------------------------


@dataclass
class Worldview:
    """The current worldview: one live conviction per key, plus the repairs that make it so.

    ``repairs`` maps an older live conviction to the newer live one of the same key (a crash
    between writing a version and archiving its predecessor, or a hand-added version): applying
    them restores "one live conviction per key".
    """

    current: dict[str, Conviction] = field(default_factory=dict)
    repairs: dict[str, str] = field(default_factory=dict)


def instant(ts: datetime | None) -> float:
    """A timestamp as a point in time, for ordering records (``-inf`` when there is none).

    Not its text: a hand-written ``09:00:00+05:00`` (04:00 UTC) sorted after the daemon's
    ``05:00:00+00:00`` as text, so the older of two versions of a key was taken as the
    current one and the newer archived into it."""
    return ts.timestamp() if ts is not None else -math.inf


def _order(c: Conviction) -> tuple[float, tuple[int, str, str, int, str]]:
    return (instant(c.timestamp), id_order(c.id))


def current_worldview(convictions: Iterable[Conviction]) -> Worldview:
    """The newest live conviction of each key; the other live ones of that key are repairs."""
    by_key: dict[str, list[Conviction]] = {}
    for c in convictions:
        if c.live and c.key:
            by_key.setdefault(c.key, []).append(c)
    view = Worldview()
    for key, versions in by_key.items():
        versions.sort(key=_order)
        newest = versions[-1]
        view.current[key] = newest
        view.repairs.update({old.id: newest.id for old in versions[:-1]})
    return view


def text_problem(text: str, *, limit: int | None = None, what: str = "its text") -> str | None:
    """Why a model's text may not be written as a record, that item alone refused: it is
    longer than ``limit`` (None: :data:`~everos_reflect.llm.tasks.MAX_ITEM_CHARS`), or it
    holds a control character, a lone surrogate or an invisible formatting character (a bidi
    override, a zero-width space: the record would display or read differently from what it
    stores), named as every edge names it (:func:`~everos_reflect.model.control_problem`).
    None: it may. ``what`` starts the reason. The reply's other items are kept, as for every
    item a tier refuses."""
    from everos_reflect.llm.tasks import MAX_ITEM_CHARS

    limit = MAX_ITEM_CHARS if limit is None else limit
    if len(text) > limit:
        return f"{what} is {len(text):,} characters; at most {limit:,}"
    problem = control_problem(text)
    return f"{what} {problem}" if problem is not None else None


def text_key(text: str) -> str:
    """``text`` with whitespace, case and trailing full stops folded away: two texts with the
    same key say the same thing."""
    return normalize_text(text).casefold().rstrip(". ")


def same_text(a: str, b: str) -> bool:
    """Whitespace, case and trailing-full-stop differences are not a shift."""
    return text_key(a) == text_key(b)


@dataclass(frozen=True)
class NewVersion:
    """A conviction to write: its slot, text, cited ids, and the version it archives."""

    key: str
    text: str
    evidence: tuple[str, ...]
    supersedes: str | None


@dataclass
class VersionPlan:
    new: list[NewVersion] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)  # keys proposed with the same text
    refused: list[str] = field(default_factory=list)    # why a proposal was not taken
    cut: list[str] = field(default_factory=list)  # proposals whose citations were cut


def plan_versions(
    current: Mapping[str, Conviction],
    proposals: Sequence[Mapping[str, object]],
    keys: Sequence[str],
    stamps: Mapping[str, datetime | None] | None = None,
    *,
    renew: AbstractSet[str] = frozenset(),
) -> VersionPlan:
    """Which proposals (``{"key", "text", "evidence"}``) become new versions.

    Only configured keys; a key proposed twice keeps its first proposal; a proposal whose text
    equals the current version of its key is no shift and writes nothing, unless that version
    is in ``renew`` (a stale one: restated on the evidence shown now, it is a new version
    that archives it). Each new version
    archives exactly the current version of its own key, nothing else. One citing more than
    :data:`MAX_CITATIONS` records keeps the most recent (``stamps``: id → timestamp), noted
    in ``cut``, as the other tiers keep them: refused, the shift was lost and its insights
    consumed, where a reconciliation or a revalidation citing as many was written.
    """
    plan = VersionPlan()
    allowed, seen = set(keys), set()
    stamps = stamps or {}
    for item in proposals:
        key = str(item.get("key", "")).strip()
        text = str(item.get("text", "")).strip()
        evidence = tuple(id_list(item.get("evidence")))
        if key not in allowed:
            plan.refused.append(f"key {quoted_value(key)} is not one of {', '.join(keys)}")
            continue
        if key in seen:
            plan.refused.append(f"key {quoted_value(key)} proposed twice; the first proposal "
                                "is kept")
            continue
        seen.add(key)
        if not text or not evidence:
            plan.refused.append(f"key {quoted_value(key)}: a conviction needs text and evidence")
            continue
        if (problem := text_problem(text)) is not None:
            plan.refused.append(f"key {quoted_value(key)}: {problem}")
            continue
        before = current.get(key)
        if before is not None and before.id not in renew and same_text(before.text, text):
            plan.unchanged.append(key)
            continue
        if len(cited := set(evidence)) > MAX_CITATIONS:
            evidence = tuple(most_recent(evidence, stamps))
            plan.cut.append(citations_kept(f"the conviction of key {quoted_value(key)}",
                                           len(cited)))
        plan.new.append(NewVersion(key, text, evidence, before.id if before else None))
    return plan


# -- edges -------------------------------------------------------------------------------------


def _as_set(items: Iterable[Any]) -> AbstractSet[Any]:
    return items if isinstance(items, AbstractSet) else set(items)


def edge_problem(
    between: Sequence[str],
    *,
    live: Iterable[str],
    changed: Iterable[str],
    standing_pairs: Iterable[frozenset[str]] = (),
    resolved_pairs: Mapping[frozenset[str], str] | None = None,
) -> str | None:
    """Why an edge over ``between`` may not be written (``None``: it may).

    It must name exactly two different convictions, both live now (current versions of their
    keys), at least one of them changed in this run's window, and no standing edge may join
    the same pair already, nor an edge a person resolved while both read as they do now
    (``resolved_pairs``: pair → that edge's id).

    Called once per item of a reply: ``live``, ``changed`` and ``standing_pairs`` given as
    sets are only looked up, never copied (a copy per item made a reply of n items against
    n convictions cost n², ~33 s for 500,000 items against 1,000 convictions).
    """
    ids = list(dict.fromkeys(between))
    if len(between) != 2 or len(ids) != 2:
        return f"an edge joins exactly two different convictions, got {list(between)}"
    not_conviction = [i for i in ids if not i.startswith(f"{Kind.CONVICTION.prefix}_")]
    if not_conviction:
        return f"{', '.join(not_conviction)} is not a conviction"
    live_set = _as_set(live)
    gone = [i for i in ids if i not in live_set]
    if gone:
        return f"{', '.join(gone)} is not a live conviction"
    changed_set = _as_set(changed)
    if not any(i in changed_set for i in ids):
        return f"neither {ids[0]} nor {ids[1]} changed in this run"
    if frozenset(ids) in _as_set(standing_pairs):
        return f"{ids[0]} and {ids[1]} already have a standing edge"
    resolved = (resolved_pairs or {}).get(frozenset(ids))
    if resolved is not None:
        return f"{ids[0]} and {ids[1]} were resolved in these texts ({resolved})"
    return None


def resolved_in_these_texts(relations: Iterable[Entry],
                            entries: Mapping[str, Entry]) -> dict[frozenset[str], str]:
    """``{pair: edge id}`` of each resolved, unarchived edge whose two convictions read now as
    when it was drawn (its ``evidence_hash``). The changes cursor keeps such a pair from being
    shown again; this keeps the model's same answer from flagging it again when the cursor is
    gone (``system.db`` lost and rebuilt), since the Markdown says a person settled it."""
    out: dict[frozenset[str], str] = {}
    for entry in relations:
        edge = Edge.of(entry)
        seen = entry.meta.get("evidence_hash")
        if (edge.status != RESOLVED or edge.archived or len(set(edge.between)) != 2
                or not isinstance(seen, dict)):
            continue
        if all((cited := entries.get(i)) is not None and seen.get(i) == cited.text_hash
               for i in edge.between):
            out[edge.pair] = edge.id
    return out


def superseded_edges(
    edges: Iterable[Edge], live: Iterable[str], successor: Mapping[str, str]
) -> dict[str, str]:
    """``{edge id: reason}`` for every standing edge citing a conviction no longer live.

    ``successor`` maps an archived conviction to what archived it, so the reason names it.
    """
    live_set = set(live)
    out: dict[str, str] = {}
    for edge in edges:
        if not edge.standing:
            continue
        gone = [c for c in edge.between if c not in live_set]
        if gone:
            out[edge.id] = "; ".join(
                f"{c} was superseded by {successor[c]}" if successor.get(c)
                else f"{c} is no longer a live conviction" for c in gone)
    return out


__all__ = [
    "ACTIVE",
    "BINDING_KEYS",
    "DEFAULT_KEYS",
    "KEY_RE",
    "MAX_CITATIONS",
    "RECONCILIATION",
    "RESOLVED",
    "SELF_CONTRADICTION",
    "Conviction",
    "Edge",
    "NewVersion",
    "VersionPlan",
    "Worldview",
    "census_due",
    "citations_kept",
    "cooldown_over",
    "count_due",
    "current_worldview",
    "depth_of",
    "derived_depth",
    "edge_problem",
    "id_list",
    "instant",
    "is_live",
    "key_of",
    "on_write_due",
    "plain",
    "plan_versions",
    "resolved_in_these_texts",
    "same_text",
    "status_of",
    "superseded_edges",
    "text_key",
    "window",
    "window_key",
]
