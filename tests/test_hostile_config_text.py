"""A configuration file that is not UTF-8 is named as a daily log is: its line and column."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.embedding import HashEmbedder
from everos_reflect.engine.engine import Engine
from everos_reflect.errors import ConfigError
from everos_reflect.fleet.config import read_fleet
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings

UTF16 = "[strategies.reflect_episodes]\nenabled = true\n".encode("utf-16")
SAID = "line 1: file is UTF-16 text, not UTF-8 (save it as UTF-8)"


def test_enable_names_an_ome_toml_saved_as_utf16_as_lint_does(root: Path) -> None:
    # enable said "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"
    (root / "ome.toml").write_bytes(UTF16)
    result = CliRunner().invoke(cli, ["enable", "learn_lessons", "--root", str(root)])
    assert result.exit_code == 1
    assert result.stderr == (f"error: invalid configuration: ome.toml: {SAID}\n")
    assert (root / "ome.toml").read_bytes() == UTF16


def test_a_daemon_names_the_line_and_column_of_an_ome_toml_that_is_not_utf8(
        root: Path) -> None:
    runtime = Runtime(root, Settings(), embedder=HashEmbedder(16))
    try:
        engine = Engine(runtime)
        ome = b"[strategies.reflect_episodes]\nenabled = true # caf\xe9\n"
        (root / "ome.toml").write_bytes(ome)
        assert engine.reload_config() is False
        assert engine.config_error == (
            "invalid configuration: ome.toml: line 2: file is not valid UTF-8: "
            "byte 0xe9 at column 21 (invalid continuation byte; save it as UTF-8)")
    finally:
        runtime.close()


def test_a_fleet_file_saved_as_utf16_is_named_so(tmp_path: Path) -> None:
    (tmp_path / "fleet.toml").write_bytes('roots = ["/tmp"]\n'.encode("utf-16"))
    with pytest.raises(ConfigError) as info:
        read_fleet(tmp_path / "fleet.toml")
    assert info.value.problems == [(str(tmp_path / "fleet.toml"), "line 1",
                                    "file is UTF-16 text, not UTF-8 (save it as UTF-8)")]
