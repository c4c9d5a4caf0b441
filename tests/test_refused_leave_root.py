"""A command that is refused (a bad id or argument, an entry that is no merge, a name nothing
has) leaves the root byte for byte as it was: no lock file, no index, no log touched. Each
command runs as a user runs it (the CLI), on a root indexed and on one never indexed."""

from __future__ import annotations

import shutil
import subprocess
import sys
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
      "--outcome", "bogus"], "must be one of: success, failure, partial; got 'bogus'"),
    (["add", "--user", "../x", "--subject", "s", "--content", "c"], "invalid user_id '../x'"),
    (["add", "--user", "u1", "--subject", "s", "--content", "c", "--timestamp", "bogus"],
     "--timestamp 'bogus' is not ISO 8601"),
    # refused under the log's lock: the lock file (and .index/locks, .index) stayed
    (["add", "--user", "u9", "--subject", "s", "--content", "c", "--timestamp",
      "2026-10-13T09:00:00+00:00"], "not a regular file"),
    (["add", "--user", "u1", "--subject", "s", "--content", "x" * (257 << 10),
      "--timestamp", "2026-10-14T09:00:00+00:00"], "limits.max_entry_bytes"),
    (["search", ""], "query: must not be empty"),
    (["search", "dog", "--user", "../x"], "invalid user_id '../x'"),
    (["search", "dog", "--app", "a/b"], "invalid app_id 'a/b'"),
    (["briefing", "--user", "../x", "dog"], "invalid user_id '../x'"),
    (["worldview", "--user", "../x"], "invalid user_id '../x'"),
    (["lessons", "--task-type", "../x"], "invalid task_type '../x'"),
    (["reports", "--limit", "0"], "'--limit'"),
    (["lint", "--bogus"], "No such option '--bogus'"),
    (["relations", "--status", "bogus"], "must be one of: active, resolved, stale, retired"),
]


def tree(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` with its bytes (``None`` for a folder)."""
    return {str(p.relative_to(root)): None if p.is_dir() else p.read_bytes()
            for p in sorted(root.rglob("*"))}


#: Builds the root of :func:`made` in a process of its own: a connection the set-up left
#: open in this one (a thread's, until the collector gets to it) kept ``system.db-wal`` and
#: ``-shm`` there, hiding a command that leaves them, or closed mid-test, changing the root.
BUILD = """
import sys
from click.testing import CliRunner
from everos_reflect import embedding
from everos_reflect.cli.main import cli
from everos_reflect.embedding import HashEmbedder

embedding.make_embedder = lambda settings: HashEmbedder(64)
root = sys.argv[1]
for args in (["init", root],
             ["add", "--root", root, "--user", "u1", "--subject", "pets", "--content",
              "Andrew adopted a dog named Toby.", "--timestamp", "2026-10-12T09:00:00+00:00"],
             ["reindex", "--root", root]):
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
"""


@pytest.fixture
def made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A root with one Episode of u1, indexed (hash embedder: no model to load)."""
    for name in ("EVEROS_ROOT", "EVEROS_LLM__PROVIDER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(embedding, "make_embedder", lambda settings: HashEmbedder(64))
    root = tmp_path / "root"
    subprocess.run([sys.executable, "-c", BUILD, str(root)], check=True, timeout=120)
    assert sorted(p.name for p in (root / ".index" / "sqlite").iterdir()) == ["system.db"]
    # a log's place taken by a folder: a write there is refused
    (root / "default_app/default_project/users/u9/episodes/episode-2026-10-13.md").mkdir(
        parents=True)
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


#: Commands that only read a root: none of them may change a byte of it.
READERS: list[list[str]] = [
    ["status"], ["status", "--json"], ["reports"], ["runs"], ["lint"], ["strategies"],
    ["insights"], ["worldview"], ["relations"], ["lessons", "--task-type", "t"],
    ["explain", "ep_20261012_0001", "--user", "u1"],
    ["provenance", "ep_20261012_0001", "--user", "u1"],
]


@pytest.mark.parametrize("indexed", [True, False], ids=["indexed", "never-indexed"])
def test_a_command_that_only_reads_leaves_the_root_byte_for_byte(made: Path,
                                                                 indexed: bool) -> None:
    # `lint` (and every check for an interrupted merge) read system.db read-only and left
    # an empty system.db-wal and a system.db-shm beside it
    if not indexed:
        shutil.rmtree(made / ".index")
    for args in READERS:
        before = tree(made)
        result = CliRunner().invoke(cli, [*args, "--root", str(made)])
        assert "Traceback" not in result.output, (args, result.output)
        assert tree(made) == before, args
