"""How hand-edited daily logs are read: what a person may type into a log that the parser
must report (at its line) rather than pass silently or misread."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli import store_cmds
from everos_reflect.markdown.parser import MAX_HIDDEN_LINES, parse_log

PATH = "u1/episodes/episode-2026-10-12.md"
HEAD = """---
type: episode_daily
schema_version: 1
user_id: u1
date: '2026-10-12'
---
"""
META = "owner_id: u1\ntimestamp: 2026-10-12T09:00:00+00:00\nparent_type: memcell\n"


def entry(n: int, *, meta: str = META, content: str = "c") -> str:
    eid = f"ep_20261012_{n:04d}"
    return (f"<!-- entry:{eid} -->\n---\n{meta}---\n## Subject\ns\n\n## Content\n{content}\n"
            f"<!-- /entry:{eid} -->\n")


def write_root(tmp_path: Path, text: str) -> Path:
    log = tmp_path / "default_app/default_project/users/u1/episodes/episode-2026-10-12.md"
    log.parent.mkdir(parents=True)
    log.write_bytes(text.encode())
    return log


def lint(root: Path) -> tuple[int, list[dict[str, object]]]:
    result = CliRunner().invoke(store_cmds.lint_cmd, ["--root", str(root), "--json"])
    return result.exit_code, json.loads(result.stdout)["problems"]


# --- invisible characters ------------------------------------------------------------------


@pytest.mark.parametrize(("char", "name"), [
    ("\u202e", "U+202E (RIGHT-TO-LEFT OVERRIDE)"),
    ("\u2066", "U+2066 (LEFT-TO-RIGHT ISOLATE)"),
    ("\x07", "U+0007 (control)"),
    ("\x00", "U+0000 (control)"),
    ("\x1b", "U+001B (control)"),
    ("\x7f", "U+007F (control)"),
    ("\x9b", "U+009B (control)"),
    ("\r", "U+000D (control)"),
])
def test_lint_warns_of_an_invisible_character_naming_file_line_and_code_point(
        tmp_path: Path, char: str, name: str) -> None:
    text = HEAD + entry(1) + entry(2, content=f"pay {char}500 to Bob\nsecond line")
    log = write_root(tmp_path, text)

    code, problems = lint(tmp_path)

    assert code == 1
    (problem,) = problems
    assert problem["severity"] == "warning"
    assert problem["file"].endswith("episodes/episode-2026-10-12.md")
    assert problem["line"] == text.split("\n").index(f"pay {char}500 to Bob") + 1 == 29
    assert name in problem["message"] and "ep_20261012_0002" in problem["message"]
    # a warning: the entry is read, its text as written, and the file is not touched
    parsed = parse_log(log.read_bytes().decode(), PATH)
    assert parsed.entries[1].content == f"pay {char}500 to Bob\nsecond line"
    assert log.read_bytes() == text.encode()


def test_tabs_crlf_and_right_to_left_marks_are_not_invisible_characters(tmp_path: Path) -> None:
    text = HEAD + entry(1, content="a\tb \u200fשלום\u200e ok")
    write_root(tmp_path, text.replace("\n", "\r\n"))
    assert lint(tmp_path) == (0, [])


def test_many_lines_with_invisible_characters_give_a_bounded_number_of_warnings() -> None:
    text = HEAD + entry(1, content="\n".join(f"x\x01{i}" for i in range(1000)))
    warnings = parse_log(text, PATH).diagnostics
    assert len(warnings) == MAX_HIDDEN_LINES + 1
    assert [w.line for w in warnings[:3]] == [17, 18, 19]
    assert warnings[-1].message.endswith(f"invisible characters on {1000 - MAX_HIDDEN_LINES} "
                                         "more lines from here")
    assert warnings[-1].line == 17 + MAX_HIDDEN_LINES


# --- a YAML !!set in metadata ----------------------------------------------------------------

SET_META = (META + "tags: !!set {dog, cat, bird, fish, horse, owl, yak}\n"
            "nested:\n  - {kinds: !!set {? a, ? b, ? c, ? d}}\n")

_HASH_OF = """
import sys
from everos_reflect.markdown.parser import parse_log
print(parse_log(sys.stdin.read(), "u1/episodes/episode-2026-10-12.md").entries[0].content_hash)
"""


def _hash_in_process(text: str, seed: int) -> str:
    env = {**os.environ, "PYTHONHASHSEED": str(seed)}
    out = subprocess.run([sys.executable, "-c", _HASH_OF], input=text, env=env,
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_the_content_hash_of_set_metadata_is_the_same_in_every_process() -> None:
    text = HEAD + entry(1, meta=SET_META)
    (parsed,) = parse_log(text, PATH).entries
    assert parsed.meta["tags"] == {"dog", "cat", "bird", "fish", "horse", "owl", "yak"}
    hashes = {_hash_in_process(text, seed) for seed in (0, 1, 2, 3, 42)}
    assert hashes == {parsed.content_hash}


def test_the_content_hash_still_sees_a_change_inside_a_set() -> None:
    before = parse_log(HEAD + entry(1, meta=SET_META), PATH).entries[0]
    after = parse_log(HEAD + entry(1, meta=SET_META.replace("yak", "elk")), PATH).entries[0]
    assert before.content_hash != after.content_hash


def test_the_content_hash_of_metadata_without_sets_is_unchanged() -> None:
    """Hashes already stored in an index stay valid: no re-write of every entry on upgrade."""
    meta = META + "sources: [ep_20261010_0001, 'x y']\nextra: {a: [1, 2.5, null], b: true}\n"
    (parsed,) = parse_log(HEAD + entry(1, meta=meta), PATH).entries
    old = hashlib.sha256()
    old.update(repr(sorted((str(k), str(v)) for k, v in parsed.meta.items())).encode())
    old.update(repr(list(parsed.sections.items())).encode())
    assert parsed.content_hash == old.hexdigest()[:32]


# --- timestamp forms ---------------------------------------------------------------------------


@pytest.mark.parametrize(("written", "reason"), [
    ("2026-10-12T09:00:00+05:30:15", "has a UTC offset with seconds (+05:30:15)"),
    ("'2026-10-12T09:00:00-01:00:30.5'", "has a UTC offset with seconds (-01:00:30.5)"),
    ("'2026-10-12T09:00:00+053015'", "has a UTC offset with seconds (+053015)"),
    ("2026-10-12X09:00:00+00:00", "separates the date and the time with 'X'"),
    ("'2026-10-12_09:00:00Z'", "separates the date and the time with '_'"),
    ("'2026-10-12é09:00+02:00'", "separates the date and the time with 'é'"),
    ("'2026-10-12T09:00:00.+00:00'", "is not an ISO 8601 date and time"),
])
def test_a_timestamp_python_reads_but_iso_8601_does_not_is_an_error_at_its_line(
        tmp_path: Path, written: str, reason: str) -> None:
    meta = f"owner_id: u1\nparent_type: memcell\ntimestamp: {written}\n"
    text = HEAD + entry(1) + entry(2, meta=meta)
    write_root(tmp_path, text)

    code, problems = lint(tmp_path)

    assert code == 1
    (problem,) = problems
    assert problem["severity"] == "error"
    assert problem["line"] == text.split("\n").index(f"timestamp: {written}") + 1 == 23
    assert reason in problem["message"] and "ep_20261012_0002" in problem["message"]
    # refused, not guessed at: the entry is not read, the others are
    assert [e.id for e in parse_log(text, PATH).entries] == ["ep_20261012_0001"]


@pytest.mark.parametrize(("written", "read"), [
    ("2026-10-12T09:00:00+05:30", "2026-10-12T09:00:00+05:30"),
    ("2026-10-12 09:00:00+05:30", "2026-10-12T09:00:00+05:30"),
    ("'2026-10-12t09:00:00Z'", "2026-10-12T09:00:00+00:00"),
    ("'2026-10-12T09:00:00 +05:30'", "2026-10-12T09:00:00+05:30"),
    ("'2026-10-12T09:00+0530'", "2026-10-12T09:00:00+05:30"),
    ("'2026-10-12T09+05'", "2026-10-12T09:00:00+05:00"),
    ("'20261012T090000Z'", "2026-10-12T09:00:00+00:00"),
    ("'2026-10-12T09:00:00,5-01:00'", "2026-10-12T09:00:00.500000-01:00"),
    ("'2026-W42-1T09:00Z'", "2026-10-12T09:00:00+00:00"),
    ("'2026-10-12t09:00:00z'", "2026-10-12T09:00:00+00:00"),  # RFC 3339 5.6: lower case too
])
def test_iso_8601_timestamps_with_an_offset_are_read_without_a_word(
        written: str, read: str) -> None:
    meta = f"owner_id: u1\nparent_type: memcell\ntimestamp: {written}\n"
    log = parse_log(HEAD + entry(1, meta=meta), PATH)
    assert log.diagnostics == []
    assert log.entries[0].timestamp.isoformat() == read


@pytest.mark.parametrize(("written", "read"), [
    ("2026-10-12T09:00:00.123456789+00:00", "2026-10-12T09:00:00.123456+00:00"),  # YAML's
    ("'2026-10-12T09:00:00.123456789+00:00'", "2026-10-12T09:00:00.123456+00:00"),
    ("'2026-10-12T09:00:00,9999999Z'", "2026-10-12T09:00:00.999999+00:00"),
    ("2026-10-12T23:59:59.9999999+00:00", "2026-10-12T23:59:59.999999+00:00"),
    ("'2026-10-12 23:59:59.99999999999-01:00'", "2026-10-12T23:59:59.999999-01:00"),
])
def test_a_fraction_past_the_microsecond_is_read_rounded_down_on_its_day(
        written: str, read: str) -> None:
    # ISO 8601 sets no limit on a fraction's digits (date --iso-8601=ns writes nine): such a
    # timestamp is valid and read, to the microsecond, never rounded up into the next second
    # (23:59:59.9999999 would leave its day, and its daily log). docs/limits.md says so.
    meta = f"owner_id: u1\nparent_type: memcell\ntimestamp: {written}\n"
    log = parse_log(HEAD + entry(1, meta=meta), PATH)
    assert log.diagnostics == []
    assert log.entries[0].timestamp.isoformat() == read


@pytest.mark.parametrize(("stamp", "written"), [
    ("2026-10-12T09:00:00.123456000+02:00", "2026-10-12T09:00:00.123456+02:00"),
    ("2026-10-12T09:00:00,1234560Z", "2026-10-12T09:00:00.123456+00:00")])
def test_a_new_record_takes_a_fraction_of_any_length(stamp: str, written: str) -> None:
    # The CLI, API and MCP refused seven digits or more as "not ISO 8601"; they are ISO 8601,
    # read as a hand-written one is (to the microsecond), and written so.
    from everos_reflect.model import UserRef, new_episode, parse_new_timestamp

    assert parse_new_timestamp(stamp).microsecond == int(stamp[20:26])
    episode = new_episode(UserRef.of("u1"), subject="s", content="c", timestamp=stamp)
    assert episode.meta["timestamp"] == written


@pytest.mark.parametrize("stamp", ["2026-10-12t09:30:00z", "2026-10-12T09:30z"])
def test_a_new_record_takes_a_lower_case_t_and_z(stamp: str) -> None:
    # RFC 3339 5.6 allows "t" and "z" in lower case; "z" was refused as "not ISO 8601"
    # (Python 3.11 reads only an upper-case Z), though the pattern let it through.
    from everos_reflect.model import parse_new_timestamp

    assert parse_new_timestamp(stamp).isoformat() == "2026-10-12T09:30:00+00:00"
