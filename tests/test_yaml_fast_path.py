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
    for text in ("a: yes", "a: 1", "a: [x, null]", "a:\n  b: c", "a: b # c", "yes: x",
                 "a: 2024-01-01", "a: *x", "a: 'x\x00'"):
        assert _flat_mapping(text) is None, text
