"""Crash safety of a merge (SPEC §5): stop it between any two steps or in the middle of a file
write, then restart; every file parses, no entry is lost, and the merge is completed or cleanly
abandoned — never a live narrative beside live sources, never a source archived toward a
narrative that does not exist. Recovery twice is a no-op.

A crash is a ``BaseException`` (not caught by the run's ``except Exception``), raised from the
journal's ``checkpoint`` seam or from ``os.replace`` inside the store's atomic write.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.markdown import store as store_module
from everos_reflect.model import Kind
from everos_reflect.runtime import Runtime
from everos_reflect.strategies import journal
from tests.reflect_fixtures import (
    ANDREW,
    Crash,
    add_fact,
    all_entries,
    check_invariants,
    crash_run_at,
    index_deprecations,
    make_runtime,
    reports,
    run_reflection,
    seed_pets,
)

#: single-threaded crash simulations: nothing else writes the logs (conftest.py)
pytestmark = pytest.mark.usefixtures("settle_at_once")

STEPS = [journal.PLANNED, journal.NARRATIVE, journal.FACTS, journal.ARCHIVING, journal.DEPRECATED,
         journal.SYNCED]
# One merge of the seed with one source fact: narrative, its 4 facts (one write), 3 source
# files, 1 fact file.
WRITES = 6


def seeded(root: Path) -> tuple[Runtime, set[str]]:
    rt = make_runtime(root, ExtractiveLLM())
    sources = seed_pets(rt)
    add_fact(rt, ANDREW, sources[2], "Andrew adopted another dog named Buddy.")
    return rt, set(all_entries(rt))


def crashed(root: Path, monkeypatch: pytest.MonkeyPatch, step: str) -> tuple[Runtime, set[str]]:
    """The seed, then a merge of it killed right after ``step`` (:func:`crash_run_at`): the
    runtime and the seed's entry ids."""
    rt, original = seeded(root)
    crash_run_at(monkeypatch, rt, step)
    return rt, original


def restart(root: Path) -> Runtime:
    """A fresh process on the same root."""
    return make_runtime(root, ExtractiveLLM())


def assert_merged_once(rt: Runtime, original: set[str]) -> None:
    entries = check_invariants(rt)
    assert original <= set(entries), "an entry was lost"
    live = [e for e in entries.values() if e.parent_type == "cluster" and e.deprecated_by is None]
    assert len(live) == 1, [e.id for e in live]
    episodes = sorted(i for i in original if i.startswith("ep_"))
    assert live[0].sources == episodes
    statuses = [r["status"] for r in reports(rt)]
    assert statuses.count("ok") == 1
    # the index agrees with the Markdown on every archived entry
    assert index_deprecations(rt) == {i: e.deprecated_by for i, e in entries.items()
                                      if e.deprecated_by}


