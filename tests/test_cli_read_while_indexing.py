"""CLI reads while another process holds the indexer (``serve``'s first scan of a large root):
`search` waited for the whole scan without a word (54 s on LoCoMo). They wait as MCP's and the
API's reads do, then answer from the index as it stands and say so."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from filelock import FileLock

from everos_reflect.api import ops
from everos_reflect.cli import cluster_cmds, index_cmds, memory_cmds
from everos_reflect.cli.common import existing_root
from everos_reflect.cli.main import cli
from everos_reflect.embedding import HashEmbedder
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.runtime import Runtime
from tests.reflect_fixtures import ANDREW, add_episode, make_runtime

BUSY = "another process held the index over 0.3 s"


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


@pytest.fixture
def busy_root(root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A root with one indexed Episode and one added since (a scan has work to do), the CLI's
    runtimes on the hash embedder, and a 0.3 s wait for the indexer."""
    rt = make_runtime(root, ExtractiveLLM())
    add_episode(rt, ANDREW, "2026-08-02T10:00:00+00:00", "Rescue dog",
                "Andrew adopted a rescue dog called Toby from the Denver shelter.")
    Indexer(rt).scan()
    add_episode(rt, ANDREW, "2026-08-03T10:00:00+00:00", "Climbing gym",
                "Andrew joined a climbing gym near the office.")
    rt.close()

    def fake_open(root_arg: str | None) -> Runtime:
        return make_runtime(existing_root(root_arg), ExtractiveLLM(), embedder=HashEmbedder(64))

    for module in (index_cmds, memory_cmds, cluster_cmds):
        monkeypatch.setattr(module, "open_runtime", fake_open)
    monkeypatch.setattr(ops, "INDEX_WAIT_SECONDS", 0.3)
    return root


def held(root: Path, seconds: float) -> threading.Event:
    """Hold the indexer lock from another thread (another open file: flock excludes it as it
    would another process) for ``seconds``, or until the returned event is set."""
    lock = FileLock(str(root / ".index" / "locks" / "indexer.lock"))
    taken, done = threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            taken.set()
            done.wait(seconds)

    threading.Thread(target=hold, daemon=True).start()
    assert taken.wait(10)
    return done


def test_search_answers_from_the_index_as_it_stands_and_says_so(busy_root: Path) -> None:
    done = held(busy_root, 30)  # before the fix the search waited these 30 s, then synced
    try:
        result = run("search", "rescue dog", "--root", str(busy_root), "--user", "u_andrew",
                     "--json")
    finally:
        done.set()
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert BUSY in doc["note"]
    assert f"note: {BUSY}" in result.stderr
    subjects = [hit["subject"] for hit in doc["episodes"]]
    assert "Rescue dog" in subjects and "Climbing gym" not in subjects  # as last indexed


def test_once_the_indexer_is_free_the_search_syncs_and_says_nothing(busy_root: Path) -> None:
    result = run("search", "climbing gym", "--root", str(busy_root), "--user", "u_andrew",
                 "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert "note" not in doc and "note:" not in result.stderr
    assert "Climbing gym" in [hit["subject"] for hit in doc["episodes"]]


def test_briefing_json_carries_the_note(busy_root: Path) -> None:
    done = held(busy_root, 30)
    try:
        result = run("briefing", "dog", "--root", str(busy_root), "--user", "u_andrew",
                     "--json")
    finally:
        done.set()
    assert result.exit_code == 0, result.output
    assert BUSY in json.loads(result.stdout)["note"]
    assert f"note: {BUSY}" in result.stderr


def test_recluster_waits_for_the_indexer_and_takes_in_every_log(busy_root: Path) -> None:
    """`recluster` rebuilds clusters from the index: it must see every log, so it waits as
    long as the other process holds the indexer (here 1 s, past the 0.3 s a read waits)."""
    held(busy_root, 1.0)
    result = run("recluster", "--root", str(busy_root))
    assert result.exit_code == 0, result.output
    assert "note:" not in result.stderr
    rt = make_runtime(busy_root, ExtractiveLLM(), embedder=HashEmbedder(64))
    try:
        (count,) = rt.db().execute("SELECT COUNT(*) FROM entries WHERE kind = 'episode'"
                                   ).fetchone()
    finally:
        rt.close()
    assert count == 2
