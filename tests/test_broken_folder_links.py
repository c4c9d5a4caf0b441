"""A symlink loop or a dangling symlink where a folder of the layout goes (a kind's folder:
``episodes``, ``.insights``, ``.lessons``, ``.worldview``; a user's folder; a project's
``users`` folder): nothing under it is read and every write there fails, so ``lint`` (exit 1)
and ``status`` name it, and a write names the folder. ``lint`` said "0 errors" while every
``add`` for that user failed, and ``add`` said a link to a folder that is not there led to
"another daily log of this root", or "Too many levels of symbolic links"."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from everos_reflect.embedding import HashEmbedder
from everos_reflect.errors import MarkdownError
from everos_reflect.index.sync import Indexer
from everos_reflect.model import Kind
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from tests.link_fixtures import ANN, indexed_ann_root, run

USERS = "default_app/default_project/users"
GONE = "a symlink to {target}, which does not exist,"
LOOP = "a symlink loop"


@pytest.fixture
def indexed(root: Path) -> Path:
    """Ann's root with one Episode, indexed."""
    return indexed_ann_root(root)


def _broken(root: Path, rel: str, loop: bool) -> str:
    """Make ``rel`` a symlink loop, or a link to ``gone`` beside it; the words for it."""
    path = root / rel
    if loop:
        path.symlink_to(path.name)
        return LOOP
    path.symlink_to("gone")
    return GONE.format(target=f"{Path(rel).parent.as_posix()}/gone")


@pytest.mark.parametrize("loop", [False, True], ids=["dangling", "loop"])
@pytest.mark.parametrize("folder", [".insights", ".lessons", ".worldview", "tasks"])
def test_lint_and_status_name_a_broken_link_where_a_kinds_folder_goes(
        indexed: Path, folder: str, loop: bool) -> None:
    rel = f"{USERS}/u_ann/{folder}"
    said = _broken(indexed, rel, loop)
    message = (f"{said} where the {folder} folder goes: no log of it is read, and nothing is "
               "written there (add, Reflection, undo) until it is moved away")
    lint = run("lint", "--root", str(indexed), "--json")
    assert lint.exit_code == 1, lint.output
    assert [(p["file"], p["message"]) for p in json.loads(lint.stdout)["problems"]] == [
        (rel, message)]
    status = json.loads(run("status", "--root", str(indexed), "--json").stdout)
    assert {"file": rel, "problems": [message], "lines": [0]} in status["files_with_problems"]


@pytest.mark.parametrize("loop", [False, True], ids=["dangling", "loop"])
def test_lint_and_status_name_a_broken_link_where_a_user_folder_goes(
        indexed: Path, loop: bool) -> None:
    rel = f"{USERS}/u_bob"
    said = _broken(indexed, rel, loop)
    message = (f"{said} where a user folder goes: nothing under it is read, and every write "
               "to it fails (add, Reflection), until it is moved away or what it leads to is "
               "back")
    lint = run("lint", "--root", str(indexed), "--json")
    assert lint.exit_code == 1, lint.output
    assert [(p["file"], p["message"], p["severity"])
            for p in json.loads(lint.stdout)["problems"]] == [(rel, message, "error")]
    status = json.loads(run("status", "--root", str(indexed), "--json").stdout)
    assert {"file": rel, "problems": [message], "lines": [0]} in status["files_with_problems"]


def test_lint_names_a_dangling_link_where_the_users_folder_goes(root: Path) -> None:
    project = root / "my_app" / "my_project"
    project.mkdir(parents=True)
    (project / "users").symlink_to("gone")
    lint = run("lint", "--root", str(root), "--json")
    assert lint.exit_code == 1, lint.output
    (problem,) = json.loads(lint.stdout)["problems"]
    assert problem["file"] == "my_app/my_project/users"
    assert problem["message"].startswith(
        "a symlink to my_app/my_project/gone, which does not exist, where the users folder "
        "goes")


@pytest.mark.parametrize("loop", [False, True], ids=["dangling", "loop"])
@pytest.mark.parametrize("where", ["episodes", "user"])
def test_add_through_a_broken_link_names_the_folder_and_writes_nothing(
        indexed: Path, where: str, loop: bool) -> None:
    user = "u_ann" if where == "episodes" else "u_bob"
    rel = f"{USERS}/u_ann/episodes" if where == "episodes" else f"{USERS}/u_bob"
    if where == "episodes":
        (indexed / rel).rename(indexed / f"{rel}.kept")  # the person moved it aside
    said = _broken(indexed, rel, loop).rstrip(",")
    before = sorted(p.relative_to(indexed).as_posix() for p in indexed.rglob("*")
                    if ".index" not in p.parts)
    add = run("add", "--root", str(indexed), "--user", user, "--subject", "Dogs",
              "--content", "Ann has a dog.", "--timestamp", "2026-10-12T10:00:00+00:00")
    assert add.exit_code == 1, add.output
    (line,) = add.stderr.splitlines()
    assert line.endswith(f"not writing this file: its folder {rel} is {said}"), line
    after = sorted(p.relative_to(indexed).as_posix() for p in indexed.rglob("*")
                   if ".index" not in p.parts)
    assert after == before  # no folder made where the link leads, nothing lost


@pytest.mark.parametrize("loop", [False, True], ids=["dangling", "loop"])
@pytest.mark.parametrize("kind", [Kind.INSIGHT, Kind.LESSON, Kind.CONVICTION, Kind.TASK])
def test_a_tiers_write_through_a_broken_kinds_folder_names_it(
        indexed: Path, kind: Kind, loop: bool) -> None:
    """Every tier writes its records through the store's append."""
    rel = f"{USERS}/u_ann/{kind.folder}"
    said = _broken(indexed, rel, loop).rstrip(",")
    rt = Runtime(indexed, Settings(), embedder=HashEmbedder(32))
    try:
        with pytest.raises(MarkdownError, match=f"its folder {rel} is {said}"):
            rt.store.append(ANN, kind, {"timestamp": "2026-10-12T10:00:00+00:00"},
                            {kind.info.main: "A record."}, day=date(2026, 10, 12))
    finally:
        rt.close()
    assert (indexed / rel).is_symlink() and not (indexed / rel).exists()


def test_a_kinds_folder_turned_into_a_loop_leaves_the_index_as_a_deleted_folder(
        indexed: Path) -> None:
    """Its logs are read by nothing (a reindex finds none): their entries go from the index,
    as when the folder is deleted, and come back with it."""
    folder = indexed / USERS / "u_ann" / "episodes"
    folder.rename(folder.with_name("kept"))
    folder.symlink_to("episodes")
    rt = Runtime(indexed, Settings(), embedder=HashEmbedder(32))
    try:
        indexer = Indexer(rt)
        indexer.scan()
        assert rt.db().execute("SELECT COUNT(*) FROM entries").fetchone()[0] == 0
        assert indexer.pending() == {"files_changed": 0, "files_deleted": 0,
                                     "lag_seconds": None}
        folder.unlink()
        folder.with_name("kept").rename(folder)
        indexer.scan()
        assert rt.db().execute("SELECT COUNT(*) FROM entries").fetchone()[0] == 1
    finally:
        rt.close()
