"""A configuration file that cannot be read -- ``fleet.toml``, ``everos.toml``, ``ome.toml`` --
is said in the words every other unreadable file is (:func:`~everos_reflect.fileio.os_reason`):
the reason, never an ``OSError``'s arguments. An error raised with an errno alone
(``OSError(errno.EIO)``, as a network file system's may be) was said as ``5``, one raised with
nothing (``TimeoutError()``) as nothing at all."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli


def _refuse(exc: OSError):  # type: ignore[no-untyped-def]
    def read(path: object) -> bytes:
        raise exc
    return read


CAUSES = [(OSError(errno.EIO), "Input/output error"), (TimeoutError(), "timeout error")]


@pytest.mark.parametrize(("exc", "reason"), CAUSES, ids=["errno-alone", "nothing-said"])
def test_an_unreadable_fleet_file_reads_like_an_unreadable_everos_toml(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exc: OSError,
        reason: str) -> None:
    fleet = tmp_path / "fleet.toml"
    fleet.write_text(f'roots = ["{root}"]\n')
    monkeypatch.setattr("everos_reflect.fleet.config.read_config_bytes", _refuse(exc))
    monkeypatch.setattr("everos_reflect.settings.read_config_bytes", _refuse(exc))
    fleet_said = CliRunner().invoke(cli, ["fleet", "status", "--fleet", str(fleet)])
    root_said = CliRunner().invoke(cli, ["search", "q", "--root", str(root)])
    assert fleet_said.exit_code == root_said.exit_code == 1
    assert fleet_said.stderr == (f"error: invalid configuration: {fleet}: (file): "
                                 f"{reason}\n")
    assert root_said.stderr == f"error: invalid configuration: everos.toml: (file): {reason}\n"


@pytest.mark.parametrize(("exc", "reason"), CAUSES, ids=["errno-alone", "nothing-said"])
def test_enable_says_an_unreadable_ome_toml_the_same(
        root: Path, monkeypatch: pytest.MonkeyPatch, exc: OSError, reason: str) -> None:
    monkeypatch.setattr("everos_reflect.cli.store_cmds.read_config_bytes", _refuse(exc))
    result = CliRunner().invoke(cli, ["enable", "reflect_episodes", "--root", str(root)])
    assert result.exit_code == 1
    assert result.stderr == f"error: ome.toml: {reason}\n"
