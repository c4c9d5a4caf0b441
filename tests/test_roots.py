"""What a memory root is (one definition), and commands that refuse anything else."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from everos_reflect.cli.main import cli
from everos_reflect.runtime import is_memory_root


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


@pytest.mark.parametrize("marker", ["everos.toml", "ome.toml", ".index"])
def test_a_folder_with_a_root_marker_is_a_root(tmp_path: Path, marker: str) -> None:
    if marker == ".index":
        (tmp_path / marker).mkdir()
    else:
        (tmp_path / marker).write_text("")
    assert is_memory_root(tmp_path)


def test_a_folder_with_the_spec_layout_is_a_root(tmp_path: Path) -> None:
    (tmp_path / "acme" / "bot" / "users").mkdir(parents=True)
    assert is_memory_root(tmp_path)


@pytest.mark.parametrize(
    "layout", ["", "notes/readme.md", "acme/bot/people", ".hidden/bot/users", "a b/bot/users"]
)
def test_other_folders_are_not_roots(tmp_path: Path, layout: str) -> None:
    if layout:
        target = tmp_path / layout
        target.parent.mkdir(parents=True, exist_ok=True)
        target.mkdir() if "." not in target.name else target.write_text("x")
    assert not is_memory_root(tmp_path)


def test_a_file_or_a_missing_path_is_not_a_root(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    assert not is_memory_root(tmp_path / "f")
    assert not is_memory_root(tmp_path / "missing")


ADD = ["--user", "u1", "--subject", "s", "--content", "c"]


def test_add_to_a_missing_root_refuses_and_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    result = run("add", "--root", str(missing), *ADD)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: no memory root at {missing}")
    assert "everos-reflect init" in result.stderr
    assert not missing.exists()


def test_add_to_a_folder_that_is_not_a_root_refuses_and_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    result = run("add", "--root", str(tmp_path), *ADD)
    assert result.exit_code == 1
    assert "is not a memory root" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_search_in_a_folder_that_is_not_a_root_creates_no_index(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    result = run("search", "anything", "--root", str(tmp_path))
    assert result.exit_code == 1
    assert "is not a memory root" in result.stderr
    assert not (tmp_path / ".index").exists()


def test_add_after_init_works(tmp_path: Path) -> None:
    assert run("init", str(tmp_path / "r")).exit_code == 0
    result = run("add", "--root", str(tmp_path / "r"), *ADD)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip().startswith("ep_")


@pytest.mark.parametrize("args", [["status"], ["search", "x"], ["add", *ADD], ["reindex"],
                                  ["mcp"], ["serve"]])
def test_a_symlink_loop_as_root_is_one_line_naming_it(tmp_path: Path, args: list[str]) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    result = run(*args, "--root", str(tmp_path / "a"))
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.stderr == f"error: {tmp_path / 'a'} is a symlink loop, not a memory root\n"


def test_init_into_a_symlink_loop_is_one_line_and_creates_nothing(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    result = run("init", str(tmp_path / "a" / "sub"))
    assert result.exit_code == 1
    loop = tmp_path / "a" / "sub"
    assert result.stderr == f"error: {loop} is a symlink loop, not a memory root\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]


def test_the_env_root_being_a_symlink_loop_is_one_line(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "a")
    monkeypatch.setenv("EVEROS_ROOT", str(tmp_path / "a"))
    result = run("status")
    assert result.exit_code == 1
    assert result.stderr == f"error: {tmp_path / 'a'} is a symlink loop, not a memory root\n"


NO_USER = "~no-such-user-everos"


@pytest.mark.parametrize("args", [["status"], ["search", "x"], ["add", *ADD], ["serve"]])
def test_a_root_under_an_unknown_users_home_is_one_line_naming_it(args: list[str]) -> None:
    """`--root '~nobody/x'`: pathlib's bare RuntimeError came out as a traceback."""
    result = run(*args, "--root", f"{NO_USER}/mem")
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.stderr == (f"error: the root '{NO_USER}/mem': no home folder is known for "
                             f"'{NO_USER}'\n")


def test_init_or_the_env_root_under_an_unknown_users_home_is_one_line(
        monkeypatch: pytest.MonkeyPatch) -> None:
    result = run("init", f"{NO_USER}/mem")
    assert (result.exit_code, result.stderr) == (
        1, f"error: the root '{NO_USER}/mem': no home folder is known for '{NO_USER}'\n")
    monkeypatch.setenv("EVEROS_ROOT", NO_USER)
    result = run("status")
    assert (result.exit_code, result.stderr) == (
        1, f"error: EVEROS_ROOT '{NO_USER}': no home folder is known for '{NO_USER}'\n")


@pytest.mark.parametrize("args", [["init", ""], ["init", "--root", ""], ["status", "--root", ""],
                                  ["reindex", "--root", ""], ["add", *ADD, "--root", ""]])
def test_an_empty_root_is_refused_not_read_as_the_default(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]) -> None:
    """`everos-reflect init "$ROOT"` with ROOT unset: the empty path had meant "not given", so
    the command went to EVEROS_ROOT (here a real root) or created ~/.everos."""
    default = tmp_path / "default"
    assert run("init", str(default)).exit_code == 0
    before = sorted(p.relative_to(default) for p in default.rglob("*"))
    monkeypatch.setenv("EVEROS_ROOT", str(default))
    result = run(*args)
    assert (result.exit_code, result.stderr) == (
        1, "error: the memory root is an empty path: pass the root's folder\n")
    assert sorted(p.relative_to(default) for p in default.rglob("*")) == before


def test_an_empty_env_root_still_means_unset(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVEROS_ROOT", "")
    monkeypatch.setenv("HOME", str(tmp_path))
    result = run("status")
    assert result.exit_code == 1
    assert str(tmp_path / ".everos") in result.stderr
