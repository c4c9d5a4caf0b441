"""A derived record whose ``status`` is blank or missing (a hand edit: ``status:``,
``status: ''``, ``status: '  '``) is read as active by every reader, of every tier: the
briefing, lessons and search read a blank one as active while the tiers and provenance read
it as "" (no status they check), so such an insight was served while its evidence was never
checked, and `insights` listed it as neither active nor stale."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.model import Entry, Kind, served_status
from everos_reflect.strategies import beliefs, provenance
from everos_reflect.strategies.insight_views import list_insights
from tests.reflect_fixtures import add_episode, make_runtime

pytestmark = pytest.mark.usefixtures("settle_at_once")

MISSING = object()
BLANKS = [MISSING, None, "", "  ", "\t"]


def _entry(kind: Kind, status: object) -> Entry:
    meta: dict[str, Any] = {"timestamp": "2026-10-20T09:00:00+00:00"}
    if status is not MISSING:
        meta["status"] = status
    return Entry(id=f"{kind.info.prefix}_20261020_0001", kind=kind, meta=meta, sections={})


@pytest.mark.parametrize("status", BLANKS, ids=["missing", "null", "empty", "spaces", "tab"])
@pytest.mark.parametrize("kind", [Kind.INSIGHT, Kind.CONVICTION, Kind.RELATION, Kind.LESSON])
def test_a_blank_or_missing_status_is_active_for_every_reader_of_every_tier(
        kind: Kind, status: object) -> None:
    entry = _entry(kind, status)
    assert served_status(entry.meta) == "active"
    assert beliefs.status_of(entry) == "active" and provenance.status_of(entry) == "active"
    assert provenance.status_of is beliefs.status_of  # one reader, not two copies


def test_an_insight_with_a_blank_status_is_listed_active_and_marked_stale_on_an_edit(
        root: Path) -> None:
    from everos_reflect.model import UserRef

    dev = UserRef.of("u_dev")
    rt = make_runtime(root, ExtractiveLLM())
    eps = [add_episode(rt, dev, f"2026-09-{d:02d}T10:00:00+00:00", f"Revert {d}",
                       f"The user reverted an auth change on day {d}.") for d in (2, 16)]
    meta = {"timestamp": "2026-10-20T09:00:00+00:00", "evidence": [e.id for e in eps],
            "depth": 1, "status": "", "derivation": "dw_test",
            "evidence_hash": {e.id: e.text_hash for e in eps}}
    insight = rt.store.append(dev, Kind.INSIGHT, meta, {"Insight": "Reverts touch auth."})
    Indexer(rt).scan()
    assert [(i["id"], i["status"]) for i in list_insights(rt, dev)] == [(insight.id, "active")]

    path = rt.store.path_for_id(dev, eps[1].id)
    path.write_text(path.read_text().replace("on day 16", "on day 17"))
    Indexer(rt).scan()

    after = rt.store.get(dev, insight.id)
    assert (after.meta.get("status"), after.meta.get("stale_reason")) == (
        "stale", f"evidence {eps[1].id} was edited")
    rt.close()
