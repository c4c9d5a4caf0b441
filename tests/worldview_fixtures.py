"""A worldview with self-contradiction edges over a conviction superseded since: what the
worldview's repair resolves and ``resolve`` may race it for (tests/test_resolve_repair_race.py,
tests/test_belief_repair_writes.py)."""

from __future__ import annotations

from dataclasses import dataclass

from everos_reflect.model import Entry, Kind, UserRef
from everos_reflect.runtime import Runtime


@dataclass(frozen=True)
class Superseded:
    """The active ``edges`` between ``old`` and ``other``, ``old`` archived into ``new``."""

    edges: list[Entry]
    old: Entry
    other: Entry
    new: Entry

    @property
    def resolution(self) -> str:
        """What the repair writes in each edge's ``resolution``."""
        return f"automatic: {self.old.id} was superseded by {self.new.id}"


def superseded_edges(rt: Runtime, ref: UserRef, n: int = 1) -> Superseded:
    """``n`` active edges between two convictions of ``ref`` (keys ``strategy`` and
    ``pricing``, written on 2026-10-12), then the ``strategy`` one superseded by a new
    version (2026-10-13), archived into it as ``update_worldview`` archives it."""
    old, other = rt.store.append_many(ref, Kind.CONVICTION, [
        ({"timestamp": "2026-10-12T05:00:00+00:00", "key": "strategy",
          "evidence": ["in_20261012_0001"], "depth": 2, "status": "active"},
         {"Conviction": "Self-serve first."}),
        ({"timestamp": "2026-10-12T06:00:00+00:00", "key": "pricing",
          "evidence": ["in_20261012_0002"], "depth": 2, "status": "active"},
         {"Conviction": "Price by seat."})])
    edges = rt.store.append_many(ref, Kind.RELATION, [
        ({"timestamp": f"2026-10-12T07:{k:02d}:00+00:00",
          "relation_type": "self_contradiction", "between": [old.id, other.id],
          "status": "active"}, {"Relation": f"Tension {k}."}) for k in range(n)])
    (new,) = rt.store.append_many(ref, Kind.CONVICTION, [
        ({"timestamp": "2026-10-13T05:00:00+00:00", "key": "strategy",
          "evidence": ["in_20261013_0001"], "depth": 2, "status": "active"},
         {"Conviction": "Enterprise first."})])
    rt.store.deprecate(ref, {old.id: new.id})
    return Superseded(edges, old, other, new)
