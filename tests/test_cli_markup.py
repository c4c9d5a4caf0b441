"""Text a table cell shows verbatim is never read as rich markup: error messages quote
providers and settings (``[/response_format]``, ``[llm]``), and a closing tag in one made the
whole command end in a ``MarkupError`` traceback."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.index.db import connect, transaction
from everos_reflect.model import UserRef
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
