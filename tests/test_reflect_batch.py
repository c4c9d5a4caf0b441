"""Reflection commits the drafts ready together as one batch (strategies/journal_batch.py) and
measures them with one embedding call (strategies/reflect_guard.py).

Each merge of a batch keeps its own journal row and steps: a crash anywhere in a batch is
recovered merge by merge, a stale source or a guard rejection touches only its own merge, and
the memory a batch leaves is the one merges committed one at a time leave.
"""

from __future__ import annotations

import os
import re
import threading
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from everos_reflect.clustering.service import ClusterService
from everos_reflect.embedding import HashEmbedder
from everos_reflect.embedding.base import CachingEmbedder
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM, ScriptedLLM
from everos_reflect.llm.base import MergeRequest, MergeResult
from everos_reflect.llm.prompts import Prompts
from everos_reflect.markdown import store as store_module
from everos_reflect.model import Entry, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.strategies import journal, journal_batch
from everos_reflect.strategies.consolidate import Draft, draft, select
from everos_reflect.strategies.reflect import live_facts
from everos_reflect.strategies.reflect_guard import Facts, Guard
from tests.reflect_fixtures import (
    ANDREW,
    add_episode,
    add_fact,
    all_entries,
    check_invariants,
    make_runtime,
    merge_on,
    reports,
    run_reflection,
)

#: single-threaded crash simulations: nothing else writes the logs (conftest.py)
pytestmark = pytest.mark.usefixtures("settle_at_once")

BETTY = UserRef.of("u_betty")
#: (user, month, topic word): three clusters, two users; Andrew's two narratives share a log
TOPICS = [(ANDREW, 2, "garden"), (ANDREW, 6, "climbing"), (BETTY, 4, "sourdough")]
#: wait for every draft, so all three commit in one batch whatever the machine's speed
ONE_BATCH = {"commit_wait_seconds": 60.0}


class Crash(BaseException):
    """The process dies here."""


def topic(rt: Runtime, ref: UserRef, month: int, word: str, n: int = 3) -> list[Entry]:
    """``n`` episodes on one topic, a day apart (each in its own daily log)."""
    return [add_episode(rt, ref, f"2026-{month:02d}-{day:02d}T10:00:00+00:00",
                        f"{word} update {day}",
                        f"{ref.user_id} talked about the {word} plans. The {word} note {day}.")
            for day in range(1, n + 1)]


def seeded(root: Path, llm: Any = None, **kwargs: Any) -> tuple[Runtime, dict[str, list[str]]]:
    rt = make_runtime(root, llm or ExtractiveLLM(), window_days=10, **kwargs)
    return rt, {word: [e.id for e in topic(rt, ref, month, word)] for ref, month, word in TOPICS}


def restart(root: Path) -> Runtime:
    return make_runtime(root, ExtractiveLLM(), window_days=10)


