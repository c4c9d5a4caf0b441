"""An entry id is never given to a new entry while any of the user's logs may still name it.

The next id of a log was one past every id its own file mentions, so an entry deleted by hand
(with its ``deprecated_entries`` key) freed its id: the next append reused it, and a narrative's
``sources`` or a fact's ``parent_id`` in another log then named an unrelated new entry. The
index now remembers the highest id of each stem mentioned in any log it has read
(``id_watermark``), and a new id goes past it. That is derived from the Markdown, so a rebuild
of a lost index protects every id the logs still mention."""

from __future__ import annotations

import re
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.embedding import HashEmbedder
from everos_reflect.errors import MarkdownError
from everos_reflect.index import db as dbmod
from everos_reflect.index.sync import Indexer
from everos_reflect.llm.base import ScriptedLLM
from everos_reflect.model import Entry, Kind, UserRef
from everos_reflect.runtime import Runtime
from tests.db_support import system_db_at
from tests.reflect_fixtures import add_episode, add_fact

#: logs written, then written again by a reopened store: no other writer (conftest.py)
pytestmark = pytest.mark.usefixtures("settle_at_once")

ANDREW = UserRef.of("u_andrew")
DAY = "2026-09-07T10:00:00+00:00"


def runtime(root: Path) -> Runtime:
    return Runtime(root, embedder=HashEmbedder(64), llm=ScriptedLLM())


def delete_by_hand(rt: Runtime, entry: Entry) -> None:
    """The entry's block and any archive key naming it go, as a person might delete them."""
    path = rt.store.path_for_id(ANDREW, entry.id)
    text = re.sub(rf"<!-- entry:{entry.id} -->.*?<!-- /entry:{entry.id} -->\n", "",
                  path.read_text(), flags=re.S)
    assert entry.id not in text
    path.write_text(text)


def narrative_citing(rt: Runtime, *sources: Entry) -> Entry:
    """A merged narrative in another day's log whose ``sources`` name ``sources``."""
    return add_episode(rt, ANDREW, "2026-10-01T10:00:00+00:00", "Dogs", "Andrew has two dogs.",
                       parent_type="cluster", parent_id="cl_000000000001",
                       sources=[e.id for e in sources])


def cite_then_delete_by_hand(root: Path) -> None:
    """An Episode a narrative cites, indexed, then deleted from its log by hand."""
    rt = runtime(root)
    try:
        first = add_episode(rt, ANDREW, DAY, "Toby", "Andrew adopted Toby.")
        narrative_citing(rt, first)
        Indexer(rt).scan()
        delete_by_hand(rt, first)
    finally:
        rt.close()


def test_an_id_deleted_by_hand_but_named_by_a_narrative_is_not_reused(root: Path) -> None:
    rt = runtime(root)
    try:
        first = add_episode(rt, ANDREW, DAY, "Toby", "Andrew adopted Toby.")
        second = add_episode(rt, ANDREW, DAY, "Buddy", "Andrew adopted Buddy.")
        narrative_citing(rt, first, second)
        Indexer(rt).scan()
        delete_by_hand(rt, second)
        Indexer(rt).scan()
        new = add_episode(rt, ANDREW, DAY, "Groceries", "Andrew bought milk.")
        assert (second.id, new.id) == ("ep_20260907_0002", "ep_20260907_0003")
    finally:
        rt.close()


def test_an_id_named_by_a_fact_is_not_reused_even_before_the_deletion_is_indexed(
        root: Path) -> None:
    rt = runtime(root)
    try:
        episode = add_episode(rt, ANDREW, DAY, "Toby", "Andrew adopted Toby.")
        add_fact(rt, ANDREW, episode, "Andrew has a dog named Toby.")
        Indexer(rt).scan()
        delete_by_hand(rt, episode)
        assert add_episode(rt, ANDREW, DAY, "Milk", "Andrew bought milk.").id == (
            "ep_20260907_0002")
    finally:
        rt.close()


def test_a_rebuild_of_a_lost_index_still_protects_every_id_the_logs_name(root: Path) -> None:
    cite_then_delete_by_hand(root)
    shutil.rmtree(dbmod.db_path(root).parent)  # derived: rebuilt from the Markdown alone
    rt = runtime(root)
    try:
        Indexer(rt).reindex()
        assert add_episode(rt, ANDREW, DAY, "Milk", "Andrew bought milk.").id == (
            "ep_20260907_0002")
    finally:
        rt.close()


