"""The flat-metadata fast path reads exactly what PyYAML reads, or steps aside."""

from __future__ import annotations

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from everos_reflect.markdown.parser import _flat_mapping, load_yaml

TRICKY = ["yes", "No", "on", "OFF", "null", "~", "1", "0x1f", "1:20", ".inf", "2024-01-01",
          "a b", "a: b", "a #b", "-x", "'q'", "[a]", "{a: 1}", "y", "NULL", "True", "&a", "*a",
          "!tag", "%x", "@x", "`x", "a,b", "x'y", "", " ", "\t", "é", "\x00", "\x85", "a\\b"]
scalar = st.one_of(st.sampled_from(TRICKY), st.text(max_size=12),
                   st.from_regex(r"[A-Za-z_][A-Za-z0-9_./@+-]{0,10}", fullmatch=True))


def _render(key: str, value: str, style: int) -> str:
    if style == 0:
        return f"{key}: {value}"
    if style == 1:
        return f"{key}: '" + value.replace("'", "''") + "'"
    return f"{key}: [{value}, {value}]"


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.sampled_from(["owner_id", "yes", "null", "a b", "k"]),
                                    st.text(max_size=8)), scalar, st.integers(0, 2)),
                min_size=1, max_size=5))
def test_fast_path_agrees_with_pyyaml_or_declines(lines):
    text = "\n".join(_render(k, v, style) for k, v, style in lines)
    fast = _flat_mapping(text)
    if fast is None:
        return
    assert fast == yaml.safe_load(text)


def test_writer_shaped_metadata_takes_the_fast_path():
    text = ("owner_id: u_andrew\ntimestamp: '2026-08-03T10:00:00+00:00'\nparent_type: memcell\n"
            "sources: [ep_20260803_0001, ep_20260804_0002]\nnote: 'it''s'")
    assert _flat_mapping(text) == yaml.safe_load(text)
    assert load_yaml(text, 1) == (yaml.safe_load(text), None)


def test_anything_unusual_is_left_to_pyyaml():
    for text in ("a: yes", "a: 01", "a: 1.5", "a: 1_000", "a: -1", "a: [x, null]",
                 "a:\n  b: c", "a: b # c", "yes: x",
                 "a: 2024-01-01", "a: *x", "a: 'x\x00'", "a: 2024-01-01 10:00:00",
                 "a: 2024-01-01T10:00:00", "a: 2024-01-01T10:00:00.1234567Z",
                 "a: 2024-13-01T10:00:00Z", "a: 2024-01-01T10:00:00+24:00", "a: ['x', 1]",
                 "a: ['x'\n  , y]", "a: 1\r\n"):
        assert _flat_mapping(text) is None, text


STAMPS = st.builds(
    lambda y, mo, d, h, mi, s, frac, tz: f"{y:04d}-{mo:02d}-{d:02d}T{h:02d}:{mi:02d}:{s:02d}"
    + frac + tz,
    st.integers(0, 9999), st.integers(0, 13), st.integers(0, 32), st.integers(0, 25),
    st.integers(0, 61), st.integers(0, 61),
    st.sampled_from(["", ".5", ".123456", ".000001", ".1234567"]),
    st.sampled_from(["Z", "+00:00", "-05:30", "+23:59", "+24:00", "-00:00", "", "z"]))
ITEMS = st.one_of(scalar.map(lambda v: "'" + v.replace("'", "''") + "'"),
                  st.from_regex(r"[A-Za-z_][A-Za-z0-9_./@+-]{0,6}", fullmatch=True),
                  st.sampled_from(["yes", "null", "'a, b'", "'[x]'", "'it''s'", "1"]))


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(
    STAMPS.map(lambda v: f"timestamp: {v}"),
    st.lists(ITEMS, max_size=4).map(lambda items: "ids: [" + ", ".join(items) + "]"),
    st.from_regex(r"num: [0-9]{1,20}", fullmatch=True),
    st.builds(lambda k, v, style: _render(k, v, style), st.sampled_from(["owner_id", "k"]),
              scalar, st.integers(0, 2))), min_size=1, max_size=5),
    st.booleans())
def test_timestamps_quoted_lists_and_integers_agree_with_pyyaml_or_decline(lines, final_nl):
    text = "\n".join(lines) + ("\n" if final_nl else "")
    fast = _flat_mapping(text)
    if fast is None:
        return
    assert repr(fast) == repr(yaml.safe_load(text))


def test_what_the_writer_emits_takes_the_fast_path():
    """Entry metadata as MarkdownStore writes it (an unquoted timestamp with its offset, a list
    of quoted ids) and a new log's frontmatter (an integer schema version, a quoted date)."""
    meta = ("owner_id: conv-42-Nate\ntimestamp: 2022-03-18T18:59:00+00:00\n"
            "parent_type: memcell\ndia_ids: ['D5:2', 'D5:4', 'it''s, here']\n"
            "sources: [ep_20260803_0001]")
    frontmatter = "type: episode_daily\nschema_version: 1\nuser_id: u_a\ndate: '2026-08-03'\n"
    for text, block in ((meta, "metadata"), (frontmatter, "frontmatter")):
        fast = _flat_mapping(text)
        assert fast is not None and repr(fast) == repr(yaml.safe_load(text))
        assert load_yaml(text, 1, block) == (yaml.safe_load(text), None)
