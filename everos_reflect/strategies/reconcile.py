"""``reconcile`` (seed 004, SPEC §10): standing self-contradictions → a reconciliation insight.

Trigger: a census — at least ``threshold`` (2) standing self-contradictions of the owner, when
a new one lands. The model sees the new edges and the convictions they join (SPEC §9
``reconciliation``) and writes one insight (``insight_type: reconciliation``) citing them. It
goes into ``.insights/``, where the next ``update_worldview`` run reads it: the loop closes
with a cited record, not an edit. Nothing is edited or deleted. A reconciliation without
text, under the citation floor, deeper than ``max_depth``, or repeating a live insight is
refused on its own (counted ``refused``), as ``reflect_insights`` refuses an insight. One
citing more than :data:`~everos_reflect.strategies.beliefs.MAX_CITATIONS` records keeps the
most recent ones (:func:`~everos_reflect.strategies.beliefs.most_recent`).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from everos_reflect.engine.registry import RunContext, SettingSpec, count_between
from everos_reflect.llm.task_catalog import MIN_CITATIONS
from everos_reflect.model import Kind, UserRef
from everos_reflect.problem_words import counted
from everos_reflect.strategies import beliefs
from everos_reflect.strategies.belief_store import (
    BeliefState,
    BeliefTier,
    Budget,
    Derived,
    Refusals,
    Work,
    derived_meta,
    sync,
    tier_settings,
)

if TYPE_CHECKING:
    from everos_reflect.runtime import Runtime

NAME = "reconcile"


class Reconcile(BeliefTier):
    name = NAME
    description = "Write a reconciliation insight once self-contradictions pile up (seed 004)."
    output_kind = Kind.INSIGHT
    task = "reconciliation"
    reads = "self-contradictions"
    settings = (
        SettingSpec("threshold", int, 2, "Standing self-contradictions that trigger a run.",
                    count_between(1, 1_000, "standing self-contradictions")),
        *tier_settings(cooldown=120.0),
    )

    def _standing(self, state: BeliefState, settings: Mapping[str, Any]) -> list[beliefs.Edge]:
        return [e for e in state.edges() if e.standing]

    def progress(self, state: BeliefState, window: list[str],
                 settings: Mapping[str, Any]) -> str:
        """The census against its bar (:meth:`due`): "1 standing self-contradiction of the
        threshold 2"."""
        return (f"{len(self._standing(state, settings))} standing self-contradictions of the "
                f"threshold {int(settings.get('threshold', 2))}")

    def candidates(self, state: BeliefState, settings: Mapping[str, Any]) -> dict[str, str]:
        cap = int(settings.get("max_depth", 8))
        entries = state.by_id()
        return {e.id: entries[e.id].text_hash for e in self._standing(state, settings)
                if beliefs.depth_of(entries[e.id]) < cap}

    def pending(self, runtime: Runtime, ref: UserRef, settings: Mapping[str, Any],
                state: BeliefState | None = None, *,
                done: Collection[beliefs.Seen] | None = None,
                ) -> tuple[BeliefState, dict[str, str]]:
        """The new standing edges one call can show whole, each with the convictions it
        joins, within ``max_records``, the oldest first (the first always, so a run always
        progresses). An edge that does not fit waits, unconsumed, for the next run: cut
        after the fact, the convictions of the later edges were never shown and the edges
        were consumed all the same. ``done``: the cursor rows the engine already read."""
        state = state or BeliefState.load(runtime, ref)
        candidates, window = self.unconsumed(runtime, ref, settings, state, done=done)
        cap = int(settings.get("max_records", 50))
        entries = state.by_id()
        chosen: list[str] = []
        shown: set[str] = set()
        for edge_id in window:
            group = {edge_id, *(c for c in beliefs.id_list(entries[edge_id].meta.get("between"))
                                if c in entries)}
            if chosen and len(shown | group) > cap:
                continue  # a later edge sharing convictions may still fit
            chosen.append(edge_id)
            shown |= group
        return state, {i: candidates[i] for i in chosen}

    def due(self, state: BeliefState, window: list[str], settings: Mapping[str, Any]) -> bool:
        return beliefs.census_due(len(window), len(self._standing(state, settings)),
                                  int(settings.get("threshold", 2)))

    def derive(self, ctx: RunContext, work: Work, budget: Budget) -> Derived:
        from everos_reflect.llm.tasks import Record

        rt, ref, state = ctx.runtime, work.ref, work.state
        entries = state.by_id()
        edges = [entries[i] for i in work.items]
        # .get: a relation a person wrote may have no ``between`` (it failed every run)
        cited = list(dict.fromkeys(c for e in edges
                                   for c in beliefs.id_list(e.meta.get("between"))
                                   if c in entries))
        records = [Record(e.id, "self-contradiction", e.content, e.timestamp) for e in edges]
        records += [Record(c, f"{beliefs.key_of(entries[c])} conviction".strip(),
                           entries[c].content, entries[c].timestamp) for c in cited]
        cap = int(ctx.settings.get("max_records", 50))
        # only a first edge joining more than max_records - 1 convictions is cut (pending)
        derived = Derived(unshown=max(0, len(records) - cap))
        records = records[:cap]
        reply = self.call(ctx, budget, records, {}, derived, min_records=MIN_CITATIONS)
        refusals = Refusals(ctx.log, f"{self.name}: {ref}")
        if not reply["insight"]:  # refused alone, as an insight without text is
            refusals.add("reconciliation refused: it has no text")
            derived.take(refusals)
            return derived
        if (problem := beliefs.text_problem(reply["insight"])) is not None:
            refusals.add(f"reconciliation refused: {problem}")
            derived.take(refusals)
            return derived
        if len(reply["evidence"]) < MIN_CITATIONS:  # that item alone is refused: asking
            # again repeats it, so the window is consumed as the other tiers consume theirs
            refusals.add(f"reconciliation refused: it cites "
                         f"{counted(len(reply['evidence']), 'record')}, at least "
                         f"{MIN_CITATIONS} needed")
            derived.take(refusals)
            return derived
        # at most MAX_CITATIONS, the most recent: citing the thousand records max_records
        # lets a call show, it could not be written (over 64 KiB of metadata), every run
        cited = beliefs.most_recent(reply["evidence"],
                                    {i: entries[i].timestamp for i in reply["evidence"]})
        if len(cited) < len(set(reply["evidence"])):
            note = beliefs.citations_kept("the reconciliation", len(set(reply["evidence"])))
            ctx.log.info("%s: %s: %s", self.name, ref, note)
            derived.cut_citations.append(note)
        depth = beliefs.derived_depth(beliefs.depth_of(entries[i]) for i in cited)
        cap = int(ctx.settings.get("max_depth", 8))
        if depth > cap:
            refusals.level = logging.WARNING
            refusals.add(f"reconciliation refused: depth {depth} > max_depth {cap}")
            derived.take(refusals)
            return derived
        # a reconciliation a live insight already states is not new, as reflect_insights
        # refuses one: written again it was a second copy, and counted twice by the worldview
        key = beliefs.text_key(reply["insight"])
        repeated = next((e.id for e in state.insights
                         if beliefs.is_live(e) and beliefs.text_key(e.content) == key), None)
        if repeated is not None:
            refusals.add(f"reconciliation refused: it repeats {repeated}")
            derived.take(refusals)
            return derived
        (written,) = rt.store.append_many(ref, Kind.INSIGHT, [(
            derived_meta(evidence=cited, depth=depth, key=work.key, seen=entries,
                         extra={"insight_type": beliefs.RECONCILIATION}),
            {"Insight": reply["insight"]})], derived=True)
        sync(rt, [rt.store.path_for_id(ref, written.id)])
        derived.outputs = [written.id]
        return derived


__all__ = ["NAME", "Reconcile"]
