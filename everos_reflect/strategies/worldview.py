"""``update_worldview`` (seed 004, SPEC §10): insights → convictions, one live version per key.

Trigger: 3 new active insights of an owner since the last committed run (a count data
trigger). The model sees the new insights (numbered) and the current conviction of every key,
and answers only the keys that shifted (SPEC §9 ``worldview``). A key whose text did not change
gets no new version; a new version archives the previous one *of its own key* through
``deprecated_entries`` — so a new strategy can never overwrite a commitment — and any standing
self-contradiction that cited the archived version is resolved with the reason.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from everos_reflect.engine.registry import RunContext, SettingSpec, count_between, set_where
from everos_reflect.model import Entry, Kind, meta_text
from everos_reflect.strategies import beliefs
from everos_reflect.strategies.belief_store import (
    BeliefState,
    BeliefTier,
    Budget,
    Derived,
    Refusals,
    Work,
    derived_meta,
    repair,
    sync,
    tier_settings,
)

NAME = "update_worldview"
#: The most characters of one current conviction (and of its key) the prompt shows: the
#: model writes at most 2,000 (the task's reply limit), a person may write any length.
MAX_CONVICTION_CHARS = 2_000
MAX_KEY_CHARS = 100


#: The most conviction slots: every key is listed in each call's prompt, whose values are
#: cut past ``llm.tasks.MAX_VALUE_PROMPT_CHARS`` (20,000 characters): with some 300 keys of
#: 64 characters or more, the keys past the cut were never shown, so never written, and
#: nothing said why. Seed 004 names five.
MAX_KEYS = 100


def _keys_problem(value: list[Any]) -> str | None:
    if not value or not all(isinstance(k, str) and beliefs.KEY_RE.fullmatch(k) for k in value):
        return "must be a non-empty list of keys (letters, digits, _ and -)"
    if len(set(value)) != len(value):
        return "must not name a key twice"
    if len(value) > MAX_KEYS:
        return (f"must list at most {MAX_KEYS} keys (each call's prompt shows every one), "
                f"got {len(value):,}")
    return None


class UpdateWorldview(BeliefTier):
    name = NAME
    description = "Promote new insights into convictions, one live version per key (seed 004)."
    output_kind = Kind.CONVICTION
    task = "worldview"
    reads = "insights"
    settings = (
        SettingSpec("threshold", int, 3, "New active insights that trigger a run "
                    "(at most max_records: a run's window holds no more).",
                    count_between(1, 1_000, "new insights")),
        SettingSpec("keys", list, list(beliefs.DEFAULT_KEYS),
                    "The conviction slots, each replaced in place.", _keys_problem),
        *tier_settings(cooldown=120.0),
    )

    def settings_problems(self, values: Mapping[str, Any], written: Collection[str],
                          inherited: Mapping[str, str] | None = None,
                          ) -> list[tuple[str, str]]:
        """``threshold`` past ``max_records``: the window a run reads holds at most
        ``max_records`` new insights, so :meth:`due` never counted that many and the tier never
        ran on its own again (``threshold = 51`` under the default 50), nothing saying why.
        The key refused is one the file sets; the reason says where the other one is set
        (a fleet's defaults: the root's file alone passed, and the pair never ran)."""
        threshold, cap = int(values["threshold"]), int(values["max_records"])
        if threshold <= cap:
            return []
        if "threshold" in written or "max_records" not in written:
            return [("threshold", f"must be at most max_records ({cap}"
                     f"{set_where('max_records', written, inherited)}: the new insights one "
                     f"run reads; more are never counted), got {threshold}")]
        return [("max_records", f"must be at least threshold ({threshold}"
                 f"{set_where('threshold', written, inherited)}: the new insights that start "
                 f"a run, all read by it), got {cap}")]

    def candidates(self, state: BeliefState, settings: Mapping[str, Any]) -> dict[str, str]:
        cap = int(settings.get("max_depth", 8))
        return {e.id: e.text_hash for e in state.insights
                if beliefs.is_live(e) and beliefs.depth_of(e) < cap}

    def due(self, state: BeliefState, window: list[str], settings: Mapping[str, Any]) -> bool:
        return beliefs.count_due(len(window), int(settings.get("threshold", 3)))

    def derive(self, ctx: RunContext, work: Work, budget: Budget) -> Derived:
        from everos_reflect.llm.tasks import Record

        rt, ref, state = ctx.runtime, work.ref, work.state
        keys = [str(k) for k in ctx.settings.get("keys") or beliefs.DEFAULT_KEYS]
        entries = state.by_id()
        shown = [entries[i] for i in work.items]
        view = state.worldview()
        stale = stale_slots(state.convictions, view.current)
        slots = {**stale, **view.current}
        current = current_block(
            [(k, c.text, stale_reason(entries.get(c.id), k in stale))
             for k, c in sorted(slots.items())])
        derived = Derived()
        proposals = self.call(ctx, budget, [
            Record(e.id, _insight_label(e), e.content, e.timestamp) for e in shown
        ], {"current": current or "(none yet)", "keys": ", ".join(keys)}, derived)
        plan = beliefs.plan_versions(slots, proposals, keys,
                                     {e.id: e.timestamp for e in shown},
                                     renew={c.id for c in stale.values()})
        refusals = Refusals(ctx.log, f"{self.name}: {ref}", logging.WARNING)
        for reason in plan.refused:
            refusals.add(f"conviction refused: {reason}")
        derived.take(refusals)
        for note in plan.cut:
            ctx.log.info("%s: %s: %s", self.name, ref, note)
        derived.cut_citations += plan.cut
        if not plan.new:
            return derived
        depths = {e.id: beliefs.depth_of(e) for e in shown}
        written = rt.store.append_many(ref, Kind.CONVICTION, [
            (derived_meta(evidence=v.evidence, key=work.key, seen=entries,
                          depth=beliefs.derived_depth(depths.get(i, 1) for i in v.evidence),
                          extra={"key": v.key, "supersedes": v.supersedes}),
             {"Conviction": v.text})
            for v in plan.new], derived=True)
        touched = {rt.store.path_for_id(ref, e.id) for e in written}
        archive = {v.supersedes: e.id for v, e in zip(plan.new, written, strict=True)
                   if v.supersedes}
        if archive:
            rt.store.deprecate(ref, archive)
            touched |= {rt.store.path_for_id(ref, old) for old in archive}
        touched |= repair(rt, ref, BeliefState.load(rt, ref))
        sync(rt, touched)
        derived.outputs = [e.id for e in written]
        return derived


#: The most characters of a stale conviction's reason the prompt shows.
MAX_REASON_CHARS = 200
#: The least characters of each current conviction the prompt shows, however many there are.
MIN_CONVICTION_CHARS = 100
#: Room a cut conviction's mark takes ("… (clipped from 1,234,567 characters)").
_CLIP_MARK_CHARS = 40


def current_block(slots: Sequence[tuple[str, str, str]]) -> str:
    """The current convictions as the prompt lists them, one line each (``slots``: key, text
    and stale reason, "" for a live one), within the room one prompt value has
    (:data:`~everos_reflect.llm.tasks.MAX_VALUE_PROMPT_CHARS`): the texts share what the
    keys leave, each cut to an equal part (at most :data:`MAX_CONVICTION_CHARS`, at least
    :data:`MIN_CONVICTION_CHARS`) and saying so. Each cut to 2,000 characters, a dozen long
    convictions passed the value's cap, and the keys listed past it (by name) were not shown
    at all: the model could "shift" a slot it had not seen, archiving a conviction no model
    read."""
    from everos_reflect.llm.tasks import MAX_VALUE_PROMPT_CHARS, clip_text

    # keys and texts may be hand-written, of any length
    parts = [(f"- {clip_text(_one_line(k), MAX_KEY_CHARS)}: ", _one_line(text),
              f" (stale: {clip_text(_one_line(reason), MAX_REASON_CHARS)})" if reason else "")
             for k, text, reason in slots]
    fixed = sum(len(head) + len(tail) + 1 for head, _, tail in parts)
    share = (MAX_VALUE_PROMPT_CHARS - fixed) // max(1, len(parts)) - _CLIP_MARK_CHARS
    cap = max(MIN_CONVICTION_CHARS, min(MAX_CONVICTION_CHARS, share))
    return "\n".join(f"{head}{clip_text(text, cap)}{tail}" for head, text, tail in parts)


def stale_slots(convictions: Iterable[Entry],
                current: Mapping[str, beliefs.Conviction]) -> dict[str, beliefs.Conviction]:
    """The newest stale, unarchived version of each key that has no live version.

    A conviction goes stale when what it cites changes (an insight it rests on revised and
    archived into the revision, say): the slot emptied, the worldview and the briefing
    dropped it, and the model was shown "(none yet)" for the key, so nothing brought it
    back. Shown to the model as stale, the next version of its key archives it."""
    by_key: dict[str, beliefs.Conviction] = {}
    for entry in convictions:
        c = beliefs.Conviction.of(entry)
        if (entry.deprecated_by is None and c.key and c.key not in current
                and beliefs.status_of(entry) == beliefs.STALE
                and (c.key not in by_key or beliefs.instant(c.timestamp) >= beliefs.instant(
                    by_key[c.key].timestamp))):
            by_key[c.key] = c
    return by_key


def stale_reason(entry: Entry | None, stale: bool) -> str:
    """Why a stale slot's conviction is stale, as the prompt says it ("" for a live one)."""
    if not stale or entry is None:
        return ""
    return meta_text(entry.meta.get("stale_reason")) or "its evidence changed"


def _one_line(text: str) -> str:
    """A conviction as the prompt shows it: one line, no ``[n]`` that could pass for a record."""
    return " ".join(text.split()).replace("[", "(").replace("]", ")")


def _insight_label(entry: Any) -> str:
    kind = entry.meta.get("insight_type")
    return "reconciliation insight" if kind == beliefs.RECONCILIATION else "insight"


__all__ = ["NAME", "UpdateWorldview"]
