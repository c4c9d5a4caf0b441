"""A merge's copy in another user's folder whose narrative's id is already taken there.

The folder copied while the merge ran holds its facts (naming the journal row) but not its
narrative; the copy's log of the merge day holds an entry of the narrative's id already (a
hand edit, or an earlier copy whose ``reflection`` key a person removed). Before, nothing was
written and the copy was dropped with a log line alone: its facts stayed live of a narrative
the look-up never settled, and no run record, audit row or status said so. Now:

- the entry there IS the copy when it holds the narrative's text (and no other row's
  ``reflection`` key): the copy is settled as a copy of the finished merge;
- otherwise the conflict is reported: the run record counts ``copy_conflicts`` and names it
  (the run is ``partial``), and the merge's audit row says it; nothing is written over the
  entry there, and the merge itself is settled (its row goes).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.engine.registry import RunContext, judge_counts, validate_strategy_settings
from everos_reflect.llm.extractive import ExtractiveLLM
from everos_reflect.markdown import writer
from everos_reflect.model import Entry, Kind
from everos_reflect.runtime import Runtime
from everos_reflect.strategies import journal
from everos_reflect.strategies.reflect import NAME, ReflectEpisodes
from tests.reflect_fixtures import ANDREW, Crash, all_entries, make_runtime, merge_on, reports
from tests.test_copy_lookups_bounded import DAY
from tests.test_copy_over_several_writes import copy_over
from tests.test_folder_copied_mid_merge import BOB, pets, state, users

pytestmark = pytest.mark.usefixtures("settle_at_once")


def andrews_narrative(rt: Runtime) -> Entry:
    [narrative] = [e for e in all_entries(rt, ANDREW).values() if e.parent_type == "cluster"]
    return narrative


def put_in_bobs_log(rt: Runtime, entry_id: str, meta: dict[str, object],
                    sections: dict[str, str]) -> None:
    """An entry written by hand into Bob's episode log of the merge day."""
    path = users(rt) / "u_bob" / rt.store.log_path(ANDREW, Kind.EPISODE, DAY).relative_to(
        users(rt) / "u_andrew")
    text = (path.read_text() if path.exists()
            else writer.new_log_text(Kind.EPISODE, "u_bob", DAY))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(writer.append_entry(text, writer.render_entry(entry_id, meta, sections)))


def run(rt: Runtime) -> tuple[dict[str, int], RunContext]:
    """One Reflection run as the engine makes it: recovery, then the run, one context."""
    values = validate_strategy_settings(NAME, {}, "ome.toml")
    strategy = ReflectEpisodes()
    recovered = strategy.recover(rt)
    ctx = RunContext(rt, values, "run_2", "manual", force=True)
    counts = strategy.run(ctx)
    for key, value in recovered.items():
        counts[key] = counts.get(key, 0) + value
    return counts, ctx


