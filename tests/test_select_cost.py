"""Select parses each daily log once per cluster, not once per member: a large log (a huge
hand-made file, a bulk import) must not make Reflection quadratic in its size."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from everos_reflect.clustering.service import ClusterService
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.markdown.store import MarkdownStore
from everos_reflect.strategies.consolidate import select
from tests.reflect_fixtures import ANDREW, add_episode, make_runtime


def test_select_reads_each_log_once_however_many_members_it_holds(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    for i in range(40):  # one day's log, one topic: one big cluster
        add_episode(rt, ANDREW, f"2026-09-04T{i // 4:02d}:{i % 4 * 10:02d}:00+00:00",
                    f"Toby walk {i}", f"Andrew walked his dog Toby in the park, walk {i}.")
    from everos_reflect.index.sync import Indexer

    Indexer(rt).scan()
    clusters = ClusterService(rt)
    [info] = clusters.eligible_for_reflection(ANDREW, 10)
    reads: Counter[str] = Counter()
    real_read = MarkdownStore.read

    def counting(self: MarkdownStore, path: object) -> object:
        reads[str(path)] += 1
        return real_read(self, path)  # type: ignore[arg-type]

    monkeypatch.setattr(MarkdownStore, "read", counting)

    picked = select(rt.store, clusters, info, max_sources=50)

    assert picked is not None and len(picked.replaced) == info.size == 40
    assert list(reads.values()) == [1]
