"""The worldview's repair resolves every edge citing a superseded conviction in one write of
the relations log: edge by edge, n edges of one day were n copies of the whole log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.markdown import store as store_module
from everos_reflect.model import UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.strategies import beliefs
from everos_reflect.strategies.belief_store import BeliefState, repair
from tests.worldview_fixtures import superseded_edges

ADA = UserRef.of("ada")
EDGES = 12


def test_edges_of_a_superseded_conviction_are_resolved_in_one_write(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rt = Runtime(root, embedder=HashEmbedder(32))
    try:
        made = superseded_edges(rt, ADA, EDGES)
        edges = made.edges
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
            assert meta["resolution"] == made.resolution
    finally:
        rt.close()
