"""Pure text edits of daily logs. Each changes only the bytes it must.

A person may have reordered keys, added comments or quoted values differently; re-dumping the
frontmatter would silently rewrite all of that. So appending adds bytes at the end, and a
``deprecated_entries`` patch inserts (or removes) only that mapping's lines inside the existing
frontmatter text. Every patch is verified by parsing the result; a patch that would change
anything else raises :class:`MarkdownError` instead of writing it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from datetime import date, datetime
from typing import Any

import yaml

from everos_reflect.errors import MarkdownError
from everos_reflect.markdown.parser import (
    HEADING_RE,
    SCHEMA_VERSION,
    UNDONE,
    bare,
    escape_body_line,
    frontmatter_bounds,
    header_text,
    load_yaml,
    newline_of,
    parse_entry_id,
    parse_log,
    split_lines,
)
from everos_reflect.model import (
    LINE_BREAKS_AS_NEWLINES,
    OTHER_LINE_BREAKS,
    DailyLog,
    Entry,
    Kind,
    format_timestamp,
    quoted_value,
)

DEPRECATED_KEY = "deprecated_entries"
#: The ``deprecated_entries`` key line (quoted or not); group ``value``: what follows it,
#: without its trailing blanks. Greedy up to the last non-blank, never ``(.*?)[ \t]*$``:
#: that tried the end of the line after every character, and a flow mapping then a comment
#: 40,000 spaces away took 7 s to archive into (quadratic; a 1 MB frontmatter line, hours).
_KEY_LINE_RE = re.compile(
    rf"^(['\"]?){DEPRECATED_KEY}\1[ \t]*+:[ \t]*+(?P<value>(?:.*[^ \t])?)[ \t]*$")
_CHILD_RE = re.compile(r"^([ \t]+)(['\"]?)([A-Za-z0-9_]+)\2[ \t]*:(?:[ \t].*)?$")


#: Only to locate a value's lines (:func:`_value_end`) in a frontmatter already read by
#: :func:`load_yaml`, so within its bounds.
_ComposeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Dumper(yaml.SafeDumper):
    """One-line YAML values: timestamps in the daemon's form, odd strings double-quoted."""


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    # Double quotes keep line breaks and control characters escaped on one line, so no value can
    # ever produce a line that reads as a '---' delimiter or an entry marker.
    odd = any(unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp", "Co", "Cn") for c in data)
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style='"' if odd else None)


def _represent_datetime(dumper: yaml.SafeDumper, data: datetime) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:timestamp", format_timestamp(data))


class GivenTime(datetime):
    """A timestamp a person or client gave (``add --timestamp``, the API's): written with its
    fraction of a second, where one the daemon read off its clock is written to the second."""

    @classmethod
    def of(cls, ts: datetime) -> GivenTime:
        return cls(ts.year, ts.month, ts.day, ts.hour, ts.minute, ts.second, ts.microsecond,
                   ts.tzinfo, fold=ts.fold)


def _represent_given(dumper: yaml.SafeDumper, data: GivenTime) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:timestamp",
                                   format_timestamp(data, fraction=True))


class _Block(dict):  # type: ignore[type-arg]
    """The top-level mapping: one ``key: value`` line per key (nested values stay in flow)."""


def _represent_block(dumper: yaml.SafeDumper, data: _Block) -> yaml.MappingNode:
    return dumper.represent_mapping("tag:yaml.org,2002:map", data, flow_style=False)


_Dumper.add_representer(str, _represent_str)
_Dumper.add_representer(datetime, _represent_datetime)
_Dumper.add_representer(GivenTime, _represent_given)
_Dumper.add_representer(_Block, _represent_block)


def _dump(mapping: Mapping[str, Any]) -> str:
    """YAML of a mapping, nested collections in flow style (``sources: [ep_1, ep_2]``)."""
    return yaml.dump(
        _Block(mapping),
        Dumper=_Dumper,
        default_flow_style=True,
        allow_unicode=True,
        sort_keys=False,
        width=float("inf"),
    )


