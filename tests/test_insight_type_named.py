"""A hand-written insight's ``insight_type`` that is neither ``reflection`` nor
``reconciliation`` (``Reconciliation``, ``[reconciliation]``, ``12``) is read as reflection by
every reader (its depth cap, its label in prompts), and ``lint`` said nothing."""

from __future__ import annotations

from everos_reflect.lint import lint_report
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime

REF = UserRef.of("u_ops")
META = {"timestamp": "2026-10-20T09:00:00+00:00", "importance": 5, "question": "q",
        "evidence": ["ep_20261012_0001", "ep_20261012_0002"], "depth": 1}


def test_lint_names_an_insight_type_no_reader_takes(rt: Runtime) -> None:
    ids = {repr(v): rt.store.append(REF, Kind.INSIGHT, {**META, "insight_type": v},
                                    {"Insight": "Dogs."}).id
           for v in ("Reconciliation", ["reconciliation"], 12, "reflection",
                     "reconciliation")}
    messages = [p["message"] for p in lint_report(rt.root)["problems"]]
    tail = "is not one of reflection, reconciliation (read as reflection)"
    assert f"entry {ids[repr('Reconciliation')]}: insight_type 'Reconciliation' {tail}" \
        in messages
    assert f'entry {ids[repr(["reconciliation"])]}: insight_type ["reconciliation"] is a ' \
        "YAML list, not one of reflection, reconciliation (read as reflection)" in messages
    assert f"entry {ids['12']}: insight_type 12 {tail}" in messages
    assert not any(m.startswith((f"entry {ids[repr('reflection')]}:",
                                 f"entry {ids[repr('reconciliation')]}:")) for m in messages)