@pytest.mark.parametrize("step", STEPS)
def test_crash_after_each_step_is_completed_by_the_next_run(
    root: Path, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    rt, original = crashed(root, monkeypatch, step)
    assert all_entries(rt).keys() >= original  # parseable and complete even mid-merge

    counts = run_reflection(restart(root))

    assert counts.get("recovered_ok", 0) == 1  # rolled forward: the sources were intact
    assert counts.get("merged", 0) == 0
    assert_merged_once(restart(root), original)


@pytest.mark.parametrize("nth", range(1, WRITES + 1))
def test_crash_inside_any_file_write_leaves_parseable_files_and_recovers(
    root: Path, monkeypatch: pytest.MonkeyPatch, nth: int
) -> None:
    rt, original = seeded(root)
    real_replace = os.replace
    calls = {"n": 0}
    leftovers: list[Path] = []

    def dying_replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        calls["n"] += 1
        if calls["n"] == nth:
            # the temp file is fully written; keep a copy as a real crash would leave it
            kept = Path(src).with_name(Path(src).name + "-crash.tmp")
            os.link(src, kept)
            leftovers.append(kept)
            raise Crash(f"write #{nth}")
        real_replace(src, dst)

    monkeypatch.setattr(store_module.os, "replace", dying_replace)
    with pytest.raises(Crash):
        run_reflection(rt)
    monkeypatch.setattr(store_module.os, "replace", real_replace)
    assert leftovers and leftovers[0].exists()

    run_reflection(restart(root))

    assert_merged_once(restart(root), original)


def test_recovery_twice_is_a_no_op(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, original = crashed(root, monkeypatch, journal.FACTS)
    fresh = restart(root)
    first = journal.recover(fresh, Indexer(fresh))
    snapshot = {p: p.read_bytes() for p in fresh.store.iter_files()}
    rows = len(reports(fresh))

    second = journal.recover(fresh, Indexer(fresh))

    assert [o.status for o in first] == ["ok"] and second == []
    assert {p: p.read_bytes() for p in fresh.store.iter_files()} == snapshot
    assert len(reports(fresh)) == rows
    assert_merged_once(fresh, original)


def test_source_edited_while_crashed_abandons_the_merge_cleanly(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt, original = seeded(root)
    sources = sorted(i for i in original if i.startswith("ep_"))

    crash_run_at(monkeypatch, rt, journal.FACTS)
    path = rt.store.path_for_id(ANDREW, sources[0])
    path.write_text(path.read_text("utf-8").replace("Denver", "Boulder"), "utf-8")
    fresh = restart(root)

    outcomes = journal.recover(fresh, Indexer(fresh))

    assert [o.status for o in outcomes] == ["abandoned"]
    entries = check_invariants(fresh)
    [narrative] = [e for e in entries.values() if e.parent_type == "cluster"]
    assert entries[narrative.id].deprecated_by == narrative.id  # withdrawn, not deleted
    assert all(entries[s].deprecated_by is None for s in sources)
    [report] = reports(fresh)
    assert report["status"] == "abandoned" and report["merged_entry_id"] is None
    assert f"{sources[0]} was edited" in report["error"] and narrative.id in report["error"]

    run_reflection(fresh)  # the cluster is merged again, from the edited text

    assert_merged_once(restart(root), original)
    live = [e for e in all_entries(fresh).values()
            if e.parent_type == "cluster" and e.deprecated_by is None]
    assert "Boulder" in live[0].content


def test_crash_while_abandoning_is_finished_by_recovery(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt, original = seeded(root)
    sources = sorted(i for i in original if i.startswith("ep_"))

    def edit_then_crash(reached: str) -> None:
        if reached == journal.FACTS:  # edited after the narrative was written: stale
            path = rt.store.path_for_id(ANDREW, sources[2])
            path.write_text(path.read_text("utf-8").replace("two dogs", "2 dogs"), "utf-8")
        if reached == journal.ABANDONING:
            raise Crash(reached)

    monkeypatch.setattr(journal, "checkpoint", edit_then_crash)
    with pytest.raises(Crash):
        run_reflection(rt)
    monkeypatch.setattr(journal, "checkpoint", lambda reached: None)
    check_invariants_partial = all_entries(rt)
    assert original <= set(check_invariants_partial)

    fresh = restart(root)
    outcomes = journal.recover(fresh, Indexer(fresh))

    assert [o.status for o in outcomes] == ["abandoned"]
    entries = check_invariants(fresh)
    assert all(entries[s].deprecated_by is None for s in sources)
    assert not [e for e in entries.values()
                if e.parent_type == "cluster" and e.deprecated_by is None]
    assert fresh.store.entries(ANDREW, Kind.ATOMIC_FACT)  # nothing deleted


def test_daemon_start_settles_a_merge_interrupted_by_a_crash(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from everos_reflect.engine.daemon import recover_interrupted

    _, original = crashed(root, monkeypatch, journal.FACTS)

    fresh = restart(root)
    assert recover_interrupted(fresh) == 1
    assert_merged_once(fresh, original)
    assert recover_interrupted(restart(root)) == 0  # nothing left in the journal


@pytest.fixture(autouse=True)
def _abandon_never_removes_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """SPEC §3: only ``undo`` removes ``deprecated_entries`` keys; no crash path may."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a crash path removed deprecated_entries keys")

    monkeypatch.setattr(store_module.MarkdownStore, "undeprecate", refuse)


FIRST_ARCHIVE_WRITE = 3  # narrative, its 4 facts (one write), then the first archive write


def test_crash_mid_archive_then_hand_edit_rolls_forward_and_leaves_the_edit_live(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt, original = seeded(root)
    sources = sorted(i for i in original if i.startswith("ep_"))
    real_replace = os.replace
    calls = {"n": 0}

    def dying_replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        calls["n"] += 1
        real_replace(src, dst)
        if calls["n"] == FIRST_ARCHIVE_WRITE:
            raise Crash("after the first archive write")

    monkeypatch.setattr(store_module.os, "replace", dying_replace)
    with pytest.raises(Crash):
        run_reflection(rt)
    monkeypatch.setattr(store_module.os, "replace", real_replace)
    partial = all_entries(rt)
    archived = [s for s in sources if partial[s].deprecated_by]
    live = [s for s in sources if not partial[s].deprecated_by]
    assert len(archived) == 1 and len(live) == 2  # really half-archived
    path = rt.store.path_for_id(ANDREW, live[0])
    path.write_text(path.read_text("utf-8").replace("Content\n", "Content\nEdited: "), "utf-8")
    assert all_entries(rt)[live[0]].content.startswith("Edited: ")

    fresh = restart(root)
    outcomes = journal.recover(fresh, Indexer(fresh))

    # committed: rolled forward, never withdrawn (that would need keys removed)
    assert [o.status for o in outcomes] == ["ok"]
    entries = all_entries(fresh)
    narrative = outcomes[0].merged_id
    assert entries[narrative].deprecated_by is None
    assert entries[live[0]].deprecated_by is None  # the edit is newer than the merge: kept live
    assert entries[live[1]].deprecated_by == narrative
    assert entries[archived[0]].deprecated_by == narrative
    [report] = reports(fresh)
    assert report["status"] == "ok" and f"{live[0]} was edited" in report["error"]
    assert original <= set(entries)


@pytest.mark.parametrize("first", [journal.NARRATIVE, journal.FACTS, journal.ARCHIVING])
@pytest.mark.parametrize("second", [journal.NARRATIVE, journal.FACTS, journal.ARCHIVING,
                                    journal.DEPRECATED, journal.SYNCED])
def test_crash_during_recovery_is_recovered_by_the_next_start(
    root: Path, monkeypatch: pytest.MonkeyPatch, first: str, second: str
) -> None:
    _, original = crashed(root, monkeypatch, first)

    def crash_at(reached: str) -> None:
        if reached == second:
            raise Crash(reached)

    monkeypatch.setattr(journal, "checkpoint", crash_at)
    fresh = restart(root)
    with contextlib.suppress(Crash):
        journal.recover(fresh, Indexer(fresh))
    monkeypatch.setattr(journal, "checkpoint", lambda reached: None)

    again = restart(root)
    journal.recover(again, Indexer(again))

    assert_merged_once(restart(root), original)


def test_cli_commands_that_write_settle_an_interrupted_merge_first(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from everos_reflect.cli.main import cli

    _, original = crashed(root, monkeypatch, journal.FACTS)
    assert journal.has_pending(root)
    monkeypatch.setattr("everos_reflect.runtime.Runtime", _hash_runtime)

    result = CliRunner().invoke(cli, ["add", "--root", str(root), "--user", "u_andrew",
                                      "--subject", "later", "--content", "A later episode."])

    assert result.exit_code == 0, result.output
    assert not journal.has_pending(root)
    assert_merged_once(restart(root), original)


def _hash_runtime(root: Path, *args: object, **kwargs: object) -> Runtime:
    """The CLI's runtime with the test embedder (the real one is an ONNX model)."""
    return make_runtime(Path(root), ExtractiveLLM())


def test_a_merge_recovery_cannot_settle_is_tried_once_per_run_and_the_run_says_so(
        root: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    # The engine recovers before every run, and the run then recovered again: a merge that
    # cannot be settled (its narrative's log broken by hand) was retried and logged twice per
    # trigger, and the run was recorded "ok" all the same: only the log said a merge was stuck.
    import logging

    from everos_reflect.engine.engine import Engine

    rt, original = crashed(root, monkeypatch, journal.FACTS)
    [(plan, _)] = journal.pending(rt.db())
    broken = rt.store.log_path(plan.ref, Kind.EPISODE, plan.day_date)
    broken.write_bytes(broken.read_bytes() + b"\xff\xfe not UTF-8\n")
    fresh = restart(root)
    (root / "ome.toml").write_text("[strategies.reflect_episodes]\nenabled = true\n")

    with caplog.at_level(logging.ERROR, logger="everos_reflect.strategies.journal"):
        outcome = Engine(fresh).trigger("reflect_episodes", timeout=60)

    tries = [r for r in caplog.records if "cannot recover merge" in r.getMessage()]
    assert len(tries) == 1, [r.getMessage() for r in tries]
    assert outcome.status == "failed", outcome
    assert outcome.counts.get("recovered_unrecovered") == 1
    assert "recovered_unrecovered=1" in (outcome.error or "")
    assert journal.pending(fresh.db())  # the row stays for the next run
    # nothing lost: every original entry lives in a log other than the broken one
    assert original <= {e.id for p in fresh.store.iter_files() for e in fresh.store.read(p).entries}
