"""An empty value a person passes (``--app ''``, what ``--app "$APP"`` gives with the variable
unset) is refused naming it, as the API refuses ``"app_id": ""``: it was taken for "not
given", so ``add --app ''`` wrote into default_app, ``clusters --user ''`` listed every user
and ``recluster --user ''`` rebuilt every user's clusters, each with exit 0."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli

ID_WORDS = "use 1-128 characters from A-Z a-z 0-9 _ . -, starting with a letter or digit"


@pytest.mark.parametrize(("argv", "said"), [
    (["add", "--user", "u1", "--app", "", "--subject", "s", "--content", "c"],
     f"invalid app_id '': {ID_WORDS}"),
    (["add", "--user", "u1", "--project", "", "--subject", "s", "--content", "c"],
     f"invalid project_id '': {ID_WORDS}"),
    (["task", "add", "--user", "u1", "--app", "", "--type", "deploy", "--goal", "g",
      "--step", "s", "--outcome", "success"], f"invalid app_id '': {ID_WORDS}"),
    (["explain", "ep_20261012_0001", "--user", "u1", "--project", ""],
     f"invalid project_id '': {ID_WORDS}"),
    (["provenance", "ep_20261012_0001", "--user", "u1", "--app", ""],
     f"invalid app_id '': {ID_WORDS}"),
    (["undo", "ep_20261012_0001", "--user", "u1", "--app", ""],
     f"invalid app_id '': {ID_WORDS}"),
    (["clusters", "--user", ""], f"invalid user_id '': {ID_WORDS}"),
    (["recluster", "--user", ""], f"invalid user_id '': {ID_WORDS}"),
    # the field named once, as the option (it said "--type invalid task_type ''")
    (["task", "add", "--user", "u1", "--type", "", "--goal", "g", "--step", "s",
      "--outcome", "success"], f"invalid --type '': {ID_WORDS}"),
])
def test_an_empty_id_is_refused_naming_it(root: Path, argv: list[str], said: str) -> None:
    result = CliRunner().invoke(cli, [*argv, "--root", str(root)])
    assert result.exit_code == 1, result.output
    assert result.stderr == f"error: {said}\n"
    assert not list(root.rglob("*.md"))


@pytest.mark.parametrize("argv", [
    ["fleet", "status"], ["fleet", "run", "reflect_episodes"], ["status"],
    ["trigger", "reflect_episodes"], ["clusters"], ["strategies"],
])
def test_an_empty_fleet_path_is_said_to_be_empty(root: Path, argv: list[str]) -> None:
    # it was read as ".": "invalid configuration: .: (file): not a regular file"
    extra = [] if argv[0] == "fleet" else ["--root", str(root)]
    result = CliRunner().invoke(cli, [*argv, "--fleet", "", *extra])
    assert result.exit_code == 1, result.output
    assert result.stderr == "error: the fleet file is an empty path: pass the fleet.toml file\n"
