"""``--user`` naming a user the root has no folder for gets a note on stderr (stdout, and
``--json``, unchanged): a typo (``--user u_andew``) was answered "No insights yet", "no
clusters", "No matching episodes." as if the user existed and had nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli


@pytest.fixture
def one_user(root: Path) -> Path:
    result = CliRunner().invoke(cli, ["add", "--user", "u_andrew", "--subject", "Pets",
                                      "--content", "Andrew adopted a dog.", "--root",
                                      str(root)])
    assert result.exit_code == 0, result.output
    return root


@pytest.mark.parametrize("args", [
    ["insights"], ["worldview"], ["relations"], ["clusters"], ["search", "dog"],
    ["briefing", "dog"],
])
def test_a_user_with_no_folder_is_noted(one_user: Path, args: list[str]) -> None:
    result = CliRunner().invoke(cli, [*args, "--user", "u_andew", "--root", str(one_user)])
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[-1] == (
        "note: no user u_andew in default_app/default_project of this root (did you mean "
        "'u_andrew'?)")


def test_the_json_document_stays_as_it_was(one_user: Path) -> None:
    result = CliRunner().invoke(cli, ["worldview", "--user", "zz", "--json", "--root",
                                      str(one_user)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"convictions": []}
    assert result.stderr == ("note: no user zz in default_app/default_project of this root "
                             "(it has 1 user)\n")


def test_a_user_of_another_app_is_noted(one_user: Path) -> None:
    result = CliRunner().invoke(cli, ["relations", "--user", "u_andrew", "--app", "acme",
                                      "--root", str(one_user)])
    assert result.exit_code == 0, result.output
    assert "note: no user u_andrew in acme/default_project of this root" in result.stderr


def test_a_user_that_exists_gets_no_note(one_user: Path) -> None:
    result = CliRunner().invoke(cli, ["insights", "--user", "u_andrew", "--root",
                                      str(one_user)])
    assert result.exit_code == 0, result.output
    assert "note:" not in result.stderr


@pytest.mark.parametrize(("filters", "note"), [
    (["--app", "acme"], "note: no users in app acme of this root (its apps: default_app)"),
    (["--app", "default_ap"], "note: no users in app default_ap of this root (did you mean "
                              "'default_app'?)"),
    (["--project", "nope"], "note: no users in project nope of this root (its projects: "
                            "default_project)"),
])
def test_search_without_user_notes_an_app_or_project_with_no_users(
        one_user: Path, filters: list[str], note: str) -> None:
    # `search dog --app acme` said only "No matching episodes.", exit 0, as if the app
    # existed and had nothing; `clusters`, `insights` and `lessons` said it on stderr
    result = CliRunner().invoke(cli, ["search", "dog", *filters, "--root", str(one_user)])
    assert result.exit_code == 0, result.output
    assert result.stdout == "No matching episodes.\n"
    assert result.stderr.splitlines()[-1] == note


def test_search_of_an_app_with_users_gets_no_note(one_user: Path) -> None:
    result = CliRunner().invoke(cli, ["search", "dog", "--app", "default_app", "--root",
                                      str(one_user)])
    assert result.exit_code == 0, result.output
    assert "note:" not in result.stderr and "1 result in" in result.stdout