def test_the_narratives_text_under_its_id_without_the_key_is_the_copy(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bob's log holds the narrative under its id, its ``reflection`` key removed by hand:
    it is the copy; the copy's facts and sources are settled toward it."""
    merge_on(monkeypatch, DAY)
    rt = pets(root, update=False)

    def hand_copy() -> None:
        narrative = andrews_narrative(rt)
        meta = {k: v for k, v in narrative.meta.items() if k != journal.REFLECTION_KEY}
        put_in_bobs_log(rt, narrative.id, {**meta, "owner_id": "u_bob"}, narrative.sections)

    copy_over(rt, monkeypatch, journal.FACTS, {"narrative"}, then=hand_copy)
    try:
        counts, ctx = run(rt)
        assert counts["merged"] == 1 and not counts.get("copy_conflicts")
        assert judge_counts(ReflectEpisodes(), counts) == ("ok", None)
        assert not ctx.failures
        andrew, bob = all_entries(rt, ANDREW), all_entries(rt, BOB)
        assert state(bob) == state(andrew)
        narrative = andrews_narrative(rt)
        assert bob[narrative.id].deprecated_by is None
        assert {i for i, e in bob.items() if e.deprecated_by == narrative.id} == {
            i for i, e in andrew.items() if e.deprecated_by == narrative.id} != set()
        assert [r["error"] for r in reports(rt)] == [None]
    finally:
        rt.close()


@pytest.mark.parametrize("what", ["another entry", "another row's narrative"])
def test_another_entry_under_the_narratives_id_is_a_conflict_reported(
        root: Path, monkeypatch: pytest.MonkeyPatch, what: str) -> None:
    """Bob's log holds another entry under the narrative's id (one of his own; or a
    narrative of the same text another row wrote): nothing is written over it, and the
    conflict is in the run record (counted, named, the run partial) and the audit row."""
    merge_on(monkeypatch, DAY)
    rt = pets(root, update=False)
    placed: dict[str, Entry] = {}

    def hand_entry() -> None:
        narrative = placed["narrative"] = andrews_narrative(rt)
        if what == "another entry":
            meta = {"owner_id": "u_bob", "timestamp": "2026-09-10T08:00:00+00:00",
                    "parent_type": "memcell", "parent_id": "mc_9"}
            sections = {"Subject": "Bob went hiking", "Content": "Bob went hiking."}
        else:
            meta = {**narrative.meta, "owner_id": "u_bob", journal.REFLECTION_KEY: "rj_other"}
            sections = narrative.sections
        put_in_bobs_log(rt, narrative.id, meta, sections)

    copy_over(rt, monkeypatch, journal.FACTS, {"narrative"}, then=hand_entry)
    try:
        counts, ctx = run(rt)
        narrative = placed["narrative"]
        assert counts["merged"] == 1 and counts["copy_conflicts"] == 1
        status, why = judge_counts(ReflectEpisodes(), counts)
        assert status == "partial" and "copy_conflicts=1" in (why or "")
        [named] = ctx.failures
        assert "u_andrew" in named.split(": ")[0]
        assert "u_bob" in named and narrative.id in named and "another entry's" in named
        [report] = reports(rt)
        assert report["status"] == "ok" and report["merged_entry_id"] == narrative.id
        assert "u_bob" in report["error"] and "another entry's" in report["error"]
        bob = all_entries(rt, BOB)
        [there] = [e for e in bob.values() if e.id == narrative.id]
        assert (there.meta.get(journal.REFLECTION_KEY) == "rj_other"
                if what != "another entry" else there.sections["Subject"] == "Bob went hiking")
        # the merge itself is settled: its row is gone
        assert rt.db().execute("SELECT COUNT(*) FROM merge_journal").fetchone()[0] == 0
    finally:
        rt.close()


def test_a_copy_its_narrative_deleted_by_hand_is_reported_not_written_again(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The copy's log names the narrative's id with no entry holding it (a source of that
    day archived toward it, the narrative deleted by hand): not written again (an id is
    never written twice), and said in the run record."""
    merge_on(monkeypatch, DAY)
    rt = pets(root, update=False)

    def hand_mention() -> None:
        narrative = andrews_narrative(rt)
        put_in_bobs_log(rt, "ep_20260910_0077",
                        {"owner_id": "u_bob", "timestamp": "2026-09-10T08:00:00+00:00",
                         "parent_type": "memcell", "parent_id": "mc_9"},
                        {"Subject": "A note", "Content": f"Bob wrote down {narrative.id}."})

    copy_over(rt, monkeypatch, journal.FACTS, {"narrative"}, then=hand_mention)
    try:
        counts, ctx = run(rt)
        assert counts["merged"] == 1 and counts["copy_conflicts"] == 1
        assert "never written twice" in ctx.failures[0]
        narrative = andrews_narrative(rt)
        assert narrative.id not in all_entries(rt, BOB)
    finally:
        rt.close()


def test_a_copy_settled_by_recovery_counts_its_conflict_in_the_run_record(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same conflict found by the recovery of a merge killed after its facts: counted
    in the counts the recovery adds to the run record."""
    merge_on(monkeypatch, DAY)
    rt = pets(root, update=False)

    def hand_entry() -> None:
        narrative = andrews_narrative(rt)
        put_in_bobs_log(rt, narrative.id,
                        {"owner_id": "u_bob", "timestamp": "2026-09-10T08:00:00+00:00",
                         "parent_type": "memcell", "parent_id": "mc_9"},
                        {"Subject": "Bob went hiking", "Content": "Bob went hiking."})
        raise Crash("killed")

    copy_over(rt, monkeypatch, journal.FACTS, {"narrative"}, then=hand_entry)
    with pytest.raises(Crash):
        run(rt)
    monkeypatch.setattr(journal, "checkpoint", lambda reached: None)
    rt.close()
    rt = make_runtime(root, ExtractiveLLM())
    try:
        recovered = ReflectEpisodes().recover(rt)
        assert recovered == {"recovered_ok": 1, "copy_conflicts": 1}
        assert judge_counts(ReflectEpisodes(), recovered)[0] != "ok"
        [report] = reports(rt)
        assert "another entry's" in report["error"]
    finally:
        rt.close()
