"""A hard-linked log's second name that cannot follow a write (its folder refusing links)
is said in the OS's words (:func:`~everos_reflect.fileio.os_reason`), as every other file
error is: one raised with an errno alone (a network file system's ``OSError(errno.EIO)``)
was said as ``5``, one raised with nothing (``TimeoutError()``) as nothing at all."""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from everos_reflect.errors import MarkdownError
from everos_reflect.model import Kind
from everos_reflect.runtime import Runtime
from tests.link_fixtures import ALICE, DAY, alice_runtime

CAUSES = [(OSError(errno.EIO), "Input/output error"), (TimeoutError(), "timeout error")]


@pytest.fixture
def rt(root: Path) -> Iterator[Runtime]:
    yield from alice_runtime(root)


def _bob(rt: Runtime) -> Path:
    alice = rt.store.log_path(ALICE, Kind.EPISODE, DAY)
    bob = alice.parents[2] / "bob" / "episodes" / alice.name
    bob.parent.mkdir(parents=True)
    os.link(alice, bob)
    return bob


def _add(rt: Runtime) -> None:
    rt.store.append(ALICE, Kind.EPISODE, {"timestamp": "2026-10-12T10:00:00+00:00"},
                    {"Subject": "More", "Content": "Later that day."}, day=DAY)


def _refused(monkeypatch: pytest.MonkeyPatch, refused: Callable[[Path], bool],
             exc: OSError) -> None:
    """``os.link`` refused with ``exc`` for each new name ``refused`` says."""
    real = os.link

    def link(src: object, dst: object, *args: object, **kwargs: object) -> None:
        if refused(Path(str(dst))):
            raise exc
        real(src, dst, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "link", link)


@pytest.mark.parametrize(("exc", "reason"), CAUSES, ids=["errno-alone", "nothing-said"])
def test_a_write_refused_for_a_second_name_says_why_in_words(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch, exc: OSError, reason: str) -> None:
    bob = _bob(rt)
    _refused(monkeypatch, lambda name: name.parent == bob.parent, exc)
    with pytest.raises(MarkdownError) as raised:
        _add(rt)
    assert f"could not be linked to the new text ({reason}), so it would keep" in str(
        raised.value)


@pytest.mark.parametrize(("exc", "reason"), CAUSES, ids=["errno-alone", "nothing-said"])
def test_a_second_name_not_relinked_nor_put_back_says_why_in_words(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        exc: OSError, reason: str) -> None:
    bob = _bob(rt)
    _refused(monkeypatch, lambda name: name == bob, exc)  # the check's probe is let in
    _add(rt)
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(f"could not be put back after a write re-linked it ({reason})" in m
               for m in said), said
    assert any("so it now holds a copy of the old text" in m and f"({reason})" in m
               for m in said), said
