"""``init`` never makes a memory root inside another one: a memory root holds no other root
(the fleet refuses such a pair), and the inner root's ``.index`` and logs landed in the outer
root's tree."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from everos_reflect.cli.main import cli

pytestmark = pytest.mark.usefixtures("no_everos_env")


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


@pytest.mark.parametrize("inner", ["default_app/default_project", "archive", "a/b/c"])
def test_init_inside_a_memory_root_is_refused_and_writes_nothing(
        tmp_path: Path, inner: str) -> None:
    outer = tmp_path / "outer"
    assert run("init", str(outer)).exit_code == 0
    assert run("add", "--root", str(outer), "--user", "u1", "--subject", "S",
               "--content", "C", "--timestamp", "2026-10-12T10:00:00Z").exit_code == 0
    before = sorted(p.relative_to(outer) for p in outer.rglob("*"))

    result = run("init", str(outer / inner))

    assert result.exit_code == 1, result.output
    assert result.stderr == (f"error: {outer / inner} is inside the memory root {outer}; a "
                             "memory root holds no other root: choose a folder outside it\n")
    assert sorted(p.relative_to(outer) for p in outer.rglob("*")) == before


def test_init_beside_a_memory_root_is_fine(tmp_path: Path) -> None:
    assert run("init", str(tmp_path / "one")).exit_code == 0
    assert run("init", str(tmp_path / "two")).exit_code == 0
    # and the root itself again, with --force, is still init's to rewrite
    assert run("init", str(tmp_path / "one"), "--force").exit_code == 0
