"""The example memory root is the demo's input and the parser's realistic fixture.

These tests pin what it promises (memory_root_example/README.md): it parses cleanly, hand-edit
quirks included; the store's edits leave its bytes alone; and it is big and varied enough for
clustering and Reflection to have real work (users, episode count, time span, valid ids).
"""

from __future__ import annotations

import shutil
import tomllib
from collections import Counter, defaultdict
from datetime import timedelta
from pathlib import Path

import pytest

from everos_reflect.lint import scan_store
from everos_reflect.markdown import writer
from everos_reflect.markdown.parser import parse_log
from everos_reflect.markdown.store import MarkdownStore
from everos_reflect.model import DEFAULT_APP, DEFAULT_PROJECT, DailyLog, EntryId, Kind, UserRef

EXAMPLE = Path(__file__).resolve().parent.parent / "memory_root_example"
FILES = sorted(EXAMPLE.glob("*/*/users/*/*/*.md"))
USERS = "default_app/default_project/users"

ANDREW = UserRef.of("u_andrew")
MEI = UserRef.of("u_mei")
NADIA = UserRef.of("u_nadia")
SAM = UserRef("acme_app", "support_bot", "u_sam")


def _rel(path: Path) -> str:
    return path.relative_to(EXAMPLE).as_posix()


def _parse(path: Path) -> DailyLog:
    return parse_log(path.read_bytes().decode("utf-8"), _rel(path))


@pytest.fixture(scope="module")
def logs() -> dict[str, DailyLog]:
    return {_rel(path): _parse(path) for path in FILES}


@pytest.fixture
def store(tmp_path: Path) -> MarkdownStore:
    """A private copy: the store writes lock files and edits, the repository copy stays put."""
    shutil.copytree(EXAMPLE, tmp_path / "root")
    return MarkdownStore(tmp_path / "root")


def test_every_file_parses_without_diagnostics(logs: dict[str, DailyLog]) -> None:
    assert len(logs) == 99
    problems = [str(d) for log in logs.values() for d in log.diagnostics]
    assert problems == []
    assert all(log.entries for log in logs.values())


def test_lint_finds_nothing_in_the_markdown() -> None:
    scan = scan_store(MarkdownStore(EXAMPLE))
    assert scan.files == 99
    assert [str(p) for p in scan.problems] == []


def test_frontmatter_is_exactly_what_the_daemon_writes(logs: dict[str, DailyLog]) -> None:
    for rel, log in logs.items():
        assert log.kind is not None and log.day is not None
        expected = writer.new_log_text(log.kind, log.frontmatter["user_id"], log.day)
        assert log.text.startswith(expected), rel
        assert log.frontmatter["user_id"] == rel.split("/")[3]


def test_four_users_one_in_another_tenant(store: MarkdownStore) -> None:
    assert list(store.iter_users()) == sorted([ANDREW, MEI, NADIA, SAM])
    assert (SAM.app, SAM.project) != (DEFAULT_APP, DEFAULT_PROJECT)


def test_enough_episodes_over_enough_time(store: MarkdownStore) -> None:
    episodes = {ref: store.entries(ref, Kind.EPISODE) for ref in store.iter_users()}
    assert {ref.user_id: len(eps) for ref, eps in episodes.items()} == {
        "u_andrew": 32,
        "u_mei": 21,
        "u_nadia": 24,
        "u_sam": 21,
    }
    stamps = [e.timestamp for eps in episodes.values() for e in eps]
    assert None not in stamps
    assert max(stamps) - min(stamps) >= timedelta(days=90)
    months = {(ts.year, ts.month) for ts in stamps}
    assert len(months) >= 4
    for eps in episodes.values():
        assert all(e.parent_type == "memcell" and e.parent_id.startswith("mc_") for e in eps)
        assert all(e.session_id and e.subject and e.content for e in eps)


def test_ids_carry_their_file_date_and_count_up_from_one(logs: dict[str, DailyLog]) -> None:
    seen: dict[str, Counter[str]] = defaultdict(Counter)
    for rel, log in logs.items():
        ids = [EntryId.parse(e.id) for e in log.entries]
        assert {(i.kind, i.day) for i in ids} == {(log.kind, log.day)}, rel
        assert [i.seq for i in ids] == list(range(1, len(ids) + 1)), rel
        seen[rel.split("/")[3]].update(e.id for e in log.entries)
    for user, counts in seen.items():
        assert [i for i, n in counts.items() if n > 1] == [], user


def test_timestamps_fall_on_the_files_day_in_local_time(logs: dict[str, DailyLog]) -> None:
    for rel, log in logs.items():
        for entry in log.entries:
            assert entry.timestamp is not None and entry.timestamp.utcoffset() is not None
            assert entry.timestamp.date() == log.day, f"{rel} {entry.id}"


def test_atomic_facts_point_at_existing_episodes(store: MarkdownStore) -> None:
    total = 0
    for ref in store.iter_users():
        episode_ids = {e.id for e in store.entries(ref, Kind.EPISODE)}
        for fact in store.entries(ref, Kind.ATOMIC_FACT):
            total += 1
            assert fact.parent_type == "episode"
            assert fact.parent_id in episode_ids, fact.id
            assert fact.meta["owner_id"] == ref.user_id
            assert list(fact.sections) == ["Fact"] and fact.content
    assert total == 9


