"""Watcher: the pure event planner, then a live watcher indexing a file written to the root."""

from __future__ import annotations

from pathlib import Path

from everos_reflect.index.watcher import FsEvent, plan_events, wants_rescan

ROOT = Path("/mem")
EP = ROOT / "a/p/users/u/episodes/episode-2026-10-12.md"
AF = ROOT / "a/p/users/u/.atomic_facts/atomic_fact-2026-10-12.md"


def test_plan_events_keeps_markdown_logs_including_dot_folders() -> None:
    events = [FsEvent("modified", str(EP)), FsEvent("created", str(AF))]
    assert plan_events(events, ROOT) == {EP, AF}


def test_plan_events_ignores_index_temp_other_files_and_directories() -> None:
    events = [
        FsEvent("modified", str(ROOT / ".index/sqlite/system.db")),
        FsEvent("created", str(ROOT / ".index/notes.md")),
        FsEvent("created", str(EP.parent / ".episode-2026-10-12.md.x7q2.tmp")),
        FsEvent("modified", str(ROOT / "everos.toml")),
        FsEvent("modified", str(EP.parent / ".hidden.md")),
        FsEvent("created", str(EP.parent), is_directory=True),
        FsEvent("opened", str(EP)),
        FsEvent("modified", "/elsewhere/episode-2026-10-12.md"),
    ]
    assert plan_events(events, ROOT) == set()


def test_plan_events_atomic_rename_syncs_the_destination_only() -> None:
    tmp = EP.parent / ".episode-2026-10-12.md.abc.tmp"
    events = [FsEvent("created", str(tmp)), FsEvent("moved", str(tmp), dest=str(EP))]
    assert plan_events(events, ROOT) == {EP}


def test_plan_events_move_between_logs_syncs_both_ends() -> None:
    other = EP.with_name("episode-2026-10-13.md")
    assert plan_events([FsEvent("moved", str(EP), dest=str(other))], ROOT) == {EP, other}


def test_wants_rescan_on_folder_move_or_delete_outside_the_index() -> None:
    users = ROOT / "a/p/users"
    assert wants_rescan([FsEvent("moved", str(users / "u"), str(users / "v"), True)], ROOT)
    assert wants_rescan([FsEvent("deleted", str(users / "u"), is_directory=True)], ROOT)
    assert not wants_rescan([FsEvent("deleted", str(ROOT / ".index/x"), is_directory=True)], ROOT)
    assert not wants_rescan([FsEvent("created", str(users / "w"), is_directory=True)], ROOT)
