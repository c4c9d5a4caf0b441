"""``init`` refuses a folder on the device files' file system (``devtmpfs``, or whatever a
container mounts at ``/dev``), naming it, before anything is written: as root, ``init /dev``
wrote ``everos.toml`` and ``ome.toml`` among the device files, which devtmpfs takes (in
memory, gone at the next boot). An ordinary ``tmpfs`` (``/tmp``, ``/dev/shm``) is not
refused. The mount table is a file of the test's here, so nothing is ever written in
``/dev``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli import store_cmds
from everos_reflect.cli.main import cli


def fake_mounts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *rows: tuple[str, str]) -> None:
    """A mount table of ``(mount point, type)`` rows, read in place of the machine's."""
    lines = ["27 1 254:0 / / rw,relatime - ext4 /dev/vda rw"]
    for at, (point, kind) in enumerate(rows, start=40):
        lines.append(f"{at} 27 0:{at} / {point} rw,relatime - {kind} {kind} rw")
    table = tmp_path / "mountinfo"
    table.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(store_cmds, "MOUNT_TABLE", table)


@pytest.mark.parametrize("kind", ["devtmpfs", "tmpfs"])
def test_init_on_the_device_files_file_system_is_refused_naming_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    devices = tmp_path / "dev"
    devices.mkdir()
    fake_mounts(tmp_path, monkeypatch, (str(devices), kind))
    monkeypatch.setattr(store_cmds, "DEVICE_FOLDER", str(devices))

    for target in (devices, devices / "memory"):
        result = CliRunner().invoke(cli, ["init", str(target)])
        assert result.exit_code == 1, result.output
        where = "it" if target == devices else str(devices)
        assert result.stderr == (
            f"error: cannot make a memory root at {target}: {where} is on the {kind} file "
            f"system mounted at {devices}, which holds the machine's device files, in memory "
            "until the next boot; choose a folder on a disk\n")
    assert list(devices.iterdir()) == []  # nothing written, no folder made


def test_devtmpfs_mounted_elsewhere_is_refused_too(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    devices = tmp_path / "devices"
    devices.mkdir()
    fake_mounts(tmp_path, monkeypatch, (str(devices), "devtmpfs"))
    result = CliRunner().invoke(cli, ["init", str(devices / "root")])
    assert result.exit_code == 1
    assert "is on the devtmpfs file system mounted at" in result.stderr
    assert not (devices / "root").exists()


def test_an_ordinary_tmpfs_is_a_folder_like_any(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scratch = tmp_path / "shm"
    scratch.mkdir()
    fake_mounts(tmp_path, monkeypatch, (str(scratch), "tmpfs"))
    result = CliRunner().invoke(cli, ["init", str(scratch / "root")])
    assert result.exit_code == 0, result.output
    assert (scratch / "root" / "everos.toml").is_file()


def test_a_kernel_file_system_that_takes_files_is_refused_before_writing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # configfs (and debugfs, as root) take a mkdir: the refusal must not wait for an OSError
    kernel = tmp_path / "config"
    kernel.mkdir()
    fake_mounts(tmp_path, monkeypatch, (str(kernel), "configfs"))
    result = CliRunner().invoke(cli, ["init", str(kernel / "root")])
    assert result.exit_code == 1
    assert "is on a configfs file system, which the kernel serves of itself" in result.stderr
    assert list(kernel.iterdir()) == []


def test_the_machine_s_own_dev_is_refused() -> None:
    # the machine's mount table, as init reads it; a root made there anyway (the defect, as
    # root) is taken away again, so no run leaves anything in /dev
    target = Path("/dev/everos-s52-never-made")
    try:
        result = CliRunner().invoke(cli, ["init", str(target)])
        made = target.exists()
    finally:
        shutil.rmtree(target, ignore_errors=True)
    assert result.exit_code == 1, result.output
    assert "which holds the machine's device files" in result.stderr
    assert not made
