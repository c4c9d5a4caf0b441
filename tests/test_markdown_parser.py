"""Daily-log parser and pure writer: SPEC §3 format, leniency, diagnostics, round trips."""

from __future__ import annotations

import string
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from everos_reflect.errors import MarkdownError
from everos_reflect.markdown import writer
from everos_reflect.markdown.parser import next_seq, parse_log
from everos_reflect.model import LINE_BREAKS_AS_NEWLINES, Kind
from everos_reflect.procedural.lessons import read_lesson

EXAMPLE_ROOT = Path(__file__).resolve().parent.parent / "memory_root_example"
PATH = "u/episodes/episode-2026-10-12.md"

SPEC_EXAMPLE = """\
---
type: episode_daily
schema_version: 1
user_id: u_andrew
date: '2026-10-12'
---
<!-- entry:ep_20261012_0001 -->
---
owner_id: u_andrew
timestamp: 2026-10-11T02:00:00+00:00
parent_type: cluster
parent_id: cl_a1b2c3d4e5f6
sources: [ep_20260810_0001, ep_20260910_0002, ep_20261010_0003]
---
## Subject
Andrew's pet adoption journey

## Content
Andrew initially had no pets. He later adopted a dog named Toby, and then adopted another dog
named Buddy. He currently has two dogs.
<!-- /entry:ep_20261012_0001 -->
"""

HEAD = SPEC_EXAMPLE.split("<!--")[0]


def entry(
    n: int, *, meta: str | None = None, body: str = "## Subject\ns\n\n## Content\nc\n"
) -> str:
    eid = f"ep_20261012_{n:04d}"
    if meta is None:
        meta = "owner_id: u_andrew\ntimestamp: 2026-10-11T02:00:00+00:00\nparent_type: memcell\n"
    return f"<!-- entry:{eid} -->\n---\n{meta}---\n{body}<!-- /entry:{eid} -->\n"


def test_spec_example_parses_into_meta_sections_and_raw() -> None:
    log = parse_log(SPEC_EXAMPLE, PATH)
    assert log.diagnostics == []
    assert (log.kind, log.day) == (Kind.EPISODE, date(2026, 10, 12))
    (e,) = log.entries
    assert e.id == "ep_20261012_0001"
    assert e.line == 7
    assert e.timestamp == datetime(2026, 10, 11, 2, tzinfo=UTC)
    assert e.sources == ["ep_20260810_0001", "ep_20260910_0002", "ep_20261010_0003"]
    assert e.subject == "Andrew's pet adoption journey"
    assert e.content.endswith("He currently has two dogs.")
    assert e.raw == SPEC_EXAMPLE[SPEC_EXAMPLE.index("<!-- entry") :].rstrip("\n")
    assert e.deprecated_by is None


def test_render_entry_reproduces_the_spec_example_byte_for_byte() -> None:
    e = parse_log(SPEC_EXAMPLE, PATH).entries[0]
    assert writer.render_entry(e.id, e.meta, e.sections) == e.raw + "\n"
    assert writer.new_log_text(Kind.EPISODE, "u_andrew", date(2026, 10, 12)) == HEAD


def test_deprecated_entries_fill_deprecated_by() -> None:
    text = HEAD[:-4] + "deprecated_entries:\n  ep_20261012_0001: ep_20261012_0002\n---\n"
    text += entry(1) + entry(2)
    log = parse_log(text, PATH)
    assert [(e.id, e.deprecated_by) for e in log.entries] == [
        ("ep_20261012_0001", "ep_20261012_0002"),
        ("ep_20261012_0002", None),
    ]


def test_hand_edits_are_tolerated_without_diagnostics() -> None:
    reordered = (
        "parent_type: memcell\nmood: tired   # a note\ntimestamp: 2026-10-11T02:00:00+00:00\n"
        "owner_id: u_andrew\n"
    )
    text = (
        HEAD
        + "Some notes written by hand.\n\n"
        + entry(1, meta=reordered)
        + "\nMore notes between entries.\n\n"
        + entry(2, body="## Subject\ns\n\n## Content\nc\n\n## Notes\nextra section\n\n"
                "### sub heading\nkept\n")
    )
    log = parse_log(text, PATH)
    assert log.diagnostics == []
    first, second = log.entries
    assert first.meta == {
        "parent_type": "memcell",
        "mood": "tired",
        "timestamp": datetime(2026, 10, 11, 2, tzinfo=UTC),
        "owner_id": "u_andrew",
    }
    assert second.sections == {"Subject": "s", "Content": "c",
                               "Notes": "extra section\n\n### sub heading\nkept"}


def test_crlf_and_missing_trailing_newline_parse_like_lf() -> None:
    lf = HEAD + entry(1) + entry(2)
    crlf = lf.replace("\n", "\r\n").removesuffix("\r\n")
    a, b = parse_log(lf, PATH), parse_log(crlf, PATH)
    assert b.diagnostics == []
    assert [(e.id, e.meta, e.sections, e.line) for e in a.entries] == [
        (e.id, e.meta, e.sections, e.line) for e in b.entries
    ]
    assert b.entries[1].raw == a.entries[1].raw.replace("\n", "\r\n")


def test_appending_after_a_last_line_cut_between_cr_and_lf_keeps_that_entry_closed() -> None:
    # A CRLF file whose last line ends in a lone CR (cut mid line ending by a sync tool or an
    # editor). Appending a whole CRLF there made the close marker end in CR CR LF, so the
    # entry that parsed before the append was "not closed" after it.
    lf = HEAD + entry(1)
    for cut in (lf.replace("\n", "\r\n").removesuffix("\n"), lf.removesuffix("\n") + "\r"):
        assert parse_log(cut, PATH).diagnostics == []
        block = writer.render_entry("ep_20261012_0002", {"owner_id": "u_andrew",
                                    "timestamp": "2026-10-12T10:00:00+00:00",
                                    "parent_type": "memcell", "parent_id": "mc_1"},
                                    {"Subject": "s", "Content": "c"})
        appended = writer.append_entry(cut, block)
        assert appended.startswith(cut)
        after = parse_log(appended, PATH)
        assert after.diagnostics == []
        assert [e.id for e in after.entries] == ["ep_20261012_0001", "ep_20261012_0002"]


