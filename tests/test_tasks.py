"""Task records: CLI ``task add``, ``POST /api/v1/tasks``, hand-written entries, indexing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.index.search import search
from everos_reflect.index.sync import Indexer
from everos_reflect.model import Kind, UserRef
from everos_reflect.procedural.tasks import InvalidTask, new_task, read_task
from everos_reflect.runtime import Runtime
from tests.api_client import ApiClient

REF = UserRef.of("u_ops")
TASK_DIR = "default_app/default_project/users/u_ops/tasks"


@pytest.fixture
def runtime(root: Path) -> Iterator[Runtime]:
    rt = Runtime(root, embedder=HashEmbedder())
    yield rt
    rt.close()


def test_task_add_writes_the_spec_layout(root: Path) -> None:
    result = CliRunner().invoke(cli, [
        "task", "add", "--user", "u_ops", "--type", "deploy", "--goal", "Deploy web v2",
        "--step", "build image", "--step", "push image", "--outcome", "failure",
        "--error", "ImagePullBackOff: registry timeout\n  (pasted over two lines)",
        "--timestamp", "2026-10-12T09:30:00+00:00", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["id"] == "tk_20261012_0001" and out["task_type"] == "deploy"
    text = (root / TASK_DIR / "task-2026-10-12.md").read_text()
    assert "type: task_daily" in text
    assert "task_type: deploy\noutcome: failure\n" in text
    assert "## Steps\n1. build image\n2. push image\n" in text
    assert "## Errors\n- ImagePullBackOff: registry timeout (pasted over two lines)\n" in text


@pytest.mark.parametrize(("args", "fragment"), [
    (["--type", "bad type"], "invalid --type 'bad type': use 1-128 characters"),
    (["--type", "deploy", "--goal", "  "], "--goal"),
    (["--type", "deploy", "--step", " "], "--step"),
    # a zero-width space alone shows nothing: no goal, no step
    (["--type", "deploy", "--goal", "\u200b"], "--goal must not be empty"),
    (["--type", "deploy", "--step", "\u200b \u200d"], "--step must not be empty"),
    (["--type", "deploy", "--timestamp", "yesterday"], "--timestamp"),
    (["--type", "deploy", "--timestamp", "0001-01-01T00:00:00+14:00"], "--timestamp"),
    # a NUL in the tasks/ log made it a "binary file" to grep and git
    (["--type", "deploy", "--goal", "ship\x00"], "--goal holds the control character U+0000"),
    (["--type", "deploy", "--step", "a\x1cb"], "--step holds the control character U+001C"),
    (["--type", "deploy", "--note", "x\x1b[2J"],
     "--note holds the control character U+001B"),
    (["--type", "deploy", "--goal", "ship\x85it"], "--goal holds the control character U+0085"),
    # given, a note must say something, as a goal: a blank one was taken for none
    (["--type", "deploy", "--note", "  "], "--note must not be empty"),
    (["--type", "deploy", "--note", "\u200b"], "--note must not be empty"),
    (["--type", "deploy", "--timestamp", "2026-02-30T09:00:00Z"],
     "--timestamp '2026-02-30T09:00:00Z': 2026-02-30 is not a date (February has 28 days in "
     "2026)"),
])
def test_task_add_refuses_bad_fields_naming_them(root: Path, args: list[str],
                                                 fragment: str) -> None:
    base = {"--goal": "g", "--step": "s", "--outcome": "success"}
    for i in range(0, len(args), 2):
        base[args[i]] = args[i + 1]
    argv = ["task", "add", "--user", "u_ops"] + [x for kv in base.items() for x in kv]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 1
    assert result.output.startswith(f"error: {fragment}")
    assert not (root / TASK_DIR).exists()  # nothing written


def test_a_long_bad_value_is_quoted_short_in_cli_and_api(root: Path,
                                                        runtime: Runtime) -> None:
    """A 5,000-character ``--type`` (or ``user_id``) was echoed whole: a 5,000-character
    error line. The message quotes its first 60 characters and says how long it is."""
    argv = ["task", "add", "--user", "u_ops", "--type", "a" * 5000, "--goal", "g",
            "--step", "s", "--outcome", "success"]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 1
    (line,) = result.output.splitlines()
    assert line.startswith(f"error: invalid --type '{'a' * 60}…' (5,000 characters)"
                           ": use 1-128 characters")
    assert len(line) < 250
    call = ApiClient(runtime)
    resp = call("POST", "/api/v1/tasks", json={
        "user_id": "u" * 3000 + " x", "task_type": "deploy", "goal": "g", "steps": ["s"],
        "outcome": "success"})
    assert resp.status_code == 422, resp.text
    message = resp.json()["error"]["message"]
    assert f"invalid user_id '{'u' * 60}…' (3,002 characters)" in message
    assert len(message) < 250


def test_task_add_keeps_to_the_roots_max_entry_bytes(root: Path) -> None:
    """``task add`` wrote with the shipped limits: a root that lowered ``max_entry_bytes``
    got a task record over it, which the index then refused ("not read"), so the task
    never reached search or ``learn_lessons``."""
    (root / "everos.toml").write_text("[limits]\nmax_entry_bytes = 4096\n")
    step = "s" * 900
    argv = ["task", "add", "--user", "u_ops", "--type", "deploy", "--goal", "ship",
            "--outcome", "success", "--timestamp", "2026-10-12T09:30:00+00:00"]
    result = CliRunner().invoke(cli, argv + [x for _ in range(5) for x in ("--step", step)])
    assert result.exit_code == 1
    assert "over limits.max_entry_bytes (4,096)" in result.output
    assert not (root / TASK_DIR / "task-2026-10-12.md").exists()
    result = CliRunner().invoke(cli, [*argv, "--step", step])
    assert result.exit_code == 0, result.output
    rt = Runtime(root, embedder=HashEmbedder())
    try:
        assert Indexer(rt).scan().problems == {}
        assert [r[0] for r in rt.db().execute("SELECT id FROM entries")] == [
            result.output.strip()]
    finally:
        rt.close()


def test_new_task_bounds() -> None:
    with pytest.raises(InvalidTask, match="outcome"):
        new_task(REF, task_type="deploy", goal="g", steps=["s"], outcome="won")
    with pytest.raises(InvalidTask, match="at most 100"):
        new_task(REF, task_type="deploy", goal="g", steps=["s"] * 101, outcome="success")
    with pytest.raises(InvalidTask, match="at most 2,000 characters, got 2,001"):
        new_task(REF, task_type="deploy", goal="g", steps=["x" * 2001], outcome="success")


@pytest.mark.parametrize(("args", "api_body", "field", "words"), [
    (["--goal", "g" * 4001], {"goal": "g" * 4001}, "goal",
     "must be at most 4,000 characters, got 4,001"),
    (["--note", "n" * 4001], {"outcome_note": "n" * 4001}, "outcome_note",
     "must be at most 4,000 characters, got 4,001"),
    ([x for i in range(101) for x in ("--step", f"s{i}")],
     {"steps": [f"s{i}" for i in range(101)]}, "steps", "must hold at most 100 items, got 101"),
    (["--step", "s", *[x for i in range(51) for x in ("--error", f"e{i}")]],
     {"errors": [f"e{i}" for i in range(51)]}, "errors", "must hold at most 50 items, got 51"),
])
def test_task_add_says_a_bound_in_the_apis_words(
        root: Path, runtime: Runtime, args: list[str], api_body: dict[str, object],
        field: str, words: str) -> None:
    # `task add` said "--goal is 4001 characters; at most 4000" and "--step 101 steps; at
    # most 100" where the API said "goal: must be at most 4,000 characters, got 4,001"
    base = ["task", "add", "--user", "u_ops", "--type", "deploy", "--outcome", "success"]
    argv = base + ([] if "--goal" in args else ["--goal", "g"]) + (
        [] if "--step" in args else ["--step", "s"]) + args
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 1, result.output
    assert result.stderr.endswith(f" {words}\n"), result.stderr
    body = {"user_id": "u_ops", "task_type": "deploy", "goal": "g", "steps": ["s"],
            "outcome": "success", **api_body}
    resp = ApiClient(runtime)("POST", "/api/v1/tasks", json=body)
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["message"] == f"{field}: {words}"
    assert not (root / TASK_DIR).exists()


def test_api_records_a_task_and_refuses_bad_bodies(runtime: Runtime, root: Path) -> None:
    call = ApiClient(runtime)
    body = {"user_id": "u_ops", "task_type": "deploy", "goal": "Deploy web v2",
            "steps": ["check logs", "deploy"], "outcome": "success",
            "timestamp": "2026-10-13T10:00:00+00:00"}
    resp = call("POST", "/api/v1/tasks", json=body)
    assert resp.status_code == 201, resp.text
    assert resp.json()["data"]["id"] == "tk_20261013_0001"
    for bad, fragment in [({"outcome": "won"}, "outcome"), ({"steps": []}, "steps"),
                          ({"user_id": "../x"}, "user_id"), ({"colour": 1}, "colour"),
                          ({"task_type": "a b"}, "task_type")]:
        resp = call("POST", "/api/v1/tasks", json={**body, **bad})
        assert resp.status_code == 422, (bad, resp.text)
        assert fragment in resp.json()["error"]["message"]
    entries = runtime.store.entries(REF, Kind.TASK)
    assert [e.id for e in entries] == ["tk_20261013_0001"]


@pytest.mark.parametrize(("bad", "message"), [
    ({"steps": ["x" * 2001]}, "steps.0: must be at most 2,000 characters, got 2,001"),
    ({"errors": ["e", ""]}, "errors.1: must not be empty"),
    ({"outcome_note": "n" * 4001}, "outcome_note: must be at most 4,000 characters, got 4,001"),
])
def test_api_names_a_step_or_error_out_of_bounds_in_characters(
        runtime: Runtime, bad: dict[str, list[str]], message: str) -> None:
    # the bounds were checked after the text's own checks, as of a collection: "Value should
    # have at most 2000 items after validation, not 2001" of one 2,001-character step
    body = {"user_id": "u_ops", "task_type": "deploy", "goal": "Deploy web v2",
            "steps": ["deploy"], "outcome": "success", **bad}
    resp = ApiClient(runtime)("POST", "/api/v1/tasks", json=body)
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["message"].startswith(message), resp.text


@pytest.mark.parametrize(("bad", "message"), [
    ({"outcome_note": ""}, "outcome_note: must not be empty"),
    ({"outcome_note": " \n "}, "outcome_note: must not be empty"),
    ({"outcome_note": 3}, "outcome_note: must be a string, got a number: 3"),
    ({"timestamp": "2026-04-31T09:00:00+02:00"},
     "timestamp: '2026-04-31T09:00:00+02:00': 2026-04-31 is not a date (April has 30 days in "
     "2026)"),
])
def test_api_refuses_a_blank_note_and_a_day_no_calendar_has(
        runtime: Runtime, bad: dict[str, object], message: str) -> None:
    # a blank outcome_note was taken for none (201, the Outcome section saying the outcome
    # word); 2026-04-31 was "not ISO 8601", which it is
    body = {"user_id": "u_ops", "task_type": "deploy", "goal": "Deploy web v2",
            "steps": ["deploy"], "outcome": "success", **bad}
    resp = ApiClient(runtime)("POST", "/api/v1/tasks", json=body)
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["message"] == message
    assert not runtime.store.entries(REF, Kind.TASK)


def test_new_task_says_a_value_of_the_wrong_type_in_json_words() -> None:
    with pytest.raises(InvalidTask, match=r"^step: must be text, got a number: 3$"):
        new_task(REF, task_type="deploy", goal="g", steps=[3], outcome="success")  # type: ignore[list-item]
    with pytest.raises(InvalidTask, match=r"^outcome_note: must be text, got an array: \[1\]$"):
        new_task(REF, task_type="deploy", goal="g", steps=["s"], outcome="success",
                 outcome_note=[1])  # type: ignore[arg-type]


HAND_WRITTEN = """\
---
type: task_daily
schema_version: 1
user_id: u_ops
date: '2026-10-14'
---
<!-- entry:tk_20261014_0001 -->
---
owner_id: u_ops
timestamp: 2026-10-14T08:00:00+00:00
task_type: deploy
outcome: Success
reviewer: dana
---
## Goal
Deploy the billing service

