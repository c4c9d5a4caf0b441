"""`everos-reflect demo --root DIR`: the demo in a new or empty folder the user names, kept
there; it never deletes anything, so it never runs in a folder holding anything (an earlier
demo's folder, a memory root above all), and never in $EVEROS_ROOT.

The demo itself (index, cluster, reflect) is replaced by a stand-in that records the folder it
was given: test_demo.py runs it end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from everos_reflect.cli import demo_cmds
from everos_reflect.cli.main import cli

pytestmark = pytest.mark.usefixtures("no_everos_env")
USER_LOGS = "default_app/default_project/users/u_andrew/episodes"


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The folders the demo ran in, each checked to hold the example's logs then."""
    seen: list[Path] = []

    def stand_in(root: Path, show: Any = None) -> dict[str, Any]:
        assert any((root / USER_LOGS).glob("episode-*.md"))
        seen.append(root)
        return {}

    monkeypatch.setattr(demo_cmds, "run_demo", stand_in)
    return seen


def demo(*args: str) -> Result:
    return CliRunner().invoke(cli, ["demo", "--json", *args])


def tree(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): None if p.is_dir() else p.read_bytes()
            for p in sorted(root.rglob("*"))}


def test_demo_root_runs_in_a_new_folder_and_keeps_it(tmp_path: Path, ran: list[Path]) -> None:
    target = tmp_path / "new" / "demo"
    result = demo("--root", str(target))
    assert result.exit_code == 0, result.output
    assert ran == [target]
    assert json.loads(result.stdout)["root"] == str(target)
    assert (target / "ome.toml").is_file()


def test_demo_root_leaves_an_earlier_demo_folder_in_use_byte_for_byte(
        tmp_path: Path, ran: list[Path]) -> None:
    # demo --root ~/mem, then ~/mem used as a real memory: a second demo there deletes nothing
    target = tmp_path / "demo"
    target.mkdir()  # empty: taken as it is
    assert demo("--root", str(target)).exit_code == 0
    added = CliRunner().invoke(cli, ["add", "--root", str(target), "--user", "u_andrew",
                                     "--subject", "s", "--content", "mine now"])
    assert added.exit_code == 0, added.output
    before = tree(tmp_path)

    result = demo("--root", str(target))

    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == (f"error: {target} is not empty: demo --root never deletes or "
                             "writes among files; to start an earlier demo over, remove its "
                             "folder yourself, or give a new one\n")
    assert ran == [target] and tree(tmp_path) == before
    assert "mine now" in "".join(p.read_text() for p in (target / USER_LOGS).glob("*.md"))


@pytest.mark.parametrize("made", ["memory root", "other files", "a file"])
def test_demo_root_refuses_a_non_empty_folder_or_a_file_and_leaves_it_byte_for_byte(
        tmp_path: Path, ran: list[Path], made: str) -> None:
    target = tmp_path / "target"
    if made == "memory root":
        assert CliRunner().invoke(cli, ["init", str(target)]).exit_code == 0
        added = CliRunner().invoke(cli, ["add", "--root", str(target), "--user", "u1",
                                         "--subject", "s", "--content", "mine"])
        assert added.exit_code == 0, added.output
        words = "is not empty: demo --root never deletes"
    elif made == "other files":
        target.mkdir()
        (target / "notes.txt").write_text("mine")
        words = "is not empty: demo --root never deletes"
    else:
        target.write_text("mine")
        words = "is not a folder"
    before = tree(tmp_path)

    result = demo("--root", str(target))

    assert result.exit_code == 1
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: {target} {words}")
    assert ran == [] and tree(tmp_path) == before


def test_demo_root_refuses_a_folder_inside_a_memory_root(tmp_path: Path,
                                                          ran: list[Path]) -> None:
    outer = tmp_path / "memory"
    assert CliRunner().invoke(cli, ["init", str(outer)]).exit_code == 0
    before = tree(tmp_path)
    result = demo("--root", str(outer / "demo"))
    assert result.exit_code == 1
    assert result.stderr == (f"error: {outer / 'demo'} is inside the memory root {outer}: give "
                             "demo --root a folder outside any memory root\n")
    assert ran == [] and tree(tmp_path) == before


def test_demo_without_root_runs_in_a_temporary_folder_whatever_everos_root_says(
        tmp_path: Path, ran: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    # the README's first command: `everos-reflect demo`, unchanged
    mine = tmp_path / "memory"
    assert CliRunner().invoke(cli, ["init", str(mine)]).exit_code == 0
    monkeypatch.setenv("EVEROS_ROOT", str(mine))
    before = tree(mine)

    result = demo()

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["root"] is None
    [used] = ran
    assert used.name == "root" and mine not in used.parents and not used.exists()
    assert tree(mine) == before
