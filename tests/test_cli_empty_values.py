"""An empty value a person passes (``--app ''``, what ``--app "$APP"`` gives with the variable
unset) is refused naming it, as the API refuses ``"app_id": ""``: it was taken for "not
given", so ``add --app ''`` wrote into default_app, ``clusters --user ''`` listed every user
and ``recluster --user ''`` rebuilt every user's clusters, each with exit 0."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli


@pytest.mark.parametrize(("argv", "said"), [
    (["add", "--user", "u1", "--app", "", "--subject", "s", "--content", "c"],
     "invalid app_id '': must not be empty"),
    (["add", "--user", "u1", "--project", "", "--subject", "s", "--content", "c"],
     "invalid project_id '': must not be empty"),
    (["task", "add", "--user", "u1", "--app", "", "--type", "deploy", "--goal", "g",
      "--step", "s", "--outcome", "success"], "invalid app_id '': must not be empty"),
    (["explain", "ep_20261012_0001", "--user", "u1", "--project", ""],
     "invalid project_id '': must not be empty"),
    (["provenance", "ep_20261012_0001", "--user", "u1", "--app", ""],
     "invalid app_id '': must not be empty"),
    (["undo", "ep_20261012_0001", "--user", "u1", "--app", ""],
     "invalid app_id '': must not be empty"),
    (["clusters", "--user", ""], "invalid user_id '': must not be empty"),
    (["recluster", "--user", ""], "invalid user_id '': must not be empty"),
    # the field named once, as the option (it said "--type invalid task_type ''")
    (["task", "add", "--user", "u1", "--type", "", "--goal", "g", "--step", "s",
      "--outcome", "success"], "invalid --type '': must not be empty"),
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


# -- every string field of every POST body: "" is said to be empty, not a bad format -----------

EPISODE = {"user_id": "u1", "subject": "s", "content": "c"}
TASK = {"user_id": "u1", "task_type": "deploy", "goal": "g", "steps": ["s"],
        "outcome": "success"}
#: (route, a request that is accepted, the string fields it may hold); a list field's item is
#: written ``name.0``. ``outcome``, ``mode`` and ``kinds`` take one of a few words and are
#: refused by listing them.
BODIES = [
    ("/api/v1/memory/episodes", EPISODE,
     ["user_id", "app_id", "project_id", "subject", "content", "timestamp", "session_id"]),
    ("/api/v1/tasks", TASK, ["user_id", "app_id", "project_id", "task_type", "goal", "steps.0",
                             "errors.0", "outcome_note", "timestamp"]),
    ("/api/v1/ome/trigger", {"name": "reflect_episodes"}, ["name"]),
    ("/api/v1/ome/undo", {"entry_id": "ep_20261012_0001", "user_id": "u1"},
     ["entry_id", "user_id", "app_id", "project_id"]),
    ("/api/v1/memory/search", {"query": "q"}, ["query", "user_id", "app_id", "project_id"]),
    ("/api/v1/memory/briefing", {"user_id": "u1", "query": "q"},
     ["user_id", "app_id", "project_id", "query", "task_type"]),
    ("/api/v1/memory/relations/rel_20261012_0001/resolve", {"user_id": "u1", "note": "n"},
     ["user_id", "app_id", "project_id", "note"]),
]
CASES = [(route, body, field) for route, body, fields in BODIES for field in fields]


@pytest.mark.parametrize(("route", "body", "field"), CASES,
                         ids=[f"{r.rsplit('/', 1)[-1]}-{f}" for r, _, f in CASES])
def test_an_empty_string_in_a_post_body_is_said_to_be_empty(
        call: Any, route: str, body: dict[str, Any], field: str) -> None:
    # "timestamp": "" was "'' is not ISO 8601 with a date, a time and an offset", "user_id":
    # "" "use 1-128 characters from A-Z ...", "entry_id": "" "invalid episode id ''"
    name, _, item = field.partition(".")
    sent = {**body, name: [""] if item else ""}
    resp = call("POST", route, json=sent)
    assert resp.status_code == 422, resp.text
    message = resp.json()["error"]["message"]
    assert "must not be empty" in message and name in message, message


@pytest.mark.parametrize("blank", ["", "  "], ids=["empty", "spaces"])
def test_add_says_an_empty_timestamp_is_empty(root: Path, blank: str) -> None:
    result = CliRunner().invoke(cli, ["add", "--root", str(root), "--user", "u1", "--subject",
                                      "s", "--content", "c", "--timestamp", blank])
    assert result.exit_code == 1, result.output
    assert result.stderr == ("error: --timestamp must not be empty (leave it out for the time "
                             "now)\n")
    assert not list(root.rglob("*.md"))
