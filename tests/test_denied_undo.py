"""`undo` of a merge whose user has a folder of logs this account may not open refuses, naming
the folder and why, and changes nothing: the folder may hold keys archived toward the
narrative. Listed by a glob, such a folder held no log, in silence, and the undo went on
without it. (Permissions mean nothing to root: the folder is made unopenable by hand.)"""

from __future__ import annotations

import errno
import os
from datetime import date
from pathlib import Path

import pytest

from everos_reflect.errors import MarkdownError
from everos_reflect.runtime import Runtime
from everos_reflect.strategies.undo import undo_merge
from tests.test_undo import REF, merge, pets, rt, snapshot

__all__ = ["rt"]


def _deny(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """``folder`` as a ``chmod 000`` folder looks to an account that is not root."""
    def refused(name: str):  # type: ignore[no-untyped-def]
        real = getattr(os, name)

        def call(path=".", *args, **kwargs):  # type: ignore[no-untyped-def]
            if os.fspath(path) == str(folder):
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
            return real(path, *args, **kwargs)
        return call

    for name in ("listdir", "scandir"):
        monkeypatch.setattr(os, name, refused(name))
    access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: (
        False if os.fspath(path) == str(folder) else access(path, mode, **kw)))


def test_undo_refuses_naming_a_folder_of_logs_it_may_not_open(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    sources = pets(rt, 2)
    narrative = merge(rt, sources, "Andrew had no pets. He adopted Toby.", day=date(2026, 8, 20))
    facts = rt.store.user_dir(REF) / ".atomic_facts"
    before = snapshot(rt)
    _deny(monkeypatch, facts)
    with pytest.raises(MarkdownError) as caught:
        undo_merge(rt, REF, narrative.id)
    assert str(caught.value) == (
        f"{rt.store.rel(facts)}: cannot undo {narrative.id}: Permission denied: this folder "
        "of logs may not be opened; undo again once its permissions let this account in")
    monkeypatch.undo()
    assert snapshot(rt) == before
