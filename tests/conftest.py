"""Shared fixtures: every test gets its own empty memory root and a HOME under tmp_path."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.llm.base import ScriptedLLM
from everos_reflect.markdown import settling
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from tests.api_client import ApiClient


@pytest.fixture(scope="session", autouse=True)
def ray_scratch() -> Iterator[None]:
    """Every local Ray a fleet test starts (here or in a ``fleet`` child process) keeps a
    session folder of logs and sockets; under the default ``/tmp/ray`` they piled up, four
    per suite run. Ray reads ``RAY_TMPDIR`` for its folder: one per worker, removed after."""
    scratch = tempfile.mkdtemp(prefix="everos-ray-")
    before = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = scratch
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = before
        shutil.rmtree(scratch, ignore_errors=True)


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty memory root (it holds ``.index/``, as any root does once opened, so every
    command accepts it); HOME and EVEROS_ROOT point into tmp so nothing leaks out."""
    home = tmp_path / "home"
    home.mkdir()
    memory = tmp_path / "root"
    (memory / ".index").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("EVEROS_ROOT", str(memory))
    return memory


@pytest.fixture
def no_everos_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No ``EVEROS_*`` variable of the caller's shell and a HOME under tmp: a CLI test that
    names its root (or none) sees only what it set up."""
    for name in list(os.environ):
        if name.startswith("EVEROS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


@pytest.fixture
def settle_at_once(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """``settling.pause`` returns at once; the waits asked for are listed. Only for tests in
    which no other thread or process writes the logs: a reopened store takes a log written
    under 2 s ago (by a run the test crashed, "another program" to it) as maybe still being
    written, pauses 0.2 s and finds it unchanged. Here it finds it unchanged at once: the
    same path without the sleep, ~30 s of each crash-recovery test file."""
    waits: list[float] = []
    monkeypatch.setattr(settling, "pause", waits.append)
    return waits


@pytest.fixture
def rt(root: Path) -> Iterator[Runtime]:
    """A runtime on ``root`` with a small hash embedder (the sync and watcher tests; a module
    that needs another runtime defines its own ``rt``, which wins there)."""
    runtime = Runtime(root, Settings(), embedder=HashEmbedder(16))
    yield runtime
    runtime.close()


@pytest.fixture
def scripted(root: Path) -> Iterator[tuple[Runtime, ScriptedLLM]]:
    """A runtime on ``root`` whose LLM replays queued replies (the derived tiers' tests)."""
    llm = ScriptedLLM()
    rt = Runtime(root, embedder=HashEmbedder(64), llm=llm)
    yield rt, llm
    rt.close()


@pytest.fixture
def call(root: Path) -> Iterator[ApiClient]:
    """The API in-process on the test's root (hash embedder): ``call(method, url, ...)``. A
    module that needs another client defines its own ``call``, which wins there."""
    runtime = Runtime(root, embedder=HashEmbedder(64))
    yield ApiClient(runtime)
    runtime.close()
