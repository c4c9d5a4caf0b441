"""The join of a fact's newer version reads the members of the clusters it may join at once.

Placing an Episode that tells a change and would found a cluster, the clustering reads the
texts of the members of each cluster near it (``online.choose_version``). It read them two
statements per cluster (the members written, the texts of those queued in the batch), and
one owner ×20 reads ~2.6 clusters per such Episode, ~1.3 members each: the statements were
most of the reading. Now: the clusters it will read first at once, the written members of
those SQLite holds in one statement, the queued members' texts in another, and no look-up
of written members for a cluster the batch created and has not written (none can exist).
The decisions are the ones the reading per cluster made."""

from __future__ import annotations

import math
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from everos_reflect.llm.extractive import tells_change, tells_newer_version
from everos_reflect.settings import ClusteringSettings
from tests.test_cluster_service import FakeRuntime
from tests.test_cluster_version_join import (
    DIM,
    LET_GO,
    T0,
    index,
    placed_as_one_by_one_and_recluster,
)

#: three facts of Noor's, none of which the layoff ends; each its own cluster (orthogonal)
FACTS = ["Noor plays chess on Sundays.", "Noor likes green tea.", "Noor reads novels at night."]
AGAIN = ["Noor played chess with Ana on Sunday.", "Noor drank green tea at noon.",
         "Noor read a novel in bed."]


def _axis(n: int) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    v[n] = 1.0
    return v


def _near_all_three() -> np.ndarray:
    """At cosine 0.4 to each fact's axis: over the version floor, under the threshold."""
    v = np.zeros(DIM, dtype=np.float32)
    v[1:4] = 0.4
    v[4] = math.sqrt(1.0 - 3 * 0.16)
    return v


@pytest.fixture
def rt(tmp_path: Path) -> FakeRuntime:
    return FakeRuntime(tmp_path, ClusteringSettings())


def _member_reads(rt: FakeRuntime) -> list[str]:
    """Record the statements that read clusters' members' texts on ``rt``'s connection."""
    seen: list[str] = []

    def trace(sql: str) -> None:
        if "JOIN entries e" in sql or sql.lstrip().startswith("SELECT id, text FROM entries"):
            seen.append(sql)

    rt.db().set_trace_callback(trace)
    return seen


def test_the_facts_are_no_versions_of_each_other_so_every_cluster_is_read() -> None:
    assert tells_change(LET_GO)
    assert not any(tells_newer_version(t, LET_GO) for t in FACTS + AGAIN)


def test_clusters_made_in_the_same_batch_cost_one_read_of_their_queued_texts(rt) -> None:
    rows = [(f"ep_2026030{2 + n}_0001", FACTS[n], T0 + timedelta(days=n), _axis(1 + n))
            for n in range(3)]
    rows.append(("ep_20260306_0001", LET_GO, T0 + timedelta(days=4), _near_all_three()))
    reads = _member_reads(rt)
    out = index(rt, *rows)  # one batch: the three clusters are queued, not written
    assert out["ep_20260306_0001"] == "new"
    # one statement for the texts of the three clusters' queued members; no look-up of
    # written members (the per-cluster reading made two statements for each: six)
    assert len(reads) == 1
    assert reads[0].lstrip().startswith("SELECT id, text FROM entries")


def test_clusters_of_an_earlier_batch_cost_two_reads_whatever_their_number(rt) -> None:
    index(rt, *[(f"ep_2026030{2 + n}_0001", FACTS[n], T0 + timedelta(days=n), _axis(1 + n))
                for n in range(3)])
    reads = _member_reads(rt)
    out = index(rt, *[(f"ep_2026030{2 + n}_0002", AGAIN[n], T0 + timedelta(days=n, hours=2),
                       _axis(1 + n)) for n in range(3)],
                ("ep_20260306_0001", LET_GO, T0 + timedelta(days=4), _near_all_three()))
    assert out["ep_20260306_0001"] == "new"
    assert [out[f"ep_2026030{2 + n}_0002"] for n in range(3)] == ["join"] * 3
    # the written members of the three clusters in one statement, the queued ones' texts
    # in another (before: two for each cluster)
    assert len(reads) == 2
    assert sum("JOIN entries e" in sql for sql in reads) == 1


def test_a_change_of_a_fact_joins_as_before_when_the_clusters_are_read_at_once(
        rt, tmp_path) -> None:
    """The job among the three clusters: the layoff joins the job's cluster, in one batch
    and placed one Episode per call, and as ``recluster`` places it."""
    facts = [FACTS[0], "Noor works at Arup.", FACTS[2]]
    rows = [(f"ep_2026030{2 + n}_0001", facts[n], T0 + timedelta(days=n), _axis(1 + n))
            for n in range(3)]
    rows.append(("ep_20260306_0001", LET_GO, T0 + timedelta(days=4), _near_all_three()))
    placed_as_one_by_one_and_recluster(rt, tmp_path, rows)
