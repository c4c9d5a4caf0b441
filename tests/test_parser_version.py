"""The index records the parser version its rows were read with; a scan under another
version (an upgrade that reads the same Markdown differently) reads every log again, so the
index follows the Markdown without a manual ``reindex``. Last session ``session_id: 0123``
and ``importance: 010`` changed meaning (octal before, the text written now), and an upgraded
root kept the old values until someone ran ``reindex``."""

from __future__ import annotations

import json
import re
import sqlite3
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.embedding import HashEmbedder
from everos_reflect.index import db as dbmod
from everos_reflect.index import sync
from everos_reflect.index.sync import Indexer
from everos_reflect.markdown import parser
from everos_reflect.markdown.parser import PARSER_VERSION, parse_log
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings

DAY = date(2026, 10, 12)
REF = UserRef.of("u")


def _root(tmp_path: Path) -> tuple[Runtime, str, Path]:
    rt = Runtime(tmp_path, Settings(), embedder=HashEmbedder(32))
    entry = rt.store.append(REF, Kind.EPISODE, {"timestamp": "2026-10-12T09:00:00+00:00",
                                                "parent_type": "memcell", "session_id": "s1"},
                            {"Subject": "Dog", "Content": "Adopted Toby."}, day=DAY)
    path = rt.store.path_for_id(REF, entry.id)
    text = path.read_text("utf-8")
    assert "\nsession_id: s1\n" in text
    path.write_text(text.replace("\nsession_id: s1\n", "\nsession_id: 0123\n"), "utf-8")
    return rt, entry.id, path


def _indexed(root: Path) -> tuple[str | None, str | None]:
    """(the entry's session_id, the recorded parser version) as the index holds them."""
    conn = sqlite3.connect(dbmod.db_path(root))
    try:
        (session,) = conn.execute("SELECT session_id FROM entries").fetchone()
        try:
            row = conn.execute("SELECT value FROM index_meta WHERE key = 'parser_version'"
                               ).fetchone()
        except sqlite3.OperationalError:  # no such table
            row = None
        return session, row[0] if row else None
    finally:
        conn.close()


def test_an_index_read_by_an_older_parser_is_read_again_by_the_next_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    rt, _, _ = _root(tmp_path)
    # an older release: any run of digits is a number (0123 -> 123), recorded as version 0
    monkeypatch.setattr(parser, "_DECIMAL_RE", re.compile(r"[-+]?[0-9]+"))
    monkeypatch.setattr(sync, "PARSER_VERSION", 0, raising=False)
    Indexer(rt).scan()
    assert _indexed(tmp_path)[0] == "123"
    monkeypatch.undo()

    report = Indexer(rt).scan()  # the upgraded daemon's first scan
    assert _indexed(tmp_path)[0] == "0123"
    assert _indexed(tmp_path)[1] == str(PARSER_VERSION)
    assert (report.logs_indexed, report.entries_upserted, report.entries_embedded) == (1, 1, 0)
    assert Indexer(rt).scan().logs_indexed == 0  # once: the next scan is an unchanged one's


def test_an_index_from_before_versions_were_recorded_is_read_again_once(
    tmp_path: Path,
) -> None:
    rt, _, _ = _root(tmp_path)
    Indexer(rt).scan()
    conn = sqlite3.connect(dbmod.db_path(tmp_path))
    conn.execute("DROP TABLE index_meta")  # as migrated before 0021
    conn.execute("DELETE FROM schema_migrations WHERE name = '0021_index_meta'")
    # read as octal 0123 back then: another value, so another content hash
    conn.execute("UPDATE entries SET session_id = '83', content_hash = 'as read then'")
    conn.commit()
    conn.close()
    rt.close()

    rt = Runtime(tmp_path, Settings(), embedder=HashEmbedder(32))
    try:
        report = Indexer(rt).scan()
        assert (report.logs_indexed, report.entries_upserted, report.entries_embedded) == (
            1, 1, 0)
        assert _indexed(tmp_path) == ("0123", str(PARSER_VERSION))
        assert Indexer(rt).scan().logs_indexed == 0
    finally:
        rt.close()


def test_reindex_records_the_version_it_read_with(tmp_path: Path) -> None:
    rt, _, _ = _root(tmp_path)
    Indexer(rt).reindex()
    assert _indexed(tmp_path) == ("0123", str(PARSER_VERSION))
    assert Indexer(rt).scan().logs_indexed == 0


def _record(root: Path, version: int) -> None:
    """``index_meta`` as another release of the parser left it."""
    conn = sqlite3.connect(dbmod.db_path(root))
    conn.execute("UPDATE index_meta SET value = ? WHERE key = 'parser_version'", (str(version),))
    conn.commit()
    conn.close()


