"""revalidate_insights (seed 000, SPEC §10): keep (evidence re-pointed), revise, retire."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.engine.registry import RunContext, validate_strategy_settings
from everos_reflect.index.audit import list_derivations
from everos_reflect.index.sync import Indexer
from everos_reflect.llm.openai_llm import OpenAILLM
from everos_reflect.model import Kind
from everos_reflect.runtime import Runtime
from everos_reflect.strategies.revalidate import NAME, RevalidateInsights
from tests.reflect_fixtures import add_episode
from tests.test_provenance import DEV, edit_file, setup

pytest_plugins = ["tests.fake_openai"]


def with_openai(rt: Runtime, fake: Any) -> Runtime:
    rt.__dict__["llm"] = OpenAILLM(model="fake-model", base_url=fake.base_url, api_key="k",
                                   max_retries=0, sleep=lambda s: None)
    return rt


def run(rt: Runtime) -> dict[str, int]:
    values = validate_strategy_settings(NAME, {"enabled": True}, "ome.toml")
    return RevalidateInsights().run(RunContext(rt, values, "run_r", "manual", force=True))


def merged(rt: Runtime, eps: list[Any]) -> Any:
    narrative = add_episode(rt, DEV, "2026-10-01T10:00:00+00:00", "Auth reverts",
                            "The user reverted three auth changes in September.",
                            parent_type="cluster")
    rt.store.deprecate(DEV, {eps[0].id: narrative.id})
    Indexer(rt).scan()
    return narrative


def numbers(body: dict[str, Any]) -> dict[str, int]:
    text = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return {line: int(n) for n, line in re.findall(r"^\[(\d+)\] (.*)$", text, re.M)}


def test_holds_reactivates_the_insight_with_its_evidence_re_pointed(root: Path, fake_openai):
    rt, eps, first, _second = setup(root)
    narrative = merged(rt, eps)
    assert rt.store.get(DEV, first.id).meta["status"] == "stale"
    fake_openai.script(*[lambda body: json.dumps(
        {"verdict": "holds", "insight": "", "evidence": sorted(numbers(body).values())})] * 2)
    counts = run(with_openai(rt, fake_openai))
    assert counts["kept"] == 2  # the depth-2 insight is re-checked after its evidence holds
    assert rt.store.get(DEV, _second.id).meta["status"] == "active"
    kept = rt.store.get(DEV, first.id)
    assert kept.meta["status"] == "active" and "stale_reason" not in kept.meta
    assert kept.meta["evidence"][0] == narrative.id and eps[0].id not in kept.meta["evidence"]
    body = fake_openai.chat_bodies()[0]
    assert list(body["response_format"]["json_schema"]["schema"]["properties"]) == [
        "verdict", "insight", "evidence"]
    assert "All three reverts touched auth." in body["messages"][1]["content"]
    rows = list_derivations(rt.db(), strategy=NAME)
    assert rows and rows[-1]["status"] == "ok"


def test_revise_archives_the_old_insight_with_a_new_version(root: Path, fake_openai) -> None:
    rt, eps, first, _second = setup(root)
    merged(rt, eps)
    fake_openai.script(*[lambda body: json.dumps(
        {"verdict": "revise", "insight": "The user reverted auth changes three times.",
         "evidence": sorted(numbers(body).values())})] * 2)
    counts = run(with_openai(rt, fake_openai))
    assert counts["revised"] >= 1
    old = rt.store.get(DEV, first.id)
    assert old.deprecated_by is not None
    new = rt.store.get(DEV, old.deprecated_by)
    assert new.content == "The user reverted auth changes three times."
    assert new.meta["status"] == "active" and new.meta["revises"] == first.id


def test_retire_when_the_model_says_so_or_the_floor_no_longer_holds(root: Path, fake_openai):
    rt, eps, first, second = setup(root)
    edit_file(rt.store.path_for_id(DEV, eps[1].id), "on day 16", "on day 17")
    for ep in eps[1:]:  # two of three cited episodes deleted: the floor is gone
        path = rt.store.path_for_id(DEV, ep.id)
        text = path.read_text()
        start = text.index(f"<!-- entry:{ep.id} -->")
        end = text.index(f"<!-- /entry:{ep.id} -->") + len(f"<!-- /entry:{ep.id} -->\n")
        path.write_text(text[:start] + text[end:])
    Indexer(rt).scan()
    counts = run(with_openai(rt, fake_openai))  # no LLM call needed for either
    assert counts["retired"] == 2 and fake_openai.chat_bodies() == []
    assert rt.store.get(DEV, first.id).meta["status"] == "retired"
    assert "retired: fewer than 2 cited records remain" in rt.store.get(
        DEV, second.id).meta["stale_reason"]
    assert all(e.meta["status"] == "retired" for e in rt.store.entries(DEV, Kind.INSIGHT))


def test_offline_a_stale_insight_stays_stale_and_the_run_says_it_needs_an_llm(root: Path):
    rt, eps, first, _second = setup(root)
    merged(rt, eps)
    counts = run(rt)
    assert counts["needs_llm"] >= 1
    assert rt.store.get(DEV, first.id).meta["status"] == "stale"


def test_the_data_poll_waits_out_the_cooldown_since_the_last_run(root: Path) -> None:
    """`cooldown_seconds` was taken and ignored: a stale insight the model could not settle
    (offline, or a server down) had the strategy run again at every data poll (30 s)."""
    from datetime import UTC, datetime, timedelta

    rt, eps, _first, _second = setup(root)
    merged(rt, eps)
    values = validate_strategy_settings(NAME, {"enabled": True, "cooldown_seconds": 600},
                                        "ome.toml")
    now = datetime.now(UTC)
    assert RevalidateInsights().observe(rt, now - timedelta(seconds=60), values) == 0
    # one: the depth-2 insight waits for the first, which it cites, to be judged
    assert RevalidateInsights().observe(rt, now - timedelta(seconds=601), values) == 1
    assert RevalidateInsights().observe(rt, None, values) == 1


@pytest.mark.parametrize("depth", ["one", "[1, 2]", "true", "-3"])
def test_a_hand_edited_depth_that_is_not_a_count_is_read_as_one(root: Path, fake_openai,
                                                                depth: str) -> None:
    # A person fixing up an insight's metadata wrote "depth: one": sorting the stale insights
    # compared it with an integer (TypeError), and the data poll and every run of the strategy
    # failed for every user, the revised insight's depth read with int() likewise.
    rt, eps, first, second = setup(root)
    edit_file(rt.store.path_for_id(DEV, first.id), "depth: 1", f"depth: {depth}")
    Indexer(rt).scan()
    merged(rt, eps)
    assert RevalidateInsights().observe(rt, None) == 1  # the second waits for the first
    # two texts: a revision repeating a live insight (the other's revision) is refused
    fake_openai.script(*[lambda body, text=text: json.dumps(
        {"verdict": "revise", "insight": text, "evidence": sorted(numbers(body).values())})
        for text in ("The user reverted auth changes again and again.",
                     "The user distrusts the auth changes they keep reverting.")])
    assert run(with_openai(rt, fake_openai))["revised"] == 2
    revised = rt.store.get(DEV, rt.store.get(DEV, second.id).deprecated_by)
    assert revised.meta["depth"] == 2  # 1 + the revised first insight's depth (1)


def test_a_revise_interrupted_between_its_two_writes_is_finished_by_the_next_run(
    root: Path, fake_openai: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "revise" appends the new insight, then archives the old one: two writes. A crash
    # between them left both standing, the old one still stale, and the next run asked the
    # model again and wrote a second revision of it.
    from tests.reflect_fixtures import Crash

    rt, eps, first, second = setup(root)
    merged(rt, eps)
    text = "The user reverted auth changes three times."
    fake_openai.script(json.dumps({"verdict": "revise", "insight": text, "evidence": [1, 2]}))

    def crash(*args: object, **kwargs: object) -> None:
        raise Crash("the process dies before the old insight is archived")

    with monkeypatch.context() as patch:
        patch.setattr(rt.store, "deprecate", crash)
        with pytest.raises(Crash):
            run(with_openai(rt, fake_openai))
    (written,) = [e for e in rt.store.entries(DEV, Kind.INSIGHT)
                  if e.meta.get("revises") == first.id]
    assert rt.store.get(DEV, first.id).deprecated_by is None  # the crash point: both stand

    fake_openai.script(*[lambda body: json.dumps(
        {"verdict": "holds", "insight": "", "evidence": sorted(numbers(body).values())})])
    counts = run(with_openai(rt, fake_openai))
    assert counts["recovered"] == 1
    assert rt.store.get(DEV, first.id).deprecated_by == written.id
    assert [e.id for e in rt.store.entries(DEV, Kind.INSIGHT)
            if e.meta.get("revises") == first.id] == [written.id]
    bodies = fake_openai.chat_bodies()
    assert len(bodies) == 2  # one ask for the revise, one for the dependent; none again
    assert first.content not in bodies[1]["messages"][1]["content"]
    assert rt.store.get(DEV, second.id).meta["status"] == "active"
    rows = [r for r in list_derivations(rt.db(), strategy=NAME) if r["inputs"] == [first.id]]
    assert [(r["status"], r["outputs"]) for r in rows] == [("ok", [written.id])]


@pytest.mark.parametrize("verdict", ["holds", "revise"])
def test_a_verdict_under_the_citation_floor_is_refused_alone_and_not_asked_again(
        root: Path, fake_openai: Any, verdict: str) -> None:
    rt, eps, first, _second = setup(root)
    edit_file(rt.store.path_for_id(DEV, eps[1].id), "on day 16", "on day 17")
    Indexer(rt).scan()
    strategy = RevalidateInsights()
    fake_openai.script(json.dumps({"verdict": verdict, "insight": "Auth reverts, once.",
                                   "evidence": [1]}))
    # the depth-2 insight cites the first, still stale: it waits for its verdict
    assert run(with_openai(rt, fake_openai)) == {"refused": 1, "waiting_on_cited": 1}
    assert rt.store.get(DEV, first.id).meta["status"] == "stale"  # nothing is pretended
    assert rt.store.get(DEV, _second.id).meta["status"] == "stale"
    assert rt.store.get(DEV, first.id).deprecated_by is None
    (row,) = [r for r in list_derivations(rt.db(), strategy=NAME)
              if r["inputs"] == [first.id]]
    assert row["status"] == "ok" and row["outputs"] == []
    assert f"refused: a '{verdict}' verdict citing 1 record, at least 2 needed" in row["error"]
    assert strategy.observe(rt, None) == 0
    assert run(rt) == {"waiting_on_cited": 1}  # not asked again: the fake has no reply left
    assert len(fake_openai.chat_bodies()) == 1

    edit_file(rt.store.path_for_id(DEV, first.id), "All three reverts touched auth.",
              "All three reverts touched the auth code.")
    Indexer(rt).scan()
    assert strategy.observe(rt, None) == 1


@pytest.mark.parametrize("text", ["", "  ", "\u200b"])
def test_a_revise_without_text_is_refused_alone_and_not_asked_again(
        root: Path, fake_openai: Any, text: str) -> None:
    """A "revise" whose revision was empty failed the call as an unusable reply: retried,
    counted failed, and the insight asked about again on every run, with a model that kept
    saying it. It is refused as a revise under the citation floor is."""
    rt, eps, first, _second = setup(root)
    edit_file(rt.store.path_for_id(DEV, eps[1].id), "on day 16", "on day 17")
    Indexer(rt).scan()
    fake_openai.script(lambda body: json.dumps(
        {"verdict": "revise", "insight": text, "evidence": sorted(numbers(body).values())}))
    assert run(with_openai(rt, fake_openai)) == {"refused": 1, "waiting_on_cited": 1}
    assert rt.store.get(DEV, first.id).meta["status"] == "stale"
    assert rt.store.get(DEV, _second.id).meta["status"] == "stale"
    assert rt.store.get(DEV, first.id).deprecated_by is None
    (row,) = [r for r in list_derivations(rt.db(), strategy=NAME)
              if r["inputs"] == [first.id]]
    assert row["status"] == "ok" and row["outputs"] == []
    assert "refused: a 'revise' verdict without a revised text" in row["error"]
    assert RevalidateInsights().observe(rt, None) == 0
    assert run(rt) == {"waiting_on_cited": 1}  # not asked again: the fake has no reply left
    assert len(fake_openai.chat_bodies()) == 1


def test_a_verdict_citing_a_number_not_shown_still_fails_the_call(root: Path,
                                                                   fake_openai: Any) -> None:
    rt, eps, _first, _second = setup(root)
    edit_file(rt.store.path_for_id(DEV, eps[1].id), "on day 16", "on day 17")
    Indexer(rt).scan()
    fake_openai.script(json.dumps({"verdict": "holds", "insight": "", "evidence": [1, 9]}))
    # the depth-2 insight cites the first, whose call failed: it waits for its verdict
    assert run(with_openai(rt, fake_openai)) == {"failed": 1, "waiting_on_cited": 1}
    assert rt.store.get(DEV, _second.id).meta["status"] == "stale"
    assert RevalidateInsights().observe(rt, None) == 1  # an unusable reply: asked again


def test_a_run_whose_every_revalidation_failed_is_recorded_failed(root: Path,
                                                                  fake_openai: Any) -> None:
    # Without unit counts the engine took any failure for a partial one: a run whose every
    # call failed (here a server answering 500) was recorded `partial`, exit code 3.
    from everos_reflect.engine.engine import Engine, list_runs
    from tests.test_provenance import insight

    rt, eps, _first, _second = setup(root)
    alone = insight(rt, "Every revert was on a weekday.", eps)
    edit_file(rt.store.path_for_id(DEV, eps[2].id), "on day 30", "on day 29")
    rt.store.deprecate(DEV, {_first.id: alone.id, _second.id: alone.id})
    Indexer(rt).scan()
    assert [e.id for e in rt.store.entries(DEV, Kind.INSIGHT)
            if e.meta["status"] == "stale" and not e.deprecated_by] == [alone.id]
    with_openai(rt, fake_openai)
    fake_openai.script(500)
    outcome = Engine(rt).trigger(NAME, force=True, timeout=60)
    assert (outcome.status, outcome.counts) == ("failed", {"failed": 1}), outcome
    assert f"default_app/default_project/u_dev: {alone.id}: " in (outcome.error or "")
    assert list_runs(rt)[0]["status"] == "failed"
    fake_openai.script(lambda body: json.dumps(
        {"verdict": "holds", "insight": "", "evidence": sorted(numbers(body).values())}))
    assert Engine(rt).trigger(NAME, force=True, timeout=60).status == "ok"  # asked again


def test_an_insight_citing_an_unreadable_entry_waits_instead_of_being_retired(
        root: Path) -> None:
    """An evidence entry made unreadable by a hand edit (still in its log) counted as
    deleted here: with one other record left, the stale insight was retired for good
    ("fewer than 2 cited records remain") for a typo. It is unknown now, as to provenance:
    the insight waits, stale, and is looked at again once the entry reads."""
    from everos_reflect.llm import ExtractiveLLM
    from tests.reflect_fixtures import make_runtime
    from tests.test_provenance import insight, status

    rt = make_runtime(root, ExtractiveLLM())
    eps = [add_episode(rt, DEV, f"2026-09-{d:02d}T10:00:00+00:00", f"Revert {d}",
                       f"The user reverted an auth change on day {d}.") for d in (2, 16)]
    cited = insight(rt, "Both reverts touched auth.", eps)
    indexer = Indexer(rt)
    indexer.scan()
    edit_file(rt.store.path_for_id(DEV, eps[0].id), "on day 2.", "on day 2, then again.")
    indexer.scan()
    assert status(rt, cited.id) == ("stale", f"evidence {eps[0].id} was edited")
    path = rt.store.path_for_id(DEV, eps[1].id)
    whole = path.read_text()
    edit_file(path, "timestamp: 2026-09-16T10:00:00+00:00", "timestamp: [2026-09-16T10:00")
    indexer.scan()

    assert RevalidateInsights().observe(rt, None) == 0.0
    counts = run(rt)
    assert not counts.get("retired"), counts
    assert status(rt, cited.id) == ("stale", f"evidence {eps[0].id} was edited")

    path.write_text(whole)  # the typo fixed: both records read, the model is needed
    indexer.scan()
    assert RevalidateInsights().observe(rt, None) == 1.0
    assert run(rt) == {"needs_llm": 1}
    assert status(rt, cited.id) == ("stale", f"evidence {eps[0].id} was edited")


def test_a_run_lifts_a_stale_mark_left_while_nothing_cited_changed(root: Path) -> None:
    """The old rule took an unreadable entry for a deleted one: the insights citing it went
    stale ("evidence ... was deleted") and stayed so, the typo fixed long since; no change
    event comes for an entry that reads as it always did. A run lifts such a mark with no
    model (offline too), for the insight and the one citing it, and records each."""
    from everos_reflect.index.audit import list_derivations
    from tests.test_provenance import status

    rt, eps, first, second = setup(root)
    for entry, reason in ((first, f"evidence {eps[1].id} was deleted"),
                          (second, f"evidence {first.id} is stale")):
        rt.store.update_meta(DEV, entry.id, {"status": "stale", "stale_reason": reason})
    # (not indexed here: the next sync of the insights' log would re-check and lift them too)
    assert status(rt, first.id) == ("stale", f"evidence {eps[1].id} was deleted")

    counts = run(rt)  # the extractive provider: no model judges anything
    assert counts == {"restored": 2}, counts
    assert status(rt, first.id) == ("active", None)
    assert status(rt, second.id) == ("active", None)
    assert {tuple(r["outputs"]) for r in list_derivations(rt.db(), strategy="provenance")
            if r["status"] == "restored"} == {(first.id,), (second.id,)}
    assert RevalidateInsights().observe(rt, None) == 0.0


# -- one owner's unexpected error ----------------------------------------------------------


def stale_insight(rt: Runtime, ref: Any, text: str) -> Any:
    """A stale insight of ``ref`` citing one episode and one record deleted since: retired
    without a model (fewer than 2 cited records remain)."""
    (ep,) = [add_episode(rt, ref, "2026-09-02T10:00:00+00:00", "Revert", "Reverted auth.")]
    return rt.store.append(ref, Kind.INSIGHT, {
        "timestamp": "2026-10-20T09:00:00+00:00", "evidence": [ep.id, "ep_20260901_0009"],
        "depth": 1, "status": "stale", "stale_reason": "evidence ep_20260901_0009 was deleted",
        "insight_type": "reflection", "derivation": "dw_test",
        "evidence_hash": {ep.id: ep.text_hash}}, {"Insight": text})


def test_an_oserror_writing_one_owners_insight_fails_that_owner_alone(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An OSError retiring bob's insight ended the run for every owner after him (and the run
    record named no one): now bob alone fails, named in the run record, his insight stays
    stale with a failed ``derivation_report`` row, and the next run retires it."""
    from click.testing import CliRunner

    from everos_reflect.cli import engine_cmds
    from everos_reflect.cli.main import cli
    from everos_reflect.engine.engine import Engine
    from everos_reflect.llm import ExtractiveLLM
    from everos_reflect.model import UserRef
    from tests.reflect_fixtures import make_runtime

    rt = make_runtime(root, ExtractiveLLM())
    ada, bob, cy = (UserRef.of(u) for u in ("ada", "bob", "cy"))
    made = {ref: stale_insight(rt, ref, f"{ref.user_id} reverts auth.") for ref in (ada, bob, cy)}
    real = rt.store.update_meta
    broken = {bob}

    def update_meta(ref: UserRef, entry_id: str, changes: Any) -> Any:
        if ref in broken:
            raise OSError(28, "No space left on device")
        return real(ref, entry_id, changes)

    monkeypatch.setattr(rt.store, "update_meta", update_meta)
    monkeypatch.setattr(engine_cmds, "open_runtime", lambda _root: rt)
    result = CliRunner().invoke(cli, ["trigger", NAME, "--force", "--json", "--root", str(root)])

    assert result.exit_code == 3, result.output  # partial
    answer = json.loads(result.stdout)
    assert answer["status"] == "partial" and answer["counts"] == {"retired": 2, "failed": 1}
    assert "default_app/default_project/bob: No space left on device" in answer["error"]
    assert "OSError" not in answer["error"] and "Errno" not in answer["error"]
    assert [rt.store.get(r, made[r].id).meta["status"] for r in (ada, bob, cy)] == [
        "retired", "stale", "retired"]
    (row,) = [r for r in list_derivations(rt.db(), strategy=NAME) if r["owner_id"] == "bob"]
    assert row["status"] == "failed" and row["inputs"] == [made[bob].id]
    assert row["error"] == "No space left on device"

    broken |= {ada, cy}  # nothing left for them; bob alone fails again: the run failed
    outcome = Engine(rt).trigger(NAME, force=True, timeout=60)
    assert (outcome.status, outcome.counts) == ("failed", {"failed": 1}), outcome
    broken.clear()
    outcome = Engine(rt).trigger(NAME, force=True, timeout=60)
    assert (outcome.status, outcome.counts) == ("ok", {"retired": 1}), outcome
    assert rt.store.get(bob, made[bob].id).meta["status"] == "retired"


