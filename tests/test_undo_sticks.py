"""``undo`` sticks (issue 11 item 10): the sources of an undone merge are not merged together
again unless a new member joins them or the user sets ``remerge_undone``; ``status`` and
``clusters`` show the cluster as held back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli import cluster_cmds
from everos_reflect.cli.main import cli
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.strategies.holdback import HoldRules, held_back, is_held
from everos_reflect.strategies.undo import undo_merge
from tests.api_client import ApiClient
from tests.reflect_fixtures import (
    ANDREW,
    add_episode,
    all_entries,
    make_runtime,
    run_reflection,
    seed_pets,
)


def test_is_held_needs_something_to_merge_and_all_of_it_undone() -> None:
    assert is_held(["a", "b"], {"a", "b", "c"})
    assert not is_held(["a", "d"], {"a", "b"})  # a new member
    assert not is_held([], {"a"})


def _merged_then_undone(root: Path):  # type: ignore[no-untyped-def]
    rt = make_runtime(root, ExtractiveLLM())
    seed_pets(rt)
    assert run_reflection(rt)["merged"] == 1
    [narrative] = [e for e in all_entries(rt).values()
                   if e.parent_type == "cluster" and e.deprecated_by is None]
    undo_merge(rt, ANDREW, narrative.id)
    return rt, narrative


def test_an_undone_merge_is_not_merged_again_by_the_next_run(root: Path) -> None:
    rt, narrative = _merged_then_undone(root)

    counts = run_reflection(rt)

    assert counts.get("merged", 0) == 0 and counts["held_back"] == 1
    live = [e for e in all_entries(rt).values()
            if e.parent_type == "cluster" and e.deprecated_by is None]
    assert live == []
    [held] = held_back(rt.db(), ANDREW)
    assert set(held.members) == set(narrative.sources)


def test_the_hold_survives_a_reindex(root: Path) -> None:
    rt, _ = _merged_then_undone(root)
    Indexer(rt).reindex()

    assert run_reflection(rt).get("merged", 0) == 0


def test_a_new_member_releases_the_hold(root: Path) -> None:
    rt, narrative = _merged_then_undone(root)
    add_episode(rt, ANDREW, "2026-09-08T09:00:00-07:00", "Andrew's dogs Toby and Buddy",
                "Andrew took his two dogs Toby and Buddy to the vet; Andrew has two dogs.")

    counts = run_reflection(rt)

    assert counts["merged"] == 1 and not counts.get("held_back")
    [live] = [e for e in all_entries(rt).values()
              if e.parent_type == "cluster" and e.deprecated_by is None]
    assert set(narrative.sources) < set(live.sources)


def test_a_member_whose_log_cannot_be_read_does_not_release_the_hold(root: Path) -> None:
    # The new member counted as one from the index, but its log no longer reads (a hand edit
    # broke the frontmatter), so the merge took exactly the undone sources again: the next
    # run redid the merge the user had just undone. Now the run's scan drops it from the
    # index (a reindex has none of it), which leaves the undone sources alone: held.
    rt, narrative = _merged_then_undone(root)
    new = add_episode(rt, ANDREW, "2026-09-08T09:00:00-07:00", "Andrew's dogs Toby and Buddy",
                      "Andrew took his two dogs Toby and Buddy to the vet; Andrew has two dogs.")
    Indexer(rt).scan()
    log = rt.store.path_for_id(ANDREW, new.id)
    log.write_text(log.read_text().replace("type: episode_daily", "type: [broken", 1))

    counts = run_reflection(rt)

    assert counts.get("merged", 0) == 0 and counts["held_back"] == 1
    log.write_text(log.read_text().replace("type: [broken", "type: episode_daily", 1))
    assert run_reflection(rt)["merged"] == 1  # readable again: a new member, a new decision
    [live] = [e for e in all_entries(rt).values()
              if e.parent_type == "cluster" and e.deprecated_by is None]
    assert set(narrative.sources) | {new.id} == set(live.sources)


def test_remerge_undone_forces_the_merge(root: Path) -> None:
    rt, _ = _merged_then_undone(root)

    assert run_reflection(rt, remerge_undone=True)["merged"] == 1


def test_status_and_clusters_show_the_hold(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rt, _ = _merged_then_undone(root)
    runner = CliRunner()

    status = runner.invoke(cli, ["status", "--root", str(root), "--json"])
    [held] = json.loads(status.stdout)["merges"]["held_back"]
    assert held["user_id"] == ANDREW.user_id and len(held["members"]) == 3
    assert "held back after an undo" in runner.invoke(cli, ["status", "--root", str(root)]).stdout

    monkeypatch.setattr(cluster_cmds, "open_runtime", lambda r: rt)
    listed = runner.invoke(cli, ["clusters", "--root", str(root), "--json"])
    assert [c["held_back"] for c in json.loads(listed.stdout)["clusters"]] == [True]


def _break(log: Path, how: str) -> None:
    if how == "frontmatter":
        log.write_text(log.read_text().replace("type: episode_daily", "type: [broken", 1))
    else:  # a byte no UTF-8 text holds: the reader refuses the whole log
        log.write_bytes(log.read_bytes() + b"\xff\xfe\n")


@pytest.mark.parametrize(("how", "problem"), [("frontmatter", "frontmatter"),
                                              ("utf8", "not valid UTF-8")])
def test_status_and_clusters_keep_the_hold_while_the_new_member_cannot_be_read(
        root: Path, monkeypatch: pytest.MonkeyPatch, how: str, problem: str) -> None:
    # They read the index, where the new member counted and released the hold, while the run
    # merged what Markdown gives and held the cluster back: both said it was ready to merge.
    # A member whose log cannot be read is none (the run's scan drops it, as a reindex has
    # none of it): the hold is the undo's, as after a reindex, and the log is named as
    # every log that cannot be read is (status once synced, lint).
    rt, narrative = _merged_then_undone(root)
    new = add_episode(rt, ANDREW, "2026-09-08T09:00:00-07:00", "Andrew's dogs Toby and Buddy",
                      "Andrew took his two dogs Toby and Buddy to the vet; Andrew has two dogs.")
    Indexer(rt).scan()
    log = rt.store.path_for_id(ANDREW, new.id)
    _break(log, how)
    runner = CliRunner()

    status = runner.invoke(cli, ["status", "--root", str(root), "--json"])
    [held] = json.loads(status.stdout)["merges"]["held_back"]
    assert held["reason"] == "undone" and set(held["members"]) == set(narrative.sources)
    assert ApiClient(rt)("GET", "/api/v1/status").json()["data"]["merges"]["held_back"] == [held]
    text = runner.invoke(cli, ["status", "--root", str(root)]).stdout
    assert "held back after an undo (3 episodes wait for a new member" in text

    monkeypatch.setattr(cluster_cmds, "open_runtime", lambda r: rt)
    [listed] = json.loads(runner.invoke(
        cli, ["clusters", "--root", str(root), "--json"]).stdout)["clusters"]
    assert listed["held_back"] is True and listed["held_back_reason"] == {"reason": "undone"}
    assert new.id not in {m["id"] for m in listed["members"]}
    assert "(held back: undone)" in runner.invoke(cli, ["clusters", "--root", str(root)]).stdout
    assert run_reflection(rt)["held_back"] == 1  # what the run does, they say
    # the log is named, with why, once synced (`clusters` and the run synced it), and by lint
    status = json.loads(runner.invoke(cli, ["status", "--root", str(root), "--json"]).stdout)
    assert status["merges"]["held_back"] == [held]
    [named] = status["files_with_problems"]
    assert named["file"] == rt.store.rel(log) and any(problem in p for p in named["problems"])
    assert problem in runner.invoke(cli, ["lint", "--root", str(root)]).stdout


def test_a_readable_new_member_shows_no_hold(root: Path) -> None:
    rt, _ = _merged_then_undone(root)
    add_episode(rt, ANDREW, "2026-09-08T09:00:00-07:00", "Andrew's dogs Toby and Buddy",
                "Andrew took his two dogs Toby and Buddy to the vet; Andrew has two dogs.")
    Indexer(rt).scan()

    assert held_back(rt.db(), ANDREW, rt.store) == []


def _reported_holds(rt, root: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """What status (JSON and text), the API's status and clusters (JSON and text) say is
    held back."""
    runner = CliRunner()
    status = json.loads(runner.invoke(cli, ["status", "--root", str(root), "--json"]).stdout)
    text = runner.invoke(cli, ["status", "--root", str(root)]).stdout
    api = ApiClient(rt)("GET", "/api/v1/status").json()["data"]["merges"]["held_back"]
    monkeypatch.setattr(cluster_cmds, "open_runtime", lambda r: rt)
    listed = json.loads(runner.invoke(
        cli, ["clusters", "--root", str(root), "--json"]).stdout)["clusters"]
    listed_text = runner.invoke(cli, ["clusters", "--root", str(root)]).stdout
    return (status["merges"]["held_back"], "held back" in text, api,
            [(c["held_back"], c["held_back_reason"]) for c in listed], "held back" in listed_text)


@pytest.mark.parametrize("remerge", [True, False])
def test_the_reports_follow_remerge_undone_in_ome_toml(
        root: Path, monkeypatch: pytest.MonkeyPatch, remerge: bool) -> None:
    # With remerge_undone = true the run merges the undone cluster again, but status, the API
    # and clusters still listed it "held back after an undo": a hold the run does not apply.
    from everos_reflect.engine.engine import Engine

    rt, narrative = _merged_then_undone(root)
    (root / "ome.toml").write_text("[strategies.reflect_episodes]\nenabled = true\n"
                                   f"remerge_undone = {str(remerge).lower()}\n")

    status, status_text, api, listed, listed_text = _reported_holds(rt, root, monkeypatch)

    outcome = Engine(rt, recover=False).trigger("reflect_episodes", timeout=60)
    assert outcome.status == "ok", outcome
    if remerge:
        assert (status, status_text, api, listed, listed_text) == (
            [], False, [], [(False, None)], False)
        assert outcome.counts.get("merged") == 1 and not outcome.counts.get("held_back")
        return
    [held] = status
    assert held["reason"] == "undone" and set(held["members"]) == set(narrative.sources)
    assert status_text and api == [held] and listed_text
    assert listed == [(True, {"reason": "undone"})]
    assert outcome.counts.get("merged", 0) == 0 and outcome.counts["held_back"] == 1


def test_the_reports_and_the_run_hold_back_past_max_sources_per_merge(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The new member cannot be read, so the run is left with the three undone sources. It
    # merged the oldest two of them (max_sources_per_merge = 2), redoing part of the undone
    # merge, because the index still counted the new member; its scan drops it now, as a
    # reindex has none of it, and the cluster is held, as the reports say.
    rt, _ = _merged_then_undone(root)
    new = add_episode(rt, ANDREW, "2026-09-08T09:00:00-07:00", "Andrew's dogs Toby and Buddy",
                      "Andrew took his two dogs Toby and Buddy to the vet; Andrew has two dogs.")
    Indexer(rt).scan()
    _break(rt.store.path_for_id(ANDREW, new.id), "frontmatter")
    (root / "ome.toml").write_text("[strategies.reflect_episodes]\nmax_sources_per_merge = 2\n")

    status, status_text, api, listed, listed_text = _reported_holds(rt, root, monkeypatch)

    assert [h["reason"] for h in status] == ["undone"] and len(status[0]["members"]) == 3
    assert (status_text, api, listed, listed_text) == (
        True, status, [(True, {"reason": "undone"})], True)
    counts = run_reflection(rt, max_sources_per_merge=2)
    assert counts["held_back"] == 1 and not counts.get("merged")


def _held_in_status(root: Path) -> list[tuple[str, int]]:
    status = CliRunner().invoke(cli, ["status", "--root", str(root), "--json"])
    return [(h["reason"], len(h["members"])) for h in json.loads(status.stdout)["merges"]
            ["held_back"]]


def test_status_counts_no_undone_member_deleted_by_hand_since_indexing(root: Path) -> None:
    # The report counted the undone members the index held, while the run's scan drops a
    # member whose log was deleted first: with one left there is nothing to merge, yet status
    # said "3 episodes wait for a new member".
    rt, narrative = _merged_then_undone(root)
    others = sorted(narrative.sources)[1:]
    rt.store.path_for_id(ANDREW, others[0]).unlink()
    assert _held_in_status(root) == [("undone", 2)]
    rt.store.path_for_id(ANDREW, others[1]).unlink()
    assert _held_in_status(root) == []
    assert not run_reflection(rt).get("held_back")  # what the run does, it says
    # a member whose log cannot be read is none either (the run's scan drops it, as a
    # reindex has none of it): the two left are held back still
    rt2, narrative2 = _merged_then_undone(root.parent / "second")
    _break(rt2.store.path_for_id(ANDREW, sorted(narrative2.sources)[1]), "utf8")
    assert [(h.reason, len(h.members)) for h in held_back(rt2.db(), ANDREW, rt2.store)] == \
        [("undone", 2)]
    assert run_reflection(rt2)["held_back"] == 1


@pytest.mark.parametrize(("max_sources", "reported"), [(50, []), (2, [("undone", 2)])])
def test_the_hold_behind_an_unreadable_new_member_counts_the_undone_members_the_run_reads(
        root: Path, max_sources: int, reported: list[tuple[str, int]]) -> None:
    # With the new member unreadable the run merges the undone sources Markdown gives: two of
    # three when a third's log cannot be read either. The report counted three from the index:
    # with max_sources_per_merge = 2 it said "merged in part, not held" of a cluster every run
    # held back; with another log broken (one left) it said "held" of one the run let be.
    # Members whose logs cannot be read are none (out of the index, as in a reindex).
    rt, narrative = _merged_then_undone(root)
    new = add_episode(rt, ANDREW, "2026-09-08T09:00:00-07:00", "Andrew's dogs Toby and Buddy",
                      "Andrew took his two dogs Toby and Buddy to the vet; Andrew has two dogs.")
    Indexer(rt).scan()
    first, second, third = sorted(narrative.sources)
    broken = {new.id, third} if max_sources == 2 else {new.id, second, third}
    for path in {rt.store.path_for_id(ANDREW, eid) for eid in broken}:
        _break(path, "utf8")
    rules = HoldRules(max_sources=max_sources)
    held = held_back(rt.db(), ANDREW, rt.store, rules)
    assert [(h.reason, len(h.members)) for h in held] == reported
    if held:
        assert held[0].members == (first, second)
    counts = run_reflection(rt, max_sources_per_merge=max_sources)
    assert counts.get("held_back", 0) == len(reported) and not counts.get("merged")
