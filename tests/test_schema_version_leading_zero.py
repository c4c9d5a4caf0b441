"""``schema_version: 01`` is version 1 with a leading zero. Read as 1 (octal) until integers
became decimal only, it then made the whole log fatal: a reindex dropped its day's entries
and every write to it was refused, for one zero. It is read as 1 again, and ``lint`` names
it as an error asking for ``1``."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.embedding import HashEmbedder
from everos_reflect.index.sync import Indexer
from everos_reflect.markdown.parser import parse_log
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings

HEAD = "---\ntype: episode_daily\nschema_version: 1\nuser_id: u\ndate: '2026-10-12'\n---\n"
ENTRY = ("<!-- entry:ep_20261012_0001 -->\n---\nowner_id: u\ntimestamp: "
         "2026-10-12T09:00:00+00:00\nparent_type: memcell\n---\n## Subject\nDog\n\n## Content\n"
         "Adopted Toby.\n<!-- /entry:ep_20261012_0001 -->\n")
PATH = "u/episodes/episode-2026-10-12.md"
DAY = date(2026, 10, 12)
MESSAGE = "schema_version {} is read as 1: write it 1 (no leading zero)"


@pytest.mark.parametrize(("line", "shown"), [
    ("schema_version: 01", "01"), ("schema_version: 0001", "0001"),
    ("schema_version:   01   # as before", "01"), ("'schema_version': 01", "01"),
])
def test_a_leading_zero_one_is_read_as_1_with_an_error_at_its_line(line: str,
                                                                     shown: str) -> None:
    log = parse_log(HEAD.replace("schema_version: 1", line) + ENTRY, PATH)
    assert log.ok and [e.id for e in log.entries] == ["ep_20261012_0001"]
    assert [(d.line, d.severity, d.message) for d in log.diagnostics] == [
        (3, "error", MESSAGE.format(shown))]


@pytest.mark.parametrize(("value", "shown"), [
    ("'01'", "'01'"), ("010", "'010'"), ("00", "'00'"), ("0x1", "'0x1'"), ("02", "'02'"),
])
def test_other_forms_stay_unsupported(value: str, shown: str) -> None:
    log = parse_log(HEAD.replace("schema_version: 1", f"schema_version: {value}") + ENTRY, PATH)
    assert not log.ok and log.entries == []
    assert [(d.line, d.severity, d.message) for d in log.diagnostics] == [
        (3, "fatal", f"unsupported schema_version {shown} (this version reads 1)")]


def test_a_log_with_schema_version_01_is_indexed_written_to_and_named_by_lint(
    tmp_path: Path,
) -> None:
    rt = Runtime(tmp_path, Settings(), embedder=HashEmbedder(32))
    ref = UserRef.of("u")
    first = rt.store.append(ref, Kind.EPISODE, {"timestamp": "2026-10-12T09:00:00+00:00",
                                                "parent_type": "memcell"},
                            {"Subject": "Dog", "Content": "Adopted Toby."}, day=DAY)
    path = rt.store.path_for_id(ref, first.id)
    text = path.read_text("utf-8")
    assert "\nschema_version: 1\n" in text
    path.write_text(text.replace("\nschema_version: 1\n", "\nschema_version: 01\n"), "utf-8")

    Indexer(rt).reindex()
    ids = [row[0] for row in rt.db().execute("SELECT id FROM entries")]
    assert ids == [first.id]

    second = rt.store.append(ref, Kind.EPISODE, {"timestamp": "2026-10-12T10:00:00+00:00",
                                                 "parent_type": "memcell"},
                             {"Subject": "Dog", "Content": "Adopted Buddy."}, day=DAY)
    assert rt.store.path_for_id(ref, second.id) == path
    after = path.read_text("utf-8")
    assert "\nschema_version: 01\n" in after and "Adopted Toby." in after  # a person's bytes

    result = CliRunner().invoke(cli, ["lint", "--root", str(tmp_path), "--json"])
    assert result.exit_code == 1, result.output
    (problem,) = json.loads(result.stdout)["problems"]
    assert problem["file"] == rt.store.rel(path) and problem["line"] == 3
    assert (problem["severity"], problem["message"]) == ("error", MESSAGE.format("01"))
