"""A conviction's ``key`` a hand edit made a YAML list (``key: [a, b]``) was read as the key
"['a', 'b']": a worldview slot nobody wrote, shown, briefed and sent to the model, and
``lint`` said nothing. It is read as no key, as a missing one, and ``lint`` names it."""

from __future__ import annotations

import json

from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.lint import lint_report
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.strategies import beliefs

REF = UserRef.of("u_ops")


def test_a_list_key_is_no_key_and_lint_says_it_must_be_a_string(rt: Runtime) -> None:
    meta = {"timestamp": "2026-10-20T09:00:00+00:00", "evidence": ["in_20261012_0001"],
            "depth": 2}
    listy = rt.store.append(REF, Kind.CONVICTION, {**meta, "key": ["a", "b"]},
                            {"Conviction": "Listy key."})
    keyless = rt.store.append(REF, Kind.CONVICTION, meta, {"Conviction": "No key."})
    assert beliefs.key_of(listy) == beliefs.key_of(keyless) == ""

    def worldview(*extra: str) -> str:
        return CliRunner().invoke(cli, ["worldview", "--user", "u_ops", *extra, "--root",
                                        str(rt.root)]).output

    assert "['a', 'b']" not in worldview()
    rows = {x["id"]: x for x in json.loads(worldview("--history", "--json"))["convictions"]}
    assert rows[listy.id]["key"] is rows[keyless.id]["key"] is None
    assert f"{listy.id}  (no key): Listy key." in worldview("--history")

    messages = [p["message"] for p in lint_report(rt.root)["problems"]]
    assert f"entry {listy.id}: key must be a string, got a list (read as no key: a " \
        "conviction without one is in no worldview or briefing)" in messages


def test_a_boolean_number_or_date_key_is_no_key_and_lint_says_so(rt: Runtime) -> None:
    # `key: true` was read as the key "True", `key: 12` as "12": slots nobody wrote (a key
    # is a string, SPEC §9), and lint said nothing; `yes` and `on` stay text
    meta = {"timestamp": "2026-10-20T09:00:00+00:00", "evidence": ["in_20261012_0001"],
            "depth": 2}
    ids = {}
    for written in ("true", "12", "2026-10-12", "yes"):
        ids[written] = rt.store.append(REF, Kind.CONVICTION, {**meta, "key": "PLACEHOLDER"},
                                       {"Conviction": f"Key {written}."}).id
        path = rt.store.path_for_id(REF, ids[written])
        path.write_text(path.read_text("utf-8").replace("key: PLACEHOLDER",
                                                        f"key: {written}"), "utf-8")
    keys = {w: beliefs.key_of(rt.store.get(REF, i)) for w, i in ids.items()}
    assert keys == {"true": "", "12": "", "2026-10-12": "", "yes": "yes"}

    out = CliRunner().invoke(cli, ["worldview", "--user", "u_ops", "--history", "--root",
                                   str(rt.root)]).output
    assert f"{ids['true']}  (no key): Key true." in out and "True" not in out

    messages = [p["message"] for p in lint_report(rt.root)["problems"]]
    tail = ("(read as no key: a conviction without one is in no worldview or briefing; put "
            "it in quotes)")
    assert f"entry {ids['true']}: key must be a string, got a boolean: true {tail}" in messages
    assert f"entry {ids['12']}: key must be a string, got a number: 12 {tail}" in messages
    assert f"entry {ids['2026-10-12']}: key must be a string, got a date: 2026-10-12 " \
        f"{tail}" in messages
    assert not any(m.startswith(f"entry {ids['yes']}:") for m in messages)
