"""One root's share of a fleet run, without Ray: triage on the driver, the run, the lock."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from filelock import FileLock

from everos_reflect.engine.engine import lock_path
from everos_reflect.fleet.work import overlay, root_status, run_root, triage
from tests.fleet_support import build_root, open_test_root

#: roots built, then opened again: nothing else writes their logs meanwhile (conftest.py)
pytestmark = pytest.mark.usefixtures("settle_at_once")

ON = {"reflect_episodes": {"enabled": True}}


def test_a_root_own_ome_toml_wins_over_the_fleet_defaults_key_by_key() -> None:
    merged = overlay({"reflect_episodes": {"enabled": True, "cron": "0 1 * * *"}},
                     {"reflect_episodes": {"cron": "0 5 * * *"}, "other": {"enabled": True}})
    assert merged == {"reflect_episodes": {"enabled": True, "cron": "0 5 * * *"},
                      "other": {"enabled": True}}


def test_run_root_merges_and_records_the_run_as_a_fleet_trigger(tmp_path: Path) -> None:
    root = tmp_path / "r"
    build_root(root)
    result = run_root(str(root), "reflect_episodes", defaults=ON, opener=open_test_root)
    assert result.status == "ok" and result.merges >= 2, result
    rt = open_test_root(str(root))
    row = rt.db().execute("SELECT trigger, status, counts FROM runs").fetchone()
    assert (row["trigger"], row["status"]) == ("fleet", "ok")
    assert json.loads(row["counts"])["merged"] == result.merges
    reports = rt.db().execute("SELECT COUNT(*) FROM reflection_report WHERE status='ok'")
    assert reports.fetchone()[0] == result.merges


def test_a_root_locked_by_another_process_is_busy_and_not_run(tmp_path: Path) -> None:
    root = tmp_path / "r"
    build_root(root)
    path = lock_path(root, "reflect_episodes")
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path)):  # as a daemon's run elsewhere holds it
        result = run_root(str(root), "reflect_episodes", defaults=ON, opener=open_test_root)
    assert result.status == "busy" and "already running" in (result.error or "")
    rt = open_test_root(str(root))
    assert rt.db().execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0
    assert rt.db().execute("SELECT COUNT(*) FROM reflection_report").fetchone()[0] == 0


def test_triage_sends_no_task_to_a_disabled_or_idle_root(tmp_path: Path) -> None:
    root = tmp_path / "r"
    build_root(root, ome="[strategies.reflect_episodes]\nenabled = false\n")
    disabled = triage(str(root), "reflect_episodes", force=False, defaults=ON, probe=True,
                      opener=open_test_root)
    assert disabled is not None and disabled.status == "disabled"
    # --force overrides the root's own "enabled = false"; there is work, so a task is needed
    assert triage(str(root), "reflect_episodes", force=True, defaults=ON, probe=True,
                  opener=open_test_root) is None
    run_root(str(root), "reflect_episodes", force=True, opener=open_test_root)
    idle = triage(str(root), "reflect_episodes", force=True, defaults=ON, probe=True,
                  opener=open_test_root)
    assert idle is not None and idle.status == "idle"
    # without probing, every enabled root gets a task
    assert triage(str(root), "reflect_episodes", force=True, defaults=ON, probe=False,
                  opener=open_test_root) is None


def test_triage_finds_work_in_new_markdown_the_index_has_not_seen(tmp_path: Path) -> None:
    root = tmp_path / "r"
    build_root(root)
    run_root(str(root), "reflect_episodes", defaults=ON, opener=open_test_root)
    assert triage(str(root), "reflect_episodes", force=False, defaults=ON, probe=True,
                  opener=open_test_root).status == "idle"
    from tests.fleet_support import user_ref
    from tests.reflect_fixtures import add_episode

    rt = open_test_root(str(root))
    add_episode(rt, user_ref(0), "2026-09-20T10:00:00+00:00", "u_00 adopted a cat",
                "u_00 adopted a cat named Tom.")
    assert triage(str(root), "reflect_episodes", force=False, defaults=ON, probe=True,
                  opener=open_test_root) is None


def test_a_missing_root_fails_alone_with_a_clear_error(tmp_path: Path) -> None:
    result = run_root(str(tmp_path / "gone"), "reflect_episodes")
    assert result.status == "failed" and "no memory root at" in (result.error or "")


def test_root_status_shows_last_and_next_run_and_index_lag(tmp_path: Path) -> None:
    root = tmp_path / "r"
    build_root(root)
    run_root(str(root), "reflect_episodes", defaults=ON, opener=open_test_root)
    doc = root_status(str(root), {"reflect_episodes": {"enabled": True,
                                                       "cron": "0 4 * * *"}}, open_test_root)
    row = next(r for r in doc["strategies"] if r["name"] == "reflect_episodes")
    assert row["enabled"] is True and row["cron"] == "0 4 * * *"
    assert row["next_run"].endswith("04:00:00+00:00")
    assert row["last_run"]["status"] == "ok" and row["last_run"]["trigger"] == "fleet"
    assert doc["index"] == {"files_changed": 0, "files_deleted": 0, "lag_seconds": None}
    assert root_status(str(tmp_path / "gone"))["error"].startswith("no memory root")


def test_a_worker_keeps_one_embedder_per_configuration_and_only_a_few(
        tmp_path: Path, monkeypatch) -> None:
    """Roots with the same [embedding] share one loaded model in a worker; a worker that meets
    many configurations (fleet serve, for days) keeps only the most recently used few."""
    from collections import OrderedDict

    from everos_reflect.fleet import work

    monkeypatch.setattr(work, "_embedders", OrderedDict())

    def root_with(name: str, batch: int) -> str:  # the model loads lazily: nothing loads here
        root = tmp_path / name
        root.mkdir()
        (root / "everos.toml").write_text(
            f'[embedding]\nprovider = "local"\nbatch_size = {batch}\n', "utf-8")
        return str(root)

    def model_of(root: str):
        rt = work.open_root(root)
        try:
            return rt.embedder.inner
        finally:
            rt.close()

    a1, a2, b, c = (root_with("a1", 64), root_with("a2", 64), root_with("b", 32),
                    root_with("c", 16))
    first = model_of(a1)
    assert model_of(a2) is first and first.batch_size == 64  # same configuration: one model
    old_b = model_of(b)
    assert old_b is not first
    assert model_of(a1) is first  # used again: now the most recent
    model_of(c)  # a third configuration: the least recently used (b's) is let go
    assert len(work._embedders) == work.MAX_EMBEDDERS == 2
    assert model_of(a1) is first
    assert {e.batch_size for e in work._embedders.values()} == {64, 16}
    assert model_of(b) is not old_b  # evicted: built afresh when b's configuration returns


def test_a_worker_lends_llm_clients_per_configuration_one_root_at_a_time(
        tmp_path: Path, monkeypatch) -> None:
    """Roots with the same OpenAI-compatible [llm] reuse a worker's client one after another
    (no client built per root), but two roots open at once each get their own (each keeps
    its own max_concurrency, as under trigger); only the most recently used few
    configurations are kept; a root that is only opened (the driver judging it) borrows
    none; the offline extractive LLM is never shared."""
    from collections import OrderedDict

    from everos_reflect.fleet import work
    from everos_reflect.llm.extractive import ExtractiveLLM
    from everos_reflect.llm.openai_llm import OpenAILLM

    monkeypatch.setattr(work, "_llms", OrderedDict())

    def root_with(name: str, llm: str) -> str:  # nothing connects: clients are only built
        root = tmp_path / name
        root.mkdir()
        (root / "everos.toml").write_text(f"[llm]\n{llm}\n", "utf-8")
        return str(root)

    def llm_of(root: str):
        rt = work.open_root(root)
        try:
            return rt.llm
        finally:
            rt.close()

    server = 'provider = "openai"\nbase_url = "http://127.0.0.1:9/v1"\napi_key = "k"\n'
    a1, a2 = root_with("a1", server + 'model = "m1"'), root_with("a2", server + 'model = "m1"')
    b, c = root_with("b", server + 'model = "m2"'), root_with("c", server + 'model = "m3"')
    local = root_with("local", 'provider = "extractive"')
    work.open_root(a1).close()
    assert not work._llms  # opened, never asked for its LLM: no client built
    first = llm_of(a1)
    assert isinstance(first, OpenAILLM) and llm_of(a2) is first
    # two roots of one configuration open at once: two clients, both kept afterwards
    one, two = work.open_root(a1), work.open_root(a2)
    assert one.llm is first and two.llm is not first and isinstance(two.llm, OpenAILLM)
    second = two.llm
    one.close()
    two.close()
    assert {id(x) for x in work._llms[next(iter(work._llms))]} == {id(first), id(second)}
    old_b = llm_of(b)
    assert old_b not in (first, second) and old_b.model == "m2"
    assert llm_of(a1) in (first, second)  # used again: now the most recent
    llm_of(c)  # a third configuration: the least recently used (b's) is let go
    assert len(work._llms) == work.MAX_LLMS == 2
    assert llm_of(a1) in (first, second) and llm_of(b) is not old_b
    off1, off2 = llm_of(local), llm_of(local)
    assert isinstance(off1, ExtractiveLLM) and off1 is not off2
    assert all(isinstance(llm, OpenAILLM) for idle in work._llms.values() for llm in idle)


def test_a_worker_roots_take_turns_for_the_shared_model() -> None:
    """Roots running at once in one worker never call the model side by side: a worker's
    model calls use only the threads of the CPUs Ray gave it."""
    import threading
    import time

    import numpy as np

    from everos_reflect.fleet.work import GatedEmbedder

    class Slow:
        name, dim, threads = "slow", 2, 1
        inside = most = 0
        lock = threading.Lock()

        def embed(self, texts: list[str]) -> np.ndarray:
            with self.lock:
                self.inside += 1
                self.most = max(self.most, self.inside)
            time.sleep(0.02)
            with self.lock:
                self.inside -= 1
            return np.zeros((len(texts), self.dim), dtype=np.float32)

    inner = Slow()
    gated = GatedEmbedder(inner)
    callers = [threading.Thread(target=gated.embed, args=(["x"],)) for _ in range(4)]
    for t in callers:
        t.start()
    for t in callers:
        t.join()
    assert inner.most == 1
    assert (gated.name, gated.dim, gated.threads) == ("slow", 2, 1)  # the rest is the model's
    assert gated.embed(["a", "b"]).shape == (2, 2)


def _backlog(root: Path, max_clusters: int = 100, max_sources: int = 100) -> int:
    """Clusters plus Episodes eligible for a merge, the slow way: user by user."""
    from everos_reflect.clustering.service import ClusterService
    from everos_reflect.strategies.reflect import users_with_clusters

    rt = open_test_root(str(root))
    try:
        clusters = ClusterService(rt)
        chosen = [c for ref in users_with_clusters(rt)
                  for c in clusters.eligible_for_reflection(ref, max_clusters)]
        return len(chosen) + sum(min(c.size, max_sources) for c in chosen)
    finally:
        rt.close()


def test_assess_estimates_the_clusters_and_episodes_a_run_would_merge(tmp_path: Path) -> None:
    from everos_reflect.fleet.work import assess

    small, large = tmp_path / "small", tmp_path / "large"
    build_root(small, users=1)
    build_root(large, users=3)  # three topics of three Episodes per user
    verdicts = {root: assess(str(root), "reflect_episodes", force=False, defaults=ON,
                             probe=True, opener=open_test_root) for root in (small, large)}
    assert verdicts[small].result is None and verdicts[large].result is None
    assert verdicts[small].work == _backlog(small) >= 1 + 2
    assert verdicts[large].work == _backlog(large) > verdicts[small].work
    # the run's own limits bound it: one cluster per user, two Episodes per merge
    capped = {"reflect_episodes": {"enabled": True, "max_clusters_per_run": 1,
                                   "max_sources_per_merge": 2}}
    assert assess(str(large), "reflect_episodes", force=False, defaults=capped, probe=True,
                  opener=open_test_root).work == _backlog(large, 1, 2) == 3 * (1 + 2)
    # without probing the driver does not look inside the root: work unknown
    assert assess(str(large), "reflect_episodes", force=False, defaults=ON, probe=False,
                  opener=open_test_root).work is None
    run_root(str(large), "reflect_episodes", defaults=ON, opener=open_test_root)
    done = assess(str(large), "reflect_episodes", force=False, defaults=ON, probe=True,
                  opener=open_test_root)
    assert done.result is not None and done.result.status == "idle"


def test_largest_first_puts_unknown_work_first_then_the_largest_keeping_ties_in_order() -> None:
    from everos_reflect.fleet.work import largest_first

    assessed = [("a", 5), ("b", 40), ("c", None), ("d", 5), ("e", 12), ("f", None)]
    assert largest_first(assessed) == ["c", "f", "b", "e", "a", "d"]
    assert largest_first([]) == []
