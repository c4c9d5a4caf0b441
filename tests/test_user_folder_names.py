"""User folder names a person may not see as the tool does.

Two user folders whose names differ only in Unicode normalization ("café" written with one
code point or with "e" and a combining accent) look the same on screen. A user id is ASCII
(SPEC §2), so neither is a user: `add` refuses each spelling and `lint` names each folder,
both written with escapes, so the two can be told apart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli

NFC, NFD = "caf\u00e9", "cafe\u0301"
USERS = "default_app/default_project/users"


@pytest.mark.parametrize(("name", "shown"), [(NFC, r"caf\xe9"), (NFD, r"cafe\u0301")])
def test_add_refuses_either_spelling_naming_it_with_escapes(
        root: Path, name: str, shown: str) -> None:
    result = CliRunner().invoke(cli, ["add", "--root", str(root), "--user", name,
                                      "--subject", "S", "--content", "C"])
    assert result.exit_code != 0
    assert result.stderr.startswith(f"error: invalid user_id '{shown}': ")
    assert not (root / "default_app").exists()


def test_lint_names_both_folders_by_their_real_paths_and_apart(root: Path) -> None:
    """The folder's path as it is (`--json` names the real folder; é shows as é), the reason
    quoting the name with escapes, which tell the two apart. The path was escaped too
    (`users/caf\\xe9`), a path no script could open."""
    for name in (NFC, NFD):
        (root / USERS / name / "episodes").mkdir(parents=True)
    result = CliRunner().invoke(cli, ["lint", "--root", str(root), "--json"])
    assert result.exit_code == 1
    found = [(p["file"], p["message"].split(":")[0])
             for p in json.loads(result.stdout)["problems"]]
    assert found == [(f"{USERS}/{NFD}", r"invalid user_id 'cafe\u0301'"),
                     (f"{USERS}/{NFC}", r"invalid user_id 'caf\xe9'")]
    text = CliRunner().invoke(cli, ["lint", "--root", str(root)]).stdout.splitlines()
    assert text[1].startswith(f"{USERS}/{NFC}: invalid user_id 'caf\\xe9'")


def test_lint_shows_a_tab_in_a_folder_name_as_an_escape(root: Path) -> None:
    (root / USERS / "a\tb" / "episodes").mkdir(parents=True)
    result = CliRunner().invoke(cli, ["lint", "--root", str(root)])
    assert result.stdout.splitlines()[0].startswith(
        f"{USERS}/a\\tb: invalid user_id 'a\\tb'")
    assert json.loads(CliRunner().invoke(cli, ["lint", "--root", str(root), "--json"]).stdout
                      )["problems"][0]["file"] == f"{USERS}/a\tb"


def test_a_log_in_the_folder_of_a_user_named_like_a_kind_folder_is_told_where_it_goes(
        root: Path) -> None:
    """A user may be named "episodes"; a log put in that user's own folder was told "2026-10-12
    is no calendar date", the folder's name taken for the kind's folder."""
    log = root / USERS / "episodes" / "episode-2026-10-12.md"
    log.parent.mkdir(parents=True)
    log.write_text("---\ntype: episode_daily\n---\n")
    result = CliRunner().invoke(cli, ["lint", "--root", str(root), "--json"])
    (problem,) = json.loads(result.stdout)["problems"]
    assert problem == {"file": f"{USERS}/episodes/episode-2026-10-12.md", "line": 0,
                       "message": "not read: a log of episodes/ goes in the user's episodes/ "
                                  "folder", "severity": "warning"}


def test_lint_names_an_app_or_project_folder_with_an_invalid_name_once(root: Path) -> None:
    """It was named once per user folder under it, each user's folder blamed for its name."""
    for folder in ("my app/default_project/users/a", "my app/default_project/users/b",
                   "my app/p q/users/c", "app/p q/users/d", "app/p q/users/e"):
        (root / folder / "episodes").mkdir(parents=True)
    result = CliRunner().invoke(cli, ["lint", "--root", str(root), "--json"])
    problems = [(p["file"], p["message"].split(":")[0])
                for p in json.loads(result.stdout)["problems"]]
    assert problems == [("app/p q", "invalid project_id 'p q'"),
                        ("my app", "invalid app_id 'my app'")]
