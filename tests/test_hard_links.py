"""A daily log hard-linked under a second user is one file, read once.

`users/bob/episodes/episode-….md` made a hard link of alice's (one inode, two names) was read
and indexed twice, as alice's memory and as bob's: bob's searches answered with alice's
entries, as bob's. Like a symlink alias, the first of the names in path order is read and
the other refused, naming the first: in `lint`, `reindex`, the watcher and writes alike.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.errors import MarkdownError
from everos_reflect.index.sync import Indexer
from everos_reflect.index.watcher import Watcher
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from tests.link_fixtures import ALICE, DAY, alice_runtime
from tests.waiting import wait_for

BOB = UserRef.of("bob")
USERS = "default_app/default_project/users"
ALICE_LOG = f"{USERS}/alice/episodes/episode-2026-10-12.md"
BOB_LOG = f"{USERS}/bob/episodes/episode-2026-10-12.md"


@pytest.fixture
def rt(root: Path) -> Iterator[Runtime]:
    yield from alice_runtime(root)


def _hard_link(rt: Runtime) -> Path:
    bob = rt.root / BOB_LOG
    bob.parent.mkdir(parents=True)
    os.link(rt.root / ALICE_LOG, bob)
    return bob


def _indexed_paths(rt: Runtime) -> set[str]:
    return {r[0] for r in rt.db().execute("SELECT path FROM entries")}


def test_lint_refuses_the_second_name_of_a_hard_linked_log_naming_the_first(
        rt: Runtime) -> None:
    from everos_reflect.cli.store_cmds import lint_cmd

    _hard_link(rt)
    result = CliRunner().invoke(lint_cmd, ["--root", str(rt.root), "--json"])
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert report["files_checked"] == 2
    (problem,) = report["problems"]
    assert problem["file"] == BOB_LOG
    assert problem["message"] == (f"not read: it is a hard link to {ALICE_LOG}, another daily "
                                  "log of this root (the same file: read there, not a second "
                                  "time here)")


def test_reindex_indexes_a_hard_linked_log_once_as_the_first_users(rt: Runtime) -> None:
    bob = _hard_link(rt)
    report = Indexer(rt).reindex()
    assert report.entries_upserted == 1
    (problem,) = report.problems[BOB_LOG]
    assert f"hard link to {ALICE_LOG}" in problem
    assert _indexed_paths(rt) == {ALICE_LOG}
    assert rt.store.entries(BOB, Kind.EPISODE) == []
    assert [e.id for e in rt.store.entries(ALICE, Kind.EPISODE)] == ["ep_20261012_0001"]

    before = bob.read_bytes()
    with pytest.raises(MarkdownError, match=f"not writing this file: it is a hard link to "
                                            f"{ALICE_LOG}"):
        rt.store.append(BOB, Kind.EPISODE, {"timestamp": "2026-10-12T10:00:00+00:00"},
                        {"Subject": "Tea", "Content": "Bob drinks tea."}, day=DAY)
    assert bob.read_bytes() == before and os.stat(bob).st_nlink == 2


def test_a_hard_link_to_a_file_outside_the_root_is_read(rt: Runtime, tmp_path: Path) -> None:
    """A backup beside the root (`cp -al`, rsnapshot) links every log once more: no alias."""
    os.link(rt.root / ALICE_LOG, tmp_path / "backup.md")
    assert rt.store.link_problem(rt.root / ALICE_LOG) is None
    assert Indexer(rt).reindex().problems == {}


def test_the_watcher_indexes_a_hard_link_made_while_watching_once(rt: Runtime) -> None:
    with Watcher(rt, debounce=0.05, reconcile_interval=0, optimize_interval=0) as watcher:
        assert wait_for(lambda: watcher.passes > 0)
        assert wait_for(lambda: _indexed_paths(rt) == {ALICE_LOG})
        _hard_link(rt)
        assert wait_for(lambda: rt.db().execute(
            "SELECT 1 FROM files WHERE path = ? AND problems LIKE '%hard link to%'",
            (BOB_LOG,)).fetchone())
        assert _indexed_paths(rt) == {ALICE_LOG}


def _still_refused(rt: Runtime, bob: Path) -> None:
    assert os.path.samestat(os.stat(bob), os.stat(rt.root / ALICE_LOG))
    report = Indexer(rt).reindex()
    assert f"hard link to {ALICE_LOG}" in report.problems[BOB_LOG][0]
    assert not any("/bob/" in path for path in _indexed_paths(rt))
    assert rt.store.entries(BOB, Kind.EPISODE) == []


def test_adding_to_a_hard_linked_log_keeps_the_second_name_the_same_file(rt: Runtime) -> None:
    """The atomic rename gave alice's name a new file; bob's kept the old one, a copy of
    alice's log read from then on as bob's memory."""
    bob = _hard_link(rt)
    rt.store.append(ALICE, Kind.EPISODE, {"timestamp": "2026-10-12T10:00:00+00:00"},
                    {"Subject": "Pets", "Content": "Alice adopted a dog."}, day=DAY)
    _still_refused(rt, bob)
    assert b"Alice adopted a dog." in bob.read_bytes()
    assert [e.id for e in rt.store.entries(ALICE, Kind.EPISODE)] == ["ep_20261012_0001",
                                                                      "ep_20261012_0002"]


def test_archiving_into_hard_linked_logs_keeps_each_second_name_the_same_file(
        rt: Runtime) -> None:
    """Reflection archives into several logs at once (staged writes): each alias follows."""
    later = date(2026, 10, 13)
    rt.store.append(ALICE, Kind.EPISODE, {"timestamp": "2026-10-13T09:00:00+00:00"},
                    {"Subject": "Pets", "Content": "Alice has a dog too."}, day=later)
    merged = rt.store.append(ALICE, Kind.EPISODE, {"timestamp": "2026-10-13T10:00:00+00:00"},
                             {"Subject": "Pets", "Content": "Alice has a cat and a dog."},
                             day=later)
    bob = _hard_link(rt)
    bob_later = rt.root / BOB_LOG.replace("2026-10-12", "2026-10-13")
    os.link(rt.root / ALICE_LOG.replace("2026-10-12", "2026-10-13"), bob_later)
    rt.store.deprecate(ALICE, {"ep_20261012_0001": merged.id, "ep_20261013_0001": merged.id})
    _still_refused(rt, bob)
    assert os.path.samestat(os.stat(bob_later),
                            os.stat(rt.root / ALICE_LOG.replace("2026-10-12", "2026-10-13")))
    assert b"deprecated_entries" in bob.read_bytes()


def test_a_write_whose_hard_linked_alias_cannot_follow_is_refused_changing_nothing(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    """bob's folder refusing new links (read-only, another account's): the write went on,
    bob's name kept the old text as a file of its own, and alice's log was read from then
    on as bob's memory, with only a warning in the log."""
    bob = _hard_link(rt)
    before = (rt.root / ALICE_LOG).read_bytes()
    real_link = os.link

    def link(src: object, dst: object, *args: object, **kwargs: object) -> None:
        if "/bob/" in str(dst):
            raise PermissionError(13, "Permission denied", str(dst))
        real_link(src, dst, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "link", link)
    with pytest.raises(MarkdownError, match=r"bob/episodes/episode-2026-10-12\.md is a hard "
                                            r"link to it that could not be linked"):
        rt.store.append(ALICE, Kind.EPISODE, {"timestamp": "2026-10-12T10:00:00+00:00"},
                        {"Subject": "Pets", "Content": "Alice adopted a dog."}, day=DAY)
    assert (rt.root / ALICE_LOG).read_bytes() == before
    assert os.path.samestat(os.stat(bob), os.stat(rt.root / ALICE_LOG))
    assert sorted(p.name for p in bob.parent.iterdir()) == [bob.name]


