"""Id validation (SPEC §2): unsafe app/project/user ids never reach the filesystem."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from everos_reflect.errors import InvalidId
from everos_reflect.markdown.parser import parse_entry_id
from everos_reflect.markdown.store import MarkdownStore
from everos_reflect.model import EntryId, Kind, UserRef, validate_name

REJECTED = [
    "../x",
    "a/b",
    "a\\b",
    "",
    ".",
    "..",
    ".hidden",
    "-dash-first",
    "_under_first",
    "tab\there",
    "new\nline",
    "nul\x00",
    "bell\x07",
    "del\x7f",
    "space here",
    "u_\u0430ndrew",  # Cyrillic 'а' looking like Latin 'a'
    "\uff55_andrew",  # fullwidth 'ｕ'
    "u_andrew\u200b",  # zero-width space
    "e\u0301",  # combining accent
    "x" * 129,
]

ACCEPTED = ["u_andrew", "U1", "7", "a.b-c_d", "default_app", "x" * 128, "0.", "a..b"]


@pytest.mark.parametrize("value", REJECTED, ids=[repr(v)[:20] for v in REJECTED])
def test_unsafe_names_are_rejected_with_a_clear_message(value: str) -> None:
    with pytest.raises(InvalidId, match="invalid user_id") as info:
        validate_name(value)
    assert "\n" not in str(info.value)  # one printable line even for control characters


def test_a_long_bad_value_is_quoted_short_and_a_short_one_whole() -> None:
    """Messages echoed the whole value; a long one is cut to 60 characters (whole escapes
    only) with its length, a short one is quoted as before."""
    with pytest.raises(InvalidId) as info:
        validate_name("bad id")
    assert str(info.value).startswith("invalid user_id 'bad id': use 1-128 characters")
    with pytest.raises(InvalidId) as info:
        validate_name("\x1b" * 100, "app_id")
    assert str(info.value).startswith(
        "invalid app_id '" + "\\x1b" * 15 + "…' (100 characters): use 1-128")
    with pytest.raises(InvalidId) as info:
        EntryId.parse("ep_" + "1" * 400)
    assert str(info.value) == ("invalid entry id '" + "ep_" + "1" * 57
                               + "…' (403 characters): expected e.g. ep_20261012_0001")


@pytest.mark.parametrize(("value", "shown"), [
    ("a\x01b", "'a\\x01b'"), ("\x1bx", "'\\x1bx'"), ("\u00fcber", "'\\xfcber'"),
    ("a\\b", "'a\\\\b'"), ("it's", '"it\'s"'),
])
def test_an_unsafe_name_is_named_with_its_escapes_written_once(value: str, shown: str) -> None:
    # Escaped, then repr()'d: each escape's backslash was escaped again, so ESC in a user id
    # was named '\\x1b' (CLI, API 422, MCP), as if its user had typed a backslash.
    with pytest.raises(InvalidId) as info:
        validate_name(value)
    assert str(info.value).startswith(f"invalid user_id {shown}: use 1-128")


@pytest.mark.parametrize("value", ACCEPTED)
def test_normal_names_are_accepted(value: str) -> None:
    assert validate_name(value) == value


@pytest.mark.parametrize("value", [None, 7, b"u"])
def test_non_strings_are_rejected(value: object) -> None:
    with pytest.raises(InvalidId, match="must be a string"):
        validate_name(value)


@pytest.mark.parametrize("field", ["app", "project", "user_id"])
def test_user_ref_validates_every_part_before_a_path_is_built(field: str, root: Path) -> None:
    parts = {"app": "a", "project": "p", "user_id": "u"}
    parts[field] = "../escape"
    with pytest.raises(InvalidId, match="escape"):
        UserRef(**parts)
    store = MarkdownStore(root)
    forged = object.__new__(UserRef)  # bypasses __post_init__, as a bug elsewhere might
    for name, value in {"app": "a", "project": "p", "user_id": "u", **{field: ".."}}.items():
        object.__setattr__(forged, name, value)
    with pytest.raises(InvalidId):
        store.user_dir(forged)
    assert [p.name for p in root.iterdir()] == [".index"]  # nothing written


def test_user_ref_of_fills_the_default_tenant() -> None:
    assert str(UserRef.of("u1")) == "default_app/default_project/u1"
    assert str(UserRef.of("u1", "acme", "bot")) == "acme/bot/u1"


def test_entry_ids_name_their_kind_day_and_sequence() -> None:
    eid = EntryId.parse("af_20261012_0042")
    assert (eid.kind, eid.day, eid.seq) == (Kind.ATOMIC_FACT, date(2026, 10, 12), 42)
    assert str(eid) == "af_20261012_0042"
    assert str(EntryId(Kind.EPISODE, date(2026, 1, 2), 12345)) == "ep_20260102_12345"


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "ep_2026101_0001",
        "ep_20261012_001",
        "xx_20261012_0001",
        "ep_20261332_0001",
        "ep_20261012_0001/../x",
        "../ep_20261012_0001",
        "ep_20261012_０００１",
        "ep_20261012_00001",
    ],
)
def test_bad_entry_ids_are_rejected_before_a_path_is_built(bad: str, root: Path) -> None:
    with pytest.raises(InvalidId):
        parse_entry_id(bad)
    with pytest.raises(InvalidId):
        MarkdownStore(root).path_for_id(UserRef.of("u1"), bad)


def test_new_episode_is_shaped_once_for_every_edge() -> None:
    from datetime import UTC, datetime

    from everos_reflect.errors import InvalidEpisode
    from everos_reflect.model import UserRef, new_episode

    ref = UserRef.of("u_1")
    ep = new_episode(ref, subject=" Dog ", content="Adopted Toby.",
                     timestamp="2026-10-12T01:30:00+02:00", session_id="s_1", importance=7)
    assert ep.day.isoformat() == "2026-10-11"  # the file day is the UTC date
    assert ep.meta == {"owner_id": "u_1", "timestamp": "2026-10-12T01:30:00+02:00",
                       "session_id": "s_1", "parent_type": "memcell", "parent_id": "s_1",
                       "importance": 7}
    assert ep.sections == {"Subject": "Dog", "Content": "Adopted Toby."}
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert new_episode(ref, subject="s", content="c", now=now).meta["parent_id"].startswith("mc_")
    for kwargs, field in [({"subject": "a\nb"}, "subject"), ({"content": "  "}, "content"),
                          ({"timestamp": "yesterday"}, "timestamp"),
                          ({"importance": 11}, "importance"), ({"importance": True}, "importance")]:
        args = {"subject": "s", "content": "c", **kwargs}
        with pytest.raises(InvalidEpisode) as info:
            new_episode(ref, **args)
        assert info.value.field == field


# --- sequence numbers: bounded ---------------------------------------------------------------

HUGE = "ep_20261012_" + "9" * 5000  # past the 4,300 digits int() accepts


def test_an_id_with_thousands_of_sequence_digits_is_an_invalid_id() -> None:
    # It passed the id pattern, then int() raised a bare ValueError ("Exceeds the limit (4300
    # digits)") wherever the id was parsed.
    with pytest.raises(InvalidId, match="invalid entry id"):
        EntryId.parse(HUGE)
    assert EntryId.parse("ep_20261012_" + "9" * 18).seq == 10**18 - 1
    with pytest.raises(InvalidId):
        EntryId.parse("ep_20261012_" + "9" * 19)


def test_a_hand_written_huge_id_breaks_only_its_entry_and_appends_still_work(
        tmp_path: Path) -> None:
    # The whole file was "internal parser error" (every entry of it unread) and an append to it
    # raised ValueError.
    from everos_reflect.markdown.parser import parse_log
    from everos_reflect.markdown.writer import new_log_text, render_entry

    ann = UserRef.of("u_ann")
    day = date(2026, 10, 12)
    meta = {"owner_id": "u_ann", "timestamp": "2026-10-12T09:00:00+00:00",
            "parent_type": "memcell"}
    good = render_entry("ep_20261012_0001", meta, {"Subject": "ok", "Content": "kept"})
    bad = render_entry("ep_20261012_0002", meta, {"Subject": "x", "Content": "y"}).replace(
        "ep_20261012_0002", HUGE)
    store = MarkdownStore(tmp_path)
    path = store.log_path(ann, Kind.EPISODE, day)
    path.parent.mkdir(parents=True)
    text = new_log_text(Kind.EPISODE, "u_ann", day) + good + bad
    path.write_text(text, encoding="utf-8")

    log = parse_log(text, "episode-2026-10-12.md")
    assert [e.id for e in log.entries] == ["ep_20261012_0001"]
    assert not [d for d in log.diagnostics if d.severity == "fatal"]
    assert any("invalid entry id" in d.message for d in log.diagnostics)

    made = store.append(ann, Kind.EPISODE, meta, {"Subject": "new", "Content": "more"}, day=day)
    assert made.id == "ep_20261012_0002"
    assert path.read_text(encoding="utf-8").startswith(text)
