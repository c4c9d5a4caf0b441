"""A call the server refuses for good (HTTP 400, 413, 422: the request itself) sets its records
aside in every tier, as ``learn_lessons`` does: the failure is recorded, the run counts
``set_aside``, and the same records are not sent again run after run; an edit brings them back.
An outage, a bad key or a rate limit still leaves them pending."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.engine.registry import RunContext, validate_strategy_settings
from everos_reflect.errors import ProviderUnavailable
from everos_reflect.index.audit import list_derivations
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ScriptedLLM
from everos_reflect.llm.openai_llm import OpenAILLM
from everos_reflect.runtime import Runtime
from everos_reflect.strategies import belief_views
from everos_reflect.strategies.revalidate import NAME as REVALIDATE
from everos_reflect.strategies.revalidate import RevalidateInsights
from tests.test_belief_tiers import (
    ADA,
    add_insights,
    contradiction,
    observe,
    run,
    seed_worldview,
    worldview_reply,
)
from tests.test_belief_tiers import llm as llm  # the tier tests' fixtures
from tests.test_belief_tiers import rt as rt
from tests.test_provenance import DEV, edit_file, setup

pytest_plugins = ["tests.fake_openai"]


def refused(status: int = 413) -> ProviderUnavailable:
    exc = ProviderUnavailable(f"HTTP {status}: request too large for the model")
    exc.permanent = True
    return exc


def error_of(rt: Runtime, strategy: str) -> str:
    rows = list_derivations(rt.db(), strategy=strategy)
    assert rows[0]["status"] == "failed"
    return str(rows[0]["error"])


def test_worldview_sets_a_refused_window_aside_and_takes_the_next_one(
        rt: Runtime, llm: ScriptedLLM) -> None:
    ids = add_insights(rt, "One.", "Two.", "Three.")
    llm.queue_task("worldview", refused())
    assert run(rt, "update_worldview", "failed") == {"failed": 1, "set_aside": 3}
    error = error_of(rt, "update_worldview")
    assert "HTTP 413" in error and f"set aside: {', '.join(ids)}" in error
    assert observe(rt, "update_worldview") == 0
    assert run(rt, "update_worldview") == {}  # not sent again: the script is empty
    assert len(llm.task_requests) == 1

    add_insights(rt, "Four.", "Five.", "Six.")
    llm.queue_task("worldview", worldview_reply(("risks", "Reviews get skipped.", ["Four"])))
    assert run(rt, "update_worldview") == {"owners": 1, "written": 1}
    assert {r.text for r in llm.task_requests[-1][1].records} == {"Four.", "Five.", "Six."}


def test_an_outage_still_leaves_the_window_pending(rt: Runtime, llm: ScriptedLLM) -> None:
    add_insights(rt, "One.", "Two.", "Three.")
    llm.queue_task("worldview", ProviderUnavailable("HTTP 503: overloaded"))
    assert run(rt, "update_worldview", "failed") == {"failed": 1}
    assert "set aside" not in error_of(rt, "update_worldview")
    assert observe(rt, "update_worldview") == 1


def test_an_edited_set_aside_insight_is_sent_again(rt: Runtime, llm: ScriptedLLM) -> None:
    ids = add_insights(rt, "One.", "Two.", "Three.")
    llm.queue_task("worldview", refused(400))
    run(rt, "update_worldview", "failed")
    edit_file(rt.store.path_for_id(ADA, ids[0]), "One.", "One, shorter.")
    Indexer(rt).scan()
    llm.queue_task("worldview", {"convictions": []})
    assert run(rt, "update_worldview", force=True) == {"owners": 1}
    assert [r.id for r in llm.task_requests[-1][1].records] == [ids[0]]


def test_the_detector_and_reconcile_set_a_refused_window_aside(
        rt: Runtime, llm: ScriptedLLM) -> None:
    ids = seed_worldview(rt, llm)
    llm.queue_task("contradictions", refused(422))
    assert run(rt, "detect_contradictions", "failed") == {"failed": 1, "set_aside": 2}
    assert sorted(ids.values())[0] in error_of(rt, "detect_contradictions")
    assert run(rt, "detect_contradictions") == {}
    assert observe(rt, "detect_contradictions") == 0

    # two standing edges for reconcile, drawn by a fresh detector run on new convictions
    add_insights(rt, "Reliability before velocity, always.", "Hotfixes shipped past review.",
                 "Launch dates beat reviews.")
    llm.queue_task("worldview", worldview_reply(
        ("principles", "Reliability before velocity, always.", ["Reliability"]),
        ("risks", "Shipping fast past review.", ["Hotfixes", "Launch"]),
        ("strategy", "Self-serve only.", ["Hotfixes"])))
    run(rt, "update_worldview")
    llm.queue_task("contradictions", contradiction(("Reliability", "Shipping fast"),
                                                   ("Self-serve", "Deliver")))
    assert run(rt, "detect_contradictions")["written"] == 2
    edges = [r["id"] for r in belief_views.relations(rt, ADA)]
    llm.queue_task("reconciliation", refused())
    assert run(rt, "reconcile", "failed") == {"failed": 1, "set_aside": 2}
    assert all(e in error_of(rt, "reconcile") for e in edges)
    assert observe(rt, "reconcile") == 0
    assert run(rt, "reconcile") == {}


def revalidate(rt: Runtime) -> dict[str, int]:
    values = validate_strategy_settings(REVALIDATE, {"enabled": True}, "ome.toml")
    return RevalidateInsights().run(RunContext(rt, values, "run_r", "manual", force=True))


def test_revalidation_refused_for_good_sets_the_insight_aside_until_it_is_edited(
        root: Path, fake_openai: Any) -> None:
    rt, eps, first, _second = setup(root)
    try:
        edit_file(rt.store.path_for_id(DEV, eps[1].id), "on day 16", "on day 17")
        Indexer(rt).scan()
        rt.__dict__["llm"] = OpenAILLM(model="fake-model", base_url=fake_openai.base_url,
                                       api_key="k", max_retries=0, sleep=lambda s: None)
        strategy = RevalidateInsights()
        assert strategy.observe(rt, None) == 1  # the second waits for the first
        fake_openai.script(400)
        # the depth-2 insight cites the first, still stale: it waits for its verdict
        assert revalidate(rt) == {"failed": 1, "set_aside": 1, "waiting_on_cited": 1}
        (row,) = [r for r in list_derivations(rt.db(), strategy=REVALIDATE)
                  if r["status"] == "failed"]
        assert f"set aside: {first.id}" in row["error"] and "HTTP 400" in row["error"]
        assert rt.store.get(DEV, first.id).meta["status"] == "stale"  # nothing is pretended
        assert rt.store.get(DEV, _second.id).meta["status"] == "stale"
        assert strategy.observe(rt, None) == 0
        assert revalidate(rt) == {"waiting_on_cited": 1}
        assert len(fake_openai.chat_bodies()) == 1

        # an edit of the insight (or of its evidence) brings it back
        edit_file(rt.store.path_for_id(DEV, first.id), "All three reverts touched auth.",
                  "All three reverts touched the auth code.")
        Indexer(rt).scan()
        assert strategy.observe(rt, None) == 1
        fake_openai.script(json.dumps({"verdict": "retire", "insight": "", "evidence": []}))
        # and the depth-2 insight waiting for it is judged next: one Episode left, retired
        assert revalidate(rt) == {"retired": 2}
        assert rt.store.get(DEV, _second.id).meta["status"] == "retired"
    finally:
        rt.close()


def test_revalidation_after_an_outage_asks_again(root: Path, fake_openai: Any) -> None:
    rt, eps, _first, _second = setup(root)
    try:
        edit_file(rt.store.path_for_id(DEV, eps[1].id), "on day 16", "on day 17")
        Indexer(rt).scan()
        rt.__dict__["llm"] = OpenAILLM(model="fake-model", base_url=fake_openai.base_url,
                                       api_key="k", max_retries=0, sleep=lambda s: None)
        fake_openai.script(503)
        # the depth-2 insight cites the first, whose call failed: it waits for its verdict
        assert revalidate(rt) == {"failed": 1, "waiting_on_cited": 1}
        assert rt.store.get(DEV, _second.id).meta["status"] == "stale"
        assert RevalidateInsights().observe(rt, None) == 1
    finally:
        rt.close()


@pytest.mark.parametrize("status", [400, 413, 422])
def test_the_openai_client_marks_each_refusal_status_permanent(
        fake_openai: Any, status: int) -> None:
    from everos_reflect.llm.tasks import Record, TaskRequest

    llm = OpenAILLM(model="fake-model", base_url=fake_openai.base_url, api_key="k",
                    max_retries=0, sleep=lambda s: None)
    fake_openai.script(status)
    with pytest.raises(ProviderUnavailable) as caught:
        llm.run_task("questions", TaskRequest(records=(Record("a", "episode", "x"),),
                                              values={"count": "1"}))
    assert caught.value.permanent


def test_a_long_window_set_aside_names_ten_ids_and_counts_the_rest() -> None:
    from everos_reflect.strategies.belief_store import set_aside_error

    ids = [f"ep_20261012_{n:04d}" for n in range(1, 26)]
    text = set_aside_error("HTTP 413: too large", ids)
    assert text == ("HTTP 413: too large; set aside: " + ", ".join(ids[:10])
                    + " and 15 more (the row's inputs) (sent again once edited, or the prompts or "
                    "model change)")


def nonzero(counts: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in counts.items() if v}


def _reflect_refused_then(tmp_path: Path, change: str) -> None:
    """A cluster whose merge the server refused for good is set aside, then ``change`` (a
    member edited, joining or leaving) brings it back."""
    import re

    from everos_reflect.llm.base import ScriptedLLM as MergeScript
    from tests.reflect_fixtures import (
        ANDREW,
        add_episode,
        make_runtime,
        reports,
        run_reflection,
        seed_pets,
    )

    llm = MergeScript([refused(413)])
    rt = make_runtime(tmp_path, llm)
    try:
        eps = seed_pets(rt)
        assert nonzero(run_reflection(rt)) == {"failed": 1, "set_aside": 1}
        (row,) = reports(rt)
        assert row["status"] == "failed"
        assert f"set aside: {', '.join(e.id for e in eps)}" in row["error"]
        assert "HTTP 413" in row["error"]
        # not sent again: the script is empty, a merge call would fail the test
        assert nonzero(run_reflection(rt, "run_again")) == {}
        assert len(llm.merge_requests) == 1

        if change == "edited":
            edit_file(rt.store.path_for_id(ANDREW, eps[1].id), "three-year-old",
                      "four-year-old")
        elif change == "joined":
            add_episode(rt, ANDREW, "2026-09-08T10:00:00-07:00", "Andrew's dogs Toby and Buddy",
                        "Andrew walks his two dogs, Toby and Buddy, every morning.")
        else:  # left: a member deleted by hand
            path = rt.store.path_for_id(ANDREW, eps[0].id)
            text = path.read_text()
            block = rf"<!-- entry:{eps[0].id} -->.*?<!-- /entry:{eps[0].id} -->\n"
            path.write_text(re.sub(block, "", text, flags=re.S))
        Indexer(rt).scan()
        llm._merges.append(refused(422))
        counts = nonzero(run_reflection(rt, "run_changed"))
        assert counts == {"failed": 1, "set_aside": 1}
        assert len(llm.merge_requests) == 2
        sent = len(llm.merge_requests[-1].members)
        assert sent == {"edited": 3, "joined": 4, "left": 2}[change]
    finally:
        rt.close()


@pytest.mark.parametrize("change", ["edited", "joined", "left"])
def test_reflection_sets_a_refused_cluster_aside_until_a_member_changes(
        tmp_path: Path, change: str) -> None:
    _reflect_refused_then(tmp_path, change)


def test_reflection_sends_a_refused_cluster_again_once_fewer_sources_are_sent(
        tmp_path: Path) -> None:
    """A 413 is answered by lowering max_sources_per_merge: that must bring the cluster back."""
    from everos_reflect.llm.base import ScriptedLLM as MergeScript
    from tests.reflect_fixtures import make_runtime, run_reflection, seed_pets

    llm = MergeScript([refused(413), refused(413)])
    rt = make_runtime(tmp_path, llm)
    try:
        seed_pets(rt)
        assert nonzero(run_reflection(rt)) == {"failed": 1, "set_aside": 1}
        assert nonzero(run_reflection(rt, "run_same")) == {}
        counts = nonzero(run_reflection(rt, "run_fewer", max_sources_per_merge=2))
        assert counts == {"failed": 1, "set_aside": 1, "deferred_sources": 1}
        assert [len(r.members) for r in llm.merge_requests] == [3, 2]
    finally:
        rt.close()


def test_reflection_after_an_outage_sends_the_cluster_again(tmp_path: Path) -> None:
    from everos_reflect.llm.base import ScriptedLLM as MergeScript
    from tests.reflect_fixtures import make_runtime, reports, run_reflection, seed_pets

    llm = MergeScript([ProviderUnavailable("HTTP 503: overloaded"),
                       ProviderUnavailable("HTTP 503: overloaded")])
    rt = make_runtime(tmp_path, llm)
    try:
        seed_pets(rt)
        assert nonzero(run_reflection(rt)) == {"failed": 1}
        assert "set aside" not in reports(rt)[0]["error"]
        assert nonzero(run_reflection(rt, "run_again")) == {"failed": 1}
        assert len(llm.merge_requests) == 2
    finally:
        rt.close()


def test_status_and_clusters_show_a_set_aside_cluster_and_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cluster set aside never merged, and neither `status` nor `clusters` said so: only an
    old report row held the server's answer. Both show it (text and JSON) until an edit
    brings the cluster back."""
    from click.testing import CliRunner

    from everos_reflect.cli import cluster_cmds
    from everos_reflect.cli.main import cli
    from everos_reflect.llm.base import ScriptedLLM as MergeScript
    from everos_reflect.status import status_document
    from tests.reflect_fixtures import ANDREW, make_runtime, run_reflection, seed_pets

    root = tmp_path / "root"
    # `status` opens the root from its [llm]: the runs' client is the one it configures
    # (the set-aside key names the provider and model requests went to)
    root.mkdir(parents=True)
    (root / "everos.toml").write_text('[llm]\nprovider = "openai"\nmodel = "m"\n')
    rt = make_runtime(root, MergeScript([refused(413)], provider="openai", model="m"))
    try:
        eps = seed_pets(rt)
        assert nonzero(run_reflection(rt)) == {"failed": 1, "set_aside": 1}
        monkeypatch.setattr(cluster_cmds, "open_runtime", lambda r: rt)
        runner = CliRunner(env={"COLUMNS": "100"})
        reason = "HTTP 413: request too large for the model"

        (aside,) = status_document(rt)["merges"]["set_aside"]
        assert (aside["user_id"], aside["reason"]) == (ANDREW.user_id, reason)
        assert aside["members"] == [e.id for e in eps]
        status = runner.invoke(cli, ["status", "--root", str(root)])
        assert status.exit_code == 0, status.output
        assert "1 cluster set aside: the server refused its merge" in status.stdout
        assert f"cluster {aside['cluster_id']} set aside: {reason}" in status.stdout
        doc = json.loads(runner.invoke(cli, ["status", "--root", str(root), "--json"]).stdout)
        assert doc["merges"]["set_aside"] == [aside]

        listed = runner.invoke(cli, ["clusters", "--root", str(root), "--json"])
        (cluster,) = json.loads(listed.stdout)["clusters"]
        assert (cluster["set_aside"], cluster["set_aside_reason"]) == (True, reason)
        text = runner.invoke(cli, ["clusters", "--root", str(root)]).stdout
        assert "(set aside)" in text and f"set aside: {reason}" in text

        edit_file(rt.store.path_for_id(ANDREW, eps[1].id), "three-year-old", "four-year-old")
        Indexer(rt).scan()  # edited: the next run sends it again, so it is no longer aside
        assert status_document(rt)["merges"]["set_aside"] == []
        listed = runner.invoke(cli, ["clusters", "--root", str(root), "--json"])
        (cluster,) = json.loads(listed.stdout)["clusters"]
        assert (cluster["set_aside"], cluster["set_aside_reason"]) == (False, None)
        assert "set aside" not in runner.invoke(cli, ["status", "--root", str(root)]).stdout
    finally:
        rt.close()


