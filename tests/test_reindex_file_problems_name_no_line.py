"""``reindex`` names a problem of a whole log by its file alone, as ``lint`` does.

It listed ``episode-2026-10-14.md:0: a folder where a daily log goes: …`` and ``….md:0:
fatal: file is … bytes, over limits.max_file_bytes``: no file has a line 0. A problem on a
line still names it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli import index_cmds
from everos_reflect.cli.main import cli
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.model import Diagnostic
from everos_reflect.runtime import Runtime

EPISODES = "default_app/default_project/users/u1/episodes"


def test_reindex_names_a_whole_file_problem_without_line_0(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (root / "everos.toml").write_text("[limits]\nmax_file_bytes = 1024\n", encoding="utf-8")
    logs = root / EPISODES
    logs.mkdir(parents=True)
    (logs / "episode-2026-10-14.md").mkdir()  # a folder where a log goes
    (logs / "episode-2026-10-15.md").write_text("x" * 2000, encoding="utf-8")
    monkeypatch.setattr(index_cmds, "open_runtime",
                        lambda _root: Runtime(root, embedder=HashEmbedder(16)))

    result = CliRunner().invoke(cli, ["reindex", "--root", str(root)])
    assert result.exit_code == 0, result.output
    problems = [line.strip() for line in result.output.splitlines()
                if line.strip().startswith(EPISODES)]
    assert [p.split(": ")[0] for p in problems] == [
        f"{EPISODES}/episode-2026-10-14.md", f"{EPISODES}/episode-2026-10-15.md"], problems
    assert problems[1] == (f"{EPISODES}/episode-2026-10-15.md: fatal: file is 2,000 bytes, over "
                           "limits.max_file_bytes (1,024); not read")
    assert ":0:" not in result.output


def test_a_diagnostic_on_a_line_still_names_it() -> None:
    assert str(Diagnostic("a.md", 7, "bad")) == "a.md:7: error: bad"
    assert str(Diagnostic("a.md", 0, "big", "fatal")) == "a.md: fatal: big"
