"""A hand-written relation whose ``relation_type`` is not ``self_contradiction``
(``Self_Contradiction``, a list, none) is read by no tier (no census, no reconciliation
resolves it), and ``lint`` said nothing."""

from __future__ import annotations

from everos_reflect.lint import lint_report
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.strategies import beliefs

REF = UserRef.of("u_ops")
META = {"timestamp": "2026-10-20T09:00:00+00:00", "status": "active",
        "between": ["wv_20261012_0001", "wv_20261012_0002"], "depth": 3}


def test_lint_names_a_relation_type_no_tier_reads(rt: Runtime) -> None:
    def relation(**meta: object) -> str:
        return rt.store.append(REF, Kind.RELATION, {**META, **meta},
                               {"Relation": "They clash."}).id

    cased = relation(relation_type="Self_Contradiction")
    listed = relation(relation_type=["self_contradiction"])
    none = relation()
    fine = relation(relation_type=beliefs.SELF_CONTRADICTION)
    messages = [p["message"] for p in lint_report(rt.root)["problems"]]
    tail = "is not self_contradiction (no tier reads this relation)"
    assert f"entry {cased}: relation_type 'Self_Contradiction' {tail}" in messages
    assert f'entry {listed}: relation_type ["self_contradiction"] is a YAML list, not ' \
        "self_contradiction (no tier reads this relation)" in messages
    assert f"entry {none}: no relation_type: write relation_type: self_contradiction (no " \
        "tier reads a relation without it)" in messages
    assert not any(m.startswith(f"entry {fine}:") for m in messages)
