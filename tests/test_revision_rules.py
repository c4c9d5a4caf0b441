"""``reconcile`` and a ``revise`` verdict of ``revalidate_insights`` write insights, and are held
to the rules ``reflect_insights`` writes insights under: a text a live insight already states is
never written again (a second copy, counted twice by ``update_worldview``'s trigger; a revise
archives its stale insight into that live one instead, unless the live one stands on it),
and a revision is no deeper than the ``max_depth`` its original was written under (a revise had
no cap). Each refusal is counted ``refused``; nothing is written. Through the real client and
the loopback fake server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.engine.registry import get_strategy
from everos_reflect.index.audit import list_derivations
from everos_reflect.index.sync import Indexer
from everos_reflect.model import Kind
from everos_reflect.runtime import Runtime
from everos_reflect.strategies.revalidate import NAME as REVALIDATE
from tests.test_aside_settings import ADA, edges, openai_settings, run
from tests.test_aside_settings import rt as rt  # the fake server's runtime
from tests.test_provenance import DEV, edit_file, insight, setup

pytest_plugins = ["tests.fake_openai"]


def ids(rt: Runtime, ref: Any) -> set[str]:
    return {e.id for e in rt.store.entries(ref, Kind.INSIGHT)}


def test_reconcile_refuses_a_reconciliation_a_live_insight_already_states(
        rt: Runtime, fake_openai: Any) -> None:
    edges(rt)  # over convictions drawn from the live insight "Reviews get skipped."
    before = ids(rt, ADA)
    fake_openai.script({"insight": "reviews  get skipped", "evidence": [1, 2]})
    assert run(rt, "reconcile") == {"owners": 1, "refused": 1}
    assert ids(rt, ADA) == before


def revalidation_runtime(root: Path, fake_openai: Any) -> tuple[Runtime, list[Any], Any, Any]:
    rt, eps, first, second = setup(root)
    rt.settings = openai_settings(fake_openai.base_url)
    rt.__dict__.pop("llm", None)  # setup's offline client: built again from [llm]
    return rt, eps, first, second


def refusal(rt: Runtime) -> str:
    (row,) = [r for r in list_derivations(rt.db(), strategy=REVALIDATE)
              if str(r["error"] or "").startswith("refused:")]
    return str(row["error"])


def test_a_revision_repeating_a_live_insight_archives_the_old_one_into_it(
        root: Path, fake_openai: Any) -> None:
    rt, eps, first, second = revalidation_runtime(root, fake_openai)
    try:
        other = insight(rt, "The auth refactor keeps getting reverted.", [eps[0], eps[2]])
        edit_file(rt.store.path_for_id(DEV, eps[1].id), "on day 16", "on day 17")
        Indexer(rt).scan()
        before = ids(rt, DEV)
        fake_openai.script({"verdict": "revise", "evidence": [1, 2],
                            "insight": "The auth refactor keeps getting reverted"},
                           # the depth-2 insight then follows the first to it
                           {"verdict": "holds", "insight": "", "evidence": [1, 2]})
        assert run(rt, REVALIDATE) == {"merged": 1, "kept": 1}
        assert ids(rt, DEV) == before  # no second copy
        assert rt.store.get(DEV, first.id).deprecated_by == other.id
        (row,) = [r for r in list_derivations(rt.db(), strategy=REVALIDATE)
                  if r["inputs"] == [first.id]]
        assert (row["status"], row["outputs"]) == ("ok", [other.id])
        assert str(row["error"]).startswith(
            f"merged: the revision of {first.id} repeats {other.id}")
        kept = rt.store.get(DEV, second.id)
        assert (kept.meta["status"], kept.meta["evidence"]) == ("active", [other.id, eps[0].id])
        assert run(rt, REVALIDATE) == {}
        assert len(fake_openai.chat_bodies()) == 2
    finally:
        rt.close()


def test_a_revision_repeating_a_live_insight_that_stands_on_it_is_refused(
        root: Path, fake_openai: Any) -> None:
    rt, eps, first, _second = revalidation_runtime(root, fake_openai)
    try:
        # a person's insight (no derivation: provenance never marks it) citing the first:
        # archived into it, the first would be its own successor's evidence
        mine = rt.store.append(DEV, Kind.INSIGHT, {
            "timestamp": "2026-10-21T09:00:00+00:00", "evidence": [first.id, eps[2].id],
            "depth": 2, "status": "active"}, {"Insight": "Auth work gets undone."})
        edit_file(rt.store.path_for_id(DEV, eps[1].id), "on day 16", "on day 17")
        Indexer(rt).scan()
        assert rt.store.get(DEV, mine.id).meta["status"] == "active"
        fake_openai.script({"verdict": "revise", "evidence": [1, 2],
                            "insight": "Auth work gets undone."})
        # the depth-2 insight cites the first, still stale: it waits for its verdict
        assert run(rt, REVALIDATE) == {"refused": 1, "waiting_on_cited": 1}
        assert f"repeating {mine.id}, which cites {first.id}" in refusal(rt)
        kept = rt.store.get(DEV, first.id)
        assert (kept.meta["status"], kept.deprecated_by) == ("stale", None)
    finally:
        rt.close()


@pytest.mark.parametrize(("max_depth", "counts"), [
    (1, {"kept": 1, "refused": 1}),
    (2, {"kept": 1, "revised": 1}),
])
def test_a_revision_is_held_to_the_max_depth_its_insight_was_written_under(
        root: Path, fake_openai: Any, max_depth: int, counts: dict[str, int]) -> None:
    rt, eps, first, second = revalidation_runtime(root, fake_openai)
    try:
        (root / "ome.toml").write_text(f"[strategies.reflect_insights]\nmax_depth = {max_depth}\n")
        edit_file(rt.store.path_for_id(DEV, eps[0].id), "on day 2", "on day 3")
        Indexer(rt).scan()
        before = ids(rt, DEV)
        fake_openai.script(
            {"verdict": "holds", "insight": "", "evidence": [1, 2, 3]},  # the first, depth 1
            # the second cites the first (depth 1) and an Episode: a revision of depth 2
            json.dumps({"verdict": "revise", "insight": "The auth refactor was reverted "
                        "three times.", "evidence": [1, 2]}))
        assert run(rt, REVALIDATE) == counts
        assert rt.store.get(DEV, first.id).meta["status"] == "active"
        if "refused" in counts:
            assert ids(rt, DEV) == before
            assert "depth 2 > max_depth 1 (reflect_insights)" in refusal(rt)
            assert rt.store.get(DEV, second.id).meta["status"] == "stale"
        else:
            (new,) = ids(rt, DEV) - before
            assert rt.store.get(DEV, new).meta["depth"] == 2
    finally:
        rt.close()


def test_a_holds_verdict_recomputes_the_depth_of_its_re_pointed_evidence(
        root: Path, fake_openai: Any) -> None:
    rt, eps, first, _second = revalidation_runtime(root, fake_openai)
    try:
        third = insight(rt, "Auth changes do not survive a week.", [first, eps[1], eps[2]],
                        depth=2)
        edit_file(rt.store.path_for_id(DEV, eps[0].id), "on day 2", "on day 3")
        Indexer(rt).scan()
        fake_openai.script(
            {"verdict": "retire", "insight": "", "evidence": []},  # the first: third loses it
            {"verdict": "holds", "insight": "", "evidence": [1, 2]})  # third: two Episodes
        # the second cites the first and one Episode: retired without a call
        assert run(rt, REVALIDATE) == {"retired": 2, "kept": 1}
        kept = rt.store.get(DEV, third.id)
        assert kept.meta["status"] == "active"
        assert kept.meta["evidence"] == [eps[1].id, eps[2].id]
        assert kept.meta["depth"] == 1  # it cites Episodes only now
    finally:
        rt.close()


@pytest.mark.parametrize(("max_depth", "counts"), [(2, {"refused": 1}), (3, {"kept": 1})])
def test_a_holds_verdict_is_held_to_the_max_depth_its_insight_was_written_under(
        root: Path, fake_openai: Any, max_depth: int, counts: dict[str, int]) -> None:
    rt, eps, first, second = revalidation_runtime(root, fake_openai)
    try:
        (root / "ome.toml").write_text(f"[strategies.reflect_insights]\nmax_depth = {max_depth}\n")
        other = insight(rt, "Reverts come in weeks apart.", [eps[1], eps[2]])
        newer = insight(rt, "Every auth change is reverted within weeks.", [other, eps[0]],
                        depth=2)
        rt.store.deprecate(DEV, {first.id: newer.id})  # the second now stands on a depth 2
        Indexer(rt).scan()
        assert rt.store.get(DEV, second.id).meta["status"] == "stale"
        fake_openai.script({"verdict": "holds", "insight": "", "evidence": [1, 2]})
        assert run(rt, REVALIDATE) == counts
        after = rt.store.get(DEV, second.id)
        if "refused" in counts:  # written now, it would be refused: it stays as it was
            assert "a 'holds' verdict of depth 3 > max_depth 2 (reflect_insights)" in refusal(rt)
            assert (after.meta["status"], after.meta["depth"]) == ("stale", 2)
            assert after.meta["evidence"] == [first.id, eps[0].id]
            assert run(rt, REVALIDATE) == {}  # not asked again until something changes
            assert len(fake_openai.chat_bodies()) == 1
        else:
            assert (after.meta["status"], after.meta["depth"]) == ("active", 3)
            assert after.meta["evidence"] == [newer.id, eps[0].id]
    finally:
        rt.close()


def test_an_insight_refused_as_too_deep_is_asked_again_once_max_depth_is_raised(
        root: Path, fake_openai: Any) -> None:
    """Set aside under the prompts and model alone, it stayed stale after a person raised
    ``max_depth`` to keep it: nothing brought it back but an edit of it or its evidence."""
    rt, eps, first, second = revalidation_runtime(root, fake_openai)
    try:
        (root / "ome.toml").write_text("[strategies.reflect_insights]\nmax_depth = 2\n")
        other = insight(rt, "Reverts come in weeks apart.", [eps[1], eps[2]])
        newer = insight(rt, "Every auth change is reverted within weeks.", [other, eps[0]],
                        depth=2)
        rt.store.deprecate(DEV, {first.id: newer.id})  # the second now stands on a depth 2
        Indexer(rt).scan()
        fake_openai.script({"verdict": "holds", "insight": "", "evidence": [1, 2]},
                           {"verdict": "holds", "insight": "", "evidence": [1, 2]})
        assert run(rt, REVALIDATE) == {"refused": 1}
        assert refusal(rt).endswith("or that max_depth is raised past 2)")
        assert run(rt, REVALIDATE) == {}  # under the same cap it is not asked again
        (root / "ome.toml").write_text("[strategies.reflect_insights]\nmax_depth = 3\n")
        assert get_strategy(REVALIDATE).observe(rt, None, {"cooldown_seconds": 0}) == 1.0
        assert run(rt, REVALIDATE) == {"kept": 1}
        assert len(fake_openai.chat_bodies()) == 2
        after = rt.store.get(DEV, second.id)
        assert (after.meta["status"], after.meta["depth"]) == ("active", 3)
        assert after.meta["evidence"] == [newer.id, eps[0].id]
    finally:
        rt.close()


def test_a_holds_that_deepens_an_insight_does_not_restore_one_citing_it_at_its_old_depth(
        root: Path, fake_openai: Any) -> None:
    rt, eps, first, second = revalidation_runtime(root, fake_openai)
    try:
        (root / "ome.toml").write_text("[strategies.reflect_insights]\nmax_depth = 3\n")
        other = insight(rt, "Reverts come in weeks apart.", [eps[1], eps[2]])
        newer = insight(rt, "Every auth change is reverted within weeks.", [other, eps[0]],
                        depth=2)
        top = insight(rt, "Auth work needs a design review first.",
                      [rt.store.get(DEV, second.id), eps[1]], depth=3)
        rt.store.deprecate(DEV, {first.id: newer.id})  # the second now stands on a depth 2
        Indexer(rt).scan()
        assert rt.store.get(DEV, top.id).meta["status"] == "stale"
        fake_openai.script({"verdict": "holds", "insight": "", "evidence": [1, 2]},
                           {"verdict": "holds", "insight": "", "evidence": [1, 2]})
        # the second is kept at depth 3; the top, citing it, was lifted by provenance with
        # no call (what it cites reads as before) and stood at depth 3 on a depth 3
        assert run(rt, REVALIDATE) == {"kept": 1, "refused": 1}
        assert rt.store.get(DEV, second.id).meta["depth"] == 3
        after = rt.store.get(DEV, top.id)
        # citing a depth 3 it is a depth 4, past max_depth 3: it is not active at depth 3
        assert (after.meta["status"], after.meta["depth"]) == ("stale", 3)
        assert "a 'holds' verdict of depth 4 > max_depth 3 (reflect_insights)" in refusal(rt)
    finally:
        rt.close()