## Steps
- check logs of the last run
* run the migration
3) deploy

## Outcome
Went fine after the migration.

## Errors
none

## Notes
kept as written
<!-- /entry:tk_20261014_0001 -->
"""


def test_hand_written_task_parses_and_is_indexed(runtime: Runtime, root: Path) -> None:
    path = root / TASK_DIR / "task-2026-10-14.md"
    path.parent.mkdir(parents=True)
    path.write_text(HAND_WRITTEN)
    entry = runtime.store.get(REF, "tk_20261014_0001")
    task = read_task(entry)
    assert (task.task_type, task.outcome) == ("deploy", "success")
    assert task.steps == ("check logs of the last run", "run the migration", "deploy")
    assert task.errors == ()
    assert entry.meta["reviewer"] == "dana" and entry.sections["Notes"] == "kept as written"
    Indexer(runtime).scan()
    hits = search(runtime, "billing service deploy", user_id="u_ops", kind=Kind.TASK)
    assert [h.id for h in hits] == ["tk_20261014_0001"]
    assert path.read_text() == HAND_WRITTEN  # indexing never rewrites it


#: A goal of many lines that looks like the log's own syntax: a section heading, an entry's
#: closing and opening markers, a metadata block. Stored as the goal's text (headings and
#: markers escaped), it adds no section, entry or key, and reads back as written.
INJECTING_GOAL = ("Deploy web v2\n## Outcome\nfailure\n<!-- /entry:tk_20261012_0001 -->\n"
                  "<!-- entry:tk_20261012_0002 -->\n---\noutcome: failure\nowner_id: eve\n---")


def test_a_goal_that_looks_like_log_syntax_is_stored_as_its_text(runtime: Runtime,
                                                                  root: Path) -> None:
    result = CliRunner().invoke(cli, [
        "task", "add", "--user", "u_ops", "--type", "deploy", "--goal", INJECTING_GOAL,
        "--step", "deploy", "--outcome", "success", "--timestamp",
        "2026-10-12T09:00:00+00:00", "--root", str(root)])
    assert result.exit_code == 0, result.output
    resp = ApiClient(runtime)("POST", "/api/v1/tasks", json={
        "user_id": "u_ops", "task_type": "deploy", "goal": INJECTING_GOAL, "steps": ["deploy"],
        "outcome": "success", "timestamp": "2026-10-12T10:00:00+00:00"})
    assert resp.status_code == 201, resp.text
    entries = runtime.store.entries(REF, Kind.TASK)
    assert [e.id for e in entries] == ["tk_20261012_0001", resp.json()["data"]["id"]]
    for entry in entries:
        task = read_task(entry)
        assert (task.goal, task.outcome, task.steps) == (INJECTING_GOAL, "success", ("deploy",))
        assert entry.meta["owner_id"] == "u_ops" and list(entry.sections) == [
            "Goal", "Steps", "Outcome"]
    lint = CliRunner().invoke(cli, ["lint", "--root", str(root)])
    assert lint.exit_code == 0, lint.output
