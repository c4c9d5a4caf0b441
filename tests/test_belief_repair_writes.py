"""The worldview's repair resolves every edge citing a superseded conviction in one write of
the relations log: edge by edge, n edges of one day were n copies of the whole log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.markdown import store as store_module
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.strategies import beliefs
from everos_reflect.strategies.belief_store import BeliefState, repair

ADA = UserRef.of("ada")
EDGES = 12


def test_edges_of_a_superseded_conviction_are_resolved_in_one_write(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rt = Runtime(root, embedder=HashEmbedder(32))
    try:
        old, other = rt.store.append_many(ADA, Kind.CONVICTION, [
            ({"timestamp": "2026-10-12T05:00:00+00:00", "key": "strategy",
              "evidence": ["in_20261012_0001"], "depth": 2, "status": "active"},
             {"Conviction": "Self-serve first."}),
            ({"timestamp": "2026-10-12T06:00:00+00:00", "key": "pricing",
              "evidence": ["in_20261012_0002"], "depth": 2, "status": "active"},
             {"Conviction": "Price by seat."}),
        ])
        edges = rt.store.append_many(ADA, Kind.RELATION, [
            ({"timestamp": f"2026-10-12T07:{n:02d}:00+00:00",
              "relation_type": "self_contradiction", "between": [old.id, other.id],
              "status": "active"}, {"Relation": f"Tension {n}."}) for n in range(EDGES)])
        (new,) = rt.store.append_many(ADA, Kind.CONVICTION, [
            ({"timestamp": "2026-10-13T05:00:00+00:00", "key": "strategy",
              "evidence": ["in_20261013_0001"], "depth": 2, "status": "active"},
             {"Conviction": "Enterprise first."})])
        rt.store.deprecate(ADA, {old.id: new.id})
        relations_log = rt.store.path_for_id(ADA, edges[0].id)
        writes: list[Path] = []
        real = store_module._atomic_write

        def counting(path: Path, *args: Any, **kwargs: Any) -> Any:
            writes.append(Path(path))
            return real(path, *args, **kwargs)

        monkeypatch.setattr(store_module, "_atomic_write", counting)
        touched = repair(rt, ADA, BeliefState.load(rt, ADA))

        assert writes.count(relations_log) == 1, writes
        assert relations_log in touched
        for edge in edges:
            meta = rt.store.get(ADA, edge.id).meta
            assert meta["status"] == beliefs.RESOLVED
            assert meta["resolution"] == (f"automatic: {old.id} was superseded by {new.id}")
    finally:
        rt.close()
