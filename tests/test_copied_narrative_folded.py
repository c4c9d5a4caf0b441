"""A user's folder copied by hand into another user's (and made theirs), then the copy's
sources made live again (their ``deprecated_entries`` removed by hand): the copy holds a live
narrative beside its live sources, attached to no cluster (its ``parent_id`` names the first
user's). The next run merged those sources into a second narrative and left the first live:
two live narratives of the same sources. It now folds the copied narrative in, as it folds a
cluster's own narrative whose sources were revived: one live narrative, the copy archived
toward it, the audit an ``update``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.model import Kind, UserRef
from tests.reflect_fixtures import (
    ANDREW,
    add_episode,
    all_entries,
    check_invariants,
    replace_log_with_own_episode,
    reports,
    run_reflection,
)
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables, merged_root

pytestmark = pytest.mark.usefixtures("settle_at_once")

BOB = UserRef.of("u_bob")


def test_a_copied_narrative_beside_its_revived_sources_is_folded_into_the_next_merge(
        root: Path, tmp_path: Path) -> None:
    rt, sources, copied = merged_root(root)
    try:
        users = rt.root / "default_app" / "default_project" / "users"
        shutil.copytree(users / "u_andrew", users / "u_bob")
        for log in (users / "u_bob").rglob("*.md"):  # the copy made Bob's
            log.write_text(log.read_text().replace("u_andrew", "u_bob"))
        assert rt.store.undeprecate(BOB, [e.id for e in sources])  # the lines, by hand
        Indexer(rt).scan()

        assert run_reflection(rt, run_id="run_2")["merged"] == 1

        entries = check_invariants(rt, BOB)
        live = [e for e in entries.values()
                if e.parent_type == "cluster" and e.deprecated_by is None]
        assert [e.id for e in live] != [copied] and len(live) == 1
        [merged] = live
        assert merged.sources == [copied, *sorted(e.id for e in sources)]
        assert entries[copied].deprecated_by == merged.id
        assert all(entries[e.id].deprecated_by == merged.id for e in sources)
        facts = rt.store.entries(BOB, Kind.ATOMIC_FACT)
        assert {f.deprecated_by for f in facts if f.parent_id == copied} == {merged.id}
        [row] = [r for r in reports(rt) if r["owner_id"] == "u_bob"]
        assert (row["mode"], row["status"], row["merged_entry_id"]) == (
            "update", "ok", merged.id)
        # the user it was copied from is untouched
        andrew = check_invariants(rt, ANDREW)
        assert andrew[copied].deprecated_by is None
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "rebuilt")
    finally:
        rt.close()


def test_a_narrative_whose_source_log_was_replaced_by_hand_is_not_folded_into_its_merge(
        root: Path) -> None:
    """The live entry under a source's id is not what the narrative merged (a person replaced
    its log with one of their own): the narrative, its other sources still archived toward
    it, is left alone when that entry is merged with others."""
    rt, sources, narrative = merged_root(root)
    try:
        replace_log_with_own_episode(rt, sources[1].id)  # "Andrew planted tomatoes ..."
        for day in (5, 6):
            add_episode(rt, ANDREW, f"2026-09-0{day}T09:00:00+00:00", "My garden",
                        f"Andrew planted tomatoes in his garden, row {day}.")
        Indexer(rt).scan()

        assert run_reflection(rt, run_id="run_2")["merged"] == 1

        entries = all_entries(rt)
        [merged] = [e for e in entries.values() if e.parent_type == "cluster"
                    and e.deprecated_by is None and e.id != narrative]
        assert narrative not in merged.sources and sources[1].id in merged.sources
        assert entries[narrative].deprecated_by is None
    finally:
        rt.close()
