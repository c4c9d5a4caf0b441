"""A derived record's or task's enumerated metadata holding a value no reader takes is a lint
warning naming entry, key and value; every value SPEC gives passes without a word."""

from __future__ import annotations

import pytest

from everos_reflect.markdown.parser import STATUSES, parse_log
from everos_reflect.model import Kind

KINDS = {Kind.LESSON: ("ls", ".lessons", "lesson", "Lesson"),
         Kind.TASK: ("tk", "tasks", "task", "Goal"),
         Kind.INSIGHT: ("in", ".insights", "insight", "Insight"),
         Kind.CONVICTION: ("wv", ".worldview", "worldview", "Conviction"),
         Kind.RELATION: ("rel", ".relations", "relation", "Relation")}


def _messages(kind: Kind, meta: str) -> list[tuple[str, str]]:
    prefix, folder, stem, section = KINDS[kind]
    rid = f"{prefix}_20261020_0001"
    if kind is Kind.CONVICTION and "key:" not in meta:
        meta += "\nkey: identity"  # a conviction has one (named when it has not)
    if kind in (Kind.LESSON, Kind.TASK) and "task_type:" not in meta:
        meta += "\ntask_type: deploy"  # served per task type (named when it has none)
    if kind is Kind.RELATION and "relation_type:" not in meta:
        meta += "\nrelation_type: self_contradiction"  # what the tiers read
    text = (f"---\ntype: {kind.file_type}\nschema_version: 1\nuser_id: u\ndate: '2026-10-20'\n"
            f"---\n<!-- entry:{rid} -->\n---\nowner_id: u\ntimestamp: 2026-10-20T09:00:00Z\n"
            f"{meta}\n---\n## {section}\nsome text\n<!-- /entry:{rid} -->\n")
    log = parse_log(text, f"u/{folder}/{stem}-2026-10-20.md")
    assert [e.id for e in log.entries] == [rid]  # read all the same
    return [(d.severity, d.message) for d in log.diagnostics]


@pytest.mark.parametrize(("kind", "meta", "message"), [
    (Kind.LESSON, "status: zombie",
     "status 'zombie' is not one of active, contested, stale, retired (write one of them)"),
    (Kind.INSIGHT, "status: contested",
     "status 'contested' is not one of active, stale, retired (write one of them)"),
    (Kind.RELATION, "status: [active]",
     'status ["active"] is a YAML list, not one of active, resolved, stale, retired (write one '
     "of them)"),
    (Kind.LESSON, "lesson_type: avoid!", "lesson_type 'avoid!' is not do or avoid (read as do)"),
    (Kind.LESSON, "confirmations: -7", "confirmations -7 is not a whole number of 0 or more"),
    (Kind.LESSON, "confirmations: 'three'",
     "confirmations 'three' is not a whole number of 0 or more"),
    (Kind.LESSON, "confirmations: true", "confirmations True is not a whole number of 0 or more"),
    (Kind.INSIGHT, "depth: deep", "depth 'deep' is not a whole number of 1 or more written "
     "in decimal (read as 1; a derived record is 1 + the deepest record it cites)"),
    (Kind.CONVICTION, "depth: 0", "depth 0 is not a whole number of 1 or more written in "
     "decimal (read as 1; a derived record is 1 + the deepest record it cites)"),
    (Kind.RELATION, "depth: -2", "depth -2 is not a whole number of 1 or more written in "
     "decimal (read as 1; a derived record is 1 + the deepest record it cites)"),
    (Kind.LESSON, "depth: 1.5", "depth 1.5 is not a whole number of 1 or more written in "
     "decimal (read as 1; a derived record is 1 + the deepest record it cites)"),
    (Kind.INSIGHT, "depth: 02", "depth '02' is not a whole number of 1 or more written in "
     "decimal (read as 1; a derived record is 1 + the deepest record it cites)"),
    (Kind.INSIGHT, "depth: true", "depth True is not a whole number of 1 or more written in "
     "decimal (read as 1; a derived record is 1 + the deepest record it cites)"),
    (Kind.INSIGHT, "depth: [2]", "depth [2] is not a whole number of 1 or more written in "
     "decimal (read as 1; a derived record is 1 + the deepest record it cites)"),
    # no key: in no worldview and no briefing (beliefs.current_worldview), without a word
    (Kind.CONVICTION, "key: ''", "no key: a conviction is current per key, so one without "
     "is in no worldview or briefing (write one, e.g. key: identity)"),
    (Kind.CONVICTION, "key:", "no key: a conviction is current per key, so one without "
     "is in no worldview or briefing (write one, e.g. key: identity)"),
    (Kind.TASK, "outcome: great",
     "outcome 'great' is not one of success, failure, partial (read as unknown: neither a "
     "success nor a failure to learn from)"),
])
def test_a_value_no_reader_takes_is_a_warning(kind: Kind, meta: str, message: str) -> None:
    prefix = KINDS[kind][0]
    assert _messages(kind, meta) == [("warning", f"entry {prefix}_20261020_0001: {message}")]


