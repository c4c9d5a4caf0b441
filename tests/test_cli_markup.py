"""Text a table cell shows verbatim is never read as rich markup: error messages quote
providers and settings (``[/response_format]``, ``[llm]``), and a closing tag in one made the
whole command end in a ``MarkupError`` traceback."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.index.db import connect, transaction
from everos_reflect.model import Kind, UserRef
from everos_reflect.strategies.journal import insert_report

QUOTED = "openai: 400: unknown field [/response_format]; set [llm] model"


def test_reports_show_an_error_quoting_brackets_verbatim(root: Path) -> None:
    conn = connect(root)
    with transaction(conn):
        insert_report(conn, run_id="run_1", ref=UserRef.of("u1"), cluster_id="cl_x",
                      mode="init", sources=["ep_20261012_0001"], status="failed",
                      provider="openai", model="m[7b]", error=QUOTED)
    conn.close()

    result = CliRunner().invoke(cli, ["reports", "--root", str(root)])

    assert result.exit_code == 0, result.output
    assert QUOTED in result.output
    assert "openai/m[7b]" in result.output


def test_status_keeps_the_setting_names_in_a_strategy_problem(root: Path) -> None:
    # "needs an LLM: ... (set [llm] provider = "openai" ...)" was shown as "set  provider".
    result = CliRunner().invoke(cli, ["status", "--root", str(root)])

    assert result.exit_code == 0, result.output
    assert "[llm]" in result.output


ESC = "\x1b"
TITLE = f"{ESC}]0;pwned{ESC}\\"  # sets the terminal's title
CLEAR = f"{ESC}[2J"  # clears the screen


def test_memory_text_never_drives_the_terminal(root: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # Episodes come from conversations, LLM replies and hand edits: printed as they were, an
    # escape sequence in one retitled or cleared the terminal of whoever ran `search`, and a
    # provider's reply quoted in a report error did the same through `reports`.
    from everos_reflect.cli import index_cmds
    from everos_reflect.cli.common import existing_root
    from everos_reflect.embedding import HashEmbedder
    from everos_reflect.runtime import Runtime
    from everos_reflect.settings import Settings

    monkeypatch.setattr(index_cmds, "open_runtime", lambda r: Runtime(
        existing_root(r), Settings(), embedder=HashEmbedder(32)))
    rt = Runtime(root, Settings(), embedder=HashEmbedder(32))
    rt.store.append(UserRef.of("u1"), Kind.EPISODE,
                    {"timestamp": "2026-10-12T09:00:00+00:00", "parent_type": "memcell"},
                    {"Subject": f"zebra {TITLE} notes",
                     "Content": f"zebra{CLEAR} crossed the road\u202e reversed"},
                    day=date(2026, 10, 12))
    rt.close()
    conn = connect(root)
    with transaction(conn):
        insert_report(conn, run_id="run_1", ref=UserRef.of("u1"), cluster_id="cl_x",
                      mode="init", sources=["ep_20261012_0001"], status="failed",
                      provider="openai", model="m", error=f"unusable reply: {CLEAR}{TITLE}")
    conn.close()

    found = CliRunner().invoke(cli, ["search", "--root", str(root), "zebra"])
    reported = CliRunner().invoke(cli, ["reports", "--root", str(root)])

    for result in (found, reported):
        assert result.exit_code == 0, result.output
        assert ESC not in result.output and "\u202e" not in result.output
    assert "\\x1b]0;pwned" in found.output and "zebra\\x1b[2J" in found.output
    assert "\\u202e" in found.output
    assert "\\x1b[2J\\x1b]0;pwned" in reported.output
    as_json = CliRunner().invoke(cli, ["search", "--root", str(root), "zebra", "--json"])
    assert json.loads(as_json.stdout)["episodes"][0]["subject"] == f"zebra {TITLE} notes"
