"""Duplicate ids in one file: a lint error, and such a file is never archived into.

A ``deprecated_entries`` key names an id, not a block, so archiving one of two blocks with the
same id would also archive the other — which nobody indexed or merged.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.errors import MarkdownError
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.markdown.parser import UNDONE, duplicate_ids, parse_log
from everos_reflect.model import Entry
from everos_reflect.runtime import Runtime
from tests.reflect_fixtures import ANDREW, add_episode, make_runtime, reports, run_reflection

HEAD = "---\ntype: episode_daily\nschema_version: 1\nuser_id: u_andrew\ndate: '2026-10-12'\n---\n"
PATH = "u/episodes/episode-2026-10-12.md"
META = "owner_id: u_andrew\ntimestamp: 2026-10-11T02:00:00+00:00\nparent_type: memcell\n"


def block(n: int, content: str = "c", meta: str = META) -> str:
    eid = f"ep_20261012_{n:04d}"
    return (f"<!-- entry:{eid} -->\n---\n{meta}---\n## Subject\ns\n\n## Content\n{content}\n"
            f"<!-- /entry:{eid} -->\n")


def test_a_second_block_with_the_same_id_is_an_error_naming_the_first_line() -> None:
    text = HEAD + block(1, "first") + block(2) + block(1, "second")
    log = parse_log(text, PATH)
    assert [(e.id, e.content) for e in log.entries] == [
        ("ep_20261012_0001", "first"), ("ep_20261012_0002", "c")]
    (problem,) = log.diagnostics
    assert problem.severity == "error"
    assert problem.line == text.splitlines().index("<!-- entry:ep_20261012_0001 -->", 10) + 1
    assert "duplicate entry id ep_20261012_0001 (first at line 7" in problem.message


def test_the_second_block_is_not_read_even_when_the_first_is_broken() -> None:
    text = HEAD + block(1, meta="owner_id: [broken\n") + block(1, "second")
    log = parse_log(text, PATH)
    assert log.entries == []
    assert sorted(d.message.split(":")[0] for d in log.diagnostics) == [
        "duplicate entry id ep_20261012_0001 (first at line 7; only that block is read, and "
        "nothing in this file is archived until one of them is renamed or removed)",
        "entry ep_20261012_0001"]


def test_duplicate_ids_lists_every_line_of_each_repeated_id() -> None:
    text = HEAD + block(1) + block(2) + block(1) + block(1).replace("\n", "\r\n")
    assert duplicate_ids(text) == {"ep_20261012_0001": [7, 31, 43]}
    assert duplicate_ids(HEAD + block(1) + block(2)) == {}


@pytest.fixture
def doubled(root: Path) -> tuple[Runtime, list[Entry], Path]:
    """Two episodes in one file, then a hand-pasted copy of the first one's block."""
    rt = make_runtime(root, ExtractiveLLM())
    first = add_episode(rt, ANDREW, "2026-10-12T09:00:00+00:00", "Garden", "Tomatoes planted.")
    second = add_episode(rt, ANDREW, "2026-10-12T10:00:00+00:00", "Garden", "Beans planted.")
    path = rt.store.path_for_id(ANDREW, first.id)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(first.raw + "\n")
    return rt, [first, second], path


def test_deprecate_refuses_a_file_with_duplicate_ids_and_changes_nothing(
    doubled: tuple[Runtime, list[Entry], Path],
) -> None:
    rt, (first, second), path = doubled
    before = path.read_bytes()
    with pytest.raises(MarkdownError, match="not archiving into this file: duplicate entry id "
                       f"{first.id}"):
        rt.store.deprecate(ANDREW, {second.id: first.id})
    assert path.read_bytes() == before


def test_undo_refuses_a_file_with_duplicate_ids_and_changes_nothing(
    doubled: tuple[Runtime, list[Entry], Path],
) -> None:
    rt, (_first, second), path = doubled
    text = path.read_text("utf-8").replace(
        "---\n<!--", f"deprecated_entries:\n  {second.id}: {UNDONE}\n---\n<!--", 1)
    path.write_text(text, "utf-8")
    with pytest.raises(MarkdownError, match="not restoring entries of this file"):
        rt.store.undeprecate(ANDREW, [second.id])
    assert path.read_text("utf-8") == text


def test_lint_reports_the_duplicate_as_an_error(
    doubled: tuple[Runtime, list[Entry], Path],
) -> None:
    rt, (first, _), path = doubled
    result = CliRunner().invoke(cli, ["lint", "--root", str(rt.root), "--json"])
    assert result.exit_code == 1
    (problem,) = json.loads(result.stdout)["problems"]
    assert problem["file"] == rt.store.rel(path) and problem["severity"] == "error"
    assert problem["message"].startswith(f"duplicate entry id {first.id}")


def test_reflection_skips_a_cluster_whose_file_has_duplicate_ids_and_says_why(
    doubled: tuple[Runtime, list[Entry], Path],
) -> None:
    rt, (first, _second), path = doubled
    before = path.read_bytes()
    counts = run_reflection(rt)
    assert counts.get("merged", 0) == 0 and counts["skipped"] == 1
    (report,) = reports(rt)
    assert report["status"] == "skipped" and report["merged_entry_id"] is None
    assert f"duplicate entry id {first.id}" in report["error"]
    assert rt.store.rel(path) in report["error"]
    assert path.read_bytes() == before
    assert len([p for p in rt.store.iter_files(ANDREW)]) == 1  # no narrative, no facts file
