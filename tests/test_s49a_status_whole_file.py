"""``status --json`` names a problem of a whole file by the file alone, as ``lint``, errors and
diagnostics do (``errors.file_at``): it wrote "0: a folder where a daily log goes", a line 0
no file has, where a problem at a line keeps its number ("7: …"). From the Markdown (no
index yet) and from the index alike; the text rendering says neither "line 0" nor "0:"."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.embedding import HashEmbedder
from everos_reflect.index.sync import Indexer
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings

ANN = UserRef.of("u_ann")
EPISODES = "default_app/default_project/users/u_ann/episodes"


@pytest.mark.parametrize("indexed", [False, True], ids=["from-markdown", "from-index"])
def test_a_whole_file_problem_is_named_without_a_line_number(root: Path, indexed: bool) -> None:
    rt = Runtime(root, Settings(), embedder=HashEmbedder(16))
    rt.store.append(ANN, Kind.EPISODE, {"timestamp": "2026-10-11T09:00:00+00:00",
                                        "parent_type": "memcell"},
                    {"Subject": "Cats", "Content": "Ann has a cat."}, day=date(2026, 10, 11))
    log = rt.store.log_path(ANN, Kind.EPISODE, date(2026, 10, 11))
    # a problem at a line: an entry opened and never closed
    log.write_text(log.read_text("utf-8") + "<!-- entry:ep_20261011_0009 -->\n", "utf-8")
    if indexed:
        Indexer(rt).reindex()
    rt.close()
    (root / EPISODES / "episode-2026-10-12.md").mkdir()  # a problem of the whole file

    result = CliRunner().invoke(cli, ["status", "--root", str(root), "--json"])
    document = json.loads(result.stdout)
    assert document["counts_from"] == ("index" if indexed else "markdown")
    problems = {f["file"].rsplit("/", 1)[-1]: f["problems"]
                for f in document["files_with_problems"]}
    [folder] = problems["episode-2026-10-12.md"]
    assert folder.startswith("a folder where a daily log goes"), folder
    [unclosed] = problems["episode-2026-10-11.md"]
    line, _, message = unclosed.partition(": ")
    assert line.isdigit() and int(line) > 0 and message, unclosed

    text = CliRunner().invoke(cli, ["status", "--root", str(root)]).stdout
    assert "    a folder where a daily log goes" in text and "line 0" not in text
    assert f"    line {line}: {message[:30]}" in text
