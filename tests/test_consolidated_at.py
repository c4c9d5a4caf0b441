"""A cluster's ``consolidated_at`` is the time of its narrative's merge, as the Markdown
records it (the narrative's ``merged_at``): a rebuild of the index (``reindex``, a removed
``.index/``) gave every consolidated cluster the rebuild's time instead."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.clustering.service import ClusterService
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.model import parse_timestamp
from everos_reflect.runtime import Runtime
from tests.reflect_fixtures import (
    ANDREW,
    add_episode,
    make_runtime,
    merge_on,
    run_reflection,
    seed_pets,
)


def listing(rt: Runtime) -> list[dict[str, Any]]:
    return [c.to_json() for c in ClusterService(rt).clusters(ANDREW)]


def test_a_reindex_keeps_each_cluster_s_consolidated_at(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    merge_on(monkeypatch, date(2026, 10, 12))
    seed_pets(rt)
    Indexer(rt).scan()
    assert run_reflection(rt)["merged"] == 1
    before = listing(rt)

    Indexer(rt).reindex()

    assert listing(rt) == before
    narrative = rt.store.get(ANDREW, before[0]["consolidated_entry_id"])
    merged_at = parse_timestamp(narrative.meta.get("merged_at"))  # the Markdown holds it
    assert merged_at is not None
    assert before[0]["consolidated_at"] == merged_at.isoformat(timespec="microseconds")


def test_a_narrative_without_a_merge_time_is_consolidated_on_its_day_online_and_rebuilt(
        root: Path) -> None:
    """Written before merges recorded the time, or by a person: its id's day, the day of the
    file the merge wrote it to, both ways."""
    rt = make_runtime(root, ExtractiveLLM())
    sources = seed_pets(rt)
    narrative = add_episode(rt, ANDREW, "2026-09-07T10:00:00-07:00", "Pets", "Two dogs now.",
                            parent_type="cluster", parent_id="cl_0123456789ab",
                            sources=[e.id for e in sources])
    Indexer(rt).scan()
    online = [c for c in listing(rt) if c["consolidated_entry_id"] == narrative.id]
    assert [c["consolidated_at"] for c in online] == ["2026-09-07T00:00:00.000000+00:00"]
    before = listing(rt)
    Indexer(rt).reindex()
    assert listing(rt) == before
