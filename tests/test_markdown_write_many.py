"""Writes that span several daily logs (``append_to_logs``, a ``deprecate`` over several files):
each file gets the same atomic, checked write as alone, in the same order; only the fsyncs of
their temp files overlap (``staged_writes``)."""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.errors import MarkdownError
from everos_reflect.markdown import store as store_module
from everos_reflect.markdown import writer
from everos_reflect.markdown.store import MarkdownStore
from everos_reflect.model import Kind, UserRef

REF = UserRef.of("u_andrew")
BETTY = UserRef.of("u_betty")
TS = datetime(2026, 10, 11, 2, tzinfo=UTC)
DAYS = [date(2026, 10, d) for d in (1, 2, 3)]


class Crash(BaseException):
    """The process dies here."""


def episode(subject: str) -> tuple[dict[str, object], dict[str, str]]:
    return ({"timestamp": TS, "parent_type": "memcell", "parent_id": "mc_1"},
            {"Subject": subject, "Content": f"{subject} happened."})


def seeded(root: Path) -> tuple[MarkdownStore, list[str]]:
    """One episode a day in three daily logs, plus a narrative to archive them toward."""
    store = MarkdownStore(root)
    ids = [store.append(REF, Kind.EPISODE, *episode(f"day {d.day}"), day=d).id for d in DAYS]
    return store, ids


def temp_files(root: Path) -> list[Path]:
    return [p for p in root.rglob(".*.tmp") if ".index" not in p.parts]


def test_append_to_logs_writes_what_append_many_writes_one_log_at_a_time(
    tmp_path: Path
) -> None:
    batches = [(REF, Kind.EPISODE, DAYS[0], [episode("a"), episode("b")]),
               (BETTY, Kind.EPISODE, DAYS[0], [episode("c")]),
               (REF, Kind.EPISODE, DAYS[1], [])]  # nothing to append: the file is not made
    together, alone = MarkdownStore(tmp_path / "together"), MarkdownStore(tmp_path / "alone")
    made = together.append_to_logs(batches)
    one_by_one = [alone.append_many(ref, kind, items, day=day)
                  for ref, kind, day, items in batches]

    assert [[e.id for e in es] for es in made] == [["ep_20261001_0001", "ep_20261001_0002"],
                                                   ["ep_20261001_0001"], []]
    assert [[e.raw for e in es] for es in made] == [[e.raw for e in es] for es in one_by_one]
    files = sorted(p.relative_to(tmp_path / "alone") for p in (tmp_path / "alone").rglob("*.md"))
    assert files == sorted(p.relative_to(tmp_path / "together")
                           for p in (tmp_path / "together").rglob("*.md"))
    assert len(files) == 2
    for rel in files:
        assert (tmp_path / "together" / rel).read_bytes() == (tmp_path / "alone" / rel).read_bytes()
    assert temp_files(tmp_path) == []


