"""CLI: `reindex` and `search` — counts, JSON shape (SPEC §7), filters, one-line errors."""

from __future__ import annotations

import json
import time
from datetime import date
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from everos_reflect.cli import index_cmds
from everos_reflect.cli.common import existing_root
from everos_reflect.embedding import HashEmbedder
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings

ANDREW = UserRef.of("u_andrew")
BEA = UserRef("acme", "bot", "u_bea")


@click.group()
def cli() -> None:
    """Only this module's commands."""


for _command in index_cmds.COMMANDS:
    cli.add_command(_command)


@pytest.fixture(autouse=True)
def hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands open their root through `open_runtime`: give them the deterministic fake."""

    def fake_open(root: str | None) -> Runtime:
        return Runtime(existing_root(root), Settings(), embedder=HashEmbedder(32))

    monkeypatch.setattr(index_cmds, "open_runtime", fake_open)


@pytest.fixture
def filled(root: Path) -> Path:
    rt = Runtime(root, Settings(), embedder=HashEmbedder(32))
    day = date(2026, 10, 12)
    meta = {"timestamp": "2026-10-12T10:00:00+00:00", "parent_type": "memcell",
            "session_id": "s1"}
    toby = rt.store.append(
        ANDREW, Kind.EPISODE, meta,
        {"Subject": "Dog adoption", "Content": "Andrew adopted a dog named Toby."}, day=day)
    both = rt.store.append(
        ANDREW, Kind.EPISODE, meta,
        {"Subject": "Two dogs", "Content": "Andrew has two dogs, Toby and Buddy."}, day=day)
    rt.store.append(BEA, Kind.EPISODE, meta,
                    {"Subject": "Dog walking", "Content": "Bea walks her dog every morning."},
                    day=day)
    rt.store.deprecate(ANDREW, {toby.id: both.id})
    rt.close()
    return root


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def test_reindex_json_reports_counts(filled: Path) -> None:
    result = run("reindex", "--root", str(filled), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["files_synced"], data["entries_upserted"], data["entries_embedded"]) == (2, 3, 3)
    assert data["problems"] == {}


def test_reindex_prints_a_summary_and_problems(filled: Path) -> None:
    broken = filled / "default_app/default_project/users/u_andrew/episodes/episode-2026-10-13.md"
    broken.write_text("no frontmatter here\n")
    result = run("reindex", "--root", str(filled))
    assert result.exit_code == 0, result.output
    assert "Reindexed 3 entries from 3 files" in result.stdout
    assert "1 file with problems" in result.stderr
    assert "episode-2026-10-13.md" in result.stderr


def test_reindex_of_a_missing_root_is_one_line_error(tmp_path: Path) -> None:
    result = run("reindex", "--root", str(tmp_path / "nope"))
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        f"error: no memory root at {tmp_path / 'nope'}: create one with "
        f"`everos-reflect init {tmp_path / 'nope'}`"]


def test_search_json_has_the_spec_fields_and_hides_deprecated(filled: Path) -> None:
    result = run("search", "dog Toby", "--root", str(filled), "--user", "u_andrew", "--json")
    assert result.exit_code == 0, result.output
    episodes = json.loads(result.stdout)["episodes"]
    assert [e["subject"] for e in episodes] == ["Two dogs"]
    hit = episodes[0]
    assert hit["episode"] == "Andrew has two dogs, Toby and Buddy."
    assert hit["session_id"] == "s1" and hit["parent_type"] == "memcell"
    assert hit["timestamp"].startswith("2026-10-12T10:00:00")
    assert 0 < hit["score"] <= 1


def test_search_shows_a_hand_written_list_session_id_as_none_not_python_text(
    root: Path
) -> None:
    # `session_id: [a, b]` (or `parent_id: {x: 1}`) was shown as "['a', 'b']": Python's repr
    rt = Runtime(root, Settings(), embedder=HashEmbedder(32))
    rt.store.append(ANDREW, Kind.EPISODE, {
        "timestamp": "2026-10-12T10:00:00+00:00", "parent_type": "memcell",
        "session_id": ["a", "b"], "parent_id": {"x": 1}},
        {"Subject": "Dog adoption", "Content": "Andrew adopted a dog named Toby."},
        day=date(2026, 10, 12))
    rt.close()
    result = run("search", "dog", "--root", str(root), "--user", "u_andrew", "--json")
    assert result.exit_code == 0, result.output
    [hit] = json.loads(result.stdout)["episodes"]
    assert (hit["session_id"], hit["parent_id"], hit["parent_type"]) == (None, None, "memcell")


def test_search_include_deprecated_and_tenant_filters(filled: Path) -> None:
    def subjects(*extra: str) -> set[str]:
        result = run("search", "dog", "--root", str(filled), "--json", *extra)
        assert result.exit_code == 0, result.output
        return {e["subject"] for e in json.loads(result.stdout)["episodes"]}

    assert subjects("--include-deprecated", "--user", "u_andrew") == {"Dog adoption", "Two dogs"}
    assert subjects("--app", "acme", "--project", "bot") == {"Dog walking"}
    assert subjects("--mode", "keyword") == {"Two dogs", "Dog walking"}


def test_search_sees_hand_edits_without_a_reindex(filled: Path) -> None:
    run("reindex", "--root", str(filled))
    path = filled / "acme/bot/users/u_bea/episodes/episode-2026-10-12.md"
    path.write_text(path.read_text().replace("walks her dog", "walks her ferret"))
    result = run("search", "ferret", "--root", str(filled), "--mode", "keyword", "--json")
    assert [e["episode"] for e in json.loads(result.stdout)["episodes"]] == [
        "Bea walks her ferret every morning."
    ]


def test_search_finds_entries_again_after_the_vector_index_was_deleted(filled: Path) -> None:
    # `rm -rf .index/lancedb` (derived, rebuildable): the tables were recreated empty, the
    # logs were unchanged so nothing was embedded again, and every search found nothing, with
    # no error, until a manual reindex.
    import shutil

    def subjects() -> set[str]:
        result = run("search", "dog", "--root", str(filled), "--json")
        assert result.exit_code == 0, result.output
        return {e["subject"] for e in json.loads(result.stdout)["episodes"]}

    found = subjects()
    assert found == {"Two dogs", "Dog walking"}
    shutil.rmtree(filled / ".index" / "lancedb")
    assert subjects() == found
    shutil.rmtree(filled / ".index" / "lancedb" / "episodes.lance")  # one table alone
    assert subjects() == found


def test_search_finds_entries_again_after_a_tables_versions_folder_was_deleted(
    filled: Path,
) -> None:
    # `rm -rf .index/lancedb/episodes.lance/_versions` (the manifests; the data files stay):
    # LanceDB found no table there and a new, empty one was made in the same folder, so the
    # scan, which saw the folder, embedded nothing again: every search answered nothing from
    # vectors, with no error, until a manual reindex.
    import shutil

    def subjects(mode: str) -> set[str]:
        result = run("search", "dog", "--root", str(filled), "--mode", mode, "--json")
        assert result.exit_code == 0, result.output
        return {e["subject"] for e in json.loads(result.stdout)["episodes"]}

    found = subjects("vector")
    assert found == {"Two dogs", "Dog walking"}
    shutil.rmtree(filled / ".index" / "lancedb" / "episodes.lance" / "_versions")
    assert subjects("vector") == found
    assert subjects("hybrid") == found
    assert not list((filled / ".index" / "lancedb").glob("*dropped*"))  # nothing left behind


def test_search_table_output(filled: Path) -> None:
    result = run("search", "dogs", "--root", str(filled), "--user", "u_andrew")
    assert result.exit_code == 0, result.output
    assert "Two dogs" in result.stdout and "u_andrew" in result.stdout
    empty = run("search", "zebra", "--root", str(filled), "--mode", "keyword")
    assert empty.stdout.strip() == "No matching episodes."


def test_search_table_shows_a_multi_line_episode_once(root: Path) -> None:
    """The snippet is the episode's text with its line breaks folded: when it is the whole
    episode, the table shows it once (it printed the same words twice)."""
    rt = Runtime(root, Settings(), embedder=HashEmbedder(32))
    rt.store.append(ANDREW, Kind.EPISODE, {"timestamp": "2026-10-12T10:00:00+00:00"},
                    {"Subject": "Packing", "Content": "Packed the tent.\nPacked the stove."},
                    day=date(2026, 10, 12))
    rt.close()
    result = run("search", "tent stove", "--root", str(root), "--user", "u_andrew")
    assert result.exit_code == 0, result.output
    assert result.stdout.count("tent") == 1, result.stdout


def test_search_table_shows_a_dated_narrative_once(root: Path) -> None:
    """A narrative's text opens with its day ("2026-10-12: …"), which the snippet gives apart
    (``snippet_date``): a snippet that is the whole text but for that day is the text, shown
    once (a one-day narrative printed its every sentence twice)."""
    rt = Runtime(root, Settings(), embedder=HashEmbedder(32))
    rt.store.append(ANDREW, Kind.EPISODE, {"timestamp": "2026-10-12T10:00:00+00:00"},
                    {"Subject": "Packing",
                     "Content": "2026-10-12: Packed the tent. Packed the stove."},
                    day=date(2026, 10, 12))
    rt.close()
    result = run("search", "tent stove", "--root", str(root), "--user", "u_andrew")
    assert result.exit_code == 0, result.output
    assert result.stdout.count("tent") == 1, result.stdout
    assert "2026-10-12: Packed" in result.stdout


def test_search_rejects_empty_query_and_bad_user(filled: Path) -> None:
    empty = run("search", "  ", "--root", str(filled))
    assert empty.exit_code == 1 and empty.stderr.startswith("error: ")
    bad = run("search", "dog", "--root", str(filled), "--user", "../etc")
    assert bad.exit_code == 1
    assert bad.stderr.count("\n") == 1 and "user_id" in bad.stderr


def test_status_shows_index_lag_until_a_scan_catches_up(tmp_path: Path) -> None:
    from everos_reflect.cli.main import cli as main_cli
    from everos_reflect.index.sync import Indexer

    rt = Runtime(tmp_path, Settings(), embedder=HashEmbedder())
    ref = UserRef.of("u_lag")
    rt.store.append(ref, Kind.EPISODE, {"timestamp": "2026-10-12T09:00:00+00:00",
                                        "parent_type": "memcell"},
                    {"Subject": "Dog", "Content": "Adopted Toby."})
    indexer = Indexer(rt)
    indexer.scan()
    assert indexer.pending()["files_changed"] == 0
    rt.store.append(ref, Kind.EPISODE, {"timestamp": "2026-10-13T09:00:00+00:00",
                                        "parent_type": "memcell"},
                    {"Subject": "Dog", "Content": "Adopted Buddy."})
    lag = indexer.pending(now=time.time() + 5)
    assert lag["files_changed"] == 1 and lag["files_deleted"] == 0 and lag["lag_seconds"] >= 5

    result = CliRunner().invoke(main_cli, ["status", "--root", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["index"]["files_changed"] == 1
    indexer.scan()
    assert indexer.pending()["files_changed"] == 0


def test_status_says_the_index_is_behind_by_a_log_deleted_by_hand(tmp_path: Path) -> None:
    # a deleted log has no change time: `status` printed a TypeError traceback ("unsupported
    # format string passed to NoneType") and `fleet status` said "1 log(s), 0 s"
    from everos_reflect.cli.fleet_cmds import _lag_text
    from everos_reflect.cli.main import cli as main_cli
    from everos_reflect.index.sync import Indexer

    rt = Runtime(tmp_path, Settings(), embedder=HashEmbedder())
    ref = UserRef.of("u_lag")
    entry = rt.store.append(ref, Kind.EPISODE, {"timestamp": "2026-10-12T09:00:00+00:00",
                                                "parent_type": "memcell"},
                            {"Subject": "Dog", "Content": "Adopted Toby."})
    Indexer(rt).scan()
    rt.store.path_for_id(ref, entry.id).unlink()
    rt.close()
    result = CliRunner().invoke(main_cli, ["status", "--root", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "index: behind by 0 changed and 1 deleted logs\n" in result.output
    doc = CliRunner().invoke(main_cli, ["status", "--root", str(tmp_path), "--json"])
    index = json.loads(doc.stdout)["index"]
    assert (index["files_deleted"], index["lag_seconds"]) == (1, None)
    assert _lag_text(index) == "1 log"


@pytest.mark.parametrize("args", [["trigger", "reflect_episodes"], ["runs"], ["strategies"],
                                  ["clusters"], ["reports"], ["reindex"], ["status"]])
def test_commands_never_create_a_root_by_accident(tmp_path: Path, args: list[str]) -> None:
    from everos_reflect.cli.main import cli as main_cli

    missing = tmp_path / "nope"
    result = CliRunner().invoke(main_cli, [*args, "--root", str(missing)])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        f"error: no memory root at {missing}: create one with `everos-reflect init {missing}`"]
    assert not missing.exists()


def test_an_unreadable_index_database_is_one_line_naming_it(filled: Path) -> None:
    # system.db overwritten with junk: search and reindex died in sqlite3 with a traceback.
    run("reindex", "--root", str(filled))
    db = filled / ".index" / "sqlite" / "system.db"
    for stale in db.parent.iterdir():  # a new file: no connection of this process touches it
        stale.unlink()
    db.write_bytes(b"\x00junk, not SQLite\n" * 300)
    for args in (["search", "dog"], ["reindex"]):
        result = run(*args, "--root", str(filled))
        assert result.exit_code == 1, result.output
        [line] = result.stderr.splitlines()
        assert line.startswith(f"error: {db} is not a readable SQLite database")
        assert "reindex" in line
    assert db.read_bytes().startswith(b"\x00junk")  # never replaced behind the user's back


@pytest.mark.parametrize("damaged", ["", "data"], ids=["whole table", "data files only"])
def test_a_damaged_vector_index_is_one_line_and_reindex_repairs_it(
    filled: Path, damaged: str
) -> None:
    # LanceDB's files overwritten: search died in lancedb with a RuntimeError traceback. With
    # only the data files overwritten the table still opens (its manifests are whole) and the
    # query itself failed.
    run("reindex", "--root", str(filled))
    under = filled / ".index" / "lancedb" / "episodes.lance" / damaged
    for path in [p for p in under.rglob("*") if p.is_file()]:
        path.write_bytes(b"junk")
    result = run("search", "dog", "--root", str(filled))
    assert result.exit_code == 1, result.output
    [line] = result.stderr.splitlines()
    assert line.startswith("error: the episodes vector index is unreadable (")
    assert line.endswith("run `everos-reflect reindex` to rebuild it")
    assert run("reindex", "--root", str(filled)).exit_code == 0
    assert run("search", "dog", "--root", str(filled)).exit_code == 0


def test_the_api_answers_503_for_a_damaged_vector_index() -> None:
    # The server's fault, not the request's: a table that did not open was a 400 bad_request,
    # a query that failed on damaged data a 500.
    from everos_reflect.api.ops import error_code
    from everos_reflect.errors import VectorIndexUnreadable

    assert error_code(VectorIndexUnreadable("episodes", RuntimeError("lance error: IO"))) == \
        (503, "index_unreadable")


def test_summaries_agree_in_number(root: Path) -> None:
    # "Reindexed 1 entries from 1 files", "1 result(s)".
    from everos_reflect.cli.common import counted

    assert [counted(1, "entry"), counted(3, "entry"), counted(1_204, "file"),
            counted(0, "result"), counted(2, "key"), counted(1, "result")] == [
        "1 entry", "3 entries", "1,204 files", "0 results", "2 keys", "1 result"]
    rt = Runtime(root, Settings(), embedder=HashEmbedder(32))
    rt.store.append(ANDREW, Kind.EPISODE, {"timestamp": "2026-10-12T10:00:00+00:00"},
                    {"Subject": "Cats", "Content": "Andrew adopted a cat."},
                    day=date(2026, 10, 12))
    rt.close()
    result = run("reindex", "--root", str(root))
    assert result.exit_code == 0, result.output
    assert "Reindexed 1 entry from 1 file " in result.stdout
    found = run("search", "--root", str(root), "--user", "u_andrew", "cat")
    assert found.exit_code == 0, found.output
    assert "1 result in" in found.stdout