def test_broken_entry_in_the_middle_is_reported_and_the_rest_parses() -> None:
    broken = "<!-- entry:ep_20261012_0002 -->\n---\nowner_id: [unclosed\n---\n"
    broken += "<!-- /entry:ep_20261012_0002 -->\n"
    text = HEAD + entry(1) + broken + entry(3)
    log = parse_log(text, PATH)
    assert [e.id for e in log.entries] == ["ep_20261012_0001", "ep_20261012_0003"]
    (d,) = log.diagnostics
    assert (d.path, d.severity) == (PATH, "error")
    assert "invalid YAML" in d.message
    assert d.line == text.splitlines().index("owner_id: [unclosed") + 1
    assert log.ok


@pytest.mark.parametrize(("stamp", "reason"), [
    ("2026-10-11T02:00:00+99:00", "its UTC offset is a day or more"),
    ("2026-13-11T02:00:00+00:00", "month must be in 1..12"),
    ("2026-02-30T02:00:00Z", "day is out of range for month"),
])
def test_an_impossible_timestamp_is_named_on_its_line(stamp: str, reason: str) -> None:
    # It said "invalid YAML: offset must be a timedelta strictly between
    # -timedelta(hours=24) and timedelta(hours=24), not datetime.timedelta(days=4, ...)", on
    # the block's first line: the YAML was fine, the date was not.
    meta = f"owner_id: u_andrew\ntimestamp: {stamp}\nparent_type: memcell\n"
    text = HEAD + entry(1, meta=meta) + entry(2)
    log = parse_log(text, PATH)
    assert [e.id for e in log.entries] == ["ep_20261012_0002"]
    [problem] = log.diagnostics
    assert problem.message == (f"entry ep_20261012_0001: YAML refused: '{stamp}' is not a "
                               f"valid date and time ({reason})")
    assert problem.line == text.splitlines().index(f"timestamp: {stamp}") + 1


BAD_ENTRIES = [
    ("unclosed", "<!-- entry:ep_20261012_0002 -->\n---\nowner_id: u\n---\n", "is not closed"),
    (
        "mismatched",
        "<!-- entry:ep_20261012_0002 -->\n---\n---\n<!-- /entry:ep_20261012_0009 -->\n",
        "closing marker names",
    ),
    ("no metadata", entry(2).replace("---\n", "", 2), "no '---' metadata block"),
    ("missing keys", entry(2, meta="parent_type: memcell\n"), "owner_id, timestamp"),
    (
        "bad timestamp",
        entry(2, meta="owner_id: u_andrew\ntimestamp: next tuesday\n"),
        "unreadable timestamp",
    ),
    ("meta not a mapping", entry(2, meta="- a\n- b\n"), "must be a YAML mapping"),
    # read, then `clusters` failed ("year 10000 is out of range") turning it back into a date
    *((f"timestamp {side} in UTC", entry(2, meta=f"owner_id: u_andrew\ntimestamp: "
       f"{stamp}\n"), f"timestamp {stamp} is outside years 1-9999 once converted to UTC")
      for side, stamp in (("after year 9999", "9999-12-31T23:59:59-01:00"),
                          ("before year 1", "0001-01-01T00:30:00+01:00"))),
    ("duplicate id", entry(1), "duplicate entry id"),
    ("wrong day", entry(2).replace("20261012", "20261013"), "does not belong in this file"),
    ("wrong kind", entry(2).replace("ep_", "af_"), "does not belong in this file"),
    ("bad id", entry(2).replace("ep_20261012_0002", "ep_2026_x"), "invalid entry id"),
    ("padded id", entry(2).replace("ep_20261012_0002", "ep_20261012_00002"), "write it as"),
]


@pytest.mark.parametrize(
    ("bad", "message"), [c[1:] for c in BAD_ENTRIES], ids=[c[0] for c in BAD_ENTRIES]
)
def test_malformed_entries_are_errors_with_their_line(bad: str, message: str) -> None:
    text = HEAD + entry(1) + bad + entry(3)
    log = parse_log(text, PATH)
    errors = [d for d in log.diagnostics if d.severity == "error"]
    assert len(errors) == 1 and message in errors[0].message
    first_bad_line = len((HEAD + entry(1)).splitlines()) + 1
    assert first_bad_line <= errors[0].line <= first_bad_line + bad.count("\n")
    assert {"ep_20261012_0001", "ep_20261012_0003"} <= {e.id for e in log.entries}
    assert len(log.entries) == 2


WARNINGS = [
    (
        "naive timestamp",
        entry(2, meta="owner_id: u_andrew\ntimestamp: 2026-10-11T02:00:00\nparent_type: memcell\n"),
        "no UTC offset",
    ),
    # A day alone was read as midnight UTC without a word (YAML makes it a date, not a
    # datetime, which the offset check passed over).
    *((f"date-only timestamp {name}", entry(2, meta=f"owner_id: u_andrew\ntimestamp: {value}\n"
       "parent_type: memcell\n"), f"timestamp {shown} has no time of day (read as {read})")
      for name, value, shown, read in (
          ("plain", "2026-10-11", "2026-10-11", "2026-10-11T00:00:00+00:00"),
          ("quoted", "'2026-10-11'", "'2026-10-11'", "2026-10-11T00:00:00+00:00"),
          ("week date", "2026-W41-1", "'2026-W41-1'", "2026-10-05T00:00:00+00:00"))),
    (
        "other owner",
        entry(2, meta="owner_id: someone\ntimestamp: 2026-10-11T02:00:00Z\nparent_type: memcell\n"),
        "is not the file's user",
    ),
    ("no Content", entry(2, body="## Subject\nonly a subject\n"), "no '## Content' section"),
    (
        "bad importance",
        entry(
            2,
            meta="owner_id: u_andrew\ntimestamp: 2026-10-11T02:00:00Z\n"
            "parent_type: memcell\nimportance: 11\n",
        ),
        "importance 11",
    ),
    # A list or a mapping there made the whole file an "internal parser error": not one of its
    # entries was indexed, and no writer would touch the file.
    *((f"parent_type {shape}", entry(2, meta="owner_id: u_andrew\ntimestamp: "
       f"2026-10-11T02:00:00Z\nparent_type: {value}\n"), f"parent_type {shown} is not one of")
      for shape, value, shown in (("list", "[memcell]", "['memcell']"),
                                  ("mapping", "{a: 1}", "{'a': 1}"))),
    ("preamble", entry(2, body="loose text\n## Subject\ns\n## Content\nc\n"),
     "before the first ## section"),
    ("stray close", "<!-- /entry:ep_20261012_0007 -->\n", "without an opening one"),
]


@pytest.mark.parametrize(
    ("extra", "message"), [w[1:] for w in WARNINGS], ids=[w[0] for w in WARNINGS]
)
def test_doubtful_entries_are_warnings_and_still_indexed(extra: str, message: str) -> None:
    log = parse_log(HEAD + entry(1) + extra, PATH)
    (d,) = log.diagnostics
    assert d.severity == "warning" and message in d.message
    assert len(log.entries) == (1 if "stray" in message or "opening" in message else 2)


