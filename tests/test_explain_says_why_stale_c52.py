"""``explain`` says why a record in the tree no longer stands: a stale or retired node carries
its ``stale_reason`` (JSON, the API, MCP) and the text tree shows it beside the mark. Before,
the tree said "[stale]" and nothing else: which citation broke was only in ``insights
--include-stale``, and a record deeper in the tree was not listed there at all. A narrative
whose merge was undone reads "merge undone", not "archived -> undone" as if ``undone`` were
an entry id."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.embedding import HashEmbedder
from everos_reflect.index.sync import Indexer
from everos_reflect.model import Kind
from everos_reflect.runtime import Runtime
from everos_reflect.strategies.insight_views import explain, render_tree
from everos_reflect.strategies.undo import undo_merge
from tests.test_provenance import DEV, edit_file, setup
from tests.test_undo import REF, SETTINGS, merge, pets


def test_a_stale_node_says_why_in_json_and_in_the_text_tree(root: Path) -> None:
    rt, eps, first, second = setup(root)
    edit_file(rt.store.path_for_id(DEV, eps[1].id), "on day 16", "on day 15")
    Indexer(rt).scan()
    try:
        tree = explain(rt, DEV, second.id)
        assert tree["status"] == "stale"
        assert tree["stale_reason"] == f"evidence {first.id} is stale"
        child = next(n for n in tree["evidence"] if n["id"] == first.id)
        assert child["stale_reason"] == f"evidence {eps[1].id} was edited"
        episode = next(n for n in tree["evidence"] if n["id"] == eps[0].id)
        assert "stale_reason" not in episode
        lines = render_tree(tree)
        assert f"[stale: evidence {first.id} is stale]" in lines[0]
        assert any(f"[stale: evidence {eps[1].id} was edited]" in ln for ln in lines)
    finally:
        rt.close()
    shown = CliRunner().invoke(cli, ["explain", second.id, "--user", DEV.user_id, "--json",
                                     "--root", str(root)])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["stale_reason"] == f"evidence {first.id} is stale"


def test_an_active_node_has_no_reason(root: Path) -> None:
    rt, _eps, _first, second = setup(root)
    try:
        tree = explain(rt, DEV, second.id)
        assert tree["status"] == "active" and "stale_reason" not in tree
        assert "stale" not in render_tree(tree)[0]
    finally:
        rt.close()


@pytest.mark.usefixtures("settle_at_once")
def test_an_undone_narrative_reads_merge_undone(root: Path) -> None:
    rt = Runtime(root, SETTINGS, embedder=HashEmbedder(64))
    try:
        eps = pets(rt)
        narrative = merge(rt, eps, "Andrew has two dogs, Toby and Buddy.",
                          day=date(2026, 8, 20))
        insight = rt.store.append(REF, Kind.INSIGHT, {
            "evidence": [narrative.id, eps[0].id], "depth": 1, "status": "active",
            "derivation": "dw_pets"}, {"Insight": "Andrew got dogs."}, derived=True)
        Indexer(rt).scan()
        undo_merge(rt, REF, narrative.id)
        Indexer(rt).scan()
        lines = render_tree(explain(rt, REF, insight.id))
        line = next(ln for ln in lines if ln.strip().startswith(narrative.id))
        assert "[merge undone]" in line and "-> undone" not in line
    finally:
        rt.close()