def test_the_cli_add_allocates_past_the_index_too(root: Path) -> None:
    cite_then_delete_by_hand(root)
    result = CliRunner().invoke(cli, ["add", "--root", str(root), "--user", "u_andrew",
                                      "--subject", "Milk", "--content", "Andrew bought milk.",
                                      "--timestamp", DAY])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "ep_20260907_0002"


def test_the_migration_seeds_the_watermark_from_the_indexed_ids_and_sources(
        tmp_path: Path) -> None:
    conn = system_db_at(tmp_path, "0014_cluster_version_bumps")
    conn.row_factory = sqlite3.Row
    rows = [("ep_20260907_0003", None, "[]"),
            ("af_20260907_0001", "ep_20260907_0007", "[]"),
            ("ep_20261001_0001", "cl_000000000001", '["ep_20260905_0012", "ep_20260907_0002"]'),
            ("ep_20261001_0002", None, "not json")]
    conn.executemany(
        "INSERT INTO entries (app_id, project_id, user_id, id, kind, path, parent_id, sources, "
        "content_hash, text_hash) VALUES ('a', 'p', 'u', ?, 'episode', 'x.md', ?, ?, '', '')",
        rows)
    conn.commit()
    dbmod.migrate(conn)
    got = {r["stem"]: r["seq"] for r in conn.execute("SELECT stem, seq FROM id_watermark")}
    assert got == {"ep_20260907_": 7, "af_20260907_": 1, "ep_20261001_": 2,
                   "ep_20260905_": 12}


def test_an_index_from_before_the_watermark_learns_the_ids_only_other_logs_name(
        root: Path) -> None:
    """Migration 0015 seeds the watermark from the index alone, which holds no insight's
    evidence: an Episode deleted by hand before the upgrade, cited by an insight only, had
    its id given to the next Episode, where a rebuild from the Markdown protected it."""
    index_from_before_the_watermark(root)
    rt = runtime(root)  # opening migrates
    try:
        Indexer(rt).scan()
        new = add_episode(rt, ANDREW, DAY, "Milk", "Andrew bought milk.")
        assert new.id == "ep_20260907_0003"
    finally:
        rt.close()


def test_a_mention_of_the_largest_id_of_a_day_does_not_stop_appends_to_it(root: Path) -> None:
    """The watermark went up to ``…_999999999999999999`` (18 digits, the most an id has) from
    one mention in any log, and stays there: every later id of that day would have been
    ``…_1000000000000000000``, refused as invalid, so nothing could be added to that day,
    not even once the mention was removed and the index rebuilt."""
    rt = runtime(root)
    try:
        note = add_episode(rt, ANDREW, DAY, "Typo", "See ep_20260908_999999999999999999.")
        Indexer(rt).scan()
        path = rt.store.path_for_id(ANDREW, note.id)
        path.write_text(path.read_text().replace("999999999999999999", "0001"))
        Indexer(rt).reindex()
        added = [add_episode(rt, ANDREW, "2026-09-08T10:00:00+00:00", "Milk", "Bought milk."),
                 add_episode(rt, ANDREW, "2026-09-08T11:00:00+00:00", "Eggs", "Bought eggs.")]
        assert [e.id for e in added] == ["ep_20260908_0001", "ep_20260908_0002"]
        assert [e.id for e in rt.store.entries(ANDREW, Kind.EPISODE)
                if e.id.startswith("ep_20260908_")] == [e.id for e in added]
    finally:
        rt.close()


def index_from_before_the_watermark(root: Path) -> None:
    """An insight cites two Episodes, the second deleted by hand and the deletion indexed;
    then the index is taken back to a release before migration 0015 (no watermark)."""
    rt = runtime(root)
    try:
        first = add_episode(rt, ANDREW, DAY, "Toby", "Andrew adopted Toby.")
        second = add_episode(rt, ANDREW, DAY, "Buddy", "Andrew adopted Buddy.")
        rt.store.append(ANDREW, Kind.INSIGHT, {
            "timestamp": "2026-10-20T09:00:00+00:00", "evidence": [first.id, second.id],
            "depth": 1, "importance": 5, "question": "q?", "status": "active",
            "insight_type": "reflection"}, {"Insight": "Andrew likes dogs."})
        Indexer(rt).scan()
        delete_by_hand(rt, second)
        Indexer(rt).scan()
        conn = rt.db()
        conn.execute("DROP TABLE id_watermark")
        conn.execute("DELETE FROM schema_migrations WHERE name >= '0015'")
        conn.commit()
    finally:
        rt.close()


