"""Concurrent triggers of Reflection over the API, and the watcher under editor-style file
operations while a Reflection run writes: one run at a time, every caller told what happened,
nothing merged twice, and the index in step with the Markdown at the end."""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path
from typing import Any

from everos_reflect.engine.engine import Engine
from everos_reflect.index.sync import Indexer
from everos_reflect.index.watcher import Watcher
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.llm.base import MergeRequest, MergeResult
from everos_reflect.model import UserRef
from everos_reflect.runtime import Runtime
from tests.api_client import ApiClient
from tests.reflect_fixtures import add_episode, check_invariants, make_runtime, seed_pets

USERS = [UserRef.of("u_ann"), UserRef.of("u_bob")]
TRIGGER = "/api/v1/ome/trigger"


class Gated(ExtractiveLLM):
    """The offline provider, whose merges wait for ``gate`` (``started`` is set at the first)."""

    def __init__(self) -> None:
        super().__init__()
        self.started = threading.Event()
        self.gate = threading.Event()

    def merge(self, req: MergeRequest) -> MergeResult:
        self.started.set()
        assert self.gate.wait(30)
        return super().merge(req)


def enabled_root(root: Path) -> None:
    (root / "ome.toml").write_text("[strategies.reflect_episodes]\nenabled = true\n")


def test_two_api_triggers_make_one_run_and_another_process_is_told_busy(root: Path) -> None:
    enabled_root(root)
    llm = Gated()
    rt = make_runtime(root, llm)
    for user in USERS:
        seed_pets(rt, user)
    Indexer(rt).scan()
    client = ApiClient(rt)
    answers: dict[str, Any] = {}
    first = threading.Thread(target=lambda: answers.setdefault(
        "first", client("POST", TRIGGER, json={"name": "reflect_episodes", "timeout": 60})))
    first.start()
    assert llm.started.wait(30)

    second = client("POST", TRIGGER, json={"name": "reflect_episodes", "timeout": 0})
    other = make_runtime(root, ExtractiveLLM())  # another process: its own engine and lock
    elsewhere = Engine(other).trigger("reflect_episodes", timeout=0)
    llm.gate.set()
    first.join(60)

    assert second.status_code == 200 and second.json()["status"] == "timeout"
    assert second.json()["joined"] is True
    assert elsewhere.status == "busy" and "another process" in (elsewhere.error or "")
    done = answers["first"].json()
    assert done["status"] == "ok" and done["counts"]["merged"] == len(USERS), done
    assert second.json()["run_id"] == done["run_id"]
    assert rt.db().execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1
    statuses = [r[0] for r in rt.db().execute("SELECT status FROM reflection_report")]
    assert statuses == ["ok"] * len(USERS)
    for user in USERS:
        check_invariants(rt, user)
    again = client("POST", TRIGGER, json={"name": "reflect_episodes", "timeout": 60}).json()
    assert again["status"] == "ok" and not again["counts"].get("merged"), again
    other.close()
    rt.close()


def _index_rows(rt: Runtime, user: UserRef) -> dict[str, tuple[Any, ...]]:
    return {r[0]: (r[1], r[2], r[3]) for r in rt.db().execute(
        "SELECT id, deprecated_by, content_hash, path FROM entries WHERE user_id=?",
        (user.user_id,))}


def _markdown_rows(rt: Runtime, user: UserRef) -> dict[str, tuple[Any, ...]]:
    return {e.id: (e.deprecated_by, e.content_hash, rt.store.rel(path))
            for path in rt.store.iter_files(user) for e in rt.store.read(path).entries}


def _hand_edit(path: Path, op: str, rnd: random.Random) -> None:
    """One editor-style operation on a daily log that ends with the log as a person meant it."""
    data = path.read_bytes()
    if op == "atomic save":  # write a temp file, rename it over the log
        tmp = path.with_name(path.name + ".swp-tmp")
        tmp.write_bytes(data.replace(b"tomatoes", b"peppers"))
        os.replace(tmp, path)
    elif op == "backup rename":  # the log renamed away, rewritten, the backup deleted
        backup = path.with_name(path.name + "~")
        os.rename(path, backup)
        path.write_bytes(data)
        backup.unlink()
    elif op == "truncated":  # a half-written save, then the whole
        with path.open("r+b") as fh:
            fh.truncate(len(data) // 2)
        time.sleep(rnd.random() * 0.1)
        path.write_bytes(data)
    elif op == "deleted":
        path.unlink()
        time.sleep(rnd.random() * 0.1)
        path.write_bytes(data)
    elif op == "renamed away and back":
        away = path.with_name("episode-2031-01-01.md")
        os.rename(path, away)
        time.sleep(rnd.random() * 0.1)
        os.rename(away, path)


def test_the_watcher_keeps_the_index_in_step_through_editor_saves_during_a_run(
        root: Path) -> None:
    enabled_root(root)
    rt = make_runtime(root, ExtractiveLLM())
    for user in USERS:
        seed_pets(rt, user)
        for day in range(10, 14):
            add_episode(rt, user, f"2026-10-{day}T10:00:00+00:00", f"Garden {day}",
                        f"Planted tomatoes in bed {day} of the garden.")
    Indexer(rt).scan()
    before = {user: set(_markdown_rows(rt, user)) for user in USERS}
    watching = make_runtime(root, ExtractiveLLM())
    watcher = Watcher(watching, debounce=0.05, reconcile_interval=0, optimize_interval=0,
                      scan_on_start=False)
    watcher.start()
    try:
        running = make_runtime(root, ExtractiveLLM())
        outcome: dict[str, Any] = {}
        run = threading.Thread(target=lambda: outcome.setdefault(
            "run", Engine(running).trigger("reflect_episodes", timeout=None)))
        run.start()
        rnd = random.Random(12)
        ops = ["atomic save", "backup rename", "truncated", "deleted", "renamed away and back"]
        for _ in range(25):
            user = rnd.choice(USERS)
            logs = sorted(rt.store.iter_files(user))
            _hand_edit(rnd.choice(logs), rnd.choice(ops), rnd)
            time.sleep(rnd.random() * 0.03)
        run.join(120)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(
                _index_rows(rt, u) != _markdown_rows(rt, u) for u in USERS):
            time.sleep(0.1)
    finally:
        watcher.stop()
    assert outcome["run"].status in {"ok", "partial"}, outcome  # stale clusters are retried
    for user in USERS:
        assert _index_rows(rt, user) == _markdown_rows(rt, user)  # by events alone
        assert before[user] <= set(_markdown_rows(rt, user))  # no entry lost
    running.close()
    watching.close()
    rt.close()
