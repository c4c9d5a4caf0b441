"""``detect_contradictions`` (seed 004, SPEC §10): convictions → ``self_contradiction`` edges.

Trigger: a write to the worldview (an on-write trigger: any live conviction the detector has
not yet seen in its current text). The model sees the current convictions, the changed ones
marked, and names conflicting pairs (SPEC §9 ``contradictions``); when they do not fit in
``max_records``, the runs that follow show each changed one beside the ones it has not met yet
(:func:`plan_pairs`), so every pair is shown once. An edge is written only when
it joins exactly two convictions that are both live now, at least one of them just changed, and
the pair has no standing edge yet (:func:`beliefs.edge_problem`). The detector appends edges;
it never edits a conviction.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from everos_reflect.engine.registry import RunContext
from everos_reflect.index import cursors
from everos_reflect.model import Kind, UserRef, id_order
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
    import sqlite3

    from everos_reflect.runtime import Runtime

NAME = "detect_contradictions"


class DetectContradictions(BeliefTier):
    name = NAME
    description = "Flag pairs of current convictions that cannot both hold (seed 004)."
    reads = "convictions"
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

    def owner_work(self, runtime: Runtime, ref: UserRef, settings: Mapping[str, Any], *,
                   force: bool = False, fix: bool = False) -> Work | None:
        """The window, with the call planned (:func:`plan_pairs`): which convictions it shows,
        the pairs that shows (noted in the cursor with the window), and the changed ones
        kept for a later run because some of their pairs do not fit. The window key covers
        the pairs too: the next part of the same window is another derivation, not a rerun."""
        work = super().owner_work(runtime, ref, settings, force=force, fix=fix)
        if work is None:
            return None
        state = work.state
        current = self._current(state, settings)
        entries = state.by_id()
        # changed too but past the window: compared as changed ones in a later run
        # both from the cursor rows the engine read once for this poll (work.done)
        later = set(self.unconsumed(runtime, ref, settings, state, done=work.done)[1]) \
            - set(work.items)
        plan = plan_pairs(current, {c.id: entries[c.id].text_hash for c in current},
                          work.items, work.done, int(settings.get("max_records", 50)), later)
        work.plan = plan
        work.commit = {**{i: h for i, h in work.items.items() if i not in plan.pending},
                       **plan.pairs}
        work.key = beliefs.window_key(self.name, str(ref), {**work.items, **plan.pairs})
        return work

    def entry_ids(self, rows: Mapping[str, str]) -> list[str]:
        return [i for i in rows if not i.startswith(PAIR)]

    def forget_stale(self, conn: sqlite3.Connection, ref: UserRef, state: Any) -> None:
        """Drop the pair rows no current conviction matches any more, in the transaction
        that writes the cursor. A pair row only says "these two texts were shown together":
        once either side is archived, retired, deleted or edited it can never match again
        (the new text is a new pair), so kept it only grew the table, by every pair of
        every version ever written."""
        entries = state.by_id()
        hashes = {c.id: entries[c.id].text_hash for c in state.worldview().current.values()}
        cursors.forget(conn, self.name, ref,
                       stale_pairs(cursors.consumed(conn, self.name, ref), hashes))

    def derive(self, ctx: RunContext, work: Work, budget: Budget) -> Derived:
        from everos_reflect.llm.tasks import Record

        rt, ref, state = ctx.runtime, work.ref, work.state
        entries = state.by_id()
        plan: PairPlan = work.plan
        by_id = {c.id: c for c in self._current(state, ctx.settings)}
        current = [by_id[i] for i in plan.shown]
        changed = set(plan.changed)
        derived = Derived(unshown=plan.unshown)
        # a changed conviction with pairs the call cannot show is not consumed: it is shown
        # again, beside the convictions it was not compared with yet, by the next run
        derived.pending = set(plan.pending)
        if len(current) < 2:
            return derived  # nothing to compare with: the window is consumed, no call made
        found = self.call(ctx, budget, [
            Record(c.id, f"{c.key} conviction" + (", just changed" if c.id in changed else ""),
                   c.text, c.timestamp) for c in current
        ], {}, derived, min_records=2)  # a pair at least
        live = {c.id for c in current if c.id not in derived.left_out}  # looked up per item
        derived.pending |= unshown_pairs(plan.pairs, derived.left_out, work.items)
        depth = {c.id: c.depth for c in current}
        pairs = {e.pair for e in state.edges() if e.standing}
        resolved = beliefs.resolved_in_these_texts(
            [e for e in state.relations
             if e.meta.get("relation_type") == beliefs.SELF_CONTRADICTION], entries)
        rows = []
        refusals = Refusals(ctx.log, f"{self.name}: {ref}")
        for item in found:
            between = list(item["between"])
            problem = beliefs.edge_problem(between, live=live, changed=changed,
                                           standing_pairs=pairs, resolved_pairs=resolved)
            if not problem and not item["text"]:
                problem = "it says nothing of what contradicts (no text)"
            if not problem:
                problem = beliefs.text_problem(item["text"])
            if problem:
                refusals.add(f"edge refused: {problem}")
                continue
            pairs.add(frozenset(between))
            rows.append((derived_meta(
                evidence=between, key=work.key, seen=entries,
                depth=beliefs.derived_depth(depth[i] for i in between),
                extra={"relation_type": beliefs.SELF_CONTRADICTION, "between": between}),
                {"Relation": item["text"]}))
        derived.take(refusals)
        if rows:
            written = rt.store.append_many(ref, Kind.RELATION, rows, derived=True)
            sync(rt, {rt.store.path_for_id(ref, e.id) for e in written})
            derived.outputs = [e.id for e in written]
        return derived


#: The cursor rows noting a pair shown together: ``pair:<wv_a>+<wv_b>``, never an entry id;
#: dropped once stale (:func:`stale_pairs`), so they stay one per pair of current convictions.
PAIR = "pair:"


def pair_row(a: str, a_hash: str, b: str, b_hash: str) -> tuple[str, str]:
    """The cursor row saying that convictions ``a`` and ``b`` were shown to the detector
    together in these texts (a text hash each): an edit of either makes it a new pair."""
    if b < a:
        a, a_hash, b, b_hash = b, b_hash, a, a_hash
    return f"{PAIR}{a}+{b}", f"{a_hash}+{b_hash}"


def stale_pairs(rows: Iterable[tuple[str, str]],
                hashes: Mapping[str, str]) -> list[tuple[str, str]]:
    """The pair rows among cursor ``rows`` that no current conviction matches: not both
    sides in ``hashes`` (the current convictions, id → text hash, whatever their depth), or
    not in those texts. Entry rows are left alone. A row is kept only when it is exactly the
    :func:`pair_row` the current texts give, so a kept row is one :func:`plan_pairs` finds
    in ``done``, and a row it writes is never dropped while its texts stand (dropped, the
    pair would be shown again on every run)."""
    stale = []
    for entry_id, value in rows:
        if not entry_id.startswith(PAIR):
            continue
        a, _, b = entry_id.removeprefix(PAIR).partition("+")
        if a not in hashes or b not in hashes or a == b or \
                pair_row(a, hashes[a], b, hashes[b]) != (entry_id, value):
            stale.append((entry_id, value))
    return stale


def unshown_pairs(pairs: Iterable[str], left_out: Collection[str],
                  window: Collection[str]) -> set[str]:
    """What a call that left out the convictions ``left_out`` (over ``[llm]
    max_prompt_tokens``) keeps pending of its planned ``pairs`` (cursor row ids) and of the
    changed convictions of ``window``: the pair rows with a side left out, never shown, and a
    changed conviction paired with an unchanged one left out (a changed one left out stays
    pending itself, and meets the rest then). Consumed, the pair was never compared: the
    next run took it as shown."""
    if not left_out:
        return set()
    kept: set[str] = set()
    for row in pairs:
        a, _, b = row.removeprefix(PAIR).partition("+")
        for side, other in ((a, b), (b, a)):
            if side in left_out:
                kept.add(row)
                if side not in window and other in window and other not in left_out:
                    kept.add(other)
    return kept


@dataclass(frozen=True)
class PairPlan:
    """One call of the detector: the convictions it shows (id order), the changed ones among
    them (marked), the changed ones of the window left for a later run, the cursor rows of
    the pairs it shows, and how many current convictions wait to be shown beside a changed
    one (``unshown_records``)."""

    shown: tuple[str, ...]
    changed: frozenset[str]
    pending: frozenset[str]
    pairs: dict[str, str]
    unshown: int


def plan_pairs(current: Sequence[beliefs.Conviction], hashes: Mapping[str, str],
               window: Iterable[str], done: Collection[tuple[str, str]], cap: int,
               later: Set[str] = frozenset()) -> PairPlan:
    """Which of the ``current`` convictions one call shows, at most ``cap``, so that every
    pair of a changed conviction (in ``window``) with a current one is shown in some run.

    A pair already shown in these texts (its :func:`pair_row` in ``done``) is not needed
    again, nor one with a conviction of ``later`` (changed but past the window: it is a
    changed one of a later run, compared with every current one then). The changed ones
    that still need a pair come first, the oldest first (all of them when they fit with one
    more, else ``cap - 1``), then the others they need, the most needed and then the most
    recently written first. A changed one whose pairs were not all shown stays pending, so
    the next run shows it beside the next ones: each run shows one more pair at least.
    With a fixed window cut to ``cap`` (the most recent others), a changed conviction was
    never compared with the others past the cut, once consumed, run after run."""
    ids = {c.id for c in current}
    changed = [i for i in sorted(set(window), key=id_order) if i in ids]
    recent = sorted(current, key=lambda c: (beliefs.instant(c.timestamp), id_order(c.id)),
                    reverse=True)

    done = set(done)

    candidates = [(c.id, hashes[c.id]) for c in recent if c.id not in later]

    def needs(a: str) -> list[str]:
        mine = hashes[a]
        return [o for o, o_hash in candidates
                if o != a and pair_row(a, mine, o, o_hash) not in done]

    todo = {c: needs(c) for c in changed}
    need = [c for c in changed if todo[c]]
    fresh = need if len(need) < cap else need[:cap - 1]
    wanted: dict[str, int] = {}
    for c in fresh:
        for other in todo[c]:
            if other not in fresh:
                wanted[other] = wanted.get(other, 0) + 1
    rank = {c.id: n for n, c in enumerate(recent)}
    others = sorted(wanted, key=lambda i: (-wanted[i], rank[i]))[:cap - len(fresh)]
    shown = set(fresh) | set(others)
    marked = shown & set(changed)
    pairs = dict(pair_row(a, hashes[a], b, hashes[b])
                 for a in marked for b in shown if a != b)
    # a pair is shown when both sides are and one of them is marked (every changed one shown)
    left_for = {c: [o for o in todo[c] if not (c in marked and o in shown)] for c in changed}
    pending = frozenset(c for c in changed if left_for[c])
    left = {o for c in pending for o in left_for[c]} - shown
    return PairPlan(tuple(sorted(shown, key=id_order)), frozenset(marked), pending, pairs,
                    len(left))


__all__ = ["NAME", "PAIR", "DetectContradictions", "PairPlan", "pair_row", "plan_pairs",
           "stale_pairs", "unshown_pairs"]
