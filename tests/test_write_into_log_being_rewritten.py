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

import os
import time
from collections.abc import Callable, Iterator
from datetime import date
from pathlib import Path
from typing import BinaryIO

import pytest

from everos_reflect.embedding import HashEmbedder
from everos_reflect.errors import MarkdownError
from everos_reflect.markdown import settling
from everos_reflect.markdown import store as store_mod
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


def _rewriting_in_place(path: Path, cut: int) -> Callable[[], None]:
    """A rewriter (``cp backup.md`` over the log, an editor saving in place) that has
    truncated the log to its first ``cut`` bytes through the file it holds open; the returned
    step writes the rest into that same file, wherever the name points by then."""
    whole = path.read_bytes()
    fh = path.open("r+b")
    fh.truncate(cut)
    fh.flush()

    def rest() -> None:
        fh.seek(cut)
        fh.write(whole[cut:])
        fh.close()

    return rest


@pytest.mark.parametrize("write", ["add", "archive mark", "undo of an archive mark"])
def test_a_write_to_a_log_being_rewritten_cut_at_an_entry_boundary_keeps_the_whole_log(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch, write: str) -> None:
    """Cut exactly before an entry, the log looked whole: the write put back what it read
    and its own change, and the rest the rewriter wrote went into the replaced file."""
    path = rt.store.log_path(ALICE, Kind.EPISODE, DAY)
    before = _ids(path)
    rt.store.deprecate(ALICE, {before[0]: before[1]})
    whole = path.read_bytes()
    rest = _rewriting_in_place(path, whole.index(f"<!-- entry:{before[2]} -->".encode()))
    steps = [rest]
    pauses = scripted_pauses(monkeypatch, steps)

    if write == "add":
        after = [*before, _add(rt)]
    elif write == "archive mark":
        rt.store.deprecate(ALICE, {before[2]: before[1]})
        after = before
    else:
        rt.store.undeprecate(ALICE, [before[0]])
        after = before
    for step in steps:  # the rewriter finishes, whether or not the write waited for it
        step()

    assert _ids(path) == after
    log = parse_log(path.read_text(), "log")
    assert log.deprecated_entries.get(before[2]) == (before[1] if write == "archive mark" else None)
    assert pauses


def test_a_log_this_store_wrote_itself_is_written_again_without_a_wait(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its own writes replace the file whole (a temp file renamed over it): nobody is
    writing into the file it replaced, so adds in a row never wait."""
    pauses = scripted_pauses(monkeypatch, [])

    first, second = _add(rt), _add(rt)

    assert pauses == []
    path = rt.store.log_path(ALICE, Kind.EPISODE, DAY)
    assert _ids(path)[-2:] == [first, second]


def test_a_write_to_a_log_a_person_just_saved_waits_one_settle_pause(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    path = rt.store.log_path(ALICE, Kind.EPISODE, DAY)
    path.write_text(path.read_text().replace("Alice did thing 1.", "Alice did thing one."))
    pauses = scripted_pauses(monkeypatch, [])

    new = _add(rt)

    assert pauses == [settling.SETTLE_SECONDS]
    assert "Alice did thing one." in path.read_text() and new in _ids(path)


def test_a_write_to_a_log_that_never_stands_still_is_refused_and_loses_nothing(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tool writing into the log all along: the write says so instead of replacing the
    file it is writing into."""
    path = rt.store.log_path(ALICE, Kind.EPISODE, DAY)
    fh = path.open("ab")
    fh.write(b"\n")
    fh.flush()

    def more() -> None:
        fh.write(b"\n")
        fh.flush()

    scripted_pauses(monkeypatch, [more] * 100)

    with pytest.raises(MarkdownError, match="keeps changing"):
        _add(rt)
    fh.close()
    assert len(_ids(path)) == 3


def test_a_log_stamped_in_the_future_is_waited_for_once_not_at_every_write(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    """A network share's clock ahead of this one, ``touch -d tomorrow``: the log's age is
    unknown, so the first write waits for it to stand still; the file it then renames into
    place is its own, and the next write goes through at once."""
    monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 2_000_000_000)
    path = rt.store.log_path(ALICE, Kind.EPISODE, DAY)
    tomorrow = time.time_ns() + 86_400 * 10**9
    os.utime(path, ns=(tomorrow, tomorrow))
    pauses = scripted_pauses(monkeypatch, [])

    first = _add(rt)
    second = _add(rt)

    assert pauses == [settling.SETTLE_SECONDS]
    assert _ids(path)[-2:] == [first, second]


def test_the_first_write_to_a_log_a_person_just_made_waits_one_settle_pause(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    """A log copied in by hand, never written here (no lock file yet): the check made before
    the lock is taken and the write under it wait once between them, not once each."""
    path = rt.store.log_path(ALICE, Kind.EPISODE, date(2026, 10, 13))
    path.write_bytes(rt.store.log_path(ALICE, Kind.EPISODE, DAY).read_bytes()
                     .replace(b"20261012", b"20261013").replace(b"2026-10-12", b"2026-10-13"))
    pauses = scripted_pauses(monkeypatch, [])

    new = rt.store.append(ALICE, Kind.EPISODE, {"timestamp": "2026-10-13T09:00:00+00:00"},
                          {"Subject": "New", "Content": "Added."}, day=date(2026, 10, 13)).id

    assert pauses == [settling.SETTLE_SECONDS]
    assert _ids(path)[-1] == new and len(_ids(path)) == 4


def test_an_add_to_a_log_being_written_anew_cut_inside_its_frontmatter_waits_for_it(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first write to a log copied in by hand, caught while the copy is in its
    frontmatter: refused as a log with broken frontmatter before the wait was made."""
    day = date(2026, 10, 13)
    path = rt.store.log_path(ALICE, Kind.EPISODE, day)
    whole = (rt.store.log_path(ALICE, Kind.EPISODE, DAY).read_bytes()
             .replace(b"20261012", b"20261013").replace(b"2026-10-12", b"2026-10-13"))
    path.write_bytes(whole[:12])  # "---\nschema_v": the frontmatter is not closed yet
    pauses = scripted_pauses(monkeypatch, [lambda: path.write_bytes(whole)])

    new = rt.store.append(ALICE, Kind.EPISODE, {"timestamp": "2026-10-13T09:00:00+00:00"},
                          {"Subject": "New", "Content": "Added."}, day=day).id

    assert _ids(path)[-1] == new and len(_ids(path)) == 4
    assert len(pauses) == 2  # it moved in the first wait, stood still in the second


def test_a_write_whose_read_is_cut_short_by_a_truncation_keeps_the_whole_log(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    """Truncated between the write's stats of the log and its read: the stats said the log
    this store had just written, so the empty bytes read were taken for the log (a
    ``touch``), written anew with the one new entry, and the copy's bytes went into the
    replaced file."""
    path = rt.store.log_path(ALICE, Kind.EPISODE, DAY)
    whole = path.read_bytes()
    before = _ids(path)
    real = store_mod.read_at_most
    cuts = [path]

    def read_at_most(fh: BinaryIO, limit: int) -> bytes:
        if cuts:
            os.truncate(cuts.pop(), 0)  # the copy begins between the stats and the read
        return real(fh, limit)

    monkeypatch.setattr(store_mod, "read_at_most", read_at_most)
    pauses = scripted_pauses(monkeypatch, [lambda: path.write_bytes(whole)])  # copy done

    new = _add(rt)

    assert _ids(path) == [*before, new]
    assert pauses
