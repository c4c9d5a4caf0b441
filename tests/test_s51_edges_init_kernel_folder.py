"""``init`` of a folder on a file system the kernel serves of itself names that as the reason.

``init /proc/self`` said "No such file or directory: /proc/<pid>/everos.toml" of a folder that
exists, and ``init /sys/kernel`` as root "Permission denied": neither said why no root can be
made there. Nothing is written either way.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.cli.store_cmds import file_system_of


@pytest.mark.parametrize("target", ["/proc/self", "/proc/self/memory"])
def test_init_in_proc_says_it_is_the_kernel_s_file_system(target: str) -> None:
    result = CliRunner().invoke(cli, ["init", target])

    assert result.exit_code == 1, result.output
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: cannot make a memory root at /proc/{os.getpid()}")
    assert "is on a proc file system, which the kernel serves of itself" in line
    assert "choose a folder on a disk" in line
    assert not Path(f"/proc/{os.getpid()}/everos.toml").exists()


def test_the_file_system_of_a_path_is_its_deepest_mount(tmp_path: Path) -> None:
    assert file_system_of(Path("/proc/self")) == "proc"
    assert file_system_of(Path("/sys/kernel")) == "sysfs"
    assert file_system_of(tmp_path) not in {None, "proc", "sysfs"}


def test_init_of_an_ordinary_folder_still_works(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["init", str(tmp_path / "root")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "root" / "everos.toml").is_file()
