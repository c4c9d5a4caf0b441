"""``reconcile`` (seed 004, SPEC §10): standing self-contradictions → a reconciliation insight.

Trigger: a census — at least ``threshold`` (2) standing self-contradictions of the owner, when
a new one lands. The model sees the new edges and the convictions they join (SPEC §9
``reconciliation``) and writes one insight (``insight_type: reconciliation``) citing them. It
goes into ``.insights/``, where the next ``update_worldview`` run reads it: the loop closes
with a cited record, not an edit. Nothing is edited or deleted. A reconciliation under the
citation floor, deeper than ``max_depth``, or repeating a live insight is refused on its own
(counted ``refused``), as ``reflect_insights`` refuses an insight.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from everos_reflect.engine.registry import RunContext, SettingSpec, at_least
from everos_reflect.llm.task_catalog import MIN_CITATIONS
from everos_reflect.model import Kind
from everos_reflect.strategies import beliefs
from everos_reflect.strategies.belief_store import (
    BeliefState,
    BeliefTier,
    Budget,
    Derived,
    Work,
    derived_meta,
    sync,
    tier_settings,
)

NAME = "reconcile"


class Reconcile(BeliefTier):
    name = NAME
    description = "Write a reconciliation insight once self-contradictions pile up (seed 004)."
    output_kind = Kind.INSIGHT
    task = "reconciliation"
    settings = (
        SettingSpec("threshold", int, 2, "Standing self-contradictions that trigger a run.",
                    at_least(1)),
        *tier_settings(cooldown=120.0),
    )

    def _standing(self, state: BeliefState, settings: Mapping[str, Any]) -> list[beliefs.Edge]:
        return [e for e in state.edges() if e.standing]

    def candidates(self, state: BeliefState, settings: Mapping[str, Any]) -> dict[str, str]:
        cap = int(settings.get("max_depth", 8))
        entries = state.by_id()
        return {e.id: entries[e.id].text_hash for e in self._standing(state, settings)
                if beliefs.depth_of(entries[e.id]) < cap}

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
        records += [Record(c, f"{entries[c].meta.get('key', '')} conviction".strip(),
                           entries[c].content, entries[c].timestamp) for c in cited]
        records = records[: int(ctx.settings.get("max_records", 50))]
        derived = Derived()
        reply = self.call(ctx, budget, records, {}, derived)
        if len(reply["evidence"]) < MIN_CITATIONS:  # that item alone is refused: asking
            # again repeats it, so the window is consumed as the other tiers consume theirs
            ctx.log.info("%s: %s: reconciliation refused: it cites %d record(s), at least %d "
                         "needed", self.name, ref, len(reply["evidence"]), MIN_CITATIONS)
            derived.refused += 1
            return derived
        depth = beliefs.derived_depth(beliefs.depth_of(entries[i]) for i in reply["evidence"])
        cap = int(ctx.settings.get("max_depth", 8))
        if depth > cap:
            ctx.log.warning("%s: %s: reconciliation refused: depth %d > max_depth %d",
                            self.name, ref, depth, cap)
            derived.refused += 1
            return derived
        # a reconciliation a live insight already states is not new, as reflect_insights
        # refuses one: written again it was a second copy, and counted twice by the worldview
        key = beliefs.text_key(reply["insight"])
        repeated = next((e.id for e in state.insights
                         if beliefs.is_live(e) and beliefs.text_key(e.content) == key), None)
        if repeated is not None:
            ctx.log.info("%s: %s: reconciliation refused: it repeats %s", self.name, ref,
                         repeated)
            derived.refused += 1
            return derived
        (written,) = rt.store.append_many(ref, Kind.INSIGHT, [(
            derived_meta(evidence=reply["evidence"], depth=depth, key=work.key, seen=entries,
                         extra={"insight_type": beliefs.RECONCILIATION}),
            {"Insight": reply["insight"]})])
        sync(rt, [rt.store.path_for_id(ref, written.id)])
        derived.outputs = [written.id]
        return derived


__all__ = ["NAME", "Reconcile"]
