"""The kind registry (SPEC §2, §3, §10): every layer derives a kind's names from one row."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from everos_reflect.index.vectors import TABLES
from everos_reflect.markdown.parser import parse_log
from everos_reflect.markdown.store import MarkdownStore
from everos_reflect.model import KINDS, EntryId, Kind, UserRef

# (kind, id prefix, folder, file stem, frontmatter type, main section) exactly as SPEC names them.
SPEC_KINDS = [
    (Kind.EPISODE, "ep", "episodes", "episode", "episode_daily", "Content"),
    (Kind.ATOMIC_FACT, "af", ".atomic_facts", "atomic_fact", "atomic_fact_daily", "Fact"),
    (Kind.INSIGHT, "in", ".insights", "insight", "insight_daily", "Insight"),
    (Kind.CONVICTION, "wv", ".worldview", "worldview", "conviction_daily", "Conviction"),
    (Kind.RELATION, "rel", ".relations", "relation", "relation_daily", "Relation"),
    (Kind.TASK, "tk", "tasks", "task", "task_daily", "Goal"),
    (Kind.LESSON, "ls", ".lessons", "lesson", "lesson_daily", "Lesson"),
]


def test_registry_holds_every_spec_kind_and_nothing_else() -> None:
    assert set(KINDS) == set(Kind) == {row[0] for row in SPEC_KINDS}
    assert len({k.prefix for k in Kind}) == len({k.table for k in Kind}) == len(Kind)


@pytest.mark.parametrize(("kind", "prefix", "folder", "stem", "file_type", "main"), SPEC_KINDS)
def test_kind_names_match_the_spec(
    kind: Kind, prefix: str, folder: str, stem: str, file_type: str, main: str
) -> None:
    assert (kind.prefix, kind.folder, kind.stem, kind.file_type, kind.main_section) == (
        prefix, folder, stem, file_type, main
    )
    assert kind.filename(date(2026, 10, 12)) == f"{stem}-2026-10-12.md"
    assert TABLES[kind] == kind.table
    parsed = EntryId.parse(f"{prefix}_20261012_0007")
    assert (parsed.kind, parsed.day, parsed.seq) == (kind, date(2026, 10, 12), 7)
    assert str(parsed) == f"{prefix}_20261012_0007"


@pytest.mark.parametrize("kind", list(Kind))
def test_store_appends_and_reads_back_every_kind(root: Path, kind: Kind) -> None:
    store = MarkdownStore(root)
    ref = UserRef.of("u_kinds")
    meta = {"timestamp": "2026-10-12T09:00:00+00:00"}
    if kind.info.parent_types:
        meta["parent_type"] = sorted(kind.info.parent_types)[0]
    entry = store.append(ref, kind, meta, {kind.main_section: f"text of a {kind.value}"},
                         day=date(2026, 10, 12))
    path = store.log_path(ref, kind, date(2026, 10, 12))
    assert path == root / "default_app/default_project/users/u_kinds" / kind.folder / (
        f"{kind.stem}-2026-10-12.md")
    assert entry.id == f"{kind.prefix}_20261012_0001"
    assert store.ref_for_path(path) == (ref, kind, date(2026, 10, 12))
    assert list(store.iter_files(ref)) == [path]
    log = store.read(path)
    assert log.kind is kind and log.frontmatter["type"] == kind.file_type
    assert [d for d in log.diagnostics if d.severity != "warning"] == []
    assert log.entries[0].content == f"text of a {kind.value}"
    assert store.get(ref, entry.id).content == f"text of a {kind.value}"


def test_a_file_in_the_wrong_folder_is_not_a_log(root: Path) -> None:
    store = MarkdownStore(root)
    user = root / "default_app/default_project/users/u1"
    assert store.ref_for_path(user / ".insights/worldview-2026-10-12.md") is None
    assert store.ref_for_path(user / ".worldview/worldview-2026-10-12.md") is not None


def test_parser_warns_when_a_derived_entry_lacks_its_main_section() -> None:
    text = (
        "---\ntype: conviction_daily\nschema_version: 1\nuser_id: u1\ndate: '2026-10-12'\n---\n"
        "<!-- entry:wv_20261012_0001 -->\n---\nowner_id: u1\n"
        "timestamp: 2026-10-12T09:00:00+00:00\n---\n## Notes\nhello\n"
        "<!-- /entry:wv_20261012_0001 -->\n"
    )
    log = parse_log(text, "x/.worldview/worldview-2026-10-12.md")
    assert log.kind is Kind.CONVICTION and [e.id for e in log.entries] == ["wv_20261012_0001"]
    assert any("no '## Conviction' section" in d.message for d in log.diagnostics)