FATAL_FILES = [
    ("no frontmatter", "", "missing file frontmatter"),
    ("unclosed frontmatter", "---\ntype: episode_daily\n", "not closed"),
    ("bad yaml", HEAD.replace("user_id: u_andrew", "user_id: [x"), "invalid YAML"),
    ("not a mapping", "---\n- a\n---\n", "must be a YAML mapping"),
    ("newer schema", HEAD.replace("schema_version: 1", "schema_version: 2"), "schema_version 2"),
    ("bad deprecated", HEAD[:-4] + "deprecated_entries: [a, b]\n---\n", "must be a mapping"),
]


@pytest.mark.parametrize(
    ("text", "message"), [f[1:] for f in FATAL_FILES], ids=[f[0] for f in FATAL_FILES]
)
def test_unusable_frontmatter_is_fatal_and_yields_no_entries(text: str, message: str) -> None:
    body = entry(1).replace("---", "===") if "not closed" in message else entry(1)
    log = parse_log(text + body, PATH)
    assert not log.ok
    assert any(d.severity == "fatal" and message in d.message for d in log.diagnostics)
    assert log.entries == []


@pytest.mark.parametrize(("value", "shown"), [("true", "true"), ("1.0", "1.0"), ("'1'", "'1'")])
def test_a_schema_version_that_only_equals_1_in_python_is_fatal_at_its_line(
    value: str, shown: str
) -> None:
    """``true == 1`` and ``1.0 == 1`` in Python: both were read as version 1 without a word."""
    log = parse_log(HEAD.replace("schema_version: 1", f"schema_version: {value}") + entry(1), PATH)
    assert not log.ok and log.entries == []
    (d,) = log.diagnostics
    assert (d.path, d.line, d.severity) == (PATH, 3, "fatal")
    assert d.message == f"unsupported schema_version {shown} (this version reads 1)"


@pytest.mark.parametrize("value", ["", " null", " ~"])
def test_an_empty_user_id_is_a_warning_like_a_missing_one(value: str) -> None:
    """``user_id:`` with no value passed without a word, and no entry's owner was checked."""
    text = HEAD.replace("user_id: u_andrew", f"user_id:{value}") + entry(1)
    log = parse_log(text, PATH)
    assert [(d.line, d.severity, d.message) for d in log.diagnostics] == [
        (4, "warning", "frontmatter has no user_id")]
    assert [e.id for e in log.entries] == ["ep_20261012_0001"]


def test_a_log_with_cr_alone_line_endings_says_so() -> None:
    """It was "missing file frontmatter (the file must start with '---')", of a file that
    starts with '---'."""
    text = (HEAD + entry(1)).replace("\n", "\r")
    log = parse_log(text, PATH)
    assert not log.ok and log.entries == []
    assert [(d.line, d.severity, d.message) for d in log.diagnostics] == [
        (1, "fatal", "lines end in CR alone (classic Mac): only LF or CRLF line endings are "
                     "read; save the file with either")]


def test_file_name_wins_over_frontmatter_and_mismatch_is_a_warning() -> None:
    log = parse_log(HEAD.replace("2026-10-12", "2026-10-13") + entry(1), PATH)
    assert log.day == date(2026, 10, 12) and [e.id for e in log.entries] == ["ep_20261012_0001"]
    assert [d.severity for d in log.diagnostics] == ["warning"]


def test_next_seq_counts_broken_entries_notes_and_deprecated_keys() -> None:
    broken = "<!-- entry:ep_20261012_0007 -->\nno metadata\n<!-- /entry:ep_20261012_0007 -->\n"
    text = HEAD[:-4] + "deprecated_entries:\n  ep_20261012_0009: ep_20261012_0001\n---\n"
    assert next_seq(parse_log(text + entry(1), PATH)) == 10
    assert next_seq(parse_log(HEAD + entry(1) + broken, PATH)) == 8
    assert next_seq(parse_log(HEAD + entry(1), PATH)) == 2
    assert next_seq(parse_log(HEAD, PATH)) == 1
    # other days' and kinds' ids are irrelevant to this file
    assert next_seq(parse_log(HEAD + "see ep_20261013_0042 and af_20261012_0042\n", PATH)) == 1


def test_body_lines_that_look_like_structure_are_escaped_and_restored() -> None:
    body = "## not a heading\n<!-- /entry:ep_20261012_0001 -->\n\\## already escaped\n### fine"
    block = writer.render_entry(
        "ep_20261012_0001", {"owner_id": "u", "timestamp": "x"}, {"Content": body}
    )
    assert "\\## not a heading\n\\<!-- /entry" in block and "\\\\## already" in block
    e = parse_log(
        HEAD + block.replace("timestamp: x", "timestamp: 2026-10-11T02:00:00Z"), PATH
    ).entries[0]
    assert e.sections == {"Content": body}


def test_render_entry_rejects_unusable_section_names_and_ids() -> None:
    meta = {"owner_id": "u"}
    for name in ["", " padded", "two\nlines", "trailing "]:
        with pytest.raises(MarkdownError):
            writer.render_entry("ep_20261012_0001", meta, {name: "x"})
    with pytest.raises(Exception, match="invalid entry id"):
        writer.render_entry("../etc", meta, {})


def test_render_entry_formats_values_as_the_spec_shows() -> None:
    block = writer.render_entry(
        "ep_20261012_0001",
        {
            "owner_id": "u",
            "timestamp": datetime(2026, 10, 11, 4, 0, 0, 123, tzinfo=timezone(timedelta(hours=2))),
            "session_id": None,
            "sources": ["ep_20260810_0001", "ep_20260910_0002"],
            "note": "yes",
            "multi": "a\nb",
        },
        {"Subject": "s"},
    )
    assert block.splitlines()[2:7] == [
        "owner_id: u",
        "timestamp: 2026-10-11T04:00:00+02:00",
        "sources: [ep_20260810_0001, ep_20260910_0002]",
        "note: 'yes'",
        'multi: "a\\nb"',
    ]


# -- the example root -------------------------------------------------------------------------


def example_files() -> list[Path]:
    return sorted(EXAMPLE_ROOT.glob("*/*/users/*/*/*.md"))


