"""``<<`` in metadata is a key of its own, as in YAML 1.2 (the parser reads integers and
booleans as YAML 1.2 does). As a YAML 1.1 merge it copied its mapping's keys into the entry
without a word and silently dropped those the entry already had, past the check for a key
written twice."""

from __future__ import annotations

from everos_reflect.markdown.parser import parse_log

HEAD = "---\ntype: episode_daily\nschema_version: 1\nuser_id: u\ndate: '2026-10-12'\n---\n"
PATH = "u/episodes/episode-2026-10-12.md"
WARNING = ("entry ep_20261012_0001: '<<' is read as a key of its own, not as a YAML merge (kept "
           "as written; write the keys it holds in the metadata itself)")


def entry(meta: str) -> str:
    return ("<!-- entry:ep_20261012_0001 -->\n---\nowner_id: u\n"
            f"timestamp: 2026-10-12T09:00:00+00:00\nparent_type: memcell\n{meta}\n---\n"
            "## Subject\nDog\n\n## Content\nToby.\n<!-- /entry:ep_20261012_0001 -->\n")


def test_a_merge_key_copies_nothing_into_the_metadata_and_is_named() -> None:
    log = parse_log(HEAD + entry("<<: {session_id: s9, owner_id: other}"), PATH)
    (read,) = log.entries
    assert "session_id" not in read.meta and read.meta["owner_id"] == "u"
    assert read.meta["<<"] == {"session_id": "s9", "owner_id": "other"}
    assert [(d.line, d.severity, d.message) for d in log.diagnostics] == [
        (12, "warning", WARNING)]


def test_a_key_given_beside_a_merge_keeps_its_value_and_the_other_is_kept_too() -> None:
    (read,) = parse_log(HEAD + entry("session_id: s1\n<<: [{session_id: s9}]"), PATH).entries
    assert read.session_id == "s1" and read.meta["<<"] == [{"session_id": "s9"}]


def test_a_merge_in_the_frontmatter_changes_no_file_key() -> None:
    text = HEAD.replace("date:", "<<: {schema_version: 2, user_id: v}\ndate:") + entry("")
    log = parse_log(text, PATH)
    assert log.ok and [e.id for e in log.entries] == ["ep_20261012_0001"]
    assert (log.frontmatter["schema_version"], log.frontmatter["user_id"]) == (1, "u")


def test_the_value_key_is_a_key_too() -> None:
    (read,) = parse_log(HEAD + entry("=: x"), PATH).entries
    assert read.meta["="] == "x"
