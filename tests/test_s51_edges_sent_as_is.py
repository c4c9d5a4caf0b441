"""What a client or a server sent, named as it was sent: a raw byte in a request line, two
Authorization headers, a ``-0`` in a JSON-RPC batch, a 200 that is no chat completion, and a
command-line value holding a byte that is no UTF-8.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.errors import ProviderUnavailable
from everos_reflect.llm.base import FactsRequest
from everos_reflect.llm.openai_llm import OpenAILLM
from everos_reflect.runtime import Runtime
from everos_reflect.settings import ServerSettings, Settings
from tests.api_client import ApiClient
from tests.status_fixtures import root_with_bad_log
from tests.test_mcp_eof import _opening, _serve
from tests.test_serve_slow_clients import _answer, port  # noqa: F401  (a fixture)


def test_a_raw_byte_in_the_request_line_is_quoted_as_the_byte_sent(
        port: int) -> None:  # noqa: F811
    line, body = _answer(port, b"GET /api/v1/h\xffalth?q=caf\xc3\xa9 HTTP/1.1\r\nHost: x\r\n\r\n")
    assert line == b"HTTP/1.1 400 Bad Request"
    assert body["error"]["code"] == "invalid_http"
    message = body["error"]["message"]
    assert message.startswith("the request is no valid HTTP/1.1: illegal request line "
                              "'GET /api/v1/h\\xffalth?q=café HTTP/1.1'"), message
    assert "\ufffd" not in message
    assert "percent-encode" in message


def test_two_authorization_headers_are_refused(root: Path) -> None:
    runtime = Runtime(root, Settings(server=ServerSettings(token="s3cret")),
                      embedder=HashEmbedder(64))
    try:
        call = ApiClient(runtime)
        right = call("GET", "/api/v1/status", headers={"authorization": "Bearer s3cret"})
        assert right.status_code == 200, right.text
        both = call("GET", "/api/v1/status", headers=[("authorization", "Bearer s3cret"),
                                                      ("authorization", "Bearer other")])
        assert both.status_code == 400, both.text
        assert both.json()["error"] == {
            "code": "invalid_request",
            "message": "the Authorization header is sent 2 times; send it once"}
    finally:
        runtime.close()


def test_a_negative_zero_in_a_json_rpc_batch_is_quoted_as_sent(
        root: Path, capfd: pytest.CaptureFixture[str]) -> None:
    batch = ('[{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": '
             '"search", "arguments": {"query": "x", "user_id": "u1", "top_k": -0}}}]')
    lines, runtime = _serve(root, _opening() + batch.encode() + b"\n", capfd, raw=True)
    runtime.close()
    [answers] = [line for line in lines if isinstance(line, list)]
    [answer] = answers
    assert answer["error"]["message"] == "top_k: must be a whole number from 1 to 100, got -0"


@pytest.fixture()
def answering() -> Iterator[tuple[list[tuple[bytes, str]], str]]:
    """A server answering every POST 200 with the next (body, content type) of the list."""
    replies: list[tuple[bytes, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", 0)))
            body, kind = replies.pop(0)
            self.send_response(200)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield replies, f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(("body", "kind", "said"), [
    (b"<html><body>Sign in to the proxy</body></html>", "text/html",
     "the text '<html><body>Sign in to the proxy</body></html>'"),
    (b'"hello"', "application/json", "the text 'hello'"),
    (b"[1, 2]", "application/json", "an array: [1, 2]"),
    (b"42", "application/json", "a number: 42"),
    (b"null", "application/json", "null"),
])
def test_a_200_that_is_no_chat_completion_is_named_with_what_it_held(
        answering: tuple[list[tuple[bytes, str]], str], body: bytes, kind: str,
        said: str) -> None:
    replies, url = answering
    replies.append((body, kind))
    llm = OpenAILLM(model="m", base_url=url, api_key="k", max_retries=0)
    with pytest.raises(ProviderUnavailable) as caught:
        llm.extract_facts(FactsRequest(text="Andrew walked Rex."))
    message = str(caught.value)
    assert f"unusable reply: not a chat completion: the server answered 200 with {said}; " \
           "is base_url an OpenAI-compatible endpoint" in message, message
    assert "no choices" not in message


def test_a_command_line_value_with_a_byte_that_is_no_utf8_is_said_so(root: Path) -> None:
    result = CliRunner().invoke(cli, ["lessons", "--root", str(root), "--user", "u1",
                                      "--task-type", "de\udcffploy"])
    assert result.exit_code == 1, result.output
    assert result.stderr == "error: task_type: holds the byte 0xFF, which is not UTF-8 text\n"


@pytest.mark.parametrize("cell", ["5", "not json", '{"line": 3}', "[[[[" * 2])
def test_status_reads_a_damaged_problems_cell_as_that_file_s_problem(
        tmp_path: Path, cell: str) -> None:
    import sqlite3

    root, runner = root_with_bad_log(tmp_path, indexed=True)
    conn = sqlite3.connect(root / ".index/sqlite/system.db")
    with conn:
        assert conn.execute("UPDATE files SET problems = ? WHERE problems != '[]'",
                            (cell,)).rowcount == 1
    conn.close()

    result = runner.invoke(cli, ["status", "--root", str(root), "--json"])

    assert result.exit_code == 0, result.output
    [item] = json.loads(result.stdout)["files_with_problems"]
    assert item["file"].endswith("episode-2026-10-12.md")
    assert item["problems"] == [
        "the index's record of this file's problems cannot be read (edited or damaged): "
        "`everos-reflect reindex` rebuilds it"]