def test_example_root_parses_cleanly_and_writers_keep_every_byte() -> None:
    files = example_files()
    assert len(files) >= 60
    for path in files:
        text = path.read_bytes().decode("utf-8")
        log = parse_log(text, str(path))
        assert log.diagnostics == [], path
        assert log.entries, path
        assert writer.add_deprecations(text, {}) == text
        assert writer.remove_deprecations(text, [e.id for e in log.entries]) == text
        block = writer.render_entry(
            log.entries[0].id.replace("_0001", "_0999"),
            log.entries[0].meta,
            log.entries[0].sections,
        )
        appended = writer.append_entry(text, block)
        assert appended.startswith(text) and appended.endswith(block)
        again = parse_log(appended, str(path))
        assert [e.raw for e in again.entries[:-1]] == [e.raw for e in log.entries]


def test_example_entries_in_canonical_form_re_render_byte_identical() -> None:
    same = total = 0
    for path in example_files():
        for e in parse_log(path.read_text("utf-8"), str(path)).entries:
            total += 1
            same += writer.render_entry(e.id, e.meta, e.sections) == e.raw + "\n"
    # Only the hand-edited ones (a YAML comment, reordered keys, ...) differ.
    assert total >= 60 and total - same <= 6


# -- property tests ---------------------------------------------------------------------------

