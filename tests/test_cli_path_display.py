"""One way to show a user's path in command output: as written, letters like é included, with
a tab, a line break or a line separator written as its escape (``\\t``, ``\\n``), so a path
stays one line and a tab is not taken for spaces. ``init`` used ``ascii()`` (``caf\\xe9``, in
quotes) while other commands left a tab raw."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.embedding import HashEmbedder
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from tests.api_client import ApiClient

NAME = "café\tnotes\nroot"
SHOWN = r"café\tnotes\nroot"


def test_init_shows_a_root_named_with_a_tab_a_line_break_and_accents_as_one_readable_line(
        tmp_path: Path) -> None:
    root = tmp_path / NAME
    result = CliRunner().invoke(cli, ["init", str(root)])
    assert result.exit_code == 0, result.output
    shown = f"{tmp_path}/{SHOWN}"
    assert result.stdout.splitlines() == [
        f"Initialized memory root {shown}",
        f"  settings:   {shown}/everos.toml (all keys commented out = defaults)",
        f"  strategies: {shown}/ome.toml (enable with: everos-reflect enable reflect_episodes "
        # $'…': inside '…' a shell took "\t" and "\n" for two characters each (s50)
        f"--root $'{shown}')"]
    assert (root / "ome.toml").is_file()


@pytest.mark.usefixtures("no_everos_env")
def test_status_shows_such_a_root_as_init_does(tmp_path: Path) -> None:
    root = tmp_path / NAME
    assert CliRunner().invoke(cli, ["init", str(root)]).exit_code == 0
    result = CliRunner().invoke(cli, ["status", "--root", str(root)])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == f"root {tmp_path}/{SHOWN}  (counts from markdown)"


@pytest.mark.usefixtures("no_everos_env")
def test_an_error_naming_such_a_path_shows_it_as_output_does(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["status", "--root", str(tmp_path / NAME)])
    assert result.exit_code != 0
    (line,) = result.stderr.splitlines()
    assert f"{tmp_path}/{SHOWN}" in line, line


#: A folder name holding a byte that is not UTF-8 (a Latin-1 ``ÿ``), as Python holds it.
BYTE_NAME = os.fsdecode(b"notes\xff")


@pytest.mark.usefixtures("no_everos_env")
def test_a_byte_that_is_not_utf8_shows_as_an_escape_in_output_errors_and_json(
        tmp_path: Path) -> None:
    """It reached stdout raw (a line that is not UTF-8) and error lines as ``\\udcff``."""
    root = tmp_path / BYTE_NAME
    shown = f"{tmp_path}/notes\\xff"
    runner = CliRunner()
    init = runner.invoke(cli, ["init", str(root)])
    assert init.exit_code == 0, init.output
    assert init.stdout_bytes.decode("utf-8").splitlines()[0] == (
        f"Initialized memory root {shown}")
    status = runner.invoke(cli, ["status", "--root", str(root)])
    assert status.stdout_bytes.decode("utf-8").splitlines()[0] == (
        f"root {shown}  (counts from markdown)")
    as_json = runner.invoke(cli, ["status", "--root", str(root), "--json"])
    assert json.loads(as_json.stdout_bytes.decode("utf-8"))["root"] == shown
    missing = runner.invoke(cli, ["status", "--root", str(root / "gone")])
    assert missing.exit_code != 0
    (line,) = missing.stderr_bytes.decode("utf-8").splitlines()
    assert f"no memory root at {shown}/gone" in line, line


def test_the_api_names_such_a_root_as_the_commands_do(tmp_path: Path) -> None:
    """Its status, and an error naming it, failed to encode (a 500): the text was no UTF-8."""
    root = tmp_path / BYTE_NAME
    root.mkdir()
    for path, answer in ((root, 200), (root / "gone", 503)):
        rt = Runtime(path, Settings(), embedder=HashEmbedder(16))
        try:
            resp = ApiClient(rt)("GET", "/api/v1/status")
        finally:
            rt.close()
        assert resp.status_code == answer, resp.text
        if answer == 200:
            assert resp.json()["data"]["root"] == f"{tmp_path}/notes\\xff"
        else:
            assert f"no memory root at {tmp_path}/notes\\xff/gone" in (
                resp.json()["error"]["message"])


def _user_folder_not_utf8(root: Path) -> None:
    """A user folder named with the byte 0xff (a Latin-1 ``ÿ``), holding a log."""
    folder = root / "default_app" / "default_project" / "users" / os.fsdecode(b"bad\xffname")
    (folder / "episodes").mkdir(parents=True)
    (folder / "episodes" / "episode-2026-01-01.md").write_text("notes\n")


#: how every edge names that folder and quotes its name: as a shell types it, byte escaped
FOLDER_SHOWN = r"default_app/default_project/users/bad\xffname"
NAME_QUOTED = r"invalid user_id 'bad\xffname': use 1-128 characters"


@pytest.mark.usefixtures("no_everos_env")
def test_a_user_folder_named_with_a_byte_that_is_not_utf8_is_quoted_as_its_path_shows_it(
        root: Path) -> None:
    """It was quoted as Python holds it (``'bad\\udcffname'``) beside its path shown as
    ``bad\\xffname``: a name nobody can type or find."""
    _user_folder_not_utf8(root)
    runner = CliRunner()
    lint = runner.invoke(cli, ["lint", "--root", str(root)])
    assert lint.exit_code == 1
    line = next(x for x in lint.stdout_bytes.decode("utf-8").splitlines()
                if x.startswith(FOLDER_SHOWN))
    assert NAME_QUOTED in line and "udc" not in line, line
    status = runner.invoke(cli, ["status", "--root", str(root), "--json"])
    bad = json.loads(status.stdout_bytes.decode("utf-8"))["files_with_problems"]
    assert [item["file"] for item in bad] == [FOLDER_SHOWN]
    assert NAME_QUOTED in bad[0]["problems"][0] and "udc" not in bad[0]["problems"][0]


def test_the_api_quotes_that_folder_as_the_commands_do(root: Path, call: ApiClient) -> None:
    _user_folder_not_utf8(root)
    resp = call("GET", "/api/v1/status")
    assert resp.status_code == 200, resp.text
    bad = resp.json()["data"]["files_with_problems"]
    assert [item["file"] for item in bad] == [FOLDER_SHOWN]
    assert NAME_QUOTED in bad[0]["problems"][0] and "udc" not in bad[0]["problems"][0]
    linted = call("GET", "/api/v1/lint")
    assert linted.status_code == 200, linted.text
    (problem,) = linted.json()["data"]["problems"]
    assert problem["file"] == FOLDER_SHOWN and NAME_QUOTED in problem["message"]
