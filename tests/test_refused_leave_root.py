"""A command that is refused (a bad id or argument, an entry that is no merge, a name nothing
has) leaves the root byte for byte as it was: no lock file, no index, no log touched. Each
command runs as a user runs it (the CLI), on a root indexed and on one never indexed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect import embedding
from everos_reflect.cli.main import cli
from everos_reflect.embedding import HashEmbedder

#: What each refused command is, and the words its error must hold.
REFUSED: list[tuple[list[str], str]] = [
    (["undo", "ep_20261012_0001", "--user", "u1"], "is not a merged narrative"),
    (["undo", "ep_20991231_0001", "--user", "u1"], "no entry ep_20991231_0001"),
    (["undo", "bogus", "--user", "u1"], "invalid entry id 'bogus'"),
    (["undo", "ep_20261012_0001", "--user", "../x"], "invalid user_id '../x'"),
    (["provenance", "ep_20991231_0001", "--user", "u1"], "no entry ep_20991231_0001"),
    (["provenance", "bogus", "--user", "u1"], "invalid entry id 'bogus'"),
    (["explain", "ep_20991231_0001", "--user", "u1"], "no entry ep_20991231_0001"),
    (["explain", "bogus", "--user", "u1"], "invalid entry id 'bogus'"),
    (["clusters", "--user", "../x"], "invalid user_id '../x'"),
    (["clusters", "--app", ""], "invalid app_id ''"),
    (["trigger", "nonexistent"], "unknown strategy 'nonexistent'"),
    (["resolve", "rel_20261012_0001", "--note", "n", "--user", "u1"],
     "no relation rel_20261012_0001"),
    (["enable", "nonexistent"], "unknown strategy 'nonexistent'"),
    (["task", "add", "--user", "u1", "--type", "t", "--goal", "g", "--step", "s",
      "--outcome", "bogus"], "'bogus' is not one of"),
    (["add", "--user", "../x", "--subject", "s", "--content", "c"], "invalid user_id '../x'"),
    (["add", "--user", "u1", "--subject", "s", "--content", "c", "--timestamp", "bogus"],
     "--timestamp 'bogus' is not ISO 8601"),
    (["search", ""], "the search query is empty"),
    (["search", "dog", "--user", "../x"], "invalid user_id '../x'"),
    (["search", "dog", "--app", "a/b"], "invalid app_id 'a/b'"),
    (["briefing", "--user", "../x", "dog"], "invalid user_id '../x'"),
    (["worldview", "--user", "../x"], "invalid user_id '../x'"),
    (["lessons", "--task-type", "../x"], "invalid task_type '../x'"),
    (["reports", "--limit", "0"], "'--limit'"),
    (["lint", "--bogus"], "No such option '--bogus'"),
    (["relations", "--status", "bogus"], "unknown status 'bogus'"),
]


def tree(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` with its bytes (``None`` for a folder)."""
    return {str(p.relative_to(root)): None if p.is_dir() else p.read_bytes()
            for p in sorted(root.rglob("*"))}


@pytest.fixture
def made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A root with one Episode of u1, indexed (hash embedder: no model to load)."""
    for name in ("EVEROS_ROOT", "EVEROS_LLM__PROVIDER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(embedding, "make_embedder", lambda settings: HashEmbedder(64))
    root = tmp_path / "root"
    r = ["--root", str(root)]
    for args in (["init", str(root)],
                 ["add", *r, "--user", "u1", "--subject", "pets", "--content",
                  "Andrew adopted a dog named Toby.", "--timestamp", "2026-10-12T09:00:00+00:00"],
                 ["reindex", *r]):
        assert CliRunner().invoke(cli, args).exit_code == 0
    return root


@pytest.mark.parametrize("indexed", [True, False], ids=["indexed", "never-indexed"])
def test_a_refused_command_leaves_the_root_byte_for_byte(made: Path, indexed: bool) -> None:
    # a refused `undo` made .index/locks/strategy-reflect_episodes.lock (and on a root never
    # indexed .index itself, with the rebuild locks); `search` with a bad --user built or
    # synced the index before it refused the id
    if not indexed:
        shutil.rmtree(made / ".index")
    for args, words in REFUSED:
        before = tree(made)
        result = CliRunner().invoke(cli, [*args, "--root", str(made)])
        assert result.exit_code != 0, (args, result.output)
        assert words in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr
        assert tree(made) == before, args
