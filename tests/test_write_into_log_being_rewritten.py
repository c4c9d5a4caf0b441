"""A write (an add, an archive mark) to a log an editor or a copy is rewriting in place.

``cp backup.md episode-….md``, an editor saving in place: the log is truncated, then written
again. A write of the store that read it in between took the empty log for a ``touch`` and
wrote it anew with its one entry, or appended to a text cut inside an entry; its rename then
put a new file in the log's place, and everything the rewriter wrote after went into the old
file, gone with it: the day's log was lost but for the new entry. A log written this instant
that is empty or ends inside an entry is now waited for until it is whole or stands still.
The rewriter's progress during the wait is played by the patched pause.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest

from everos_reflect.embedding import HashEmbedder
from everos_reflect.markdown import settling
from everos_reflect.markdown.parser import parse_log
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from tests.waiting import scripted_pauses

ALICE = UserRef.of("alice")
DAY = date(2026, 10, 12)


@pytest.fixture
def rt(root: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Runtime]:
    # every log here counts as written this instant, however slowly the test runs
    monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 3600 * 10**9)
    runtime = Runtime(root, Settings(), embedder=HashEmbedder(16))
    for n in range(3):
        runtime.store.append(ALICE, Kind.EPISODE, {"timestamp": f"2026-10-12T0{n}:00:00+00:00"},
                             {"Subject": f"Day part {n}", "Content": f"Alice did thing {n}."},
                             day=DAY)
    yield runtime
    runtime.close()



def _add(rt: Runtime) -> str:
    return rt.store.append(ALICE, Kind.EPISODE, {"timestamp": "2026-10-12T09:00:00+00:00"},
                           {"Subject": "New", "Content": "Added meanwhile."}, day=DAY).id


def _ids(path: Path) -> list[str]:
    return [e.id for e in parse_log(path.read_text(), "log").entries]


@pytest.mark.parametrize("cut_at", ["nothing yet", "inside an entry"])
def test_an_add_to_a_log_being_rewritten_in_place_keeps_the_whole_log(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch, cut_at: str) -> None:
    path = rt.store.log_path(ALICE, Kind.EPISODE, DAY)
    whole = path.read_bytes()
    before = _ids(path)
    cut = 0 if cut_at == "nothing yet" else whole.index(b"Alice did thing 1") + 5
    with path.open("r+b") as fh:  # truncated in place, as an editor saving does
        fh.truncate(cut)

    def rest() -> None:
        with path.open("r+b") as fh:
            fh.seek(cut)
            fh.write(whole[cut:])

    pauses = scripted_pauses(monkeypatch, [rest])

    new = _add(rt)

    assert _ids(path) == [*before, new]
    assert new not in before
    assert pauses


def test_a_log_a_person_left_empty_long_ago_is_written_anew_at_once(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    path = rt.store.log_path(ALICE, Kind.EPISODE, DAY)
    path.write_bytes(b"")
    monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 0)
    pauses = scripted_pauses(monkeypatch, [])

    new = _add(rt)

    assert pauses == []
    assert _ids(path) == [new]


def test_a_log_left_cut_inside_an_entry_is_written_once_it_stands_still(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    """A closing marker lost for real: the wait ends, the add goes through."""
    path = rt.store.log_path(ALICE, Kind.EPISODE, DAY)
    whole = path.read_bytes()
    path.write_bytes(whole[:whole.index(b"Alice did thing 2") + 5])
    pauses = scripted_pauses(monkeypatch, [])

    new = _add(rt)

    assert len(pauses) == 1
    assert new in _ids(path)