def test_a_metadata_edit_a_merge_never_sends_leaves_a_refused_cluster_aside(
        tmp_path: Path) -> None:
    """The key took every metadata key: a person adding `importance` or a note of their own
    sent the refused cluster again, to be refused again. A new timestamp is sent (it dates
    the episode for the model), so it brings the cluster back."""
    from everos_reflect.llm.base import ScriptedLLM as MergeScript
    from tests.reflect_fixtures import ANDREW, make_runtime, run_reflection, seed_pets

    llm = MergeScript([refused(413)])
    rt = make_runtime(tmp_path, llm)
    try:
        eps = seed_pets(rt)
        assert nonzero(run_reflection(rt)) == {"failed": 1, "set_aside": 1}
        path = rt.store.path_for_id(ANDREW, eps[1].id)
        edit_file(path, "session_id: sess_0904\n",
                  "session_id: sess_0904b\nimportance: 7\nreviewed_by: ana\n")
        Indexer(rt).scan()
        # not sent again: the script is empty, a merge call would fail the run
        assert nonzero(run_reflection(rt, "run_meta")) == {}
        assert len(llm.merge_requests) == 1

        edit_file(path, "2026-09-04T21:10:00-07:00", "2026-09-05T08:00:00-07:00")
        Indexer(rt).scan()
        llm._merges.append(refused(413))
        assert nonzero(run_reflection(rt, "run_time")) == {"failed": 1, "set_aside": 1}
        assert len(llm.merge_requests) == 2
    finally:
        rt.close()


