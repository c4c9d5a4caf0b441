"""A briefing's convictions carry their timestamp in ISO 8601, as every other item and every
other answer has it: it was the ``str`` of the YAML datetime, "2026-10-08 10:00:00+00:00"
(the CLI's ``--json``, the API and MCP serve these items as they are)."""

from __future__ import annotations

from everos_reflect.briefing.build import build_briefing
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime

REF = UserRef.of("u1")


def test_a_briefed_conviction_has_an_iso_timestamp(rt: Runtime) -> None:
    written = rt.store.append(REF, Kind.CONVICTION, {
        "timestamp": "2026-10-08T10:00:00+00:00", "key": "identity",
        "evidence": ["ep_20261001_0001"], "depth": 2, "status": "active"},
        {"Conviction": "Andrew is an animal person."}).id

    brief = build_briefing(rt, REF, "animal", max_tokens=500)

    assert [(i.id, i.timestamp) for i in brief.items] == [
        (written, "2026-10-08T10:00:00+00:00")]