def _dump_meta(values: Mapping[str, Any]) -> str:
    """:func:`_dump` of entry metadata, remembered for flat metadata of strings and datetimes:
    the facts of one merge carry the same metadata, and dumping YAML is most of rendering."""
    key = []
    for name, value in values.items():
        if type(value) is str:
            key.append((name, "s", value))
        elif type(value) is datetime:  # by its text: equal instants may carry other offsets
            key.append((name, "d", value.isoformat()))
        else:
            return _dump(values)
    frozen = tuple(key)
    text = _DUMPED.get(frozen)
    if text is None:
        if len(_DUMPED) >= _DUMPED_MAX:
            _DUMPED.clear()
        text = _DUMPED[frozen] = _dump(values)
    return text


def metadata_bytes(meta: Mapping[str, Any]) -> int:
    """The UTF-8 size of ``meta`` as :func:`render_entry` writes it (``None`` values left
    out): what the parser's cap on a metadata block (``MAX_YAML_BYTES``) measures, a byte on
    the safe side (its final line break)."""
    values = {k: v for k, v in meta.items() if v is not None}
    return len(_dump_meta(values).encode("utf-8")) if values else 0


#: Recent dumps of flat metadata (a few KB; cleared whole when full).
_DUMPED: dict[tuple[tuple[str, str, str], ...], str] = {}
_DUMPED_MAX = 256


def new_log_text(kind: Kind, user_id: str, day: date) -> str:
    """The frontmatter of a new, empty daily log (SPEC §3)."""
    return (
        "---\n"
        f"type: {kind.file_type}\n"
        f"schema_version: {SCHEMA_VERSION}\n"
        + _dump({"user_id": user_id})
        + f"date: '{day.isoformat()}'\n"
        "---\n"
    )


def render_entry(entry_id: str, meta: Mapping[str, Any], sections: Mapping[str, str]) -> str:
    """One entry block, from the opening marker to the closing marker's newline.

    ``None`` values are omitted; datetimes are written with ``format_timestamp``; section bodies
    are stripped, use ``\\n`` line breaks, and lines that would read as a heading or a marker are
    escaped with a backslash (the parser removes it). Every other line break ``str.splitlines``
    or YAML knows (U+2028, U+2029, U+0085, form feed, ...: ``model.OTHER_LINE_BREAKS``) is
    written as ``\\n`` (U+2029 as a blank line) before that: kept, a ``<!-- /entry:... -->``
    after a U+2028 in an Episode's content (``add``, the API, MCP, a model's narrative or fact)
    was one line to the parser and a closing marker of its own to an editor, ``splitlines``
    and YAML, never escaped.
    """
    parse_entry_id(entry_id)
    values = {}
    for key, value in meta.items():
        if not isinstance(key, str) or not key.strip() or key != key.strip():
            raise MarkdownError(f"entry {entry_id}", 0, f"invalid metadata key {quoted_value(key)}")
        if value is not None:
            values[key] = value
    parts = [f"<!-- entry:{entry_id} -->\n---\n", _dump_meta(values) if values else "", "---\n"]
    blocks = []
    for name, body in sections.items():
        heading = HEADING_RE.match(f"## {name}") if isinstance(name, str) else None
        if (heading is None or heading.group(1) != name
                or any(c in name for c in "\r\n" + OTHER_LINE_BREAKS)):
            raise MarkdownError(f"entry {entry_id}", 0,
                                f"invalid section name {quoted_value(name)}")
        text = (str(body).replace("\r\n", "\n").replace("\r", "\n")
                .translate(LINE_BREAKS_AS_NEWLINES).strip())
        lines = "".join(escape_body_line(line) + "\n" for line in text.split("\n")) if text else ""
        blocks.append(f"## {name}\n{lines}")
    parts.append("\n".join(blocks))
    parts.append(f"<!-- /entry:{entry_id} -->\n")
    return "".join(parts)


def append_entry(text: str, block: str) -> str:
    """``text`` with ``block`` added at the end, in the file's line-ending style.

    A file without a trailing newline gets one (in its own style) before the block: the only
    byte of the existing text that may be added to. A last line cut between CR and LF gets
    just the LF: a whole CRLF after its CR would end that line in CR CR LF, and the parser
    (which drops one CR) would no longer see the close marker on it.
    """
    nl = newline_of(text)
    if nl != "\n":
        block = block.replace("\n", nl)
    if text and not text.endswith("\n"):
        text += "\n" if text.endswith("\r") else nl
    return text + block


def append_entries(text: str, blocks: Iterable[str]) -> str:
    """:func:`append_entry` of every block in turn, in one copy of ``text``: appending them one
    by one copied the whole log per block, quadratic in a batch of thousands of entries."""
    joined = "".join(blocks)
    return append_entry(text, joined) if joined else text


