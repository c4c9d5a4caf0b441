"""The watcher watches only the folders that hold logs: never `.index/`, never a symlink."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest

from everos_reflect.embedding import HashEmbedder
from everos_reflect.index.watcher import FsEvent, Watcher, top_folders_touched, watched_folders
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from tests.waiting import wait_for

DAY = date(2026, 10, 12)


def _append(rt: Runtime, ref: UserRef, content: str) -> str:
    return rt.store.append(ref, Kind.EPISODE,
                           {"timestamp": "2026-10-12T10:00:00+00:00", "parent_type": "memcell"},
                           {"Subject": "Pets", "Content": content}, day=DAY).id


@pytest.fixture
def rt(root: Path) -> Iterator[Runtime]:
    runtime = Runtime(root, Settings(), embedder=HashEmbedder(16))
    yield runtime
    runtime.close()


def test_watched_folders_are_the_top_level_folders_but_the_index_hidden_ones_and_links(
    tmp_path: Path,
) -> None:
    for name in (".index", ".git", "default_app", "acme"):
        (tmp_path / name).mkdir()
    (tmp_path / "ome.toml").write_text("")
    (tmp_path / "linked").symlink_to(tmp_path / "acme", target_is_directory=True)
    assert watched_folders(tmp_path) == [tmp_path / "acme", tmp_path / "default_app"]


def test_top_folders_touched_are_the_new_moved_and_deleted_folders_under_the_root() -> None:
    root = Path("/r")
    events = [
        FsEvent("created", "/r/new_app", is_directory=True),
        FsEvent("created", "/r/new_app/p", is_directory=True),  # nested: its watch covers it
        FsEvent("created", "/r/.index/x", is_directory=True),
        FsEvent("moved", "/r/old", "/r/renamed", is_directory=True),
        FsEvent("deleted", "/r/gone", is_directory=True),
        FsEvent("modified", "/r/touched", is_directory=True),
        FsEvent("created", "/r/file.md"),
    ]
    assert top_folders_touched(events, root) == {
        Path("/r/new_app"), Path("/r/renamed"), Path("/r/old"), Path("/r/gone")}


def test_writes_under_the_index_never_reach_the_watcher(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = UserRef.of("u1")
    _append(rt, ref, "before")
    seen: list[str] = []
    original = Watcher._on_event

    def spy(self: Watcher, event: FsEvent) -> None:
        seen.extend(p for p in (event.path, event.dest) if p)  # an atomic write is a move
        original(self, event)

    monkeypatch.setattr(Watcher, "_on_event", spy)
    with Watcher(rt, debounce=0.05, reconcile_interval=0, optimize_interval=0) as watcher:
        assert rt.index_dir not in watcher.watched
        for n in range(20):
            (rt.index_dir / f"noise-{n}.md").write_text("x")
        live = _append(rt, ref, "while watching")
        assert wait_for(lambda: any(p.endswith("episode-2026-10-12.md") for p in seen))
        assert wait_for(lambda: live in {r[0] for r in rt.db().execute("SELECT id FROM entries")})
    assert not [p for p in seen if "/.index/" in p or p.endswith("/.index")]


def test_a_folder_created_after_start_is_watched_and_its_logs_indexed(rt: Runtime) -> None:
    with Watcher(rt, debounce=0.05, reconcile_interval=0, optimize_interval=0) as watcher:
        assert watcher.watched == []
        new = _append(rt, UserRef("acme", "bot", "u2"), "a new tenant")
        assert wait_for(lambda: new in {r[0] for r in rt.db().execute("SELECT id FROM entries")})
        # the start-up scan may index the log before the folder's event adds the watch
        assert wait_for(lambda: watcher.watched == [rt.root / "acme"])
        later = _append(rt, UserRef("acme", "bot", "u3"), "written once it is watched")
        assert wait_for(lambda: later in {r[0] for r in rt.db().execute(
            "SELECT id FROM entries")})


def test_edits_in_a_folder_deleted_and_restored_at_once_still_reach_the_index(
        rt: Runtime, tmp_path_factory: pytest.TempPathFactory) -> None:
    # `git checkout`, `rm -rf` and a restore: the folder's old watch went with it, the two
    # events cancelled out, and no later edit in it was indexed before a reconcile scan.
    ref = UserRef.of("u1")
    first = _append(rt, ref, "before the restore")
    app = rt.root / "default_app"
    backup = tmp_path_factory.mktemp("backup") / "app"
    shutil.copytree(app, backup)
    ids = lambda: {r[0] for r in rt.db().execute("SELECT id FROM entries")}  # noqa: E731
    watcher = Watcher(rt, debounce=0.5, reconcile_interval=0, optimize_interval=0)
    scans: list[object] = []
    scan = watcher.indexer.scan
    watcher.indexer.scan = lambda progress=None: scans.append(scan(progress))  # type: ignore[method-assign]
    with watcher:
        assert wait_for(lambda: ids() == {first} and len(scans) == 1)
        shutil.rmtree(app)
        shutil.copytree(backup, app)
        assert wait_for(lambda: len(scans) >= 2)  # the rescan after the folder change
        later = _append(rt, ref, "written after the restore")
        assert wait_for(lambda: ids() == {first, later})
