"""``detect_contradictions`` (seed 004, SPEC §10): convictions → ``self_contradiction`` edges.

Trigger: a write to the worldview (an on-write trigger: any live conviction the detector has
not yet seen in its current text). The model sees every current conviction, the changed ones
marked, and names conflicting pairs (SPEC §9 ``contradictions``). An edge is written only when
it joins exactly two convictions that are both live now, at least one of them just changed, and
the pair has no standing edge yet (:func:`beliefs.edge_problem`). The detector appends edges;
it never edits a conviction.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import Any

from everos_reflect.engine.registry import RunContext
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

NAME = "detect_contradictions"


class DetectContradictions(BeliefTier):
    name = NAME
    description = "Flag pairs of current convictions that cannot both hold (seed 004)."
    output_kind = Kind.RELATION
    task = "contradictions"
    settings = tier_settings(cooldown=0.0)

    def _current(self, state: BeliefState, settings: Mapping[str, Any]) -> list[beliefs.Conviction]:
        cap = int(settings.get("max_depth", 8))
        return [c for c in state.worldview().current.values() if c.depth < cap]

    def candidates(self, state: BeliefState, settings: Mapping[str, Any]) -> dict[str, str]:
        entries = state.by_id()
        return {c.id: entries[c.id].text_hash for c in self._current(state, settings)}

    def due(self, state: BeliefState, window: list[str], settings: Mapping[str, Any]) -> bool:
        return beliefs.on_write_due(len(window))

    def derive(self, ctx: RunContext, work: Work, budget: Budget) -> Derived:
        from everos_reflect.llm.tasks import Record

        rt, ref, state = ctx.runtime, work.ref, work.state
        entries = state.by_id()
        changed = set(work.items)
        # changed too but past the window: compared in a later run, so not lost if unshown
        later = set(self.unconsumed(rt, ref, ctx.settings, state)[1]) - changed
        current, unshown = shown_convictions(self._current(state, ctx.settings), changed,
                                             int(ctx.settings.get("max_records", 50)), later)
        derived = Derived(unshown=unshown)
        # a changed conviction the call cannot show is not consumed: it waits for a run (the
        # window is cut to max_records as the call is, so this is only a safeguard)
        derived.pending = changed - {c.id for c in current}
        if len(current) < 2:
            return derived  # nothing to compare with: the window is consumed, no call made
        found = self.call(ctx, budget, [
            Record(c.id, f"{c.key} conviction" + (", just changed" if c.id in changed else ""),
                   c.text, c.timestamp) for c in current
        ], {}, derived)
        live = [c.id for c in current]
        depth = {c.id: c.depth for c in current}
        pairs = {e.pair for e in state.edges() if e.standing}
        rows = []
        for item in found:
            between = list(item["between"])
            problem = beliefs.edge_problem(between, live=live, changed=changed,
                                           standing_pairs=pairs)
            if problem:
                ctx.log.info("%s: %s: edge refused: %s", self.name, ref, problem)
                derived.refused += 1
                continue
            pairs.add(frozenset(between))
            rows.append((derived_meta(
                evidence=between, key=work.key, seen=entries,
                depth=beliefs.derived_depth(depth[i] for i in between),
                extra={"relation_type": beliefs.SELF_CONTRADICTION, "between": between}),
                {"Relation": item["text"]}))
        if rows:
            written = rt.store.append_many(ref, Kind.RELATION, rows)
            sync(rt, {rt.store.path_for_id(ref, e.id) for e in written})
            derived.outputs = [e.id for e in written]
        return derived


def shown_convictions(current: list[beliefs.Conviction], changed: set[str], cap: int,
                      later: Set[str] = frozenset()) -> tuple[list[beliefs.Conviction], int]:
    """The current convictions one call shows, at most ``cap``, in id order, and how many
    were left out (not counting ``later``: changed ones a later run compares): every changed
    one first (they are what the call is for; the oldest first when more changed than fit),
    then the most recently written others. Cut in id order, a conviction that just changed,
    whose id is the newest, was the one left out, and consumed all the same."""
    def newest_first(c: beliefs.Conviction) -> tuple[str, str]:
        return (c.timestamp.isoformat() if c.timestamp is not None else "", c.id)

    fresh = sorted((c for c in current if c.id in changed), key=lambda c: c.id)
    others = sorted((c for c in current if c.id not in changed), key=newest_first,
                    reverse=True)
    chosen = (fresh + others)[:cap]
    left_out = {c.id for c in current} - {c.id for c in chosen} - later
    return sorted(chosen, key=lambda c: c.id), len(left_out)


__all__ = ["NAME", "DetectContradictions", "shown_convictions"]