def test_a_bug_reading_one_owner_skips_that_owner_alone_in_the_run_and_the_poll(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hand-edited record of bob's that trips a bug while his records are read: the poll
    still counts the others' stale insights and the run still retires them."""
    from everos_reflect.llm import ExtractiveLLM
    from everos_reflect.model import UserRef
    from everos_reflect.strategies import provenance
    from tests.reflect_fixtures import make_runtime

    rt = make_runtime(root, ExtractiveLLM())
    ada, bob, cy = (UserRef.of(u) for u in ("ada", "bob", "cy"))
    for ref in (ada, bob, cy):
        stale_insight(rt, ref, f"{ref.user_id} reverts auth.")
    real = provenance.load_records

    def load_records(runtime: Runtime, ref: UserRef, unreadable: Any = None) -> Any:
        if ref == bob:
            raise TypeError("unhashable type: 'list'")
        return real(runtime, ref, unreadable)

    monkeypatch.setattr(provenance, "load_records", load_records)
    assert RevalidateInsights().observe(rt, None) == 2
    values = validate_strategy_settings(NAME, {"enabled": True}, "ome.toml")
    ctx = RunContext(rt, values, "run_r", "manual", force=True)
    assert RevalidateInsights().run(ctx) == {"retired": 2, "failed": 1}
    assert ctx.failures == ["default_app/default_project/bob: internal error (TypeError: "
                            "unhashable type: 'list')"]


def test_an_insight_citing_one_whose_call_failed_waits_then_is_judged_after_it(
        root: Path, fake_openai: Any) -> None:
    """The depth-2 insight cites the first and an Episode. The first's call failed (a server
    down): the first, counted as gone, left the second "fewer than 2 cited records" and it
    was retired for good, though the first held once the server was back."""
    rt, eps, first, second = setup(root)
    narrative = merged(rt, eps)  # both cite eps[0]: both need a verdict
    fake_openai.script(503)
    assert run(with_openai(rt, fake_openai)) == {"failed": 1, "waiting_on_cited": 1}
    assert rt.store.get(DEV, second.id).meta["status"] == "stale"
    assert [r["inputs"] for r in list_derivations(rt.db(), strategy=NAME)] == [[first.id]]
    assert RevalidateInsights().observe(rt, None) == 1  # the first; the second waits

    fake_openai.script(*[lambda body: json.dumps(
        {"verdict": "holds", "insight": "", "evidence": sorted(numbers(body).values())})] * 2)
    assert run(with_openai(rt, fake_openai)) == {"kept": 2}
    kept = rt.store.get(DEV, second.id)
    assert kept.meta["status"] == "active"
    assert sorted(kept.meta["evidence"]) == sorted([first.id, narrative.id])
    assert "The user distrusts the auth refactor." in user_text(fake_openai.chat_bodies()[-1])


def test_stale_insights_citing_each_other_do_not_wait_for_each_other(root: Path) -> None:
    """A ring only a hand edit makes: each waiting for the other's verdict, neither was ever
    judged. The shallower is judged first, then the other."""
    rt, eps, first, second = setup(root)
    rt.store.update_meta(DEV, first.id, {
        "evidence": [eps[0].id, eps[1].id, second.id],
        "evidence_hash": {eps[0].id: eps[0].text_hash, eps[1].id: eps[1].text_hash,
                          second.id: rt.store.get(DEV, second.id).text_hash}})
    edit_file(rt.store.path_for_id(DEV, eps[1].id), "on day 16", "on day 17")
    Indexer(rt).scan()
    assert rt.store.get(DEV, first.id).meta["status"] == "stale"
    assert rt.store.get(DEV, second.id).meta["status"] == "stale"
    assert RevalidateInsights().observe(rt, None) == 1
    assert run(rt) == {"needs_llm": 1, "waiting_on_cited": 1}
    assert rt.store.get(DEV, second.id).meta["status"] == "stale"


def user_text(body: dict[str, Any]) -> str:
    return str(next(m["content"] for m in body["messages"] if m["role"] == "user"))
