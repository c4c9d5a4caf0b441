"""Reflection pipelining: later clusters' LLM calls — of any user — run while earlier clusters
commit, bounded by ``llm.max_concurrency``; commits stay in selection order."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from everos_reflect.llm import ExtractiveLLM
from everos_reflect.llm.base import MergeRequest, MergeResult
from everos_reflect.model import UserRef
from everos_reflect.strategies import journal_batch
from tests.reflect_fixtures import add_episode, make_runtime, reports, run_reflection, seed_pets

USERS = [UserRef.of(f"u_{name}") for name in ("ann", "bob", "cy", "dee", "eve", "fay")]


class SlowLLM(ExtractiveLLM):
    """The extractive provider, each merge taking ``delay`` seconds; counts calls in flight.

    ``gather``: the first that many calls wait (up to 30 s) until all of them are in flight
    together before taking their delay, so whether calls overlap does not depend on how fast
    a loaded machine submits them; a pipeline that never runs them together leaves the
    count short (and the test fails), it does not hang."""

    def __init__(self, delay: float, gather: int = 0) -> None:
        super().__init__()
        self.delay = delay
        self.gather = gather
        self.lock = threading.Condition()
        self.calls = self.in_flight = self.max_in_flight = 0
        self.merged: list[str] = []

    def delay_for(self, req: MergeRequest) -> float:
        return self.delay

    def merge(self, req: MergeRequest) -> MergeResult:
        with self.lock:
            self.calls += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.lock.notify_all()
            if self.calls <= self.gather:
                self.lock.wait_for(lambda: self.max_in_flight >= self.gather, timeout=30)
        try:
            time.sleep(self.delay_for(req))
            return super().merge(req)
        finally:
            with self.lock:
                self.in_flight -= 1


def test_llm_calls_of_different_users_overlap_up_to_max_concurrency(root: Path) -> None:
    llm = SlowLLM(0.2, gather=3)
    rt = make_runtime(root, llm, max_concurrency=3)
    for ref in USERS:
        seed_pets(rt, ref)  # one eligible cluster per user

    counts = run_reflection(rt)

    assert counts["merged"] == len(USERS)
    # one cluster per user: a pool drained per user would never have two calls in flight
    assert llm.max_in_flight == 3


def test_commits_follow_the_selection_order_whatever_order_drafts_finish(root: Path) -> None:
    names = [ref.user_id.removeprefix("u_") for ref in USERS]
    # the first user's merge is slowest, so later users' drafts are ready first
    delays = {name: 0.05 * (len(names) - i) for i, name in enumerate(names)}

    class ByUser(SlowLLM):
        def delay_for(self, req: MergeRequest) -> float:
            return delays[req.members[0].content.split()[0].lower()]

    llm = ByUser(0.0, gather=4)
    rt = make_runtime(root, llm, max_concurrency=4)
    for ref, name in zip(USERS, names, strict=True):
        for day, text in ((2, "has no pets"), (4, "adopted a dog named Toby"),
                          (6, "adopted a second dog named Buddy")):
            add_episode(rt, ref, f"2026-09-0{day}T10:00:00+00:00", f"{name} pets",
                        f"{name.title()} {text}. {name.title()} talks about pets and dogs.")

    counts = run_reflection(rt, max_drafts_ahead=4)

    assert counts["merged"] == len(USERS) and llm.max_in_flight == 4
    written = [r["owner_id"] for r in sorted(reports(rt), key=lambda r: r["created_at"])]
    assert written == [ref.user_id for ref in USERS]  # users_with_clusters' order


def test_llm_calls_go_on_while_a_commit_runs(root: Path, monkeypatch: Any) -> None:
    # no barrier between the LLM and the commits: with the first commit held until every
    # cluster's calls are made, the calls all get made (a pipeline waiting for that commit
    # would leave them waiting, and the commit would give up below)
    llm = SlowLLM(0.02)
    rt = make_runtime(root, llm, max_concurrency=2)
    for ref in USERS:
        seed_pets(rt, ref)
    every_call_made = threading.Event()
    calls = {"merge": 0, "facts": 0}
    lock = threading.Lock()
    real_facts = llm.extract_facts

    def counting_facts(req: Any) -> Any:
        result = real_facts(req)
        with lock:
            calls["facts"] += 1
            if calls["facts"] == len(USERS):
                every_call_made.set()
        return result

    monkeypatch.setattr(llm, "extract_facts", counting_facts)
    real_commit = journal_batch.commit_many
    held: list[bool] = []

    def held_commit(runtime: Any, indexer: Any, plans: Any) -> Any:
        if not held:
            held.append(every_call_made.wait(timeout=30))
        return real_commit(runtime, indexer, plans)

    monkeypatch.setattr(journal_batch, "commit_many", held_commit)

    counts = run_reflection(rt, max_commit_batch=1, commit_wait_seconds=0.0,
                            max_drafts_ahead=len(USERS))

    assert held == [True] and counts["merged"] == len(USERS)
    # the bound holds; whether two 20 ms calls overlap depends on the machine's load
    assert llm.max_in_flight <= 2