def cli_add(root: Path) -> str:
    result = CliRunner().invoke(cli, ["add", "--root", str(root), "--user", "u_andrew",
                                      "--subject", "Milk", "--content", "Andrew bought milk.",
                                      "--timestamp", DAY])
    assert result.exit_code == 0, result.output
    return result.output.strip()


def test_a_cli_add_after_the_upgrade_but_before_any_scan_does_not_reuse_an_id(
        root: Path) -> None:
    """Migration 0016 leaves the watermark complete only once the next scan has read every
    log again: an ``add`` before that scan saw 0015's seed alone (no insight's evidence) and
    gave the new Episode the id only the insight still named."""
    index_from_before_the_watermark(root)
    rt = runtime(root)
    rt.db()  # opening migrates (0015 seeds, 0016 marks every log to be read again); no scan
    rt.close()
    assert cli_add(root) == "ep_20260907_0003"


def test_a_cli_add_on_an_index_not_yet_migrated_does_not_reuse_an_id(root: Path) -> None:
    """The CLI reads the index without migrating it: an index from before the watermark
    gave no watermark at all, and the file's own ids decided alone."""
    index_from_before_the_watermark(root)
    assert cli_add(root) == "ep_20260907_0003"


def test_an_append_after_the_upgrade_but_before_any_scan_does_not_reuse_an_id(
        root: Path) -> None:
    """The same through a runtime (the API, the daemon before its first scan)."""
    index_from_before_the_watermark(root)
    rt = runtime(root)
    try:
        assert add_episode(rt, ANDREW, DAY, "Milk", "Andrew bought milk.").id == (
            "ep_20260907_0003")
        Indexer(rt).scan()  # read again: nothing left to read for the watermark
        assert rt.db().execute("SELECT COUNT(*) FROM files WHERE mtime_ns = -1").fetchone()[0] == 0
        assert add_episode(rt, ANDREW, DAY, "Eggs", "Andrew bought eggs.").id == (
            "ep_20260907_0004")
    finally:
        rt.close()


def test_a_mention_of_the_largest_id_of_a_day_in_its_own_log_does_not_stop_appends(
        root: Path) -> None:
    """An Episode whose content names ``…_999999999999999999`` of its own day (typed by a
    person, or sent by a client): the next id was one past every id the file mentions,
    ``…_1000000000000000000``, refused as invalid, so nothing could be added to that day of
    that user again. Now the next id goes past the entries' ids, never onto a mentioned one."""
    rt = runtime(root)
    try:
        day = "2026-09-08T10:00:00+00:00"
        note = add_episode(rt, ANDREW, day, "Typo",
                           "See ep_20260908_0002 and ep_20260908_999999999999999999.")
        added = [add_episode(rt, ANDREW, day, "Milk", "Bought milk."),
                 add_episode(rt, ANDREW, day, "Eggs", "Bought eggs.")]
        assert [e.id for e in added] == ["ep_20260908_0003", "ep_20260908_0004"]
        Indexer(rt).scan()
        added.append(add_episode(rt, ANDREW, day, "Tea", "Bought tea."))
        assert added[-1].id == "ep_20260908_0005"
        assert [e.id for e in rt.store.entries(ANDREW, Kind.EPISODE)] == [
            note.id, *(e.id for e in added)]
    finally:
        rt.close()


def test_a_day_whose_last_id_is_taken_refuses_an_append_naming_its_log(root: Path) -> None:
    """An entry written by hand with the largest id a day may have: the next append is
    refused as a problem of that log (it said "invalid entry id …_1000000000000000000",
    an id nobody gave), and the log is not touched."""
    rt = runtime(root)
    try:
        day = "2026-09-08T10:00:00+00:00"
        first = add_episode(rt, ANDREW, day, "Milk", "Bought milk.")
        path = rt.store.path_for_id(ANDREW, first.id)
        path.write_text(path.read_text().replace(first.id, "ep_20260908_999999999999999999"))
        before = path.read_bytes()
        with pytest.raises(MarkdownError, match="no free entry id is left") as caught:
            add_episode(rt, ANDREW, day, "Eggs", "Bought eggs.")
        assert "episode-2026-09-08.md" in str(caught.value)
        assert path.read_bytes() == before
    finally:
        rt.close()
