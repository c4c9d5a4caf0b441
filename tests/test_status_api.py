"""``status`` and ``lint`` are library functions (everos_reflect/status.py, lint.py): the CLI and
the HTTP API report the same document, unparseable files included (SPEC §3)."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.embedding import HashEmbedder
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from tests.api_client import ApiClient
from tests.store_fixtures import refuse_reads

BROKEN = "default_app/default_project/users/u_ann/episodes/episode-2026-10-13.md"


@pytest.fixture
def rt(root: Path) -> Runtime:
    runtime = Runtime(root, Settings(), embedder=HashEmbedder(32), llm=ExtractiveLLM())
    runtime.store.append(UserRef.of("u_ann"), Kind.EPISODE,
                         {"timestamp": "2026-10-12T09:00:00+00:00", "parent_type": "memcell",
                          "parent_id": "mc_1", "session_id": "s1"},
                         {"Subject": "Deploy", "Content": "The deploy went out."},
                         day=date(2026, 10, 12))
    path = root / BROKEN
    path.write_text("---\ntype: [unclosed\n---\n<!-- entry:ep_20261013_0001 -->\n", "utf-8")
    Indexer(runtime).scan()
    yield runtime
    runtime.close()


def cli_json(*args: str) -> dict:
    result = CliRunner().invoke(cli, list(args))
    return json.loads(result.stdout)


def test_the_api_status_is_the_cli_status_unparseable_files_included(rt: Runtime,
                                                                     root: Path) -> None:
    resp = ApiClient(rt)("GET", "/api/v1/status")
    assert resp.status_code == 200
    api = resp.json()["data"]
    assert [f["file"] for f in api["files_with_problems"]] == [BROKEN]
    assert api["counts_from"] == "index"
    assert api["totals"]["episode"] == {"live": 1, "deprecated": 0}
    cli_doc = cli_json("status", "--root", str(root), "--json")
    for key in ("root", "counts_from", "users", "totals", "files_with_problems",
                "files_with_warnings", "config",
                "merges"):
        assert api[key] == cli_doc[key], key
    assert [r["name"] for r in api["strategies"]] == [r["name"] for r in cli_doc["strategies"]]


def test_status_names_a_log_it_may_not_read_as_lint_does(
        rt: Runtime, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Counting from the index, status read no log, and the indexer skips a log it may not
    # open: lint said "not read: Permission denied", status "no files with problems".
    # Tests run as root, where ``chmod 000`` blocks no read: the store's open is refused.

    locked = "default_app/default_project/users/u_ann/episodes/episode-2026-10-12.md"
    refuse_reads(monkeypatch, root / locked)
    api = ApiClient(rt)("GET", "/api/v1/status").json()["data"]
    assert api["counts_from"] == "index"
    assert {f["file"]: f["problems"] for f in api["files_with_problems"]}[locked] == [
        "not read: Permission denied"]
    assert api["files_with_problems"] == cli_json("status", "--root", str(root),
                                                  "--json")["files_with_problems"]
    lint = cli_json("lint", "--root", str(root), "--json")
    assert [p["message"] for p in lint["problems"] if p["file"] == locked] == [
        "not read: Permission denied"]
    text = CliRunner().invoke(cli, ["status", "--root", str(root)]).stdout
    assert locked in text and "not read: Permission denied" in text


def test_the_api_lint_is_the_cli_lint(rt: Runtime, root: Path) -> None:
    resp = ApiClient(rt)("GET", "/api/v1/lint")
    assert resp.status_code == 200
    api = resp.json()["data"]
    assert api["ok"] is False and api["files_checked"] == 2
    assert [p["file"] for p in api["problems"]] == [BROKEN]
    assert api == cli_json("lint", "--root", str(root), "--json")


def test_status_and_lint_need_the_token_when_one_is_set(root: Path) -> None:
    from everos_reflect.settings import ServerSettings

    runtime = Runtime(root, Settings(server=ServerSettings(token="s3cret")),
                      embedder=HashEmbedder(32), llm=ExtractiveLLM())
    try:
        client = ApiClient(runtime)
        for url in ("/api/v1/status", "/api/v1/lint"):
            assert client("GET", url).status_code == 401
            ok = client("GET", url, headers={"Authorization": "Bearer s3cret"})
            assert ok.status_code == 200
    finally:
        runtime.close()


NAIVE = "default_app/default_project/users/u_bo/episodes/episode-2026-10-12.md"
COPY = "default_app/default_project/users/u_bo/episodes/episode-2026-10-12.copy.md"


@pytest.mark.parametrize("counted_from", ["index", "markdown"])
def test_status_counts_the_files_lint_warns_about(root: Path, counted_from: str) -> None:
    # Only errors were counted: status said "no files with problems" for a root whose logs
    # held warnings, while lint exited 1 on it. The warnings are counted apart (lint shows
    # them), from what status reads anyway: the index's diagnostics or the Markdown scan.
    text = ("---\ntype: episode_daily\nschema_version: 1\nuser_id: u_bo\ndate: '2026-10-12'\n"
            "---\n<!-- entry:ep_20261012_0001 -->\n---\nowner_id: u_bo\n"
            "timestamp: 2026-10-12T10:00:00\nparent_type: memcell\nparent_id: s1\n---\n"
            "## Subject\nNaive\n\n## Content\nA timestamp without an offset.\n"
            "<!-- /entry:ep_20261012_0001 -->\n")
    for rel in (NAIVE, COPY):  # COPY: named like no log, not read (a lint warning)
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, "utf-8")
    if counted_from == "index":
        runtime = Runtime(root, Settings(), embedder=HashEmbedder(32), llm=ExtractiveLLM())
        Indexer(runtime).scan()
        runtime.close()
    lint = CliRunner().invoke(cli, ["lint", "--root", str(root), "--json"])
    assert lint.exit_code == 1
    assert {p["severity"] for p in json.loads(lint.stdout)["problems"]} == {"warning"}
    doc = cli_json("status", "--root", str(root), "--json")
    assert doc["counts_from"] == counted_from
    assert doc["files_with_problems"] == []
    assert doc["files_with_warnings"] == [{"file": COPY, "warnings": 1},
                                          {"file": NAIVE, "warnings": 1}]
    if counted_from == "index":  # a second status counts from the index status opened
        shown = CliRunner().invoke(cli, ["status", "--root", str(root)]).stdout
        assert ("no files with errors; 2 files with warnings (`everos-reflect lint` lists "
                "them)") in shown
        assert "no files with problems" not in shown


def test_status_on_a_root_with_no_index_creates_none_and_keeps_counting_the_markdown(
    root: Path,
) -> None:
    # Reading the strategies' last runs opened system.db, which created an empty index; the
    # next status took that for the root's counts and showed "0 / 0" Episodes.
    added = CliRunner().invoke(cli, ["add", "--root", str(root), "--user", "u_cy",
                                     "--subject", "Garden", "--content", "Planted tomatoes.",
                                     "--timestamp", "2026-10-12T09:00:00+00:00"])
    assert added.exit_code == 0, added.output
    assert not list(root.rglob("system.db*"))
    for _ in range(2):
        doc = cli_json("status", "--root", str(root), "--json")
        assert doc["counts_from"] == "markdown"
        assert doc["totals"]["episode"] == {"live": 1, "deprecated": 0}
        assert all(s["last_run"] is None for s in doc["strategies"])
    assert not list(root.rglob("system.db*"))
    runs = CliRunner().invoke(cli, ["runs", "--root", str(root), "--json"])
    assert runs.exit_code == 0, runs.output
    assert not list(root.rglob("system.db*"))
