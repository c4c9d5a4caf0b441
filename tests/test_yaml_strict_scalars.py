"""Metadata a person writes is read as they wrote it: only plain decimal integers are numbers
and only true/false are booleans. YAML 1.1's other forms (010 octal, 1_0, 1:20 base 60, 0x0a,
yes/no/on/off) stay the text written, and a key that needs a number names it in lint."""

from __future__ import annotations

import pytest

from everos_reflect.markdown.parser import load_yaml, parse_log
from everos_reflect.markdown.writer import set_entry_meta
from everos_reflect.strategies.insights import importance_of

HEAD = "---\ntype: episode_daily\nschema_version: 1\nuser_id: u\ndate: '2026-10-12'\n---\n"
META = "owner_id: u\ntimestamp: 2026-10-11T02:00:00+00:00\nparent_type: memcell\n"


def _episode(extra: str) -> str:
    eid = "ep_20261012_0001"
    return (f"{HEAD}<!-- entry:{eid} -->\n---\n{META}{extra}\n---\n## Subject\ns\n\n"
            f"## Content\nc\n<!-- /entry:{eid} -->\n")


@pytest.mark.parametrize("written", ["010", "1_0", "1:20", "0x0a", "0o12", "yes", "on", "00"])
def test_an_importance_yaml_1_1_reads_as_another_number_is_refused_at_its_line(
    written: str,
) -> None:
    # `importance: 010` was 8 (octal), `1_0` 10, `1:20` 80, `yes` True: used or reported as a
    # number the person never wrote
    log = parse_log(_episode(f"importance: {written}"), "u/episodes/episode-2026-10-12.md")
    [read] = log.entries  # still read and indexed
    assert read.meta["importance"] == written
    assert [(d.line, d.severity, d.message) for d in log.diagnostics] == [
        (12, "warning", f"entry ep_20261012_0001: importance '{written}' is not a whole number "
                        "1-10 written in decimal (not read: scored as if absent)")]
    assert importance_of(read) == importance_of(
        parse_log(_episode(""), "u/episodes/episode-2026-10-12.md").entries[0])


def test_a_decimal_importance_is_read_without_a_word() -> None:
    log = parse_log(_episode("importance: 10"), "u/episodes/episode-2026-10-12.md")
    assert log.diagnostics == [] and importance_of(log.entries[0]) == 10


@pytest.mark.parametrize(("written", "read"), [
    ("10", 10), ("-3", -3), ("+5", 5), ("0", 0), ("true", True), ("False", False),
    ("1.5", 1.5), ("~", None), ("null", None),
    ("010", "010"), ("1_0", "1_0"), ("1:20", "1:20"), ("0x1f", "0x1f"), ("0b11", "0b11"),
    ("yes", "yes"), ("No", "No"), ("ON", "ON"), ("off", "off"), ("1_0.5", "1_0.5"),
    ("1:20.5", "1:20.5"),
])
def test_only_decimal_numbers_and_true_false_are_read_as_other_than_text(
    written: str, read: object,
) -> None:
    for text, where in ((f"k: {written}", lambda d: d["k"]),
                        (f"k: [x, {written}]", lambda d: d["k"][1]),
                        (f"k:\n  j: {written}", lambda d: d["k"]["j"])):
        data, problem = load_yaml(text, 1)
        assert problem is None
        got = where(data)
        assert got == read and type(got) is type(read), (text, got)


def test_a_yaml_1_1_bool_word_as_a_key_stays_text() -> None:
    assert load_yaml("on: a\nyes: b", 1) == ({"on": "a", "yes": "b"}, None)


@pytest.mark.parametrize("key", ["on", "010", "1:20", "1_0.5"])
def test_a_key_written_bare_and_quoted_is_a_key_written_twice(key: str) -> None:
    # both are the text now: the second silently replaced the first
    assert load_yaml(f"{key}: a\n'{key}': b", 1) == (
        None, (2, f"YAML refused: key '{key}' is written twice in one mapping; keep one"))


def test_rewriting_a_records_metadata_keeps_valid_values_byte_for_byte() -> None:
    rid = "in_20261020_0001"
    text = ("---\ntype: insight_daily\nschema_version: 1\nuser_id: u\ndate: '2026-10-20'\n---\n"
            f"<!-- entry:{rid} -->\n---\nowner_id: u\ntimestamp: 2026-10-20T09:00:00+00:00\n"
            "evidence: [ep_20261012_0001, ep_20261012_0002]\ndepth: 1\nimportance: 7\n"
            "status: active\nflag: true\n---\n## Insight\nx\n<!-- /entry:" + rid + " -->\n")
    assert set_entry_meta(text, rid, {"status": "active"}) == text
    # a person's `importance: 010` stays that text through a rewrite, never 8
    edited = text.replace("importance: 7", "importance: 010")
    rewritten = set_entry_meta(edited, rid, {"status": "stale"})
    assert "importance: '010'\n" in rewritten and "status: stale\n" in rewritten
    assert parse_log(rewritten, "u/.insights/insight-2026-10-20.md").entries[0].meta[
        "importance"] == "010"


@pytest.mark.parametrize("first, second", [
    ("true", "True"), ("1", "+1"), ("1", "1.0"), ("0", "-0"), ("true", "1"),
    ("1", "'1'"), ("true", "'True'"), ("null", "'None'"), ("1.5", "'1.5'"),
])
def test_two_spellings_of_one_key_are_a_key_written_twice(first: str, second: str) -> None:
    # both read as one key (True and True, 1 and 1.0, or the same text once the metadata's
    # keys are read as text): the second silently replaced the first
    value, problem = load_yaml(f"{first}: a\n{second}: b", 1)
    assert value is None and problem is not None
    assert problem[0] == 2 and "is written twice in one mapping" in problem[1]


def test_keys_of_other_values_are_still_two_keys() -> None:
    assert load_yaml("1: a\n01: b\n'on': c\n1.5: d\n'1.50': e", 1)[1] is None


@pytest.mark.parametrize(("meta", "line"), [
    (META + "session_id: 1.10\n", 12),  # read as 1.1: put it in quotes
    (META + "parent_id: [a, b]\n", 12),  # no one value
    (META.replace("parent_type: memcell", "parent_type: note"), 11),
    (META.replace("+00:00", ""), 10),  # no UTC offset
    (META.replace("T02:00:00+00:00", ""), 10),  # no time of day
    (META.replace("owner_id: u", "owner_id: v"), 9),  # not the file's user
])
def test_a_problem_with_a_key_s_value_is_named_on_its_key_s_line(meta: str, line: int) -> None:
    # these warnings were put on the entry's opening marker line (7), as status and
    # confirmations were: a person looked for the value there
    eid = "ep_20261012_0001"
    text = (f"{HEAD}<!-- entry:{eid} -->\n---\n{meta}---\n## Subject\ns\n\n"
            f"## Content\nc\n<!-- /entry:{eid} -->\n")
    log = parse_log(text, "u/episodes/episode-2026-10-12.md")
    assert [d.line for d in log.diagnostics] == [line], log.diagnostics
