"""``status`` (text and ``--json``) and the API's status show the stale insights a revalidation
left stale because its verdict would stand them deeper than ``max_depth``: how many, why, and
the setting that brings them back. They were set aside in silence: not asked about again, and
nothing but an old ``derivation_report`` row said so. Through the real client and the loopback
fake server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.index.sync import Indexer
from everos_reflect.runtime import Runtime
from everos_reflect.strategies.revalidate import NAME as REVALIDATE
from tests.api_client import ApiClient
from tests.test_aside_settings import run
from tests.test_provenance import DEV, insight
from tests.test_revision_rules import revalidation_runtime

pytest_plugins = ["tests.fake_openai"]


def too_deep(root: Path, fake_openai: Any) -> tuple[Runtime, str]:
    """A stale insight whose "holds" verdict is refused as deeper than max_depth 2."""
    # the CLI opens the root as the run did: the same model and server
    (root / "everos.toml").write_text(
        f'[llm]\nprovider = "openai"\nmodel = "model-a"\nbase_url = "{fake_openai.base_url}"\n'
        'api_key = "k"\nmax_retries = 0\n')
    (root / "ome.toml").write_text("[strategies.reflect_insights]\nmax_depth = 2\n")
    rt, eps, first, second = revalidation_runtime(root, fake_openai)
    other = insight(rt, "Reverts come in weeks apart.", [eps[1], eps[2]])
    newer = insight(rt, "Every auth change is reverted within weeks.", [other, eps[0]],
                    depth=2)
    rt.store.deprecate(DEV, {first.id: newer.id})  # the second now stands on a depth 2
    Indexer(rt).scan()
    fake_openai.script({"verdict": "holds", "insight": "", "evidence": [1, 2]})
    assert run(rt, REVALIDATE) == {"refused": 1}
    return rt, second.id


def status_json(root: Path) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["status", "--root", str(root), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_status_lists_an_insight_held_stale_as_deeper_than_max_depth(
        root: Path, fake_openai: Any) -> None:
    rt, held = too_deep(root, fake_openai)
    try:
        doc = status_json(root)
        [item] = doc["insights"]["held_too_deep"]
        assert (item["user_id"], item["insight_id"]) == (DEV.user_id, held)
        assert (item["tier"], item["max_depth"]) == ("reflect_insights", 2)
        assert "deeper than max_depth 2" in item["reason"]
        assert "[strategies.reflect_insights] max_depth" in item["remedy"]
        resp = ApiClient(rt)("GET", "/api/v1/status")
        assert resp.status_code == 200
        assert resp.json()["data"]["insights"]["held_too_deep"] == [item]
        text = CliRunner().invoke(cli, ["status", "--root", str(root)])
        assert text.exit_code == 0, text.output
        assert ("1 insight held stale: a verdict would stand it deeper than max_depth 2 "
                "(reflect_insights)") in text.stdout
        assert f"u_dev: {held}" in text.stdout
        assert "raise max_depth in [strategies.reflect_insights] of ome.toml" in text.stdout
    finally:
        rt.close()


def test_status_no_longer_lists_it_once_max_depth_is_raised(
        root: Path, fake_openai: Any) -> None:
    rt, _held = too_deep(root, fake_openai)
    try:
        (root / "ome.toml").write_text("[strategies.reflect_insights]\nmax_depth = 3\n")
        assert status_json(root)["insights"]["held_too_deep"] == []  # the next run asks
        text = CliRunner().invoke(cli, ["status", "--root", str(root)])
        assert "held stale" not in text.stdout
    finally:
        rt.close()


def test_a_revalidation_with_nothing_to_judge_says_which_are_held_stale(
        root: Path, fake_openai: Any) -> None:
    """It said "no stale insight to judge: no record an insight cites was archived, edited
    or deleted", of a root holding a stale insight it will not judge."""
    from everos_reflect.engine.engine import Engine

    rt, _held = too_deep(root, fake_openai)
    try:
        out = Engine(rt).trigger(REVALIDATE, force=True)
        assert out.status == "ok" and not any(out.counts.values()), out
        assert out.reason == (
            "no stale insight to judge now: 1 stale insight is set aside: 1 held as "
            "deeper than max_depth (reflect_insights 2: raise it in ome.toml to revalidate "
            "them) (`status` lists those held too deep)")
    finally:
        rt.close()


def test_status_names_the_insights_that_wait_with_one_held_too_deep(
        root: Path, fake_openai: Any) -> None:
    """An insight citing one held too deep waits for it to be judged first, which never comes:
    each run counted it ``waiting_on_cited`` and ``status`` listed only the one it cites."""
    (root / "ome.toml").write_text("[strategies.reflect_insights]\nmax_depth = 2\n")
    rt, eps, first, second = revalidation_runtime(root, fake_openai)
    try:
        (root / "everos.toml").write_text(
            f'[llm]\nprovider = "openai"\nmodel = "model-a"\nbase_url = '
            f'"{fake_openai.base_url}"\napi_key = "k"\nmax_retries = 0\n')
        third = insight(rt, "The user will keep reverting auth changes.",
                        [rt.store.get(DEV, second.id), eps[1]], depth=3)
        fourth = insight(rt, "Auth work needs a second reviewer.",
                         [third, eps[2]], depth=4)
        other = insight(rt, "Reverts come in weeks apart.", [eps[1], eps[2]])
        newer = insight(rt, "Every auth change is reverted within weeks.", [other, eps[0]],
                        depth=2)
        rt.store.deprecate(DEV, {first.id: newer.id})
        Indexer(rt).scan()
        fake_openai.script({"verdict": "holds", "insight": "", "evidence": [1, 2]})
        assert run(rt, REVALIDATE) == {"refused": 1, "waiting_on_cited": 2}
        [item] = status_json(root)["insights"]["held_too_deep"]
        assert (item["insight_id"], item["waiting"]) == (second.id, [third.id, fourth.id])
        text = CliRunner().invoke(cli, ["status", "--root", str(root)])
        assert (f"u_dev: {second.id} (2 stale insights citing it wait with it: "
                f"{third.id}, {fourth.id})") in text.stdout
    finally:
        rt.close()


def test_waiters_follow_chains_and_stop_at_rings() -> None:
    from everos_reflect.strategies.revalidate import waiters

    a, b, c, d = (f"in_20261206_{n:04d}" for n in (1, 2, 3, 4))
    # b and d wait for a; c waits for b; a hand-made ring of c and d ends the walk
    out = waiters({b: [a], c: [b, d], d: [a, c]})
    assert out[a] == (b, c, d)
    assert out[b] == (c, d)
    assert out[d] == (c,)
