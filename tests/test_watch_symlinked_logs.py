"""A daily log that is a symlink to a file elsewhere in the root: an edit of that file is
indexed at once, not at the next reconcile scan.

The edit raised events for the file the link leads to, never for the link: nothing but the
reconcile scan (60 s by default) saw it. A write through the link by the store (an `add`)
goes to the target too, so even the daemon's own appends waited for the scan. A link leading
out of the root stays unread, as before, and nothing outside the root is watched.
"""

from __future__ import annotations

import time
from datetime import date
from pathlib import Path

import pytest

from everos_reflect.index.watcher import FsEvent, Watcher, link_targets, linked_folders
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from tests.sync_fixtures import indexed_ids
from tests.waiting import wait_for

REF = UserRef.of("u_andrew")
DAY = date(2026, 10, 12)
ENTRY = """<!-- entry:{id} -->
---
owner_id: u_andrew
timestamp: 2026-10-12T{hour}:00:00+00:00
parent_type: memcell
---
## Subject
Pets

## Content
{content}
<!-- /entry:{id} -->
"""
HEAD = """---
type: episode_daily
schema_version: 1
user_id: u_andrew
date: '2026-10-12'
---
"""


def _entry(seq: int, content: str) -> str:
    return ENTRY.format(id=f"ep_20261012_{seq:04d}", hour=f"{9 + seq:02d}", content=content)