def batches_of(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record the size of every batch committed."""
    sizes: list[int] = []
    real = journal_batch.commit_many

    def recording(runtime: Runtime, indexer: Any, plans: Any) -> Any:
        plans = list(plans)
        sizes.append(len(plans))
        return real(runtime, indexer, plans)

    monkeypatch.setattr(journal_batch, "commit_many", recording)
    return sizes


def assert_each_topic_merged_once(rt: Runtime, sources: dict[str, list[str]]) -> None:
    check_invariants(rt)
    for ref, _, word in TOPICS:
        entries = all_entries(rt, ref)
        live = [e for e in entries.values()
                if e.parent_type == "cluster" and e.deprecated_by is None
                and set(e.sources) & set(sources[word])]
        assert len(live) == 1, (word, [e.id for e in live])
        assert live[0].sources == sources[word]
        assert all(entries[s].deprecated_by == live[0].id for s in sources[word])
    assert sorted(r["status"] for r in reports(rt)).count("ok") == len(TOPICS)


def normalized(root: Path) -> dict[str, str]:
    """Every daily log's text, the random journal ids and creation times left out."""
    out = {}
    for path in sorted(root.rglob("*.md")):
        if ".index" in path.parts:
            continue
        text = re.sub(r"rj_[0-9a-f]{16}", "rj_*", path.read_text("utf-8"))
        text = re.sub(r"merged_at: '[^']*'", "merged_at: *", text)  # when each merge ran
        out[str(path.relative_to(root))] = text
    return out


# --------------------------------------------------------------------------- the batch path


def test_ready_drafts_commit_as_one_batch_that_leaves_what_one_at_a_time_leaves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sizes = batches_of(monkeypatch)
    merge_on(monkeypatch, date(2026, 10, 12))  # both runs on one day, whenever they run
    batched, sources = seeded(tmp_path / "batched")
    written: list[Path] = []
    real_write = store_module._atomic_write

    def counting(path: Path, data: bytes) -> None:
        written.append(path)
        real_write(path, data)

    monkeypatch.setattr(store_module, "_atomic_write", counting)

    counts = run_reflection(batched, **ONE_BATCH)

    assert counts["merged"] == 3 and sizes == [3]
    # each file written once: both of Andrew's narratives in one write, and so on
    assert len(written) == len(set(written)) == 2 + 2 + 9  # narratives, facts, 9 source logs
    assert_each_topic_merged_once(batched, sources)

    monkeypatch.setattr(store_module, "_atomic_write", real_write)
    single, _ = seeded(tmp_path / "single")
    run_reflection(single, max_commit_batch=1)

    assert sizes[1:] == [1, 1, 1]
    assert normalized(tmp_path / "batched") == normalized(tmp_path / "single")


# The batch of TOPICS writes 13 files (see above); a crash in or after any one of them.
BATCH_WRITES = 13


@pytest.mark.parametrize("nth", range(1, BATCH_WRITES + 1))
def test_a_crash_inside_any_write_of_a_batch_is_recovered_merge_by_merge(
    root: Path, monkeypatch: pytest.MonkeyPatch, nth: int
) -> None:
    rt, sources = seeded(root)
    real_replace = os.replace
    calls = {"n": 0}

    def dying_replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        calls["n"] += 1
        if calls["n"] == nth:
            raise Crash(f"write #{nth}")
        real_replace(src, dst)

    monkeypatch.setattr(store_module.os, "replace", dying_replace)
    with pytest.raises(Crash):
        run_reflection(rt, **ONE_BATCH)
    monkeypatch.setattr(store_module.os, "replace", real_replace)
    # every merge of the batch is in the journal, each at its own step
    assert len(journal.pending(rt.db())) == len(TOPICS)

    counts = run_reflection(restart(root))

    assert counts.get("recovered_ok", 0) == len(TOPICS) and counts.get("merged", 0) == 0
    assert_each_topic_merged_once(restart(root), sources)


@pytest.mark.parametrize("step", [journal.PLANNED, journal.NARRATIVE, journal.FACTS,
                                  journal.ARCHIVING, journal.DEPRECATED, journal.SYNCED])
def test_a_crash_after_any_step_of_a_batch_is_recovered_merge_by_merge(
    root: Path, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    rt, sources = seeded(root)

    def crash_at(reached: str) -> None:
        if reached == step:
            raise Crash(reached)

    monkeypatch.setattr(journal, "checkpoint", crash_at)
    with pytest.raises(Crash):
        run_reflection(rt, **ONE_BATCH)
    monkeypatch.setattr(journal, "checkpoint", lambda reached: None)
    assert [s for _, s in journal.pending(rt.db())] == [step if step != journal.SYNCED
                                                        else journal.DEPRECATED] * len(TOPICS)

    counts = run_reflection(restart(root))

    assert counts.get("recovered_ok", 0) == len(TOPICS)
    assert_each_topic_merged_once(restart(root), sources)


def test_a_stale_source_inside_a_batch_withdraws_only_its_merge(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sizes = batches_of(monkeypatch)
    # at 0.25 the climbing notes, left unmerged, rejoin the garden narrative's cluster once a
    # run ends (the template's words), as a reindex places them: their next run is an update
    rt, sources = seeded(root, threshold=0.5)
    edited = sources["climbing"][1]

    def edit_after_facts(reached: str) -> None:
        if reached == journal.FACTS:  # every narrative of the batch is written by now
            path = rt.store.path_for_id(ANDREW, edited)
            path.write_text(path.read_text("utf-8").replace("plans", "routes"), "utf-8")

    monkeypatch.setattr(journal, "checkpoint", edit_after_facts)
    counts = run_reflection(rt, **ONE_BATCH)
    monkeypatch.setattr(journal, "checkpoint", lambda reached: None)

    assert sizes == [3]
    assert counts["merged"] == 2 and counts["stale"] == 1
    entries = check_invariants(rt)
    assert all(entries[s].deprecated_by is None for s in sources["climbing"])
    [withdrawn] = [e for e in entries.values() if e.parent_type == "cluster"
                   and set(e.sources) == set(sources["climbing"])]
    assert withdrawn.deprecated_by == withdrawn.id
    stale = next(r for r in reports(rt) if r["status"] == "stale")
    assert f"{edited} was edited" in stale["error"]
    assert sorted(r["status"] for r in reports(rt)) == ["ok", "ok", "stale"]

    counts = run_reflection(rt)  # the next run merges it from the edited text

    assert counts["merged"] == 1
    assert_each_topic_merged_once(rt, sources)


def test_a_guard_rejection_inside_a_batch_leaves_the_others_committed(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sizes = batches_of(monkeypatch)

    def merge(req: MergeRequest) -> MergeResult:
        if "sourdough" in req.members[0].content:  # drops every fact: coverage 0
            return MergeResult("Betty", "Betty went out.", provider="scripted", model="m")
        return ExtractiveLLM().merge(req)

    rt, sources = seeded(root, ScriptedLLM([merge] * 3, fallback=ExtractiveLLM()))
    betty_files = {p: p.read_bytes() for p in rt.store.iter_files(BETTY)}

    counts = run_reflection(rt, **ONE_BATCH)

    assert counts["merged"] == 2 and counts["rejected"] == 1
    assert sizes == [2]  # the rejected draft never reached the batch
    assert {p: p.read_bytes() for p in rt.store.iter_files(BETTY)} == betty_files
    rejected = next(r for r in reports(rt) if r["status"] == "rejected")
    assert rejected["owner_id"] == "u_betty" and "fact coverage" in rejected["error"]
    entries = check_invariants(rt)
    for word in ("garden", "climbing"):
        [narrative] = [e for e in entries.values() if e.parent_type == "cluster"
                       and e.sources == sources[word]]
        assert narrative.deprecated_by is None


def test_a_plan_sharing_an_entry_with_an_earlier_one_goes_into_the_next_batch() -> None:
    def plan(user: str, cluster: str, sources: list[str]) -> journal.Plan:
        return journal.Plan(id=f"rj_{cluster}", run_id="r", app="a", project="p",
                            user_id=user, cluster_id=cluster, mode="init", day="2026-01-01",
                            title="t", content="c", facts=[], timestamp="t", sources=sources,
                            existing_id=None, hashes={}, fact_ids=[], provider="p", model="m")

    plans = [plan("u1", "c1", ["ep_1"]), plan("u2", "c2", ["ep_1"]),  # other user: no clash
             plan("u1", "c3", ["ep_2", "ep_1"]), plan("u1", "c4", ["ep_3"])]

    batches = journal_batch.disjoint_batches(plans)

    assert [[p.cluster_id for p in b] for b in batches] == [["c1", "c2"], ["c3", "c4"]]


# --------------------------------------------------------------------------- the guard


class CountingHash(HashEmbedder):
    def __init__(self) -> None:
        super().__init__(64)
        self.calls: list[list[str]] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return super().embed(texts)


def _extractive_drafts(rt: Runtime) -> list[tuple[Draft, Facts]]:
    """An extractive draft of every cluster eligible now, with its sources' live facts."""
    clusters = ClusterService(rt)
    drafts = []
    for ref in (ANDREW, BETTY):
        for info in clusters.eligible_for_reflection(ref, 10):
            sel = select(rt.store, clusters, info, max_sources=50)
            assert sel is not None
            facts = live_facts(rt, ref, [e.id for e in sel.replaced])
            drafts.append((draft(sel, ExtractiveLLM(), Prompts.from_settings({})), facts))
    return drafts


def test_the_guard_measures_drafts_waiting_together_with_one_embedding_call(
    root: Path,
) -> None:
    counting = CountingHash()
    rt, _ = seeded(root, embedder=CachingEmbedder(counting))
    Indexer(rt).scan()
    drafts = _extractive_drafts(rt)
    assert len(drafts) == 3
    guard = Guard(rt, match_threshold=0.75, max_ratio=1.0)
    counting.calls.clear()

    with guard:
        with guard._embedding:  # an embedding call is running: the three queue up
            verdicts = [guard.submit(d, f) for d, f in drafts]
        results = [v.result(timeout=30) for v in verdicts]

    assert len(counting.calls) == 1 and guard.batches == 1 and guard.batched == 3
    # ... and each is measured as alone, with the plain embedder
    _assert_measured_as_alone(root, drafts, results)
    assert all(m.coverage is not None and m.coverage.score > 0.5 for m, _ in drafts)


def _assert_measured_as_alone(root: Path, drafts: list[tuple[Draft, Facts]],
                              results: list[Any]) -> None:
    """Each draft's verdict, coverage and provenance are what a guard of its own, with the
    plain embedder, finds for it: batching changed nothing but the number of calls."""
    alone = Guard(make_runtime(root / "alone", ExtractiveLLM(), embedder=HashEmbedder(64)),
                  match_threshold=0.75, max_ratio=1.0)
    for (measured, facts), too_long in zip(drafts, results, strict=True):
        fresh = draft(measured.selection, ExtractiveLLM(), Prompts.from_settings({}))
        assert alone.remeasure(fresh, facts) == too_long
        assert fresh.coverage == measured.coverage and fresh.provenance == measured.provenance


def _drafts_with_stated_facts(root: Path, counting: CountingHash,
                              ) -> tuple[Runtime, list[tuple[Draft, Facts]]]:
    """A seeded root whose every source has a stated atomic fact (so the guard has stored
    fact vectors to read), indexed, embedding through ``counting``; and its drafts."""
    rt, sources = seeded(root, embedder=CachingEmbedder(counting))
    for ref, _, word in TOPICS:
        entries = all_entries(rt, ref)
        for n, eid in enumerate(sources[word]):
            add_fact(rt, ref, entries[eid], f"{ref.user_id} keeps the {word} note {n}.")
    Indexer(rt).scan()
    return rt, _extractive_drafts(rt)


def test_the_guard_reads_the_stored_fact_vectors_of_a_pass_with_one_query_per_user(
    root: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    counting = CountingHash()
    rt, drafts = _drafts_with_stated_facts(root, counting)
    assert len(drafts) == 3 and all(facts for _, facts in drafts)
    queries: list[UserRef] = []
    real = rt.vectors.get_vectors

    def querying(kind: Any, ref: UserRef, ids: Any) -> Any:
        queries.append(ref)
        return real(kind, ref, ids)

    monkeypatch.setattr(rt.vectors, "get_vectors", querying)
    guard = Guard(rt, match_threshold=0.75, max_ratio=1.0)
    counting.calls.clear()

    with guard:
        with guard._embedding:  # an embedding call is running: the three queue up
            verdicts = [guard.submit(d, f) for d, f in drafts]
        for verdict in verdicts:
            verdict.result(timeout=30)

    assert sorted(queries) == sorted([ANDREW, BETTY])  # Andrew's two drafts: one query
    stored = {" ".join(t.split()) for _, f in drafts for fs in f.values() for _, t in fs}
    embedded = {t for call in counting.calls for t in call}
    assert stored and not stored & embedded  # every source fact's vector came from the index


def test_a_narrative_prefetched_during_its_facts_call_leaves_only_new_facts_to_embed(
    root: Path,
) -> None:
    counting = CountingHash()
    rt, _ = seeded(root, embedder=CachingEmbedder(counting))
    Indexer(rt).scan()
    clusters = ClusterService(rt)
    info = next(iter(clusters.eligible_for_reflection(ANDREW, 10)))
    sel = select(rt.store, clusters, info, max_sources=50)
    assert sel is not None
    facts = live_facts(rt, ANDREW, [e.id for e in sel.replaced])
    narratives: list[Any] = []
    finished = draft(sel, ExtractiveLLM(), Prompts.from_settings({}),
                     on_merged=narratives.append)
    assert [n.content for n in narratives] == [finished.content] and narratives[0].facts == []
    guard = Guard(rt, match_threshold=0.75, max_ratio=1.0)
    counting.calls.clear()

    with guard:
        guard.prefetch(narratives[0], facts)
        assert guard._thread is not None
        guard._thread.submit(lambda: None).result(timeout=30)  # the prefetch is done
        prefetched = [t for call in counting.calls for t in call]
        counting.calls.clear()
        too_long = guard.submit(finished, facts).result(timeout=30)

    assert prefetched and guard.prefetched == 1
    assert {t for call in counting.calls for t in call} <= set(finished.facts)
    # measured exactly as without the prefetch
    alone = Guard(make_runtime(root / "alone", ExtractiveLLM(), embedder=HashEmbedder(64)),
                  match_threshold=0.75, max_ratio=1.0)
    fresh = draft(sel, ExtractiveLLM(), Prompts.from_settings({}))
    assert alone.remeasure(fresh, facts) == too_long
    assert fresh.coverage == finished.coverage and fresh.provenance == finished.provenance


def test_the_guard_loads_the_model_on_its_own_thread_when_the_run_starts(root: Path) -> None:
    class Loading(HashEmbedder):
        loaded_on: str | None = None

        def load(self) -> None:
            self.loaded_on = threading.current_thread().name

    inner = Loading(64)
    rt = make_runtime(root, ExtractiveLLM(), embedder=CachingEmbedder(inner))
    with Guard(rt, match_threshold=0.75, max_ratio=1.0):
        pass  # no draft at all

    assert inner.loaded_on is not None and inner.loaded_on.startswith("reflect-guard")


def test_the_guard_starts_loading_only_once_its_hold_returns(root: Path) -> None:
    released = threading.Event()
    held: list[str] = []

    class Loading(HashEmbedder):
        loaded_released: bool | None = None

        def load(self) -> None:
            self.loaded_released = released.is_set()

    def hold() -> None:
        held.append(threading.current_thread().name)
        released.wait(30)

    inner = Loading(64)
    rt = make_runtime(root, ExtractiveLLM(), embedder=inner)
    with Guard(rt, match_threshold=0.75, max_ratio=1.0, hold=hold):
        released.set()

    assert inner.loaded_released is True
    # both start-up threads (the model's, the vector index's) waited for it
    assert sorted(name.split("_")[0] for name in held) == ["reflect-guard",
                                                           "reflect-guard-vectors"]


def test_while_the_vector_index_opens_the_guard_embeds_the_drafts_own_texts_first(
    root: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    counting = CountingHash()
    rt, drafts = _drafts_with_stated_facts(root, counting)
    embedded_before_reading: list[set[str]] = []
    real = rt.vectors.get_vectors

    def reading(kind: Any, ref: UserRef, ids: Any) -> Any:
        embedded_before_reading.append({t for call in counting.calls for t in call})
        return real(kind, ref, ids)

    monkeypatch.setattr(rt.vectors, "get_vectors", reading)
    opened = threading.Event()

    def index_still_opening() -> None:  # the index's start-up thread waits; the model's not
        if threading.current_thread().name == "reflect-guard-vectors":
            opened.wait(30)

    guard = Guard(rt, match_threshold=0.75, max_ratio=1.0, hold=index_still_opening)
    counting.calls.clear()
    with guard:
        with guard._embedding:  # an embedding call is running: the three queue up
            verdicts = [guard.submit(d, f) for d, f in drafts]
        results = [v.result(timeout=30) for v in verdicts]
        opened.set()

    stored = {" ".join(t.split()) for _, f in drafts for fs in f.values() for _, t in fs}
    embedded = {t for call in counting.calls for t in call}
    assert stored and not stored & embedded  # the source facts' vectors still come from it
    # the drafts' own texts were embedded before the stored vectors were read
    assert embedded_before_reading and embedded_before_reading[0] == embedded
    _assert_measured_as_alone(root, drafts, results)