def test_each_file_of_a_multi_file_write_is_fsynced_before_its_rename(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, ids = seeded(root)
    narrative = store.append(REF, Kind.EPISODE, *episode("all"), day=DAYS[2]).id
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        events.append(("rename", str(src)))
        real_replace(src, dst)

    monkeypatch.setattr(store_module.os, "fsync", fsync)
    monkeypatch.setattr(store_module.os, "replace", replace)
    store.deprecate(REF, {i: narrative for i in ids})

    renamed = [src for what, src in events if what == "rename"]
    # one write per file, in the order of the mapping
    assert [Path(src).name.split(".")[1] for src in renamed] == [
        store.path_for_id(REF, i).name.rsplit(".", 1)[0] for i in ids]
    for src in renamed:  # its temp file was fsynced, before it was renamed
        assert events.index(("fsync", src)) < events.index(("rename", src))
    assert all(store.get(REF, i).deprecated_by == narrative for i in ids)
    assert temp_files(root) == []


def test_a_crash_at_one_rename_leaves_the_files_after_it_untouched_and_no_temp_files(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, ids = seeded(root)
    narrative = store.append(REF, Kind.EPISODE, *episode("all"), day=DAYS[2]).id
    paths = [store.path_for_id(REF, i) for i in ids]
    before = [p.read_bytes() for p in paths]
    real_replace = os.replace
    calls = {"n": 0}

    def dying_replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise Crash("at the second rename")
        real_replace(src, dst)

    monkeypatch.setattr(store_module.os, "replace", dying_replace)
    with pytest.raises(Crash):
        store.deprecate(REF, {i: narrative for i in ids})

    assert store.get(REF, ids[0]).deprecated_by == narrative
    assert [p.read_bytes() for p in paths[1:]] == before[1:]
    assert temp_files(root) == []


def test_a_file_edited_by_hand_after_its_write_was_planned_gets_the_edit_redone_on_its_text(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, ids = seeded(root)
    narrative = store.append(REF, Kind.EPISODE, *episode("all"), day=DAYS[2]).id
    middle = store.path_for_id(REF, ids[1])
    real_staged = store_module.staged_writes

    def staged_then_edited(writes: dict[Path, bytes]) -> object:
        # a person saves a file after the daemon planned its new text and staged it
        middle.write_text(middle.read_text("utf-8").replace("day 2 happened.",
                                                            "day 2 happened, twice."), "utf-8")
        return real_staged(writes)

    monkeypatch.setattr(store_module, "staged_writes", staged_then_edited)
    store.deprecate(REF, {i: narrative for i in ids})

    assert store.get(REF, ids[1]).content == "day 2 happened, twice."
    assert all(store.get(REF, i).deprecated_by == narrative for i in ids)
    assert temp_files(root) == []


def test_an_edit_that_fails_on_one_file_leaves_every_file_as_it_was(root: Path) -> None:
    store, ids = seeded(root)
    narrative = store.append(REF, Kind.EPISODE, *episode("all"), day=DAYS[2]).id
    paths = [store.path_for_id(REF, i) for i in ids]
    last = paths[-1]  # a duplicate id: archiving into it is refused
    text = last.read_text("utf-8")
    block = text[text.index("<!-- entry:"):]
    last.write_text(text + block, "utf-8")
    before = [p.read_bytes() for p in paths]

    with pytest.raises(MarkdownError, match="duplicate entry id"):
        store.deprecate(REF, {i: narrative for i in ids})

    assert [p.read_bytes() for p in paths] == before
    assert temp_files(root) == []


def test_a_staged_temp_file_is_used_only_for_the_very_bytes_it_holds(tmp_path: Path) -> None:
    a, b = tmp_path / "a.md", tmp_path / "b.md"
    with store_module.staged_writes({a: b"staged a", b: b"staged b"}):
        assert len(temp_files(tmp_path)) == 2
        store_module._atomic_write(a, b"staged a")
        store_module._atomic_write(b, b"something else")
        assert temp_files(tmp_path) == []
    assert a.read_bytes() == b"staged a" and b.read_bytes() == b"something else"
    with store_module.staged_writes({a: b"never written", b: b"nor this"}):
        pass
    assert temp_files(tmp_path) == [] and a.read_bytes() == b"staged a"


def _text_handled_by_append_many(root: Path, count: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """Characters of text handed to the Markdown helpers (every public function of ``writer``,
    and the parser functions the store calls) while ``append_many`` writes ``count`` entries
    to a new log: a measure of work that does not depend on the machine's speed."""
    handled = [0]

    def counting(fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            handled[0] += sum(len(a) for a in [*args, *kwargs.values()] if isinstance(a, str))
            return fn(*args, **kwargs)
        return wrapper

    with monkeypatch.context() as patch:
        for name, fn in vars(writer).items():
            if (inspect.isfunction(fn) and not name.startswith("_")
                    and fn.__module__ == writer.__name__):
                patch.setattr(writer, name, counting(fn))
        for name in ("parse_log", "header_text", "next_seq"):
            patch.setattr(store_module, name, counting(getattr(store_module, name)))
        store = MarkdownStore(root / str(count))
        made = store.append_many(REF, Kind.EPISODE, [episode(f"note {n}") for n in range(count)],
                                 day=DAYS[0])
    assert [e.id for e in made][-1] == f"ep_20261001_{count:04d}"
    assert [e.subject for e in store.entries(REF, Kind.EPISODE)] == [
        f"note {n}" for n in range(count)]
    return handled[0]


def test_append_many_handles_text_in_proportion_to_the_entries_not_their_square(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 30,000 entries took 89 s: each entry re-copied (and re-counted the lines of) the whole
    # log written so far. Doubling the entries must about double the work, not quadruple it.
    small = _text_handled_by_append_many(root, 300, monkeypatch)
    large = _text_handled_by_append_many(root, 600, monkeypatch)
    assert large < 2.3 * small, (small, large)


def test_a_batch_entry_that_would_not_read_back_is_named_and_nothing_is_written(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _ = seeded(root)
    path = store.log_path(REF, Kind.EPISODE, DAYS[0])
    before = path.read_bytes()
    real_render = writer.render_entry

    def unclosed_second(entry_id: str, meta: Any, sections: Any) -> str:
        block = real_render(entry_id, meta, sections)
        return block.replace(f"<!-- /entry:{entry_id} -->", "") if entry_id.endswith("3") \
            else block

    monkeypatch.setattr(writer, "render_entry", unclosed_second)
    with pytest.raises(MarkdownError, match="refusing to write ep_20261001_0003"):
        store.append_many(REF, Kind.EPISODE, [episode("b"), episode("c"), episode("d")],
                          day=DAYS[0])
    assert path.read_bytes() == before