def _frontmatter(text: str) -> tuple[list[str], int, int, dict[str, Any]]:
    """The lines of the frontmatter (the rest of the text as one last piece: splitting a
    16 MB log of short lines took ~50x its size), the indexes of its ``---`` lines, and its
    values."""
    head = header_text(text)
    lines = split_lines(head) + ([text[len(head) :]] if len(head) < len(text) else [])
    bounds = frontmatter_bounds(lines)
    if bounds is None:
        raise MarkdownError("<text>", 1, "no file frontmatter to patch")
    start, end = bounds
    data, problem = load_yaml("".join(lines[start + 1 : end]), start + 2, "frontmatter")
    if problem:
        raise MarkdownError("<text>", problem[0], f"file frontmatter: {problem[1]}")
    data = data or {}
    if not isinstance(data, dict):
        raise MarkdownError("<text>", 1, "file frontmatter is not a mapping")
    current = data.get(DEPRECATED_KEY) or {}
    if not isinstance(current, dict):
        raise MarkdownError("<text>", 1, f"{DEPRECATED_KEY} is not a mapping")
    return lines, start, end, data


def _key_span(lines: list[str], start: int, end: int) -> tuple[int, int] | None:
    """Line range of the ``deprecated_entries`` key and its indented children (and of the
    rest of a flow mapping that closes further down)."""
    for i in range(start + 1, end):
        if _KEY_LINE_RE.match(bare(lines[i])):
            last = i
            for j in range(i + 1, end):
                line = bare(lines[j])
                if line[:1] in (" ", "\t") and line.strip():
                    last = j
                elif line.strip():
                    break
            if any("{" in line or "[" in line for line in lines[i : last + 1]):
                last = max(last, _value_end(lines, start, end))
            return i, last + 1
    return None


def _value_end(lines: list[str], start: int, end: int) -> int:
    """Index of the last line of the ``deprecated_entries`` value, by YAML's own marks: a flow
    mapping may close on a line of its own (``}`` unindented), which the indentation rule of
    :func:`_key_span` leaves out. -1 when there is no such key."""
    loader = _ComposeLoader("".join(lines[start + 1 : end]))
    try:
        node = loader.get_single_node()
    finally:
        loader.dispose()
    for key, value in node.value if isinstance(node, yaml.MappingNode) else []:
        if isinstance(key, yaml.ScalarNode) and key.value == DEPRECATED_KEY:
            mark = value.end_mark
            return start + 1 + (mark.line if mark.column > 0 else mark.line - 1)
    return -1


def _block(mapping: Mapping[str, str], nl: str, indent: str = "  ") -> list[str]:
    return [f"{DEPRECATED_KEY}:{nl}"] + [f"{indent}{k}: {v}{nl}" for k, v in mapping.items()]


def _is_comment(line: str) -> bool:
    return bare(line).lstrip().startswith("#")


def _comment_start(text: str) -> int | None:
    """Index of the ``#`` that starts a YAML comment in one line of ``text`` (outside quotes,
    at the start or after a blank), or None."""
    quote, i = "", 0
    while i < len(text):
        c = text[i]
        if quote == "'":
            if c == "'" and text[i + 1 : i + 2] == "'":
                i += 1
            elif c == "'":
                quote = ""
        elif quote == '"':
            if c == "\\":
                i += 1
            elif c == '"':
                quote = ""
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or text[i - 1] in " \t"):
            return i
        i += 1
    return None


def _rewritten(lines: list[str], span: tuple[int, int], mapping: Mapping[Any, Any],
               nl: str) -> list[str]:
    """``deprecated_entries`` of ``span`` (flow style, null, or anything not one ``old: new``
    per line) written anew in block style, with the person's comments kept: the key line's
    own comment stays on it, every other comment gets a line of its own above the keys.
    Dropping them lost a note like ``deprecated_entries: {}  # merged by hand`` on the first
    archive into the file."""
    key_line = bare(lines[span[0]])
    value_at = key_line.index(":") + 1
    at = _comment_start(key_line[value_at:])
    trailing = ""
    if at is not None:
        start = value_at + at
        while start > value_at and key_line[start - 1] in " \t":
            start -= 1
        trailing = key_line[start:] if start > value_at else " " + key_line[value_at + at :]
    notes = []
    for line in lines[span[0] + 1 : span[1]]:
        text = bare(line)
        at = _comment_start(text)
        if at is not None:  # a comment line as it is, a comment after a value on its own
            notes.append(text if not text[:at].strip() else "  " + text[at:])
    return ([f"{key_line[:value_at]}{trailing}{nl}"] + [note + nl for note in notes]
            + ["  " + _dump({k: v}).replace("\n", nl) for k, v in mapping.items()])