@pytest.mark.parametrize(("kind", "meta"), [
    *((kind, f"status: {value}") for kind, values in STATUSES.items() for value in values),
    (Kind.LESSON, "lesson_type: Avoid"), (Kind.LESSON, "lesson_type: do"),
    (Kind.LESSON, "confirmations: 0"), (Kind.LESSON, "confirmations: 12"),
    (Kind.TASK, "outcome: Success"), (Kind.TASK, "outcome: partial"),
    (Kind.INSIGHT, "status:"),  # left empty: read as active, as when absent
    # blank, as every reader takes it (served_status): active; lint named it "not one of"
    (Kind.INSIGHT, "status: ''"), (Kind.LESSON, "status: '  '"),
    (Kind.RELATION, 'status: "\\t"'), (Kind.CONVICTION, "status: ' '"),
    # in any case, as every reader takes it: `lint` warned of what was served as active
    (Kind.INSIGHT, "status: ACTIVE"), (Kind.LESSON, "status: Contested"),
    (Kind.RELATION, "status: ' resolved'"),
    (Kind.INSIGHT, "depth: 1"), (Kind.CONVICTION, "depth: 3"), (Kind.LESSON, "depth: 1"),
    (Kind.INSIGHT, "depth:"),  # left empty: as when absent
    (Kind.TASK, "depth: 0"),  # not a derived record: no depth is read
])
def test_the_values_spec_gives_pass(kind: Kind, meta: str) -> None:
    assert _messages(kind, meta) == []


@pytest.mark.parametrize(("kind", "meta", "message"), [
    (Kind.LESSON, "confirmations: 010", "confirmations '010' is not a whole number of 0 or more"),
    (Kind.LESSON, "lesson_type: avoid!", "lesson_type 'avoid!' is not do or avoid (read as do)"),
    (Kind.INSIGHT, "status: zombie",
     "status 'zombie' is not one of active, stale, retired (write one of them)"),
])
def test_a_value_no_reader_takes_is_named_on_its_keys_line(kind: Kind, meta: str,
                                                          message: str) -> None:
    # `confirmations: 010` (octal 8 to YAML 1.1) was named on the entry's marker line, not
    # where the value is written
    prefix, folder, stem, section = KINDS[kind]
    rid = f"{prefix}_20261020_0001"
    text = (f"---\ntype: {kind.file_type}\nschema_version: 1\nuser_id: u\ndate: '2026-10-20'\n"
            f"---\n<!-- entry:{rid} -->\n---\nowner_id: u\ntimestamp: 2026-10-20T09:00:00Z\n"
            f"evidence: [ep_20261019_0001]\n{meta}\n"
            f"{'task_type: deploy' if kind is Kind.LESSON else 'depth: 1'}\n---\n"
            f"## {section}\nsome text\n"
            f"<!-- /entry:{rid} -->\n")
    log = parse_log(text, f"u/{folder}/{stem}-2026-10-20.md")
    assert [(d.line, d.message) for d in log.diagnostics] == [(12, f"entry {rid}: {message}")]