def _wake_and_wait(watcher: Watcher, wake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Write a file inside the root and wait until the watcher has synced its event: events
    of an edit made before it, had there been any, were synced by then too. (Counting two
    more passes was a race: a loop slow to wake finds the event settled and takes it in one.)"""
    synced: list[str] = []
    sync = watcher._sync_events

    def spy(events: list[FsEvent]) -> None:
        sync(events)
        synced.extend(event.path for event in events)

    monkeypatch.setattr(watcher, "_sync_events", spy)
    wake.write_text("")
    assert wait_for(lambda: str(wake) in synced)


def _link_log(rt: Runtime, target: Path) -> Path:
    """The user's episode log of DAY as a symlink to ``target`` (holding one entry)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(HEAD + _entry(1, "Andrew has a dog named Toby."))
    log = rt.store.log_path(REF, Kind.EPISODE, DAY)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.symlink_to(target)
    return log


@pytest.mark.parametrize("where", [".shared/andrew.md", "notes/andrew-episodes.md"],
                         ids=["unwatched-hidden-folder", "watched-folder"])
def test_an_edit_of_a_symlinked_logs_target_is_indexed_at_once(rt: Runtime, where: str) -> None:
    target = rt.root / where
    log = _link_log(rt, target)
    with Watcher(rt, debounce=0.05, reconcile_interval=0, optimize_interval=0) as watcher:
        assert wait_for(lambda: watcher.passes > 0)  # the first scan, and what it found
        assert indexed_ids(rt) == {"ep_20261012_0001"}

        with target.open("a") as fh:  # an editor writing the file in place
            fh.write(_entry(2, "Andrew adopted a second dog named Buddy."))
        assert wait_for(lambda: "ep_20261012_0002" in indexed_ids(rt))

        added = rt.store.append(REF, Kind.EPISODE, {"timestamp": "2026-10-12T15:00:00+00:00",
                                                    "parent_type": "memcell"},
                                {"Subject": "Pets", "Content": "Buddy likes the beach."},
                                day=DAY)  # written through the link: renamed over the target
        assert wait_for(lambda: added.id in indexed_ids(rt))
    assert log.is_symlink() and "Buddy likes the beach." in target.read_text()


def test_a_link_made_while_watching_is_followed_at_once(rt: Runtime) -> None:
    target = rt.root / ".shared" / "andrew.md"
    with Watcher(rt, debounce=0.05, reconcile_interval=0, optimize_interval=0):
        _link_log(rt, target)
        assert wait_for(lambda: indexed_ids(rt) == {"ep_20261012_0001"})
        time.sleep(0.5)  # the events of the new folders are settled and synced

        with target.open("a") as fh:
            fh.write(_entry(2, "Andrew adopted a second dog named Buddy."))
        assert wait_for(lambda: "ep_20261012_0002" in indexed_ids(rt))


def test_a_link_leading_out_of_the_root_is_not_read_nor_its_target_watched(
        rt: Runtime, tmp_path_factory: pytest.TempPathFactory,
        monkeypatch: pytest.MonkeyPatch) -> None:
    outside = tmp_path_factory.mktemp("outside") / "andrew.md"
    _link_log(rt, outside)
    wake = rt.root / "default_app" / "wake.txt"
    with Watcher(rt, debounce=0.05, reconcile_interval=0, optimize_interval=0) as watcher:
        assert wait_for(lambda: watcher.passes > 0)
        with outside.open("a") as fh:
            fh.write(_entry(2, "Andrew adopted a second dog named Buddy."))
        _wake_and_wait(watcher, wake, monkeypatch)
        assert indexed_ids(rt) == set()
        assert all(rt.root in (p, *p.parents) for p in watcher.watched_targets)


def test_link_targets_keep_links_leading_inside_the_root_but_not_into_the_index(
        tmp_path: Path) -> None:
    root = tmp_path / "root"
    logs = root / "a/p/users/u/episodes"
    logs.mkdir(parents=True)
    (root / ".index").mkdir()
    (root / "shared.md").write_text("")
    (root / ".index" / "x.md").write_text("")
    (tmp_path / "away.md").write_text("")
    inside, twice, index, away = (logs / f"episode-2026-10-1{i}.md" for i in range(4))
    inside.symlink_to(root / "shared.md")
    twice.symlink_to(inside)  # a chain: the file at its end
    index.symlink_to(root / ".index" / "x.md")
    away.symlink_to(tmp_path / "away.md")
    assert link_targets([inside, twice, index, away], root) == {
        root / "shared.md": {inside, twice}}


# --- folders on a log's path that are symlinks ------------------------------------------------


def _append(rt: Runtime, content: str, day: date = DAY) -> str:
    return rt.store.append(REF, Kind.EPISODE, {"timestamp": f"{day}T10:00:00+00:00",
                                               "parent_type": "memcell"},
                           {"Subject": "Pets", "Content": content}, day=day).id


def _link_folder(rt: Runtime, link: Path, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target, target_is_directory=True)


USERS = Path("default_app/default_project/users")


@pytest.mark.parametrize(("link", "target"), [
    (USERS / "u_andrew", ".people/u_andrew"),  # into a hidden folder, watched by nobody
    (USERS / "u_andrew", "people/u_andrew"),  # into a watched folder, as another path
    (Path("default_app"), ".apps/default_app"),  # the app folder itself
    (USERS / "u_andrew" / "episodes", ".people/andrew-episodes"),  # a kind's folder
], ids=["user-to-hidden", "user-to-watched", "app", "kind-folder"])
def test_a_log_written_through_a_symlinked_folder_is_indexed_at_once(
        rt: Runtime, link: Path, target: str) -> None:
    """Its events name the folder the link leads to, never the link: the new log and every
    later edit waited for the reconcile scan (60 s by default), or a restart."""
    if link == USERS / "u_andrew" / "episodes":
        (rt.root / USERS / "u_andrew").mkdir(parents=True)
    _link_folder(rt, rt.root / link, rt.root / target)
    first = _append(rt, "Andrew has a dog named Toby.", date(2026, 10, 11))
    with Watcher(rt, debounce=0.05, reconcile_interval=0, optimize_interval=0) as watcher:
        assert wait_for(lambda: watcher.passes > 0)
        assert wait_for(lambda: indexed_ids(rt) == {first})

        added = _append(rt, "Andrew adopted a second dog named Buddy.")  # a new day's log
        assert wait_for(lambda: added in indexed_ids(rt))
        log = rt.store.log_path(REF, Kind.EPISODE, DAY)
        with log.open("a") as fh:  # an editor appending to it in place
            fh.write(_entry(2, "Buddy likes the beach."))
        assert wait_for(lambda: "ep_20261012_0002" in indexed_ids(rt))
        assert all(rt.root in (p, *p.parents) for p in watcher.watched_targets)


def test_a_folder_link_made_while_watching_is_followed_at_once(rt: Runtime) -> None:
    target = rt.root / ".people" / "u_andrew"
    target.mkdir(parents=True)
    (rt.root / USERS).mkdir(parents=True)
    with Watcher(rt, debounce=0.05, reconcile_interval=0, optimize_interval=0) as watcher:
        assert wait_for(lambda: watcher.passes > 0)
        _link_folder(rt, rt.root / USERS / "u_andrew", target)
        assert wait_for(lambda: watcher.watched_targets == [target])
        added = _append(rt, "Andrew adopted a second dog named Buddy.")
        assert wait_for(lambda: added in indexed_ids(rt))


def test_a_folder_link_removed_while_watching_takes_its_logs_out_of_the_index_at_once(
        rt: Runtime) -> None:
    link = rt.root / USERS / "u_andrew"
    _link_folder(rt, link, rt.root / ".people" / "u_andrew")
    first = _append(rt, "Andrew has a dog named Toby.")
    with Watcher(rt, debounce=0.05, reconcile_interval=0, optimize_interval=0) as watcher:
        assert wait_for(lambda: indexed_ids(rt) == {first})
        assert wait_for(lambda: watcher.watched_targets == [rt.root / ".people" / "u_andrew"])
        link.unlink()  # the logs it led to are no longer under the root's layout
        assert wait_for(lambda: indexed_ids(rt) == set())
        # the scan that dropped them follows the links anew once it has synced
        assert wait_for(lambda: watcher.watched_targets == [])


def test_a_folder_link_leading_out_of_the_root_is_neither_read_nor_watched(
        rt: Runtime, tmp_path_factory: pytest.TempPathFactory,
        monkeypatch: pytest.MonkeyPatch) -> None:
    outside = tmp_path_factory.mktemp("outside") / "u_andrew"
    _link_folder(rt, rt.root / USERS / "u_andrew", outside)
    (outside / "episodes").mkdir()
    (outside / "episodes" / "episode-2026-10-12.md").write_text(
        HEAD + _entry(1, "Andrew has a dog named Toby."))
    with Watcher(rt, debounce=0.05, reconcile_interval=0, optimize_interval=0) as watcher:
        assert wait_for(lambda: watcher.passes > 0)
        with (outside / "episodes" / "episode-2026-10-12.md").open("a") as fh:
            fh.write(_entry(2, "Andrew adopted a second dog named Buddy."))
        _wake_and_wait(watcher, rt.root / "default_app" / "wake.txt", monkeypatch)
        assert indexed_ids(rt) == set()
        assert all(rt.root in (p, *p.parents) for p in watcher.watched_targets)


def test_linked_folders_keep_links_on_a_logs_path_inside_the_root_only(tmp_path: Path) -> None:
    root = tmp_path / "root"
    users = root / "a/p/users"
    users.mkdir(parents=True)
    (root / ".index/x").mkdir(parents=True)
    (root / ".people/u1").mkdir(parents=True)
    (tmp_path / "away").mkdir()
    (users / "u1").symlink_to(root / ".people/u1")
    (users / "u2").symlink_to(users / "u1")  # a chain: the folder at its end
    (users / "u3").symlink_to(root / ".index/x")
    (users / "u4").symlink_to(tmp_path / "away")
    (users / "u5").symlink_to(users / "u5")  # a loop
    (root / "a/p/notes").symlink_to(root / ".people")  # not where logs go
    assert linked_folders(root) == {root / ".people/u1": {users / "u1", users / "u2"}}
