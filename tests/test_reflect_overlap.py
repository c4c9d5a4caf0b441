"""Reflection pipelining: later clusters' LLM calls — of any user — run while earlier clusters
commit, bounded by ``llm.max_concurrency``; commits stay in selection order."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from everos_reflect.llm import ExtractiveLLM
from everos_reflect.llm.base import MergeRequest, MergeResult
from everos_reflect.model import UserRef
from tests.reflect_fixtures import add_episode, make_runtime, reports, run_reflection, seed_pets

USERS = [UserRef.of(f"u_{name}") for name in ("ann", "bob", "cy", "dee", "eve", "fay")]


class SlowLLM(ExtractiveLLM):
    """The extractive provider, each merge taking ``delay`` seconds; counts calls in flight."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay
        self.lock = threading.Lock()
        self.in_flight = self.max_in_flight = 0
        self.merged: list[str] = []

    def delay_for(self, req: MergeRequest) -> float:
        return self.delay

    def merge(self, req: MergeRequest) -> MergeResult:
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            time.sleep(self.delay_for(req))
            return super().merge(req)
        finally:
            with self.lock:
                self.in_flight -= 1


def test_llm_calls_of_different_users_overlap_up_to_max_concurrency(root: Path) -> None:
    llm = SlowLLM(0.2)
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

    llm = ByUser(0.0)
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