def test_unchanged_entries_render_back_to_their_own_bytes(logs: dict[str, DailyLog]) -> None:
    """Parse -> render is lossless for every entry except the one whose YAML carries a comment:
    comments cannot survive a re-dump, which is why the store never re-renders an entry."""
    differing = []
    for rel, log in logs.items():
        for entry in log.entries:
            if writer.render_entry(entry.id, entry.meta, entry.sections) != entry.raw + "\n":
                differing.append(f"{rel.split('/')[3]}/{entry.id}")
    assert differing == ["u_andrew/ep_20260727_0001"]


def test_deprecate_then_undo_restores_every_file_byte_for_byte(store: MarkdownStore) -> None:
    for path in store.iter_files():
        ref, _, _ = store.ref_for_path(path)
        before = path.read_bytes()
        first = store.read(path).entries[0].id
        merged = "ep_20261019_0042"  # a Reflection narrative's id, as in the seed walkthrough
        assert store.deprecate(ref, {first: merged}) == {}
        patched = store.read(path)
        assert patched.deprecated_entries == {first: merged}
        assert patched.diagnostics == []
        assert patched.entries[0].deprecated_by == merged
        assert store.undeprecate(ref, [first]) == {first: merged}
        assert path.read_bytes() == before, store.rel(path)


def test_append_keeps_every_existing_byte(store: MarkdownStore) -> None:
    for path in store.iter_files(kinds=[Kind.EPISODE]):
        ref, _, day = store.ref_for_path(path)
        before = path.read_bytes()
        old = store.read(path).entries
        new = store.append(
            ref,
            Kind.EPISODE,
            {"parent_type": "memcell", "parent_id": "mc_000000000000"},
            {"Subject": "Appended by the test", "Content": "Nothing else may change."},
            day=day,
        )
        after_bytes = path.read_bytes()
        # The one file without a trailing newline gets exactly that newline, nothing else.
        prefix = before if before.endswith(b"\n") else before + b"\n"
        assert after_bytes.startswith(prefix), store.rel(path)
        assert EntryId.parse(new.id).seq == len(old) + 1
        after = store.read(path)
        assert after.diagnostics == []
        assert [(e.id, e.meta, e.sections, e.raw) for e in after.entries[:-1]] == [
            (e.id, e.meta, e.sections, e.raw) for e in old
        ]


def test_the_documented_hand_edit_quirks_are_present(logs: dict[str, DailyLog]) -> None:
    """README.md promises these; a tidy-up that removed one would silently weaken the tests."""

    def entry(rel: str, entry_id: str):
        return next(e for e in logs[rel].entries if e.id == entry_id)

    andrew, mei = f"{USERS}/u_andrew/episodes", f"{USERS}/u_mei/episodes"
    sam = "acme_app/support_bot/users/u_sam/episodes"
    assert entry(f"{andrew}/episode-2026-07-14.md", "ep_20260714_0001").meta["mood"] == "tired"
    notes = entry(f"{mei}/episode-2026-07-31.md", "ep_20260731_0001").sections
    assert list(notes) == ["Subject", "Content", "Notes"]
    two = logs[f"{sam}/episode-2026-07-22.md"]
    first, second = two.entries
    between = two.text[two.text.index(first.raw) + len(first.raw) : two.text.index(second.raw)]
    assert between.strip().startswith("Checked by Priya on 2026-07-23")
    reordered = entry(f"{andrew}/episode-2026-09-04.md", "ep_20260904_0001").meta
    assert list(reordered)[:2] == ["timestamp", "importance"]
    assert not logs[f"{mei}/episode-2026-10-14.md"].text.endswith("\n")
    commented = entry(f"{andrew}/episode-2026-07-27.md", "ep_20260727_0001")
    assert commented.meta["importance"] == 7 and "# bumped from 5" in commented.raw


def test_ome_toml_turns_reflection_on() -> None:
    ome = tomllib.loads((EXAMPLE / "ome.toml").read_text(encoding="utf-8"))
    assert ome == {"strategies": {"reflect_episodes": {"enabled": True}}}


def test_nadias_history_holds_three_patterns_the_offline_method_finds(
        store: MarkdownStore) -> None:
    """README.md: Nadia's auth reverts, flaky checkout test and Friday migrations recur across
    weeks; the offline insight method (TF-IDF over the Episodes) states all three."""
    from everos_reflect.strategies.insights_offline import recurring_topics

    episodes = store.entries(NADIA, Kind.EPISODE)
    topics = recurring_topics(episodes, limit=3)
    subjects = {e.id: e.subject for e in episodes}
    cited = [sorted(subjects[i] for i in t.evidence) for t in topics]
    assert len(topics) == 3
    assert any(all("reverted" in s and "auth" in s for s in c) and len(c) == 3 for c in cited)
    assert any(all(("checkout" in s.lower()) for s in c) and len(c) == 4 for c in cited)
    assert any(all("migration" in s.lower() for s in c) and len(c) == 3 for c in cited)
    assert sum(int(e.meta["importance"]) for e in episodes) >= 150  # the accumulator fires