_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r"), max_size=80)
_body = _text.map(str.strip)
_lines = st.lists(
    st.one_of(
        _text, st.sampled_from(["## x", "<!-- /entry:ep_20261012_0001 -->", "\\## y", "---"])
    ),
    max_size=6,
).map(lambda lines: "\n".join(lines).strip())
_section_name = (
    st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1, max_size=20)
    .map(str.strip)
    .filter(lambda s: s and writer.HEADING_RE.match(f"## {s}") is not None)
)
_key = st.text(string.ascii_letters + string.digits + "_-", min_size=1, max_size=12).filter(
    lambda k: k not in ("owner_id", "timestamp")
)
_scalar = st.one_of(
    _text,
    st.integers(-(10**12), 10**12),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(
        ["yes", "no", "null", "~", "2026-10-12", "12:30", "- x", "a: b", "#", "'q'", '"']
    ),
)
_value = st.one_of(
    _scalar, st.lists(_scalar, max_size=4), st.dictionaries(_key, _scalar, max_size=3)
)
_stamp = st.datetimes(
    min_value=datetime(1971, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
).map(lambda d: d.replace(microsecond=0))


@settings(max_examples=150, deadline=None)
@given(
    seq=st.integers(1, 99999),
    stamp=_stamp,
    extra=st.dictionaries(_key, _value, max_size=5),
    sections=st.dictionaries(_section_name, st.one_of(_body, _lines), max_size=4),
)
def test_rendered_entries_parse_back_to_the_same_values_and_bytes(
    seq: int, stamp: datetime, extra: dict, sections: dict
) -> None:
    entry_id = f"ep_20261012_{seq:04d}"
    meta = {"owner_id": "u_andrew", "timestamp": stamp, **extra}
    block = writer.render_entry(entry_id, meta, sections)
    log = parse_log(writer.append_entry(HEAD, block), PATH)
    assert [d for d in log.diagnostics if d.severity != "warning"] == []
    (e,) = log.entries
    assert e.meta == meta
    # every line break but \n (U+2028, U+0085, ...) is written as the \n it means: kept, it
    # was one line to the parser and two to YAML, editors and str.splitlines
    assert e.sections == {k: v.translate(LINE_BREAKS_AS_NEWLINES) for k, v in sections.items()}
    assert e.raw + "\n" == block
    assert writer.render_entry(e.id, e.meta, e.sections) == block


@settings(max_examples=60, deadline=None)
@given(
    notes=st.lists(_text, max_size=3),
    crlf=st.booleans(),
    trailing_newline=st.booleans(),
    existing=st.dictionaries(st.integers(1, 50), st.integers(51, 99), max_size=3),
    added=st.dictionaries(st.integers(1, 99), st.integers(1, 99), min_size=1, max_size=3),
)
def test_frontmatter_patches_touch_only_the_mapping(
    notes: list[str], crlf: bool, trailing_newline: bool, existing: dict, added: dict
) -> None:
    ids = {n: f"ep_20261012_{n:04d}" for n in range(1, 100)}
    text = HEAD.replace("user_id", "# a comment\nuser_id")
    if existing:
        block = "".join(f"    {ids[k]}: {ids[v]}\n" for k, v in existing.items())
        text = text[:-4] + "deprecated_entries:\n" + block + "---\n"
    text += "\n".join(notes) + "\n" + entry(1)
    if crlf:
        text = text.replace("\n", "\r\n")
    if not trailing_newline:
        text = text.rstrip("\r\n")
    mapping = {ids[k]: ids[v] for k, v in added.items()}
    patched = writer.add_deprecations(text, mapping)
    body = text[text.index("<!-- entry") :]
    assert patched.endswith(body) and patched.startswith(text[: text.index("user_id")])
    expected = {ids[k]: ids[v] for k, v in existing.items()}
    expected.update({k: v for k, v in mapping.items() if k not in expected})
    assert parse_log(patched, PATH).deprecated_entries == expected
    restored = writer.remove_deprecations(
        patched, [k for k in mapping if k not in {ids[e] for e in existing}]
    )
    assert restored == text


@pytest.mark.parametrize("block", [
    "deprecated_entries:\n  # merged by hand in October\n  ep_20261012_0001: ep_20261012_0009\n",
    "deprecated_entries:\n  ep_20261012_0001: ep_20261012_0009\n  # the last one was mine\n",
    "deprecated_entries:\n  # nothing archived yet\n",
    "deprecated_entries:  # archive keys below\n",
])
def test_a_persons_comments_in_deprecated_entries_survive_archive_and_undo(block: str) -> None:
    """A comment line among the archive keys made the writer rewrite the whole mapping in its
    own layout, dropping the comment, on every archive and every undo."""
    text = HEAD[:-4] + block + "---\n" + entry(1) + entry(2)
    before = parse_log(text, PATH).deprecated_entries
    notes = [ln for ln in block.splitlines() if "#" in ln]
    patched = writer.add_deprecations(text, {"ep_20261012_0002": "ep_20261012_0009"})
    assert all(ln in patched.splitlines() for ln in notes)
    assert parse_log(patched, PATH).deprecated_entries == {
        **before, "ep_20261012_0002": "ep_20261012_0009"}
    assert writer.remove_deprecations(patched, ["ep_20261012_0002"]) == text
    emptied = writer.remove_deprecations(patched, [*before, "ep_20261012_0002"])
    assert all(ln in emptied.splitlines() for ln in notes)
    assert parse_log(emptied, PATH).deprecated_entries == {}
    assert parse_log(emptied, PATH).diagnostics == []


@pytest.mark.parametrize("block", [
    "deprecated_entries: {}  # merged by hand\n",
    "deprecated_entries: {ep_20261012_0001: ep_20261012_0009}  # merged by hand\n",
    "deprecated_entries: ~ # merged by hand\n",
    "deprecated_entries: {\n  ep_20261012_0001: ep_20261012_0009,  # merged by hand\n}\n",
    "deprecated_entries: {\n  # merged by hand\n  ep_20261012_0001: ep_20261012_0009}\n",
])
def test_a_comment_on_flow_style_deprecated_entries_survives_archive_and_undo(block: str) -> None:
    """Flow style is rewritten in block style on the first archive into the file; the comments
    on it were dropped with the flow text."""
    text = HEAD[:-4] + block + "---\n" + entry(1) + entry(2)
    before = parse_log(text, PATH).deprecated_entries
    patched = writer.add_deprecations(text, {"ep_20261012_0002": "ep_20261012_0009"})
    assert "# merged by hand" in patched
    assert patched.endswith(text[len(HEAD) - 4 + len(block):])
    assert parse_log(patched, PATH).deprecated_entries == {
        **before, "ep_20261012_0002": "ep_20261012_0009"}
    for undone in (writer.remove_deprecations(text, list(before)),
                   writer.remove_deprecations(patched, [*before, "ep_20261012_0002"])):
        assert "# merged by hand" in undone or not before
        assert parse_log(undone, PATH).deprecated_entries == {}


def test_the_comment_after_a_flow_style_mapping_stays_on_its_key_line() -> None:
    text = HEAD[:-4] + "deprecated_entries: {}   # merged by hand\n---\n" + entry(1)
    patched = writer.add_deprecations(text, {"ep_20261012_0001": "ep_20261012_0009"})
    assert patched == text.replace(
        "deprecated_entries: {}   # merged by hand\n",
        "deprecated_entries:   # merged by hand\n  ep_20261012_0001: ep_20261012_0009\n")


@pytest.mark.parametrize(("value", "shown"), [
    ("null", "null"), ("", "null"), ("42", "42"), ("true", "true"),
    ("[ep_20261012_0002]", '["ep_20261012_0002"]'),
])
def test_an_archive_toward_no_id_is_an_error_and_that_entry_is_not_read(
    value: str, shown: str
) -> None:
    """``{id: null}`` read as "archived toward 'None'" (``str(None)``), with a warning only."""
    text = (HEAD[:-4] + f"deprecated_entries:\n  ep_20261012_0003: ep_20261012_0002\n"
            f"  ep_20261012_0001: {value}\n---\n" + entry(1) + entry(2) + entry(3))
    log = parse_log(text, PATH)
    assert [(e.id, e.deprecated_by) for e in log.entries] == [
        ("ep_20261012_0002", None), ("ep_20261012_0003", "ep_20261012_0002")]
    (d,) = log.diagnostics
    assert (d.line, d.severity) == (8, "error")
    assert d.message == (
        f"deprecated_entries: ep_20261012_0001 is archived toward {shown}, not an entry id; "
        "ep_20261012_0001 is not read until its value names the entry that replaced it "
        "('undone' too), or the key is removed")
    assert log.deprecated_entries == {"ep_20261012_0003": "ep_20261012_0002"}
    # the person's key is kept, as every key: archiving adds, undo removes only what it names
    patched = writer.add_deprecations(text, {"ep_20261012_0002": "ep_20261012_0009"})
    assert f"  ep_20261012_0001: {value}\n" in patched
    restored = writer.remove_deprecations(patched, ["ep_20261012_0002"])
    assert restored == text


def test_lines_outside_entries_cost_no_memory_per_line() -> None:
    """Every line of the file was held twice (with and without its ending): a 16 MB log of
    short lines took 786 MB to parse, and a log of blank lines 6 s. Now only the frontmatter
    and one entry at a time are split into lines."""
    import tracemalloc

    text = HEAD + entry(1) + "ab\n" * 1_000_000 + entry(2) + "\n" * 1_000_000
    tracemalloc.start()
    try:
        log = parse_log(text, PATH)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [e.id for e in log.entries] == ["ep_20261012_0001", "ep_20261012_0002"]
    assert log.entries[1].line == len((HEAD + entry(1)).splitlines()) + 1_000_000 + 1
    assert peak < len(text) // 4, f"{peak:,} bytes to parse {len(text):,}"


@pytest.mark.parametrize("line", [
    "<!-- entry:" + " " * 200_000 + "x",  # an opening marker that never closes
    "<!-- /entry:" + "\t " * 100_000 + "-- >",
    "<!--" + " " * 200_000 + "entry: a b",
])
def test_a_marker_line_of_many_blanks_is_read_in_linear_time(line: str) -> None:
    """The blanks before and after an empty id could split a run of spaces every way, and the
    marker pattern tried each split: 200,000 spaces took ~25 s, a 16 MB line days."""
    import time

    from everos_reflect.markdown.parser import duplicate_ids

    text = HEAD + entry(1) + line + "\n" + entry(2) + line
    started = time.perf_counter()
    log = parse_log(text, PATH)
    dups = duplicate_ids(text)
    seconds = time.perf_counter() - started
    assert [e.id for e in log.entries] == ["ep_20261012_0001", "ep_20261012_0002"]
    assert dups == {}
    assert seconds < 3.0, f"{seconds:.1f} s"


def test_archiving_into_a_deprecated_entries_line_of_many_blanks_takes_linear_time() -> None:
    """The writer's key-line pattern tried the end of the line after every character of its
    value: a flow mapping and a comment 100,000 spaces away took ~45 s to archive into."""
    import time

    key = ("deprecated_entries: {ep_20261012_0001: ep_20261012_0002}" + " " * 100_000
           + "# kept\n")
    text = HEAD.replace("date: '2026-10-12'\n", "date: '2026-10-12'\n" + key) + entry(3)
    assert parse_log(text, PATH).ok
    started = time.perf_counter()
    archived = writer.add_deprecations(text, {"ep_20261012_0003": "ep_20261012_0004"})
    seconds = time.perf_counter() - started
    assert parse_log(archived, PATH).deprecated_entries == {
        "ep_20261012_0001": "ep_20261012_0002", "ep_20261012_0003": "ep_20261012_0004"}
    assert seconds < 3.0, f"{seconds:.1f} s"


@pytest.mark.parametrize(("key", "patched"), [
    ('"deprecated_entries": {}\n',
     '"deprecated_entries":\n  ep_20261012_0002: ep_20261012_0009\n'),
    ("'deprecated_entries':\n  ep_20261012_0001: ep_20261012_0009\n",
     "'deprecated_entries':\n  ep_20261012_0001: ep_20261012_0009\n"
     "  ep_20261012_0002: ep_20261012_0009\n"),
])
def test_a_quoted_deprecated_entries_key_is_archived_into_as_written(
    key: str, patched: str
) -> None:
    """The writer looked for the key unquoted only: it added a second `deprecated_entries`
    (which then hid the first) or refused with "could not patch ... without side effects"."""
    text = HEAD[:-4] + key + "---\n" + entry(1) + entry(2)
    out = writer.add_deprecations(text, {"ep_20261012_0002": "ep_20261012_0009"})
    assert out == text.replace(key, patched)
    # an undo that empties a mapping with no note in it takes the key away
    assert writer.remove_deprecations(out, ["ep_20261012_0002"]) == (
        text if "0001" in key else text.replace(key, ""))


def test_a_deprecated_entries_key_the_writer_cannot_locate_is_never_written_twice() -> None:
    text = HEAD[:-4] + "? deprecated_entries\n: {}\n---\n" + entry(1) + entry(2)
    with pytest.raises(MarkdownError, match="cannot locate deprecated_entries"):
        writer.add_deprecations(text, {"ep_20261012_0002": "ep_20261012_0009"})


def test_archiving_into_a_log_of_many_lines_splits_only_its_frontmatter() -> None:
    """The archive and undo writers split the whole log into lines, twice (the patch, then its
    check): ~50x the log's size for one of short lines."""
    import tracemalloc

    text = HEAD + entry(1) + "ab\n" * 1_000_000 + entry(2)
    tracemalloc.start()
    try:
        patched = writer.add_deprecations(text, {"ep_20261012_0001": "ep_20261012_0002"})
        restored = writer.remove_deprecations(patched, ["ep_20261012_0001"])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert restored == text
    assert patched == text.replace(
        "---\n<!--", "deprecated_entries:\n  ep_20261012_0001: ep_20261012_0002\n---\n<!--", 1)
    assert peak < 5 * len(text), f"{peak:,} bytes to patch {len(text):,}"


@pytest.mark.parametrize(("written", "read_as"), [
    ("123", "a number: 123"), ("true", "a boolean: true"),
    ("2026-10-12", "a date: 2026-10-12"),
])
def test_a_bare_session_id_that_yaml_reads_as_no_text_is_a_warning(
    written: str, read_as: str
) -> None:
    # `session_id: 0123` came back from search as "83", `yes` as "True", and lint said
    # nothing: the value shown is not the one a person wrote. Quoted, it is read as written.
    meta = "owner_id: u_andrew\ntimestamp: 2026-10-11T02:00:00+00:00\nparent_type: memcell\n"
    log = parse_log(HEAD + entry(1, meta=f"{meta}session_id: {written}\n"), PATH)
    [_] = log.entries  # still read and indexed
    assert [(d.severity, d.message) for d in log.diagnostics] == [
        ("warning", f"entry ep_20261012_0001: session_id is read as {read_as}, not as the "
                    "text written: put it in quotes")]
    quoted = parse_log(HEAD + entry(1, meta=f"{meta}session_id: '{written}'\n"), PATH)
    assert quoted.diagnostics == [] and quoted.entries[0].session_id == written


@pytest.mark.parametrize("written", ["0123", "1:20", "yes", "0x1f"])
def test_a_bare_session_id_yaml_1_1_reads_as_a_number_or_bool_is_read_as_written(
    written: str,
) -> None:
    # `session_id: 0123` was 83 (octal), `1:20` 80, `yes` True
    meta = "owner_id: u_andrew\ntimestamp: 2026-10-11T02:00:00+00:00\nparent_type: memcell\n"
    log = parse_log(HEAD + entry(1, meta=f"{meta}session_id: {written}\n"), PATH)
    assert log.diagnostics == [] and log.entries[0].session_id == written


@pytest.mark.parametrize(("key", "written", "yaml_type"), [
    ("session_id", "[a, b]", "list"), ("session_id", "{x: 1}", "mapping"),
    ("parent_id", "[ep_1]", "list"), ("session_id", "!!binary aGk=", "binary"),
])
def test_a_list_or_mapping_where_one_text_value_goes_is_ignored_and_named(
    key: str, written: str, yaml_type: str
) -> None:
    # `session_id: [a, b]` came back from search as "['a', 'b']", Python's repr of the list,
    # as if a person had written that text; it is no session id at all.
    meta = "owner_id: u_andrew\ntimestamp: 2026-10-11T02:00:00+00:00\nparent_type: memcell\n"
    log = parse_log(HEAD + entry(1, meta=f"{meta}{key}: {written}\n"), PATH)
    [read] = log.entries  # still read and indexed
    assert getattr(read, key) is None
    assert [(d.severity, d.message) for d in log.diagnostics] == [
        ("warning", f"entry ep_20261012_0001: {key} is a YAML {yaml_type}, not one value: it "
                    "is ignored (shown and indexed as none)")]


@pytest.mark.parametrize(("written", "what"), [
    ("{x: 1}", "a YAML mapping"), ("[tk_1, {x: 1}]", "a list holding a YAML mapping"),
])
def test_a_derived_record_whose_evidence_is_no_list_of_ids_is_named(
    written: str, what: str
) -> None:
    text = ("---\ntype: lesson_daily\nschema_version: 1\nuser_id: u_andrew\n"
            "date: '2026-10-12'\n---\n<!-- entry:ls_20261012_0001 -->\n---\n"
            "owner_id: u_andrew\ntimestamp: 2026-10-12T02:00:00+00:00\n"
            f"evidence: {written}\ntask_type: deploy\n---\n## Lesson\nCheck the logs.\n"
            "<!-- /entry:ls_20261012_0001 -->\n")
    log = parse_log(text, "lesson-2026-10-12.md")
    [read] = log.entries
    assert [(d.severity, d.message) for d in log.diagnostics] == [
        ("warning", f"entry ls_20261012_0001: evidence is {what}, not a list of ids "
                    "(write [id, ...])")]
    assert read_lesson(read).evidence == (("tk_1",) if "tk_1" in written else ())


def _unmarked(n: int) -> str:
    """An entry as pasted without its opening and closing markers."""
    return "\n".join(entry(n).splitlines()[1:-1]) + "\n"


@pytest.mark.parametrize(("where", "text", "line"), [
    # between two entries, at the end, right after the frontmatter; CRLF alike
    ("between", HEAD + entry(1) + "\n" + _unmarked(2) + "\n" + entry(3), 21),
    ("end", HEAD + entry(1) + _unmarked(2), 20),
    ("start", HEAD + _unmarked(2) + entry(1), 8),
    ("crlf", (HEAD + entry(1) + _unmarked(2)).replace("\n", "\r\n"), 20),
    ("heading only", HEAD + entry(1) + "\n## Content\nwritten under no entry\n", 20),
])
def test_an_entry_without_its_markers_is_named_not_passed_over(
        where: str, text: str, line: int) -> None:
    # Notes between entries are welcome and said nothing of; an entry pasted without its
    # markers was not read (not indexed, not searchable) and lint said "0 errors".
    log = parse_log(text, PATH)
    assert "ep_20261012_0002" not in {e.id for e in log.entries}
    [warning] = log.diagnostics
    assert (warning.line, warning.severity) == (line, "warning"), where
    assert "outside any entry: it is not read" in warning.message
    assert "<!-- entry:ID -->" in warning.message


@pytest.mark.parametrize("crlf", [False, True])
def test_an_entry_whose_opening_marker_was_deleted_is_named_and_kept(crlf: bool) -> None:
    # Only "closing marker ... without an opening one" was said: not that the entry's text
    # is not read, and the entry was taken as deleted (its deletion published).
    text = (HEAD + entry(1) + entry(2) + entry(3)).replace(OPEN_2 + "\n", "", 1)
    log = parse_log(text.replace("\n", "\r\n") if crlf else text, PATH)
    assert [e.id for e in log.entries] == ["ep_20261012_0001", "ep_20261012_0003"]
    assert log.unreadable == {"ep_20261012_0002"}  # still in the file: never taken as deleted
    outside, stray = log.diagnostics
    assert (outside.line, outside.severity) == (20, "warning")
    assert "'owner_id:' outside any entry: it is not read" in outside.message
    assert (stray.line, stray.severity) == (29, "warning")
    assert "closing marker of 'ep_20261012_0002' without an opening one" in stray.message


@pytest.mark.parametrize("typo", ["ep_20261012_002", "ep_20261012_0002\u200b"])
def test_a_typo_in_an_opening_marker_id_keeps_the_entry_it_names(typo: str) -> None:
    # A digit lost, an invisible character pasted: the closing marker still names the entry,
    # which was taken as deleted (its deletion published), as if its text had gone.
    text = (HEAD + entry(1) + entry(2) + entry(3)).replace(OPEN_2, f"<!-- entry:{typo} -->", 1)
    log = parse_log(text, PATH)
    assert [e.id for e in log.entries] == ["ep_20261012_0001", "ep_20261012_0003"]
    assert log.unreadable == {typo, "ep_20261012_0002"}
    [error] = [d for d in log.diagnostics if "closing marker names" in d.message]
    assert error.line == 30


@pytest.mark.parametrize(("old", "new", "shown"), [
    ("date: '2026-10-12'", "date: \u20182026-10-12\u2019",  # smart quotes
     "unreadable date '‘2026-10-12’' (read as 2026-10-12, as the file name says)"),
    ("type: episode_daily", "type: diary",
     "unknown file type 'diary' (read as episode_daily, as the file name says)"),
])
def test_a_typo_in_the_frontmatter_type_or_date_is_a_warning_where_the_name_says_it(
        old: str, new: str, shown: str) -> None:
    # It was fatal: the day's entries left the index for a typo in one line the file name
    # overrides anyway (a valid but different value was a warning already).
    log = parse_log((HEAD + entry(1)).replace(old, new, 1), PATH)
    assert [(d.severity, d.message) for d in log.diagnostics] == [("warning", shown)]
    assert [e.id for e in log.entries] == ["ep_20261012_0001"]
    assert (log.kind, log.day) == (Kind.EPISODE, date(2026, 10, 12))


@pytest.mark.parametrize(("old", "new", "shown"), [
    ("date: '2026-10-12'", "date: '2026-10-33'", "unreadable date '2026-10-33'"),
    ("type: episode_daily", "type: diary", "unknown file type 'diary'"),
])
def test_a_typo_in_the_frontmatter_is_fatal_where_the_name_does_not_say_it(
        old: str, new: str, shown: str) -> None:
    log = parse_log((HEAD + entry(1)).replace(old, new, 1), "u/episodes/notes.md")
    assert not log.ok and log.entries == []
    assert ("fatal", shown) in [(d.severity, d.message) for d in log.diagnostics]


@pytest.mark.parametrize(("old", "new", "line", "message"), [
    ("date: '2026-10-12'", "date: \u20182026-10-12\u2019", 5, "unreadable date"),  # smart quotes
    ("date: '2026-10-12'", "date: '2026-10-13'", 5, "does not match the file name"),
    ("type: episode_daily", "type: diary", 2, "unknown file type"),
    ("type: episode_daily", "type: atomic_fact_daily", 2, "does not match the file name"),
])
def test_a_frontmatter_field_problem_points_at_its_line(
        old: str, new: str, line: int, message: str) -> None:
    # They said line 1 (the opening ---), wherever the field was.
    log = parse_log((HEAD + entry(1)).replace(old, new, 1), PATH)
    [problem] = [d for d in log.diagnostics if message in d.message]
    assert problem.line == line


def test_a_leftover_closing_marker_alone_is_no_entry_kept() -> None:
    # The entry deleted for real, its closing marker left behind: deleted, not kept.
    text = HEAD + entry(1) + CLOSE_2 + "\n" + entry(3)
    log = parse_log(text, PATH)
    assert log.unreadable == set()
    [stray] = log.diagnostics
    assert "without an opening one" in stray.message


def test_a_hand_note_naming_no_entry_part_is_still_no_problem() -> None:
    notes = ("owner notes: ask Andrew about owner_id: later\n"
             "## Subjects to raise\n### Content ideas\n---\n")
    log = parse_log(HEAD + notes + entry(1) + notes + entry(2) + notes, PATH)
    assert log.diagnostics == [] and len(log.entries) == 2


def _indent(text: str, marker: str, indent: str = "\t") -> str:
    return text.replace(marker, indent + marker, 1)


OPEN_2, CLOSE_2 = "<!-- entry:ep_20261012_0002 -->", "<!-- /entry:ep_20261012_0002 -->"


@pytest.mark.parametrize(("written", "crlf"), [
    ("<!-- ENTRY:ep_20261012_0002 -->", False),
    ("<!--\u00a0entry:ep_20261012_0002 -->", False),  # a no-break space
    ("<!-- entry:ep_20261012_0002 --> Andrew's dogs", False),
    ("<!-- entry:ep_20261012_0002 --->", False),
    ("<!--entry:ep_20261012_0002--> x", True),
])
def test_a_misshapen_opening_marker_is_an_error_at_its_line(written: str, crlf: bool) -> None:
    # Only the closing marker was named ("without an opening one", ten lines further): the
    # line that looks like a marker, and is none, was never pointed at.
    text = (HEAD + entry(1) + entry(2) + entry(3)).replace(OPEN_2, written, 1)
    log = parse_log(text.replace("\n", "\r\n") if crlf else text, PATH)
    assert [e.id for e in log.entries] == ["ep_20261012_0001", "ep_20261012_0003"]
    assert log.unreadable == {"ep_20261012_0002"}  # still in the file: never taken as deleted
    [error] = log.diagnostics
    assert (error.line, error.severity) == (19, "error")
    assert error.message.startswith(
        "opening marker of 'ep_20261012_0002' is not written as <!-- entry:ep_20261012_0002 "
        "--> alone on its line: the entry is not read")


def test_a_note_in_an_html_comment_naming_no_entry_id_is_no_marker() -> None:
    notes = "<!-- entry: todo, merge the two below -->\n<!-- Entry list follows -->\n"
    log = parse_log(HEAD + entry(1) + notes + entry(2) + notes, PATH)
    assert log.diagnostics == [] and len(log.entries) == 2


def test_a_closing_marker_still_being_written_is_no_misshapen_one() -> None:
    text = HEAD + entry(1) + entry(2)
    for cut in ("<!-- /entry:ep_20261012_00", "<!-- /entry:ep_20261012_0002 -"):
        log = parse_log(text[: text.rindex(cut) + len(cut)], PATH)
        assert [d.message for d in log.diagnostics] == [
            "entry 'ep_20261012_0002' is not closed by <!-- /entry:ep_20261012_0002 -->"]


def test_both_markers_misshapen_are_both_named() -> None:
    text = (HEAD + entry(1) + entry(2)).replace(OPEN_2, OPEN_2.upper(), 1).replace(
        CLOSE_2, CLOSE_2.replace("entry", "Entry"), 1)
    log = parse_log(text, PATH)
    assert [(d.line, d.severity, d.message.split(" is ")[0]) for d in log.diagnostics] == [
        (19, "error", "opening marker of 'EP_20261012_0002'"),
        (30, "error", "closing marker of 'ep_20261012_0002'")]


@pytest.mark.parametrize(("where", "text", "lines"), [
    # between two entries, at the end, right after the frontmatter; spaces, CRLF alike
    ("opening", _indent(HEAD + entry(1) + entry(2) + entry(3), OPEN_2), [19]),
    ("spaces", _indent(HEAD + entry(1) + entry(2) + entry(3), OPEN_2, "  "), [19]),
    ("first", _indent(HEAD + entry(2) + entry(1), OPEN_2), [7]),
    ("closing", _indent(HEAD + entry(1) + entry(2) + entry(3), CLOSE_2), [30]),
    ("closing at the end", _indent(HEAD + entry(1) + entry(2), CLOSE_2), [30]),
    ("both", _indent(_indent(HEAD + entry(1) + entry(2) + entry(3), OPEN_2), CLOSE_2),
     [19, 30]),
    ("crlf", _indent(HEAD + entry(1) + entry(2), OPEN_2).replace("\n", "\r\n"), [19]),
])
def test_an_indented_entry_marker_is_an_error_naming_the_fix(
        where: str, text: str, lines: list[int]) -> None:
    # "\t<!-- entry:ID -->" is no marker: the whole entry was skipped (not indexed, not
    # searchable, not merged) and lint only warned of a closing marker without an opening one.
    log = parse_log(text, PATH)
    assert "ep_20261012_0002" not in {e.id for e in log.entries}
    assert "ep_20261012_0002" in log.unreadable  # still in the file: never taken as deleted
    assert [(d.line, d.severity) for d in log.diagnostics] == [(n, "error") for n in lines], where
    for d in log.diagnostics:
        assert "marker of 'ep_20261012_0002' is indented: the entry is not read" in d.message
        assert d.message.endswith("remove the indentation before the marker)")
    assert {e.id for e in log.entries} <= {"ep_20261012_0001", "ep_20261012_0003"}
    assert "ep_20261012_0001" in {e.id for e in log.entries}


def test_an_indented_marker_line_inside_an_entry_is_its_text() -> None:
    # the writer does not escape an indented line of a section body: it stays text, unflagged
    body = f"## Subject\ns\n\n## Content\nquoted:\n  {OPEN_2}\n\t{CLOSE_2}\n"
    log = parse_log(HEAD + entry(1, body=body) + entry(3), PATH)
    assert log.diagnostics == []
    assert log.entries[0].content == f"quoted:\n  {OPEN_2}\n\t{CLOSE_2}"


def test_a_main_section_left_empty_is_named_empty_not_missing() -> None:
    # `## Lesson` written with nothing under it was "no '## Lesson' section"
    text = ("---\ntype: lesson_daily\nschema_version: 1\nuser_id: u\ndate: '2026-10-20'\n"
            "---\n<!-- entry:ls_20261020_0001 -->\n---\nowner_id: u\n"
            "timestamp: 2026-10-20T09:00:00Z\ntask_type: deploy\n---\n## Lesson\n\n"
            "<!-- /entry:ls_20261020_0001 -->\n")
    log = parse_log(text, "u/.lessons/lesson-2026-10-20.md")
    assert [(d.severity, d.message) for d in log.diagnostics] == [
        ("warning", "entry ls_20261020_0001: '## Lesson' section is empty (nothing to index)")]


@pytest.mark.parametrize(("written", "said"), [
    ("## content", "no '## Content' section (nothing to index; '## content' is not read as "
                   "it: write '## Content')"),
    ("## SUBJECT", "no '## Subject' section; '## SUBJECT' is not read as it: write "
                   "'## Subject'"),
])
def test_a_section_named_in_another_case_is_named_in_the_warning(written: str,
                                                                  said: str) -> None:
    """``## content`` is a section of its own: the entry's text was not indexed, and the
    warning said only that there was no ``## Content``."""
    name = written.split(" ", 1)[1].capitalize()
    text = SPEC_EXAMPLE.replace(f"## {name}\n", f"{written}\n", 1)
    assert written in text
    log = parse_log(text, PATH)
    assert any(said in d.message for d in log.diagnostics), [d.message for d in log.diagnostics]
