"""The MCP server over real stdio: spawned as ``everos-reflect mcp``, driven by the official client.

One server process serves the whole module (spawning it loads the ONNX embedder once), and
every tool is called through it: good calls answer what the HTTP API answers, bad input gets
an MCP error naming the problem, and the server stays up after each error.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from everos_reflect.api.mcp_server import tools

pytestmark = pytest.mark.slow


def _params(root: Path) -> StdioServerParameters:
    env = {"EVEROS_ROOT": str(root), "HOME": str(root.parent)}
    return StdioServerParameters(
        command=sys.executable, args=["-m", "everos_reflect.cli.main", "mcp", "--root", str(root)],
        env=env, cwd=os.getcwd(),
    )


def _run(root: Path, script: Any) -> Any:
    """Run ``script(client)`` against a freshly spawned server; returns its result."""

    async def main() -> Any:
        async with Client(_params(root), mode="legacy", read_timeout_seconds=60) as client:
            return await script(client)

    return anyio.run(main)


def _data(result: Any) -> dict[str, Any]:
    assert not result.is_error
    text = json.loads(result.content[0].text)
    assert text == result.structured_content  # one answer, two renderings
    return text


def test_lists_every_tool_with_the_http_request_schema(root: Path) -> None:
    async def script(client: Client) -> Any:
        return (await client.list_tools()).tools

    listed = {t.name: t for t in _run(root, script)}
    expected = {t.name: t for t in tools()}
    assert set(listed) == set(expected) >= {"add_episode", "search"}
    for name, tool in listed.items():
        assert tool.input_schema["properties"] == expected[name].schema()["properties"]
    assert "user_id" in listed["add_episode"].input_schema["required"]


def test_add_then_search_then_bad_input_over_stdio(root: Path) -> None:
    async def script(client: Client) -> dict[str, Any]:
        out: dict[str, Any] = {}
        out["added"] = _data(await client.call_tool("add_episode", {
            "user_id": "u_ann", "subject": "Pets",
            "content": "Ann adopted a grey cat called Miso.",
            "timestamp": "2026-10-12T09:30:00+00:00"}))
        out["found"] = _data(await client.call_tool("search", {
            "query": "which cat did Ann adopt", "user_id": "u_ann"}))
        out["briefing"] = _data(await client.call_tool("briefing", {
            "user_id": "u_ann", "query": "which cat did Ann adopt", "max_tokens": 200}))
        out["task"] = _data(await client.call_tool("record_task", {
            "user_id": "u_ann", "task_type": "deploy", "goal": "Deploy web v2",
            "steps": ["check logs", "deploy"], "outcome": "success",
            "timestamp": "2026-10-13T09:00:00+00:00"}))
        out["lessons"] = _data(await client.call_tool("lessons", {"task_type": "deploy"}))
        out["insights"] = _data(await client.call_tool("insights", {"user_id": "u_ann"}))
        out["explain"] = _data(await client.call_tool("explain", {
            "user_id": "u_ann", "entry_id": out["added"]["id"]}))
        out["errors"] = []
        for name, args in [
            ("add_episode", {"user_id": "../etc", "subject": "s", "content": "c"}),
            ("add_episode", {"user_id": "u_ann", "subject": "s"}),
            ("add_episode", {"user_id": "u_ann", "subject": "s", "content": "c",
                             "timestamp": "yesterday"}),
            ("search", {"query": "x", "top_k": 0}),
            ("search", {"query": "x", "colour": "red"}),
            ("no_such_tool", {}),
            ("record_task", {"user_id": "u_ann", "task_type": "deploy", "goal": "g",
                             "steps": ["s"], "outcome": "won"}),
            ("briefing", {"user_id": "u_ann", "query": "cat", "max_tokens": 0}),
            ("lessons", {"task_type": "de ploy"}),
            ("explain", {"user_id": "u_ann", "entry_id": "in_20261012_0009"}),
            ("insights", {"user_id": "u/ann"}),
            ("search", {"query": "x", "passages_per_entry": 0}),
        ]:
            try:
                await client.call_tool(name, args)
            except MCPError as exc:
                out["errors"].append((exc.code, exc.message))
            else:
                out["errors"].append(None)
        # still serving after all of that
        out["after"] = _data(await client.call_tool("search", {"query": "Miso",
                                                               "user_id": "u_ann"}))
        return out

    out = _run(root, script)
    added = out["added"]
    assert added["id"].startswith("ep_20261012_")
    assert added["user_id"] == "u_ann" and added["timestamp"] == "2026-10-12T09:30:00+00:00"
    log = root / "default_app/default_project/users/u_ann/episodes/episode-2026-10-12.md"
    assert "Ann adopted a grey cat called Miso." in log.read_text()
    hits = out["found"]["episodes"]
    assert [h["id"] for h in hits] == [added["id"]]  # indexed on write, no daemon running
    assert hits[0]["episode"] == "Ann adopted a grey cat called Miso."
    codes = [e[0] if e else None for e in out["errors"]]
    assert codes == [-32602] * 12
    messages = [e[1] for e in out["errors"]]
    assert "invalid user_id" in messages[0]
    assert "content" in messages[1]
    assert "timestamp" in messages[2]
    assert "top_k" in messages[3]
    assert "colour" in messages[4]
    assert "no_such_tool" in messages[5]
    assert "outcome" in messages[6]
    assert "max_tokens" in messages[7]
    assert "task_type" in messages[8]
    assert "in_20261012_0009" in messages[9]
    assert "user_id" in messages[10]
    assert messages[11].startswith("passages_per_entry: ")
    assert out["insights"] == {"insights": [], "total": 0}
    assert out["explain"]["id"] == added["id"]
    assert out["lessons"] == {"lessons": [], "total": 0}  # a task was recorded, nothing learned yet
    briefing = out["briefing"]
    assert [i["id"] for i in briefing["items"]] == [added["id"]]
    assert briefing["tokens"] <= 200 and added["id"] in briefing["text"]
    assert out["task"]["id"] == "tk_20261013_0001" and out["task"]["outcome"] == "success"
    assert [h["id"] for h in out["after"]["episodes"]] == [added["id"]]


@pytest.mark.parametrize(("tool", "args", "message"), [
    ("add_episode", {"user_id": "u_ann", "subject": "Pets", "content": "Mi\x00so"},
     "content: holds the control character U+0000"),
    ("record_task", {"user_id": "u_ann", "task_type": "deploy", "goal": "g",
                     "steps": ["s\x1b[2J"], "outcome": "success"},
     "steps.0: holds the control character U+001B"),
    ("add_episode", {"user_id": "u_ann", "subject": "Pets", "content": "Mi\x85so"},
     "content: holds the control character U+0085"),
])
def test_a_control_character_is_invalid_params_and_nothing_is_written(
    root: Path, tool: str, args: dict[str, Any], message: str
) -> None:
    # A NUL written into a daily log made the Markdown a "binary file" to grep and git.
    from everos_reflect.api import mcp_server
    from everos_reflect.embedding.base import HashEmbedder
    from everos_reflect.runtime import Runtime
    from everos_reflect.settings import Settings

    runtime = Runtime(root, Settings(), embedder=HashEmbedder())
    try:
        [spec] = [t for t in mcp_server.tools() if t.name == tool]
        with pytest.raises(MCPError) as caught:
            mcp_server.call(runtime, spec, args)
    finally:
        runtime.close()
    assert (caught.value.code, caught.value.message) == (-32602, message)
    assert not [p for p in root.rglob("*.md") if "users" in p.parts]


def test_a_message_over_the_request_limit_is_refused_and_the_server_goes_on(
    root: Path,
) -> None:
    # The SDK's stdio transport read a line whole, however long: one endless message held
    # all of it in memory. Now a line over limits.max_request_bytes (1 MiB by default) is
    # read past in chunks and answered with a JSON-RPC error for its id.
    import subprocess

    from mcp import types

    params = _params(root)
    proc = subprocess.Popen([params.command, *params.args], env={**os.environ, **params.env},
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None

    def send(message: dict[str, Any], pad: int = 0) -> int:
        text = json.dumps(message)
        if pad:  # the id first, as clients write it, then a huge argument
            text = text[:-1] + ', "pad": "' + "x" * pad + '"}'
        proc.stdin.write(text.encode() + b"\n")
        proc.stdin.flush()
        return len(text) + 1

    def receive() -> dict[str, Any]:
        return json.loads(proc.stdout.readline())

    try:
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": types.LATEST_PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}}})
        assert receive()["id"] == 1
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        size = send({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
            "name": "search", "arguments": {"query": "dogs"}}}, pad=5 * 1024 * 1024)
        refused = receive()
        assert refused["id"] == 7
        assert refused["error"]["code"] == types.INVALID_REQUEST
        assert refused["error"]["message"] == (
            f"message too large: {size:,} bytes, over limits.max_request_bytes (1,048,576)")
        send({"jsonrpc": "2.0", "id": 8, "method": "tools/list"})
        listed = receive()
        assert listed["id"] == 8 and {t["name"] for t in listed["result"]["tools"]} >= {
            "search", "add_episode"}
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0


def test_a_write_after_the_root_was_moved_fails_and_writes_nothing_at_the_old_path(
        tmp_path: Path) -> None:
    # An MCP server outlives its root being moved: add_episode wrote the Episode into a new
    # ghost tree at the old path, then failed to index it, so the agent saw an error for a
    # write that had landed where nothing would ever read it.
    from mcp import types

    from everos_reflect.api.mcp_server import call
    from everos_reflect.embedding.base import HashEmbedder
    from everos_reflect.runtime import Runtime
    from everos_reflect.settings import Settings

    root = tmp_path / "root"
    root.mkdir()
    (root / "ome.toml").write_text("")
    runtime = Runtime(root, Settings(), embedder=HashEmbedder())
    os.rename(root, tmp_path / "moved")
    [add] = [t for t in tools() if t.name == "add_episode"]

    with pytest.raises(MCPError) as caught:
        call(runtime, add, {"user_id": "u1", "subject": "s", "content": "c"})

    assert caught.value.error.code == types.INTERNAL_ERROR
    assert caught.value.error.message == \
        f"the memory root {root} is gone (moved or deleted while in use)"
    assert not root.exists()
    runtime.close()


def test_an_unexpected_error_is_answered_in_one_bounded_line(root: Path) -> None:
    # An unexpected error's text is bounded by nothing the agent sent: an embedding server's
    # 2 MB error page, a library error quoting a record. The tool's answer carried it whole
    # (index_error), and so did the internal error of a failed call, line breaks and all.
    from everos_reflect.api.mcp_server import call, internal_error
    from everos_reflect.embedding.base import HashEmbedder
    from everos_reflect.errors import BRIEF_MAX
    from everos_reflect.runtime import Runtime
    from everos_reflect.settings import Settings

    page = "<html>\n" + "x" * 2_000_000 + "\n</html>"

    class Down(HashEmbedder):
        def embed(self, texts: Any) -> Any:
            raise RuntimeError(page)

    runtime = Runtime(root, Settings(), embedder=Down())
    try:
        [add] = [t for t in tools() if t.name == "add_episode"]
        data = call(runtime, add, {"user_id": "u1", "subject": "s", "content": "c"})
    finally:
        runtime.close()
    assert data["indexed"] is False
    assert data["index_error"].startswith("<html> xxx")
    assert "\n" not in data["index_error"]
    assert len(data["index_error"]) < BRIEF_MAX + 60
    left_off = len(page) - BRIEF_MAX
    assert data["index_error"].endswith(f"({left_off:,} more "
                                        "characters in the log)")

    message = internal_error("search", OSError(page)).error.message
    assert message.startswith("search failed: <html> xxx")
    assert "\n" not in message and len(message) < BRIEF_MAX + 80


def test_a_batch_piped_with_stdin_closed_is_answered_and_exits_0(root: Path) -> None:
    # `printf '%s\n' <initialize> <initialized> <tools/call> | everos-reflect mcp`: the server
    # stopped at the end of stdin with the call in flight; the Episode was written and its id
    # never printed.
    import subprocess

    from mcp import types

    params = _params(root)
    piped = "".join(json.dumps(m) + "\n" for m in [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": types.LATEST_PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "add_episode", "arguments": {"user_id": "u_ann", "subject": "Pets",
                                                 "content": "Ann adopted a cat."}}},
    ])
    done = subprocess.run([params.command, *params.args], env={**os.environ, **params.env},
                          input=piped.encode(), capture_output=True, timeout=120)

    assert done.returncode == 0, done.stderr.decode()[-2000:]
    answers = {a["id"]: a for a in map(json.loads, done.stdout.decode().splitlines())}
    assert set(answers) == {1, 2}
    written = answers[2]["result"]["structuredContent"]["id"]
    assert f"<!-- entry:{written} -->" in "".join(
        p.read_text() for p in root.rglob("episode-*.md"))
