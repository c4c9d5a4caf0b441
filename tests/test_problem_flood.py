"""A log with thousands of problems lists the first of them and counts the rest.

A 17 MB log of 300,000 unclosed entry markers (a paste gone wrong, a generated file) gave
600,000 problems: 148 MB of them stored in ``system.db``, a three-minute ``status`` printing
77 MB, a 114 MB ``lint``. The first :data:`MAX_LISTED_PROBLEMS` are listed; one more says
how many errors and warnings follow, from which line."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.embedding import HashEmbedder
from everos_reflect.index.sync import Indexer
from everos_reflect.markdown.parser import MAX_LISTED_PROBLEMS, parse_log
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings

HEAD = "---\ntype: episode_daily\nschema_version: 1\nuser_id: u\ndate: '2026-10-12'\n---\n"
UNCLOSED = 250


def _flood(count: int) -> str:
    return "".join(f"<!-- entry:ep_20261012_{n:04d} -->\n" for n in range(1, count + 1))


def test_a_log_lists_its_first_problems_and_counts_the_rest() -> None:
    log = parse_log(HEAD + _flood(UNCLOSED), "u/episodes/episode-2026-10-12.md")
    assert len(log.diagnostics) == MAX_LISTED_PROBLEMS + 1
    assert [d.line for d in log.diagnostics[:3]] == [7, 8, 9]
    last = log.diagnostics[-1]
    assert (last.line, last.severity) == (7 + MAX_LISTED_PROBLEMS, "error")
    assert last.message == (
        f"{UNCLOSED - MAX_LISTED_PROBLEMS} errors more in this file from here on, not listed "
        f"one by one (only the first {MAX_LISTED_PROBLEMS} problems are): fix those and check "
        "it again")
    assert log.unreadable >= {"ep_20261012_0001", f"ep_20261012_{UNCLOSED:04d}"}


def test_a_log_with_fewer_problems_lists_them_all() -> None:
    log = parse_log(HEAD + _flood(MAX_LISTED_PROBLEMS), "u/episodes/episode-2026-10-12.md")
    assert len(log.diagnostics) == MAX_LISTED_PROBLEMS
    assert "not listed" not in log.diagnostics[-1].message


@pytest.mark.usefixtures("no_everos_env")
def test_lint_and_status_show_such_a_log_in_a_bounded_list(root: Path) -> None:
    rt = Runtime(root, Settings(), embedder=HashEmbedder(16))
    ref = UserRef.of("u")
    rt.store.append(ref, Kind.EPISODE, {"timestamp": "2026-10-12T09:00:00+00:00",
                                        "parent_type": "memcell"},
                    {"Subject": "Dog", "Content": "Adopted Toby."}, day=date(2026, 10, 12))
    log = rt.store.log_path(ref, Kind.EPISODE, date(2026, 10, 12))
    log.write_text(log.read_text("utf-8") + _flood(UNCLOSED).replace("_0001 ", "_9001 "),
                   "utf-8")
    Indexer(rt).reindex()
    rt.close()

    lint = CliRunner().invoke(cli, ["lint", "--root", str(root), "--json"])
    assert lint.exit_code == 1
    problems = json.loads(lint.stdout)["problems"]
    assert len(problems) == MAX_LISTED_PROBLEMS + 1
    assert problems[-1]["message"].startswith(
        f"{UNCLOSED - MAX_LISTED_PROBLEMS} errors more in this file")
    status = CliRunner().invoke(cli, ["status", "--root", str(root), "--json"])
    (bad,) = json.loads(status.stdout)["files_with_problems"]
    assert len(bad["problems"]) == MAX_LISTED_PROBLEMS + 1