def _simple_children(lines: list[str], span: tuple[int, int]) -> bool:
    """True when the key has no inline value and each child line is ``  old: new`` or a
    comment (a person's note there is kept: the key is added to, never rewritten)."""
    key_value = _KEY_LINE_RE.match(bare(lines[span[0]]))
    if key_value is None or (key_value["value"] and not key_value["value"].startswith("#")):
        return False
    children = [bare(line) for line in lines[span[0] + 1 : span[1]] if bare(line).strip()]
    return bool(children or key_value["value"]) and all(
        _CHILD_RE.match(c) or _is_comment(c) for c in children)


def _verified(new_text: str, before: dict[str, Any], expected: dict[Any, Any]) -> str:
    """Return ``new_text`` if its frontmatter equals ``before`` except for the patched mapping,
    and that mapping is ``expected``: values compared as YAML reads them, not as text (a
    person's ``null`` rewritten as ``None`` would read as the string 'None')."""
    _, _, _, after = _frontmatter(new_text)
    got = dict(after.get(DEPRECATED_KEY) or {})
    rest_before = {k: v for k, v in before.items() if k != DEPRECATED_KEY}
    rest_after = {k: v for k, v in after.items() if k != DEPRECATED_KEY}
    if got != expected or rest_before != rest_after:
        raise MarkdownError("<text>", 1, f"could not patch {DEPRECATED_KEY} without side effects")
    return new_text


def _check_ids(ids: Iterable[str]) -> None:
    for value in ids:
        parse_entry_id(value)


def add_deprecations(text: str, mapping: Mapping[str, str]) -> str:
    """Add ``old: new`` pairs to the frontmatter's ``deprecated_entries``.

    Additive: a key already present is left exactly as it is (the caller decides whether a
    different existing value is a conflict). New lines go after the mapping's last child, or a
    new ``deprecated_entries:`` block goes just before the closing ``---``.
    """
    _check_ids([*mapping.keys(), *(v for v in mapping.values() if v != UNDONE)])
    lines, start, end, data = _frontmatter(text)
    raw = dict(data.get(DEPRECATED_KEY) or {})
    current = {str(k) for k in raw}
    added = {k: v for k, v in mapping.items() if k not in current}
    if not added:
        return text
    nl = newline_of(text)
    span = _key_span(lines, start, end)
    if span is None and DEPRECATED_KEY in data:  # ``? deprecated_entries``: a second one
        raise MarkdownError("<text>", 1, f"cannot locate {DEPRECATED_KEY} to patch it safely "
                            f"(write it as '{DEPRECATED_KEY}:' at the start of a line)")
    if span is None:
        new_lines = lines[:end] + _block(added, nl) + lines[end:]
    elif _simple_children(lines, span):
        children = [bare(ln) for ln in lines[span[0] + 1 : span[1]] if bare(ln).strip()]
        first_child = next((c for c in children if not _is_comment(c)),
                           children[0] if children else "  ")
        indent = first_child[: len(first_child) - len(first_child.lstrip())]
        last = lines[span[1] - 1]
        head = lines[: span[1]]
        if not last.endswith("\n"):  # cannot happen inside a closed frontmatter; be safe
            head[-1] = last + nl
        new_lines = head + [f"{indent}{k}: {v}{nl}" for k, v in added.items()] + lines[span[1] :]
    else:
        # Flow style or null: rewrite just this key, in block style, its comments kept.
        new_lines = (lines[: span[0]] + _rewritten(lines, span, {**raw, **added}, nl)
                     + lines[span[1] :])
    return _verified("".join(new_lines), data, {**raw, **added})


