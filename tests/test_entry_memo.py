"""``Entry.timestamp`` and ``Entry.text_hash`` are computed once per value (the indexer, the
clustering service and the planners all read them) and never go stale."""

from __future__ import annotations

import dataclasses
import pickle
from datetime import UTC, datetime

from everos_reflect.model import Entry, Kind, parse_timestamp, text_hash


def _entry() -> Entry:
    return Entry("ep_20260101_0001", Kind.EPISODE, {"timestamp": "2026-01-01T10:00:00+00:00"},
                 {"Subject": "Trip", "Content": "Andrew  went hiking."})


def test_the_memo_follows_every_change_of_the_text(monkeypatch) -> None:
    e = _entry()
    assert e.text_hash == text_hash("Trip\nAndrew went hiking.")
    calls: list[str] = []
    real = text_hash
    monkeypatch.setattr("everos_reflect.model.text_hash", lambda t: calls.append(t) or real(t))
    for _ in range(3):
        assert e.text_hash == real(e.search_text)
    assert calls == []  # memoised
    e.sections["Content"] = "Andrew went sailing."  # a section replaced
    assert e.text_hash == real("Trip\nAndrew went sailing.")
    e.sections["Summary"] = "Sea"  # a section added
    assert e.text_hash == real("Trip\nSea\nAndrew went sailing.")
    e.sections = {"Subject": "Trip", "Content": "Andrew went sailing."}  # a new dict, same text
    assert e.text_hash == real("Trip\nAndrew went sailing.")
    e.kind = Kind.ATOMIC_FACT  # another main section: the text is now the Subject alone
    assert e.text_hash == real("Trip")
    assert len(calls) == 4


def test_the_timestamp_memo_follows_the_raw_value() -> None:
    e = _entry()
    assert e.timestamp == datetime(2026, 1, 1, 10, tzinfo=UTC)
    e.meta["timestamp"] = "2026-01-02T10:00:00Z"
    assert e.timestamp == datetime(2026, 1, 2, 10, tzinfo=UTC)
    del e.meta["timestamp"]
    assert e.timestamp is None
    e.meta = {"timestamp": datetime(2026, 1, 3)}  # a naive datetime from YAML: taken as UTC
    assert e.timestamp == parse_timestamp(datetime(2026, 1, 3))


def test_the_memo_is_no_field() -> None:
    """Not compared, not dumped, not copied by ``replace``; a pickled entry still works."""
    a, b = _entry(), _entry()
    _ = a.text_hash, a.timestamp
    assert a == b
    assert dataclasses.asdict(a) == dataclasses.asdict(b)
    c = dataclasses.replace(a, sections={"Subject": "Other", "Content": "x"})
    assert c.text_hash == text_hash("Other\nx")
    assert pickle.loads(pickle.dumps(a)).text_hash == a.text_hash
