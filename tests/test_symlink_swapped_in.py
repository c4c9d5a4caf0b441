"""A log swapped for a symlink leading out of the root after its path was checked is not read.

The store and the indexer check a log's path (``link_problem``: a symlink out of the root is
never read), then open it. A person (or a program) replacing the log with a symlink to
another file between the two had that file read as the log: its text indexed, searchable
and merged as the user's memory, and a write went through the link into it. The file
opened is checked once open (its real path, as the kernel names it)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest

from everos_reflect.embedding import HashEmbedder
from everos_reflect.errors import MarkdownError
from everos_reflect.index.sync import Indexer
from everos_reflect.markdown.store import MarkdownStore
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings

ALICE = UserRef.of("alice")
DAY = date(2026, 10, 12)
LEADS_OUT = "it is a symlink leading outside the memory root"


@pytest.fixture
def swapped(root: Path, tmp_path: Path,
            monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Runtime, Path, Path]]:
    """alice's log, indexed, then swapped for a symlink to a log-shaped file outside the root
    just after the path check (which passes: it ran before the swap)."""
    rt = Runtime(root, Settings(), embedder=HashEmbedder(16))
    rt.store.append(ALICE, Kind.EPISODE, {"timestamp": "2026-10-12T09:00:00+00:00",
                                          "parent_type": "memcell"},
                    {"Subject": "Pets", "Content": "Alice has a cat."}, day=DAY)
    log = rt.store.log_path(ALICE, Kind.EPISODE, DAY)
    Indexer(rt).reindex()
    secret = tmp_path / "elsewhere.md"
    secret.write_text(log.read_text("utf-8").replace("Alice has a cat.", "The vault code is 4711."),
                      "utf-8")
    log.unlink()
    log.symlink_to(secret)
    assert rt.store.link_problem(log) == LEADS_OUT
    monkeypatch.setattr(MarkdownStore, "link_problem", lambda self, path: None)
    yield rt, log, secret
    rt.close()


def test_the_store_does_not_read_it(swapped: tuple[Runtime, Path, Path]) -> None:
    rt, log, _ = swapped
    read = rt.store.read(log)
    assert read.entries == [] and read.unread
    assert [d.message for d in read.diagnostics] == [f"not read: {LEADS_OUT}"]


def test_the_indexer_indexes_nothing_of_the_other_file_nor_of_the_log(
        swapped: tuple[Runtime, Path, Path]) -> None:
    rt, log, _ = swapped
    Indexer(rt).sync_path(log)
    rows = [tuple(r) for r in rt.db().execute("SELECT * FROM entries")]
    assert rows == []  # the log is not read: it holds nothing, as a reindex sees it
    (problems,) = rt.db().execute("SELECT problems FROM files").fetchone()
    assert LEADS_OUT in problems


def test_a_write_does_not_go_through_it(swapped: tuple[Runtime, Path, Path]) -> None:
    rt, _, secret = swapped
    before = secret.read_bytes()
    with pytest.raises(MarkdownError, match=f"not writing this file: {LEADS_OUT}"):
        rt.store.append(ALICE, Kind.EPISODE, {"timestamp": "2026-10-12T10:00:00+00:00"},
                        {"Subject": "Tea", "Content": "Alice drinks tea."}, day=DAY)
    assert secret.read_bytes() == before
    assert os.path.islink(rt.store.log_path(ALICE, Kind.EPISODE, DAY))