def test_a_log_hard_linked_as_another_users_other_day_is_refused_naming_the_first(
        rt: Runtime) -> None:
    """Only the same day's log of another user was looked for: bob's log of the 13th, the
    very file of alice's 12th, was read (every entry of it "does not belong in this file")
    and written to as a file of its own."""
    bob_later = rt.root / BOB_LOG.replace("2026-10-12", "2026-10-13")
    bob_later.parent.mkdir(parents=True)
    os.link(rt.root / ALICE_LOG, bob_later)
    report = Indexer(rt).reindex()
    (problem,) = report.problems[BOB_LOG.replace("2026-10-12", "2026-10-13")]
    assert f"not read: it is a hard link to {ALICE_LOG}, another daily log" in problem
    assert _indexed_paths(rt) == {ALICE_LOG}

    before = bob_later.read_bytes()
    with pytest.raises(MarkdownError, match=f"not writing this file: it is a hard link to "
                                            f"{ALICE_LOG}"):
        rt.store.append(BOB, Kind.EPISODE, {"timestamp": "2026-10-13T10:00:00+00:00"},
                        {"Subject": "Tea", "Content": "Bob drinks tea."},
                        day=date(2026, 10, 13))
    assert bob_later.read_bytes() == before
    rt.store.append(ALICE, Kind.EPISODE, {"timestamp": "2026-10-12T10:00:00+00:00"},
                    {"Subject": "Pets", "Content": "Alice adopted a dog."}, day=DAY)
    assert os.path.samestat(os.stat(bob_later), os.stat(rt.root / ALICE_LOG))


def test_an_episodes_log_hard_linked_as_a_facts_log_is_read_as_the_episodes_log(
        rt: Runtime) -> None:
    """The facts log's name comes first in path order (``.atomic_facts`` < ``episodes``),
    but the file is the episodes log its frontmatter says: the facts name is refused, and
    alice's episode stays searchable."""
    facts = rt.root / f"{USERS}/alice/.atomic_facts/atomic_fact-2026-10-12.md"
    facts.parent.mkdir(parents=True)
    os.link(rt.root / ALICE_LOG, facts)
    report = Indexer(rt).reindex()
    (problem,) = report.problems[rt.store.rel(facts)]
    assert f"not read: it is a hard link to {ALICE_LOG}, another daily log" in problem
    assert ALICE_LOG not in report.problems
    assert [e.id for e in rt.store.entries(ALICE, Kind.EPISODE)] == ["ep_20261012_0001"]
    assert rt.store.entries(ALICE, Kind.ATOMIC_FACT) == []
    assert _indexed_paths(rt) == {ALICE_LOG}
