"""``status``'s text on a root with no user yet: a sentence saying so, not an empty table."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from everos_reflect.cli.main import cli


def _status(root: Path) -> str:
    result = CliRunner().invoke(cli, ["status", "--root", str(root)])
    assert result.exit_code == 0, result.output
    return result.output


def test_a_new_root_says_it_has_no_users_yet(root: Path) -> None:
    # the header row and "live / deprecated" under nothing read like a rendering fault
    out = _status(root)
    assert "no users yet" in out
    assert "live / deprecated" not in out and "atomic facts" not in out


def test_a_root_with_a_user_shows_the_counts_table(root: Path) -> None:
    added = CliRunner().invoke(cli, ["add", "--root", str(root), "--user", "ana", "--subject",
                                     "Pets", "--content", "Ana has a cat."])
    assert added.exit_code == 0, added.output
    out = _status(root)
    assert "no users yet" not in out
    assert "live / deprecated" in out and "ana" in out and "1 / 0" in out
