"""A value outside a fixed set is refused in one wording by the CLI and the API
(:func:`everos_reflect.problem_words.one_of`: ``must be one of: …; got 'x'``). ``relations
--status bogus`` said "unknown status 'bogus' (use one of …)" where the API's 422 said "must be
one of: …", and on a root without users it took the value and answered "no relations with
status bogus"; click's own choices said "'x' is not one of 'a', 'b'"."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.embedding import HashEmbedder
from everos_reflect.runtime import Runtime
from tests.api_client import ApiClient

RELATIONS = "must be one of: active, resolved, stale, retired; got 'bogus'"
MODES = "must be one of: hybrid, vector, keyword; got 'bogus'"


def _api_message(root: Path, method: str, url: str, body: dict[str, object] | None) -> str:
    rt = Runtime(root, embedder=HashEmbedder(16))
    try:
        resp = ApiClient(rt)(method, url, **({"json": body} if body else {}))
    finally:
        rt.close()
    assert resp.status_code == 422, resp.text
    return str(resp.json()["error"]["message"])


@pytest.mark.parametrize(("args", "option", "method", "url", "body", "words"), [
    (["relations", "--status", "bogus"], "--status", "GET",
     "/api/v1/memory/relations?user_id=u1&status=bogus", None, RELATIONS),
    (["relations", "--user", "u1", "--status", "bogus"], "--status", "GET",
     "/api/v1/memory/relations?user_id=u1&status=bogus", None, RELATIONS),
    (["search", "dogs", "--mode", "bogus"], "--mode", "POST", "/api/v1/memory/search", {
        "query": "dogs", "mode": "bogus"}, MODES),
])
def test_the_cli_refuses_a_value_outside_the_set_in_the_apis_words(
        root: Path, args: list[str], option: str, method: str, url: str,
        body: dict[str, object] | None, words: str) -> None:
    result = CliRunner().invoke(cli, [*args, "--root", str(root)])
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: Invalid value for '{option}': {words}"), line
    assert _api_message(root, method, url, body).endswith(words)


def test_a_valid_status_is_still_taken(root: Path) -> None:
    result = CliRunner().invoke(cli, ["relations", "--status", "resolved", "--root", str(root)])
    assert result.exit_code == 0, result.output
    assert result.stdout == "no relations with status resolved\n"
