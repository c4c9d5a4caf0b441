"""MCP answers never hold a raw U+2028 or U+2029: JSON allows them in a string, but a reader
that splits lines at them (JavaScript before ES2019, Python's ``str.splitlines``) read an
answer quoting a hand-written record that holds one as two broken lines."""

from __future__ import annotations

import io
import json
from pathlib import Path

import anyio
import pytest

from everos_reflect.api import mcp_server
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from tests.test_mcp_eof import _call, _line, _opening

LOG = """---
type: episode_daily
schema_version: 1
user_id: u_ann
date: '2026-10-12'
---
<!-- entry:ep_20261012_0001 -->
---
owner_id: u_ann
timestamp: 2026-10-12T09:30:00+00:00
parent_type: memcell
---
## Subject
Pets

## Content
Ann adopted\u2028a cat\u2029called Miso.
<!-- /entry:ep_20261012_0001 -->
"""


def test_an_answer_quoting_line_separators_escapes_them(
        root: Path, capfd: pytest.CaptureFixture[str]) -> None:
    episodes = root / "default_app/default_project/users/u_ann/episodes"
    episodes.mkdir(parents=True)
    (episodes / "episode-2026-10-12.md").write_text(LOG, encoding="utf-8")
    piped = _opening() + _line(_call(2, "explain", {"entry_id": "ep_20261012_0001",
                                                    "user_id": "u_ann"}))

    runtime = Runtime(root, Settings(), embedder=HashEmbedder())
    try:
        anyio.run(lambda: mcp_server.serve_stdio(runtime, io.BytesIO(piped)))
    finally:
        runtime.close()
    out = capfd.readouterr().out

    assert "\u2028" not in out and "\u2029" not in out
    lines = out.splitlines()
    assert len(lines) == 2, lines
    answer = json.loads(lines[1])
    text = "Ann adopted\u2028a cat\u2029called Miso."
    assert answer["result"]["structuredContent"]["text"] == text
    assert json.loads(answer["result"]["content"][0]["text"])["text"] == text
