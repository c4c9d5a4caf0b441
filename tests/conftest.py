"""Shared fixtures: every test gets its own empty memory root and a HOME under tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest


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