def remove_deprecations(text: str, ids: Iterable[str]) -> str:
    """Remove the given keys from ``deprecated_entries`` (explicit undo only).

    When no key is left the ``deprecated_entries`` key itself goes, restoring the frontmatter
    to how it was before the first deprecation.
    """
    lines, start, end, data = _frontmatter(text)
    raw = dict(data.get(DEPRECATED_KEY) or {})
    drop = set(ids) & {str(k) for k in raw}
    if not drop:
        return text
    remaining = {k: v for k, v in raw.items() if str(k) not in drop}
    span = _key_span(lines, start, end)
    if span is None:
        raise MarkdownError("<text>", 1, f"cannot locate {DEPRECATED_KEY} to patch it safely")
    noted = any(_comment_start(bare(line)) is not None for line in lines[span[0] : span[1]])
    if not remaining and not noted:
        new_lines = lines[: span[0]] + lines[span[1] :]
    elif _simple_children(lines, span):  # with no key left, the key stays for the notes
        kept = []
        for line in lines[span[0] + 1 : span[1]]:
            m = _CHILD_RE.match(bare(line))
            if not (m and m.group(3) in drop):
                kept.append(line)
            elif (at := _comment_start(bare(line))) is not None:  # a note on a key undone
                kept.append(m.group(1) + bare(line)[at:] + newline_of(text))
        new_lines = lines[: span[0] + 1] + kept + lines[span[1] :]
    else:
        new_lines = (lines[: span[0]] + _rewritten(lines, span, remaining, newline_of(text))
                     + lines[span[1] :])
    return _verified("".join(new_lines), data, remaining)


def set_entry_meta(text: str, entry_id: str, updates: Mapping[str, Any], *,
                   parse: Callable[[str], DailyLog] = parse_log) -> str:
    """``text`` with the metadata block of ``entry_id`` updated: keys of ``updates`` set (a
    ``None`` value removes the key), every other key kept in its place.

    Only for entries the daemon created (SPEC §10: it may rewrite their metadata, never a
    person's): the block is re-dumped, the rest of the file is left byte for byte. The result
    is verified by parsing it back; anything else changing raises :class:`MarkdownError`.
    ``parse``: how a text is parsed (the store's, which reuses a parse of the same text).
    """
    return set_entries_meta(text, {entry_id: updates}, parse=parse)


def set_entries_meta(text: str, updates: Mapping[str, Mapping[str, Any]], *,
                     parse: Callable[[str], DailyLog] = parse_log) -> str:
    """:func:`set_entry_meta` for several entries of one log (``{entry id: updates}``), with
    one parse before and one after: updated one by one, a run updating a hundred of its
    records in one log (a lessons run's confirmations) parsed the whole log twice per
    record. Blocks are rewritten from the last up, so each one's lines are where the parse
    before found them."""
    before = parse(text)
    found: dict[str, Entry] = {}
    for entry in before.entries:
        found.setdefault(entry.id, entry)
    for entry_id in updates:
        if entry_id not in found:
            raise MarkdownError("<text>", 0, f"no entry {entry_id} to update")
    lines: list[str] = split_lines(text)
    nl = newline_of(text)
    for entry_id in sorted(updates, key=lambda i: found[i].line, reverse=True):
        entry = found[entry_id]
        first = entry.line - 1
        start = next(i for i in range(first + 1, len(lines)) if bare(lines[i]).strip())
        end = next(i for i in range(start + 1, len(lines)) if bare(lines[i]).rstrip() == "---")
        meta = dict(entry.meta)
        for key, value in updates[entry_id].items():
            if not isinstance(key, str) or not key.strip() or key != key.strip():
                raise MarkdownError(f"entry {entry_id}", 0,
                                    f"invalid metadata key {quoted_value(key)}")
            if value is None:
                meta.pop(key, None)
            else:
                meta[key] = value
        block = _dump(meta).replace("\n", nl) if meta else ""
        lines[start + 1:end] = [block] if block else []
    new_text = "".join(lines)
    after = parse(new_text)
    old = {e.id: (e.meta, e.sections) for e in before.entries if e.id not in updates}
    new = {e.id: (e.meta, e.sections) for e in after.entries if e.id not in updates}
    written = {e.id: e for e in reversed(after.entries)}  # the first of an id, as found
    unsafe = next((i for i in updates if i not in written
                   or written[i].sections != found[i].sections), None)
    if old != new or after.frontmatter != before.frontmatter or unsafe is not None:
        entry = found[unsafe] if unsafe is not None else found[next(iter(updates))]
        raise MarkdownError("<text>", entry.line, f"could not update {entry.id} safely")
    return new_text
