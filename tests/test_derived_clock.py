"""A derived record's ``timestamp`` and the daily log it lands in come from one clock read: at
midnight they cannot fall on two days. Fake clocks only: nothing here depends on the time."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.llm import ScriptedLLM
from everos_reflect.markdown import store as store_module
from everos_reflect.markdown.store import MarkdownStore
from everos_reflect.model import EntryId, Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from everos_reflect.strategies import belief_store, revalidate
from tests import test_revalidate as rv
from tests.test_belief_tiers import add_insights, ome, run, worldview_reply

pytest_plugins = ["tests.fake_openai"]

ADA = UserRef.of("ada")


class SteppingClock:
    """Stands for ``datetime`` in the modules that read the clock: each ``now()`` is ``step``
    later than the one before, from ``start`` (UTC). Two reads for one record tell apart."""

    def __init__(self, start: datetime, step: timedelta) -> None:
        self.reads: Iterator[datetime] = (start + n * step for n in range(1_000_000))

    def now(self, tz: object = None) -> datetime:
        return next(self.reads)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> SteppingClock:
    """Every clock read a derived write can make (the record's stamp, its log's day)."""
    fake = SteppingClock(datetime(2031, 3, 9, 23, 59, 59, 500_000, tzinfo=UTC),
                         timedelta(seconds=1))
    for module in (store_module, belief_store):
        monkeypatch.setattr(module, "datetime", fake)
    return fake


def a_day_per_read(monkeypatch: pytest.MonkeyPatch, *modules: Any) -> None:
    """A clock a day later at every read in ``modules``: any second read for one record
    shows, at whatever time the test runs."""
    fake = SteppingClock(datetime(2031, 3, 9, 12, tzinfo=UTC), timedelta(days=1))
    for module in modules:
        monkeypatch.setattr(module, "datetime", fake)


def day_of(entry_id: str) -> object:
    return EntryId.parse(entry_id).day


def test_derived_meta_rows_are_stamped_on_the_day_of_their_log_across_midnight(
    root: Path, clock: SteppingClock
) -> None:
    # The stamp was read in derived_meta (23:59:59.5) and the log's day in the store a
    # moment later (00:00:00.5 the next day): the record said 9 March in the 10 March log.
    store = MarkdownStore(root)
    rows = [(belief_store.derived_meta(evidence=["ep_20310309_0001"], depth=1, key="k"),
             {"Insight": f"Insight {n}."}) for n in range(2)]
    written = store.append_many(ADA, Kind.INSIGHT, rows)
    assert len(written) == 2
    for entry in written:
        assert entry.timestamp is not None
        assert entry.timestamp.astimezone(UTC).date() == day_of(entry.id)


def test_a_tier_run_writes_its_record_on_the_day_of_its_timestamp(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a_day_per_read(monkeypatch, store_module, belief_store)
    ome(root)
    llm = ScriptedLLM()
    rt = Runtime(root, Settings(), embedder=HashEmbedder(32), llm=llm)
    try:
        add_insights(rt, "One.", "Two.", "Three.")
        llm.queue_task("worldview", worldview_reply(("risks", "Shipping past review.",
                                                     ["One", "Two"])))
        assert run(rt, "update_worldview") == {"owners": 1, "written": 1}
        [conviction] = rt.store.entries(ADA, Kind.CONVICTION)
        assert conviction.timestamp is not None
        assert conviction.timestamp.date() == day_of(conviction.id)
    finally:
        rt.close()


def test_a_revised_insight_is_written_on_the_day_of_its_timestamp(
    root: Path, fake_openai: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt, eps, first, _second = rv.setup(root)
    rv.merged(rt, eps)
    fake_openai.script(*[lambda body: json.dumps(
        {"verdict": "revise", "insight": "The user reverted auth changes three times.",
         "evidence": sorted(rv.numbers(body).values())})] * 2)
    a_day_per_read(monkeypatch, store_module, revalidate)
    assert rv.run(rv.with_openai(rt, fake_openai))["revised"] >= 1
    new = rt.store.get(rv.DEV, rt.store.get(rv.DEV, first.id).deprecated_by)
    assert new.timestamp is not None
    assert new.timestamp.date() == day_of(new.id)
