"""A count agrees with its noun ("1 user", "2 users") in what `status`, `fleet status`,
`recluster`, `lessons`, the API and a run's reason say: they printed "1 user(s)", "1
interrupted merge(s) await recovery", "unknown query parameter(s)". One table per message
family, each message said of one and of two."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from tests.api_client import ApiClient

OWNER = {"app_id": "default_app", "project_id": "default_project", "user_id": "ada"}


def _aside(n: int) -> dict[str, Any]:
    return {"set_aside": [{**OWNER, "cluster_id": f"cl_{i}", "reason": "HTTP 413"}
                          for i in range(n)]}


def _live_beside(n: int) -> dict[str, Any]:
    return {"live_beside_sources": [{**OWNER, "narrative": "ep_20261001_0009",
                                     "live_sources": [f"ep_20261001_000{i + 1}"
                                                      for i in range(n)]}]}


def _held(n: int) -> dict[str, Any]:
    return {"held_back": [{**OWNER, "cluster_id": "cl_1", "members": ["a"] * n,
                           "reason": "undone"}]}


def _too_deep(n: int) -> dict[str, Any]:
    return {"held_too_deep": [{**OWNER, "tier": "reflect_insights", "max_depth": 2,
                               "insight_id": f"in_{i}", "waiting": [f"in_w{j}" for j in range(n)]}
                              for i in range(n)]}


#: (what the status document holds for a count of n, what `status` says of 1, of 2)
STATUS: list[tuple[str, Callable[[int], dict[str, Any]], str, str]] = [
    ("merges", lambda n: {"interrupted": n},
     "1 interrupted merge awaits recovery (any command that writes, `serve` or the next run "
     "settles it)",
     "2 interrupted merges await recovery (any command that writes, `serve` or the next run "
     "settles them)"),
    ("merges", lambda n: {"interrupted_undos": n},
     "1 interrupted undo awaits recovery", "2 interrupted undos await recovery"),
    ("merges", _aside, "1 cluster set aside: the server refused its merge for good",
     "2 clusters set aside: the server refused their merge for good"),
    ("merges", _live_beside, "is live beside its live source ep_20261001_0001",
     "is live beside its live sources ep_20261001_0001, ep_20261001_0002"),
    ("merges", _held,
     "held back after an undo (1 episode waits for a new member",
     "held back after an undo (2 episodes wait for a new member"),
    ("insights", _too_deep,
     "1 insight held stale: a verdict would stand it deeper than max_depth 2 "
     "(reflect_insights); it is not revalidated until you raise max_depth",
     "2 insights held stale: a verdict would stand them deeper than max_depth 2 "
     "(reflect_insights); they are not revalidated until you raise max_depth"),
    ("insights", _too_deep, "(1 stale insight citing it waits with it: in_w0)",
     "(2 stale insights citing it wait with it: in_w0, in_w1)"),
]


@pytest.fixture(scope="module")
def status_doc(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The status document of a new root, as `status --json` gives it."""
    root = tmp_path_factory.mktemp("counts") / "root"
    assert CliRunner().invoke(cli, ["init", str(root)]).exit_code == 0
    result = CliRunner().invoke(cli, ["status", "--root", str(root), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize(("part", "holds", "one", "two"), STATUS,
                         ids=[f"{p}-{one.split(':')[0][:30]}" for p, _, one, _ in STATUS])
def test_status_counts_agree_with_their_nouns(
        status_doc: dict[str, Any], capsys: pytest.CaptureFixture[str], part: str,
        holds: Callable[[int], dict[str, Any]], one: str, two: str) -> None:
    from everos_reflect.cli.store_cmds import _render_status

    for n, said in ((1, one), (2, two)):
        _render_status({**status_doc, part: {**(status_doc.get(part) or {}), **holds(n)}})
        text = " ".join(capsys.readouterr().out.split())  # rich may wrap a long line
        assert said in text, (n, text)
        assert "(s)" not in text, text


def test_fleet_status_counts_the_logs_behind() -> None:
    from everos_reflect.cli.fleet_cmds import _lag_text

    behind = {"files_changed": 1, "files_deleted": 0, "lag_seconds": 3.0}
    assert _lag_text(behind) == "1 log, 3 s"
    assert _lag_text({**behind, "files_deleted": 1}) == "2 logs, 3 s"


@pytest.mark.parametrize(("query", "said"), [
    ("limt=5", "unknown query parameter: limt; "),
    ("limt=5&usr=a", "unknown query parameters: limt, usr; "),
    ("task_type=build", "query parameter given more than once: task_type; "),
    ("task_type=build&limit=3&limit=4", "query parameters given more than once: limit, "
                                        "task_type; "),
], ids=["one-unknown", "two-unknown", "one-repeated", "two-repeated"])
def test_the_api_counts_the_query_parameters_it_refuses(root: Path, query: str,
                                                        said: str) -> None:
    from everos_reflect.embedding.base import HashEmbedder
    from everos_reflect.runtime import Runtime

    runtime = Runtime(root, embedder=HashEmbedder(64))
    try:
        resp = ApiClient(runtime)("GET", f"/api/v1/lessons?task_type=deploy&{query}")
    finally:
        runtime.close()
    assert resp.status_code == 422, resp.text
    assert said in resp.json()["error"]["message"]


def _said_texts(tree: ast.AST) -> list[ast.AST]:
    """The string literals of a module that reach a reader (logs, errors, output): every
    one but docstrings, which quote the old words on purpose."""
    docs = {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef
                          | ast.AsyncFunctionDef)
            and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)}
    return [node for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docs]


def test_no_message_counts_with_a_plural_in_brackets() -> None:
    # log lines said "abandoned 1 MCP request(s)", "1 record(s) left out", "gives 1 vector(s)
    # for 2 text(s)", "fleet scheduler for 1 root(s)": problem_words.counted says it
    import everos_reflect

    package = Path(everos_reflect.__file__).parent
    found = [f"{path.relative_to(package)}:{node.lineno}: {node.value!r}"
             for path in sorted(package.rglob("*.py"))
             for node in _said_texts(ast.parse(path.read_text(encoding="utf-8")))
             if re.search(r"\w\(s\)", node.value)]
    assert found == []
