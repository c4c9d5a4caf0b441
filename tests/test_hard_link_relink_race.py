"""A person moving or replacing a hard-linked log's second name while a write re-links it.

A write renames its new text over the log, then makes each other name of the old file in
the root (``users/bob/…`` hard-linked to alice's) a link of the new one. A person's ``mv``
in between used to go wrong two ways: bob's name moved to carol's log kept alice's old text
as a file of its own, read from then on as carol's memory (alice's entries twice); and a
file the person put in place of bob's name was replaced by alice's log, its text lost. The
person's step is played at the exact point of the write, by patching the call before it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.markdown import store as store_module
from everos_reflect.model import Kind
from everos_reflect.runtime import Runtime
from tests.link_fixtures import ALICE, DAY, alice_runtime


@pytest.fixture
def rt(root: Path) -> Iterator[Runtime]:
    yield from alice_runtime(root)


def _alice(rt: Runtime) -> Path:
    return rt.store.log_path(ALICE, Kind.EPISODE, DAY)


def _name_of(rt: Runtime, user: str) -> Path:
    path = _alice(rt).parents[2] / user / "episodes" / _alice(rt).name
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _add(rt: Runtime) -> None:
    rt.store.append(ALICE, Kind.EPISODE, {"timestamp": "2026-10-12T10:00:00+00:00"},
                    {"Subject": "More", "Content": "Later that day."}, day=DAY)


def _before_the_rename(monkeypatch: pytest.MonkeyPatch, step: Any) -> None:
    """``step`` runs just before the write renames its new text over the log."""
    real = store_module._atomic_write

    def racing(target: Path, data: bytes) -> None:
        step()
        real(target, data)

    monkeypatch.setattr(store_module, "_atomic_write", racing)


def test_a_second_name_moved_to_another_user_during_a_write_stays_a_link(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    bob, carol = _name_of(rt, "bob"), _name_of(rt, "carol")
    os.link(_alice(rt), bob)
    _before_the_rename(monkeypatch, lambda: os.rename(bob, carol))

    _add(rt)

    assert os.path.samestat(os.stat(carol), os.stat(_alice(rt)))
    assert b"Later that day." in carol.read_bytes()
    assert f"hard link to {rt.store.rel(_alice(rt))}" in str(rt.store.link_problem(carol))


def test_a_second_name_linked_during_a_write_follows_it(
        rt: Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Also for a log whose only other link is a backup's, outside the root."""
    os.link(_alice(rt), tmp_path / "backup.md")
    carol = _name_of(rt, "carol")
    _before_the_rename(monkeypatch, lambda: os.link(_alice(rt), carol))

    _add(rt)

    assert os.path.samestat(os.stat(carol), os.stat(_alice(rt)))
    assert b"Later that day." not in (tmp_path / "backup.md").read_bytes()


def test_a_file_put_in_place_of_a_second_name_during_its_relink_is_kept(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    bob = _name_of(rt, "bob")
    os.link(_alice(rt), bob)
    notes = "Bob's own notes, typed in place of the link.\n"
    real_rename, real_replace = os.rename, os.replace
    done: list[bool] = []

    def person_moves_notes_in() -> None:
        """``mv notes.txt bob``, once, just before the write moves a file onto or off bob's
        name (whichever way the write re-links it)."""
        if not done:
            done.append(True)
            mine = bob.with_name("notes.txt")
            mine.write_text(notes)
            real_replace(mine, bob)

    def rename(src: Any, dst: Any) -> None:
        if Path(src) == bob:
            person_moves_notes_in()
        real_rename(src, dst)

    def replace(src: Any, dst: Any) -> None:
        if Path(dst) == bob:
            person_moves_notes_in()
        real_replace(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    monkeypatch.setattr(os, "replace", replace)

    _add(rt)

    assert done
    assert bob.read_text() == notes
    assert b"Later that day." in _alice(rt).read_bytes()
    hidden = [p.name for p in bob.parent.iterdir() if p.name.startswith(".")]
    assert hidden == []
