"""A file of the root that stands in the way (a folder or a socket where a daily log goes, a
file where a user's folder goes) is named by its path in the root — as ``lint`` and ``status``
name logs — at the CLI, the HTTP API and MCP alike: one message, never the absolute path."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from mcp.shared.exceptions import MCPError

from everos_reflect.api import mcp_server
from everos_reflect.cli.main import cli
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from tests.api_client import ApiClient

LOG = "default_app/default_project/users/u_ann/episodes/episode-2026-10-12.md"
USER = "default_app/default_project/users/u_ann"
BODY = {"user_id": "u_ann", "subject": "s", "content": "c",
        "timestamp": "2026-10-12T09:00:00+00:00"}


@pytest.fixture
def runtime(root: Path) -> Iterator[Runtime]:
    rt = Runtime(root, Settings(), embedder=HashEmbedder())
    yield rt
    rt.close()


def _folder_as_log(root: Path) -> None:
    (root / LOG).mkdir(parents=True)


def _socket_as_log(root: Path) -> Iterator[None]:
    (root / LOG).parent.mkdir(parents=True)
    here = os.getcwd()
    os.chdir((root / LOG).parent)  # a socket's path is bounded (108 bytes): bind it by name
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(Path(LOG).name)
    finally:
        os.chdir(here)
    try:
        yield
    finally:
        sock.close()


def _file_as_user_folder(root: Path) -> None:
    (root / USER).parent.mkdir(parents=True)
    (root / USER).write_text("not a folder")


def _answers(runtime: Runtime, root: Path) -> tuple[str, str, str]:
    """The message of the CLI (its one error line), the API and MCP for one ``add``."""
    result = CliRunner().invoke(cli, ["add", "--root", str(root), "--user", "u_ann",
                                      "--subject", "s", "--content", "c",
                                      "--timestamp", BODY["timestamp"]])
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    resp = ApiClient(runtime)("POST", "/api/v1/memory/episodes", json=BODY)
    assert resp.status_code == 409, resp.text
    assert resp.json()["error"]["code"] == "file_error"
    [spec] = [t for t in mcp_server.tools() if t.name == "add_episode"]
    with pytest.raises(MCPError) as caught:
        mcp_server.call(runtime, spec, BODY)
    return result.stderr[len("error: "):-1], resp.json()["error"]["message"], \
        caught.value.message


def test_a_folder_where_a_log_goes_is_named_in_the_root_everywhere(
        runtime: Runtime, root: Path) -> None:
    _folder_as_log(root)
    cli_says, api_says, mcp_says = _answers(runtime, root)
    assert cli_says == api_says == mcp_says == f"not a regular file: {LOG}"
    assert (root / LOG).is_dir()


def test_a_socket_where_a_log_goes_is_named_in_the_root_everywhere(
        runtime: Runtime, root: Path) -> None:
    stand_in = _socket_as_log(root)
    next(stand_in)
    try:
        cli_says, api_says, mcp_says = _answers(runtime, root)
    finally:
        next(stand_in, None)
    assert cli_says == api_says == mcp_says == f"not a regular file: {LOG}"


def test_a_file_where_a_user_folder_goes_is_named_in_the_root_everywhere(
        runtime: Runtime, root: Path) -> None:
    _file_as_user_folder(root)
    cli_says, api_says, mcp_says = _answers(runtime, root)
    assert cli_says == api_says == mcp_says == (
        f"{USER} is not a folder, and a folder is needed there: move it aside")
    assert (root / USER).read_text() == "not a folder"


def test_path_in_root_names_a_path_outside_the_root_whole(tmp_path: Path) -> None:
    from everos_reflect.fileio import path_in_root

    root = tmp_path / "root"
    assert path_in_root(root / "a" / "b.md", root) == "a/b.md"
    assert path_in_root(tmp_path / "elsewhere.md", root) == str(tmp_path / "elsewhere.md")
    assert path_in_root(root, root) == str(root)
    assert path_in_root(root / "x.md", None) == str(root / "x.md")