def test_a_changed_prompt_language_or_model_sends_a_refused_cluster_again_once(
        tmp_path: Path) -> None:
    """The set-aside key held only the members: a person who rewrote the merge prompt, picked
    a language or another model to get past a refusal still had the cluster left aside (by the
    runs and by `status`) until a member changed. Each change sends it once; unchanged
    settings keep it aside."""
    from everos_reflect.llm.base import ScriptedLLM as MergeScript
    from everos_reflect.llm.prompts import MERGE_INIT
    from everos_reflect.status import status_document
    from tests.reflect_fixtures import make_runtime, run_reflection, seed_pets

    prompt = {"merge_init": "Be brief.\n" + MERGE_INIT}
    llm = MergeScript([refused(400), refused(400), refused(422)])
    rt = make_runtime(tmp_path, llm)
    try:
        seed_pets(rt)
        assert nonzero(run_reflection(rt)) == {"failed": 1, "set_aside": 1}
        assert nonzero(run_reflection(rt, "run_same")) == {}
        # the prompts of the other mode and of other tasks are not sent: still aside
        assert nonzero(run_reflection(rt, "run_other", prompts={
            "merge_update": "Other.\n$narrative\n$episodes"})) == {}
        assert nonzero(run_reflection(rt, "run_prompt", prompts=prompt)) == {
            "failed": 1, "set_aside": 1}
        assert nonzero(run_reflection(rt, "run_prompt_again", prompts=prompt)) == {}
        assert "Be brief." in llm.merge_requests[-1].prompts.merge_init
        # the view agrees with the runs: aside under the prompt ome.toml configures
        (rt.root / "ome.toml").write_text(
            "[strategies.reflect_episodes.prompts]\n"
            f"merge_init = {json.dumps(prompt['merge_init'])}\n")
        assert len(status_document(rt)["merges"]["set_aside"]) == 1
        # refused under the default prompts too: aside
        (rt.root / "ome.toml").write_text("")
        assert len(status_document(rt)["merges"]["set_aside"]) == 1
        (rt.root / "ome.toml").write_text(
            '[strategies.reflect_episodes]\nlanguage = "German"\n')
        assert status_document(rt)["merges"]["set_aside"] == []  # the next run sends it
        assert nonzero(run_reflection(rt, "run_german", prompts=prompt,
                                      language="German")) == {"failed": 1, "set_aside": 1}
        assert len(llm.merge_requests) == 3
    finally:
        rt.close()

    # another model: the same root opened with a client of another model sends it again
    # (the client's model, not [llm]'s: a client handed to the runtime is what requests use)
    llm2 = MergeScript([refused(413)], model="bigger-model")
    rt = make_runtime(tmp_path, llm2)
    try:
        assert nonzero(run_reflection(rt, "run_model")) == {"failed": 1, "set_aside": 1}
        assert nonzero(run_reflection(rt, "run_model_again")) == {}
        assert len(llm2.merge_requests) == 1
    finally:
        rt.close()
