"""A record with no text names its own kind's text section in the problem ``status`` lists."""

from __future__ import annotations

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime

ADA = UserRef("default_app", "default_project", "ada")
TS = "2026-10-12T09:00:00+00:00"


@pytest.mark.parametrize(("kind", "meta", "section"), [
    (Kind.EPISODE, {"timestamp": TS}, "Content"),
    (Kind.INSIGHT, {"timestamp": TS, "evidence": [], "status": "active"}, "Insight"),
    (Kind.CONVICTION, {"timestamp": TS, "key": "k", "evidence": [], "status": "active"},
     "Conviction"),
])
def test_a_record_left_without_text_names_its_kinds_section(
        rt: Runtime, kind: Kind, meta: dict[str, object], section: str) -> None:
    # a lesson or insight whose text a hand edit removed was said to have "no Subject,
    # Summary or Content", the sections of an Episode, not the '## Insight' it lacks
    (entry,) = rt.store.append_many(ADA, kind, [(meta, {section: "Something said."})])
    indexer = Indexer(rt)
    indexer.scan()
    [log] = [p for p in rt.store.root.rglob("*.md") if entry.id in p.read_text()]
    log.write_text(log.read_text().replace("Something said.", ""))
    indexer.scan()
    messages = [d["message"] for d in indexer.problems()[rt.store.rel(log)]]
    assert f"entry {entry.id} has no text (no Subject, Summary or {section}); " \
        "it is not indexed" in messages