def test_an_older_parser_leaves_an_index_a_newer_one_read_to_it_marking_what_it_synced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    """A ``serve`` of an older release beside a newer one's command recorded its own version
    back at its next scan, and each took the other's index for stale: every log read again
    at each alternation. The older one now writes what it must sync (a hand edit) marked for
    a fresh read, and leaves the rest and the recorded version to the newer one."""
    rt, _, path = _root(tmp_path)
    other = rt.store.append(REF, Kind.EPISODE, {"timestamp": "2026-10-13T09:00:00+00:00",
                                                "parent_type": "memcell"},
                            {"Subject": "Cat", "Content": "Adopted Tom."},
                            day=date(2026, 10, 13))
    Indexer(rt).scan()
    _record(tmp_path, PARSER_VERSION + 1)  # a newer release read the index
    path.write_text(path.read_text("utf-8").replace("Adopted Toby.", "Adopted Toby and Rex."),
                    "utf-8")

    with caplog.at_level("WARNING", logger="everos_reflect.index.sync"):
        report = Indexer(rt).scan()
    assert report.logs_indexed == 1
    assert _indexed(tmp_path)[1] == str(PARSER_VERSION + 1)
    rows = dict(rt.db().execute("SELECT path, mtime_ns FROM files").fetchall())
    assert rows[rt.store.rel(path)] == -1
    assert rows[rt.store.rel(rt.store.path_for_id(REF, other.id))] > 0
    assert [r.getMessage() for r in caplog.records if "newer than" in r.getMessage()] == [
        f"the index of {tmp_path} was read by parser version {PARSER_VERSION + 1}, newer than "
        f"this program's {PARSER_VERSION}: the logs synced here are read again by the newer "
        "version's next scan; upgrade everos-reflect here"]

    monkeypatch.setattr(sync, "PARSER_VERSION", PARSER_VERSION + 1)  # the newer release
    assert Indexer(rt).scan().logs_indexed == 1  # that log alone, not every log
    assert Indexer(rt).scan().logs_indexed == 0


@pytest.mark.usefixtures("no_everos_env")
@pytest.mark.parametrize(("recorded", "read_only", "line"), [
    (PARSER_VERSION - 1, True,
     f"index: read by parser version {PARSER_VERSION - 1}, not by this program's "
     f"{PARSER_VERSION}, and read-only here: logs read differently now are answered as read "
     "then until the index is rebuilt where it is writable (`reindex`, or `serve`'s first "
     "scan)"),
    (PARSER_VERSION - 1, False,
     f"index: read by parser version {PARSER_VERSION - 1}: the next sync reads every log "
     f"again with version {PARSER_VERSION}"),
    (PARSER_VERSION + 1, False,
     f"index: read by parser version {PARSER_VERSION + 1}, newer than this program's "
     f"{PARSER_VERSION}: the logs synced here are read again by the newer version; upgrade "
     "everos-reflect here"),
])
def test_status_names_the_parser_version_of_an_index_read_by_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recorded: int, read_only: bool,
    line: str,
) -> None:
    """A read-only root's index read by an older parser is never read again here, and
    nothing said so: ``status`` showed it up to date."""
    from click.testing import CliRunner

    from everos_reflect.cli.main import cli

    rt, _, _ = _root(tmp_path)
    Indexer(rt).scan()
    rt.close()
    _record(tmp_path, recorded)
    if read_only:  # as on a read-only mount (tests/test_read_only_root.py mounts one)
        monkeypatch.setattr(Runtime, "read_only", property(lambda self: True))
    text = CliRunner().invoke(cli, ["status", "--root", str(tmp_path)])
    assert text.exit_code == 0, text.output
    assert line in text.stdout.splitlines()
    doc = json.loads(CliRunner().invoke(cli, ["status", "--root", str(tmp_path), "--json"]
                                        ).stdout)
    assert doc["index"]["parser_version"] == {"index": recorded, "this": PARSER_VERSION}
    assert doc["index"].get("read_only", False) is read_only


#: Hand-written metadata values and what this parser reads them as. When a change of the
#: parser changes any of these (or the way other bytes read), raise ``PARSER_VERSION``, so
#: indexes built before read every log again, and pin the new reading here.
READINGS: dict[str, Any] = {
    "importance: 010": "010", "importance: 7": 7, "importance: +7": 7,
    "session_id: 0123": "0123", "session_id: 1_0": "1_0", "session_id: 0x0a": "0x0a",
    "session_id: 1:20": "1:20", "session_id: yes": "yes", "session_id: on": "on",
    "session_id: 'abc'": "abc", "session_id: 1.5": 1.5, "session_id: 1_0.5": "1_0.5",
    "session_id: true": True, "session_id: True": True, "session_id: null": None,
    "session_id: 2026-10-12": date(2026, 10, 12), "session_id: [a, b]": ["a", "b"],
    "<<: {session_id: s9}": {"session_id": "s9"},  # version 2: no merge
}


def _read(line: str) -> Any:
    text = ("---\ntype: episode_daily\nschema_version: 1\nuser_id: u\ndate: '2026-10-12'\n---\n"
            "<!-- entry:ep_20261012_0001 -->\n---\nowner_id: u\n"
            f"timestamp: 2026-10-12T09:00:00+00:00\nparent_type: memcell\n{line}\n---\n"
            "## Subject\nDog\n\n## Content\nAdopted Toby.\n<!-- /entry:ep_20261012_0001 -->\n")
    (entry,) = parse_log(text, "u/episodes/episode-2026-10-12.md").entries
    return entry.meta[line.split(":")[0].strip("'")]


def test_this_parser_version_reads_hand_edits_as_pinned() -> None:
    assert PARSER_VERSION == 9, "pin the readings of the new version below"
    assert {line: _read(line) for line in READINGS} == READINGS


def test_version_3_warns_of_a_zero_width_space_and_reads_the_text_as_written() -> None:
    text = ("---\ntype: episode_daily\nschema_version: 1\nuser_id: u\ndate: '2026-10-12'\n---\n"
            "<!-- entry:ep_20261012_0001 -->\n---\nowner_id: u\n"
            "timestamp: 2026-10-12T09:00:00+00:00\nparent_type: memcell\n---\n"
            "## Subject\nDog\n\n## Content\nAdopted To\u200bby.\n"
            "<!-- /entry:ep_20261012_0001 -->\n")
    log = parse_log(text, "u/episodes/episode-2026-10-12.md")
    assert [e.content for e in log.entries] == ["Adopted To\u200bby."]
    assert [(d.line, d.severity) for d in log.diagnostics] == [(17, "warning")]
