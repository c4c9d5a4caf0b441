"""Daily-log parser: text in, :class:`DailyLog` out. Pure and lenient — it never raises.

People edit these files by hand, so every problem becomes a :class:`Diagnostic` (file, 1-based
line, reason) and the rest of the file still parses. Severities:

- ``fatal``: the file frontmatter is missing, unreadable or of an unknown kind/version. No entry
  is returned and the store refuses to write the file (it would risk the person's text).
- ``error``: one entry cannot be trusted (bad YAML, unclosed or mismatched markers, duplicate or
  misplaced id (of a duplicate only the first block is read, and writers never archive into the
  file), missing ``owner_id``/``timestamp``, unreadable timestamp, a marker indented by
  spaces or tabs outside every entry or in place of its closing one). It is skipped; its
  text stays in the file and its id still counts when the next id is allocated.
- ``warning``: indexed anyway (naive or date-only timestamp, owner differing from the file's
  user, missing ``Content``/``Fact`` section, an Episode with no or an empty ``Subject``
  (``add`` refuses one), unexpected ``parent_type``, text before the first section,
  characters an editor does not show: controls, bidi overrides, zero-width and tag characters
  (what new text refuses), named with line and column; a U+2028 / U+2029, which
  YAML, editors and ``str.splitlines`` take for a line break, named by line and column).
  Also text outside every entry that looks like one without its markers (an ``owner_id:`` line, a
  ``## Subject`` or main-section heading): it is not read.

Unknown metadata keys and unknown sections are not problems: they are kept in ``Entry.meta`` /
``Entry.sections``; nor are notes between entries (kept in the file, not read). Lines are
split on ``\\n`` only; a trailing ``\\r`` (CRLF files) is ignored for matching and dropped from
section bodies, so bodies always use ``\\n``.

Inside a section body a line starting with ``##`` or ``<!--`` would end the section or the entry,
so the writer escapes such lines with one leading backslash (``\\## not a heading``); the parser
removes exactly one backslash from any line of the form ``\\`` + (``\\``)* + (``##`` | ``<!--``).
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, date, datetime, timedelta, timezone
from itertools import islice
from typing import Any, NamedTuple

import yaml

from everos_reflect.errors import InvalidId, UnknownEntry, brief
from everos_reflect.model import (
    CONVICTION_KEY_RE,
    ENTRY_ID_RE,
    HIDDEN_FORMAT_CLASS,
    ID_MENTION_RE,
    LOG_FILENAME_RE,
    OUT_OF_RANGE,
    SELF_CONTRADICTION,
    DailyLog,
    Diagnostic,
    Entry,
    EntryId,
    Kind,
    UserRef,
    blank,
    day_stamp,
    format_timestamp,
    id_items,
    json_got,
    json_text,
    meta_text,
    parse_timestamp,
    quoted_value,
    read_iso_timestamp,
    served_status,
    subject_length_problem,
    subject_line_count,
    timestamp_form_problem,
    utc_day,
    validate_name,
)

SCHEMA_VERSION = 1

#: How this parser reads a log: raise it whenever the same bytes are read as other values,
#: ids or problems (``importance: 010`` as the text "010" where it was octal 8, say). The
#: index records the version its rows were read with, and the next scan under another one
#: reads every log again (:meth:`~everos_reflect.index.sync.Indexer.scan`): the Markdown is
#: the source of truth, and an upgraded daemon kept the old values until a manual
#: ``reindex``. ``tests/test_parser_version.py`` pins what a sample of hand edits reads as.
#: 2: '<<' is a key of its own, no YAML merge; 3: zero-width and other invisible characters
#: warned of; 4: an emptied log (no bytes, or blank lines only) holds no entry, said so, and
#: invisible characters in the file frontmatter are warned of; 5: a conviction's key that is
#: no text, and a lesson's ``contested_with`` naming itself or no rival, warned of; 6: a
#: conviction's key that is a YAML boolean, number or date (no string: no key) warned of;
#: 7: an entry id whose day cannot exist names the part ("there is no month 13"), and a
#: lesson's or task's task_type that no query can name (none, ``deploy prod``), and an
#: insight's insight_type that is neither reflection nor reconciliation, and a relation's
#: relation_type that is not self_contradiction, warned of; 8: a derived record's
#: stale_reason or an insight's question that is no text, and a conviction's key that no
#: ``keys`` of ome.toml can name (a control character, over 64 characters), warned of; 9: a
#: derived record's evidence_hash that is no mapping, and a relation's resolution that is no
#: text, warned of.
PARSER_VERSION = 9

#: What the parser says of a log with nothing but white space in it (``> log``, a save cut
#: short by a full disk): it holds no entry, so the index drops what it held (as a
#: ``reindex`` does), and the person hears of it: it may be memory lost.
EMPTIED = ("the file is empty: it holds no entry (restore it from a backup if it held some; "
           "`add` writes a new log here)")

# Marker patterns: the runs of blanks are possessive (``*+``). An empty id lets the blanks
# before and after it split a run of spaces every way, and each split was tried: a line of
# ``<!-- entry:`` and 40,000 spaces took a second, 16 MB of them days (quadratic).
OPEN_RE = re.compile(r"^<!--[ \t]*+entry:[ \t]*+([^\s>]*)[ \t]*+-->[ \t]*+$")
CLOSE_RE = re.compile(r"^<!--[ \t]*+/entry:[ \t]*+([^\s>]*)[ \t]*+-->[ \t]*+$")
HEADING_RE = re.compile(r"^##[ \t]+(\S(?:.*\S)?)[ \t]*$")
_ESCAPABLE_RE = re.compile(r"^\\*(?:##|<!--)")
_FILENAME_RE = LOG_FILENAME_RE
_ID_MENTION_RE = ID_MENTION_RE
#: ``deprecated_entries`` value of an entry archived by an explicit undo (no replacement).
UNDONE = "undone"

REQUIRED_META = ("owner_id", "timestamp")

#: Characters an editor does not show that still reach narratives, prompts and search
#: snippets as written: C0 controls but tab and line feed, DEL and C1 (what new input refuses,
#: ``model.CONTROL_CHARS``), a carriage return inside a line, and the invisible formatting
#: characters new text refuses (:func:`~everos_reflect.model.hidden_format`): the bidi
#: embeddings, overrides and isolates that display text in another order than it is read
#: ("Trojan Source"), and those that show nothing (zero-width space, word joiner, a BOM past
#: the file's start, tag characters). In a hand-written entry, or a narrative that restated
#: one, they are a warning: the text stays as written. The marks U+200E/U+200F are ordinary
#: right-to-left writing, and the joiners ordinary spelling: not listed.
_HIDDEN_RE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{HIDDEN_FORMAT_CLASS}]")
#: The same, for a whole block: a CR is only hidden when it does not end a line (CRLF).
_HIDDEN_IN_BLOCK_RE = re.compile(
    f"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f{HIDDEN_FORMAT_CLASS}]|\r(?!\n)")
#: The invisible formatting characters alone, for the file frontmatter, where YAML refuses
#: the controls itself (a fatal problem naming them).
_FORMAT_RE = re.compile(f"[{HIDDEN_FORMAT_CLASS}]")
#: Lines with hidden characters reported one by one per entry; the rest in one warning.
MAX_HIDDEN_LINES = 5
#: The line and paragraph separators: a line break to YAML, editors and ``str.splitlines``,
#: none to this parser (lines end at ``\n``). The other characters ``splitlines`` breaks at
#: (U+0085, form feed, ...) are among :data:`_HIDDEN_RE`.
_SEPARATOR_RE = re.compile("[\u2028\u2029]")


_LINE_RE = re.compile(r"[^\n]*\n|[^\n]+$")
#: Per kind: a line outside every entry that belongs to one (see ``_Parser._outside``).
_ENTRY_LIKE_RE: dict[Kind, re.Pattern[str]] = {}
_HEADER_END_RE = re.compile(r"\n(?:---|\.\.\.)[ \t]*(?:\r?\n|\r?$)")


def split_lines(text: str) -> list[str]:
    """Lines with their endings kept, split on ``\n`` only (``str.splitlines`` also splits on
    form feeds and unicode separators, which would shift line numbers and corrupt edits)."""
    return _LINE_RE.findall(text)


def bare(line: str) -> str:
    """A line without its ``\\n`` / ``\\r\\n`` ending."""
    if line.endswith("\n"):
        line = line[:-1]
    if line.endswith("\r"):
        line = line[:-1]
    return line


def newline_of(text: str) -> str:
    """The file's line ending, judged by its first line after any blank ones
    (:func:`lead_end`; ``\\n`` when there is none)."""
    first = text.find("\n", lead_end(text)[0])
    return "\r\n" if first > 0 and text[first - 1] == "\r" else "\n"


def escape_body_line(line: str) -> str:
    return "\\" + line if _ESCAPABLE_RE.match(line) else line


def unescape_body_line(line: str) -> str:
    return line[1:] if line.startswith("\\") and _ESCAPABLE_RE.match(line[1:]) else line


#: Blank lines (spaces, tabs, a BOM) before the frontmatter's opening ``---`` that are read
#: past and kept as written: a person's editor or paste left one, and the whole log was
#: unreadable ("missing file frontmatter"). More than this many are no frontmatter at the start.
MAX_LEAD_LINES = 100
_BLANK_LINE_RE = re.compile(r"[ \t]*\r?\n")


def lead_end(text: str) -> tuple[int, int]:
    """Offset and count of the blank lines before the file frontmatter (:data:`MAX_LEAD_LINES`
    at most); ``(0, 0)`` when there are none (a BOM alone stays on the first line)."""
    pos = 1 if text.startswith("\ufeff") else 0
    count = 0
    while count < MAX_LEAD_LINES and (blank_line := _BLANK_LINE_RE.match(text, pos)):
        pos, count = blank_line.end(), count + 1
    return (pos, count) if count else (0, 0)


def _lead_count(lines: list[str]) -> int:
    """:func:`lead_end`'s count, of ``lines`` (split as :func:`split_lines` splits)."""
    count = 0
    while (count < min(len(lines), MAX_LEAD_LINES) and lines[count].endswith("\n")
           and not bare(lines[count]).lstrip("\ufeff" if count == 0 else "").strip(" \t")):
        count += 1
    return count


def frontmatter_bounds(lines: list[str]) -> tuple[int, int] | None:
    """Indexes of the opening and closing ``---`` lines of the file frontmatter, or None.
    Blank lines before the opening one are read past (:data:`MAX_LEAD_LINES`)."""
    start = _lead_count(lines)
    if len(lines) <= start or bare(lines[start]).lstrip("\ufeff").rstrip() != "---":
        return None
    for i in range(start + 1, len(lines)):
        if bare(lines[i]).rstrip() in ("---", "..."):
            return start, i
    return None


# libyaml's scanner is ~7x faster; construction (types, timestamps) is the same safe one.
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

#: Bounds on every YAML block the daemon reads (file frontmatter and entry metadata). A hand
#: edit can hold anything: ten nested aliases in 791 bytes expand to 10^10 values, which once
#: stringified (a content hash does that) take the machine down. So a block is refused, never
#: expanded, when it is larger than ``MAX_YAML_BYTES`` (UTF-8), nests more than
#: ``MAX_YAML_DEPTH`` collections (the top mapping counts as one), holds more than
#: ``MAX_YAML_NODES`` values, or uses any alias (``*name``; an anchor alone is harmless).
#: Without aliases a value is never bigger than its text, so the size cap bounds everything
#: built from it. Entry metadata is a few keys; the frontmatter grows by one
#: ``deprecated_entries`` line per archived entry, hence its larger cap.
MAX_YAML_BYTES = {"frontmatter": 1 << 20, "metadata": 64 << 10}
MAX_YAML_DEPTH = 16
MAX_YAML_NODES = 50_000


class YamlBoundError(Exception):
    """A YAML block beyond the bounds above (line offset inside the block, reason)."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(reason)
        self.line, self.reason = line, reason


def _utf8_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _check_node(root: yaml.Node) -> None:
    """Walk a composed node graph (iteratively: no recursion limit to hit) and refuse aliases,
    depth and size beyond the bounds. libyaml gives an alias the very node object its anchor
    named, so a node met twice is an alias (and a cycle is one too)."""
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if id(node) in seen:
            raise YamlBoundError(node.start_mark.line, "aliases (*name) are not accepted here")
        seen.add(id(node))
        if len(seen) > MAX_YAML_NODES:
            raise YamlBoundError(node.start_mark.line, f"more than {MAX_YAML_NODES} values")
        if isinstance(node, yaml.SequenceNode):
            children: list[yaml.Node] = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
            _check_keys(node)
        else:
            continue
        if depth > MAX_YAML_DEPTH:
            raise YamlBoundError(
                node.start_mark.line, f"nested deeper than {MAX_YAML_DEPTH} levels"
            )
        stack.extend((child, depth + 1) for child in children)


def _check_keys(node: yaml.MappingNode) -> None:
    """Refuse a key written twice in one mapping. YAML forbids it, and PyYAML silently keeps
    the last value: a second ``deprecated_entries:`` block hid every archive of the first,
    a second ``owner_id`` replaced the first without a word. Two spellings of one key are one
    key written twice (:func:`_key_identity`)."""
    values: set[Any] = set()
    texts: set[str] = set()
    for key, _ in node.value:
        if not isinstance(key, yaml.ScalarNode):
            continue
        value = _key_identity(key)
        if value in values or str(value) in texts:
            raise YamlBoundError(key.start_mark.line,
                                 f"key {quoted_value(key.value)} is written twice in one "
                                 "mapping; keep one")
        values.add(value)
        texts.add(str(value))


_FLOAT_WORDS = {".inf": math.inf, "+.inf": math.inf, "-.inf": -math.inf}


def _key_identity(key: yaml.ScalarNode) -> Any:
    """A scalar key as the mapping will hold it, and as metadata reads it (as text): ``on``
    and ``'on'`` are both the text "on" (:data:`_DECIMAL_RE`), ``true`` and ``True`` both
    True, ``1``, ``+1`` and ``1.0`` all 1 (True too: a dict takes True and 1 for one key),
    ``1`` and ``'1'`` both "1" once read as text: each pair held one key, the second's value
    silently replacing the first's."""
    tag, text = key.tag, key.value
    if len(text) > MAX_YAML_INT_CHARS:  # refused as it is constructed, naming its size
        return text
    if tag == "tag:yaml.org,2002:int" and _DECIMAL_RE.fullmatch(text):
        return int(text)
    if tag == "tag:yaml.org,2002:bool" and text in _BOOL_WORDS:
        return _BOOL_WORDS[text]
    if tag == "tag:yaml.org,2002:null":
        return None
    if tag == "tag:yaml.org,2002:float" and "_" not in text and ":" not in text:
        try:
            number = _FLOAT_WORDS.get(text.lower()) or float(text)
        except ValueError:  # .nan, or a form float() does not read: the text
            return text
        return int(number) if number.is_integer() else number
    return text


#: Characters of one YAML integer (any base, ``_`` and ``:`` included). Hex, octal, binary
#: and base-60 (``1:30:00``) ints have no digit limit in Python, but ``str()`` refuses one of
#: over 4,300 decimal digits: 4 KB of hex in a hand edit passed the parser, then failed
#: every content hash, so ``reindex``, ``search`` and the watcher stopped on that one log.
#: 1,000 characters make at most ~1,200 decimal digits.
MAX_YAML_INT_CHARS = 1000


#: A frontmatter line giving ``schema_version`` as 1 with leading zeros (``01``), unquoted:
#: the one value besides ``1`` read as version 1, with an error (:meth:`_file_identity`).
_LEADING_ZERO_ONE_RE = re.compile(r"""(['"]?)schema_version\1[ \t]*:[ \t]*0+1[ \t]*(?:#.*)?$""")

#: The only integers and booleans read as such: plain decimal, ``true``/``false`` (YAML 1.2's
#: JSON forms). PyYAML reads YAML 1.1, where ``importance: 010`` is 8 (octal), ``1_0`` is 10,
#: ``1:20`` is 80 (base 60), ``0x0a`` is 10 and ``yes``/``no``/``on``/``off`` are booleans:
#: a person's value silently became another. Any other form is kept as the text written, so a
#: key that needs a number names it in lint (``importance '010' is not ...``) and a text key
#: (``session_id: 0123``) reads as written.
_DECIMAL_RE = re.compile(r"[-+]?(?:0|[1-9][0-9]*)")
_BOOL_WORDS = {"true": True, "True": True, "TRUE": True,
               "false": False, "False": False, "FALSE": False}


def _construct_int(loader: yaml.constructor.SafeConstructor, node: yaml.ScalarNode) -> Any:
    if len(node.value) > MAX_YAML_INT_CHARS:
        raise YamlBoundError(node.start_mark.line, f"a number of {len(node.value):,} "
                             f"characters (at most {MAX_YAML_INT_CHARS:,})")
    if not _DECIMAL_RE.fullmatch(node.value):
        return node.value
    return int(node.value)


def _construct_bool(loader: yaml.constructor.SafeConstructor, node: yaml.ScalarNode) -> Any:
    return _BOOL_WORDS.get(node.value, node.value)


def _construct_float(loader: yaml.constructor.SafeConstructor, node: yaml.ScalarNode) -> Any:
    if "_" in node.value or ":" in node.value:  # 1_0.5, base-60 1:20.5: YAML 1.1 only
        return node.value
    return loader.construct_yaml_float(node)


def _construct_timestamp(loader: yaml.constructor.SafeConstructor,
                         node: yaml.ScalarNode) -> Any:
    """A timestamp YAML recognises but Python cannot hold (an offset of a day or more, a
    month 13) is named as one, not as "invalid YAML: offset must be a timedelta strictly
    between -timedelta(hours=24) and timedelta(hours=24), not …"."""
    try:
        return loader.construct_yaml_timestamp(node)
    except (ValueError, OverflowError) as exc:
        reason = "its UTC offset is a day or more" if "offset" in str(exc) else str(exc)
        raise YamlBoundError(node.start_mark.line,
                             f"{quoted_value(node.value)} is not a valid date and time "
                             f"({reason})") from None


def _construct_plain_key(loader: yaml.constructor.SafeConstructor,
                         node: yaml.ScalarNode) -> Any:
    return node.value


class _BoundedLoader(_Loader):  # type: ignore[misc, valid-type]
    """:data:`_Loader` with integers bounded (:data:`MAX_YAML_INT_CHARS`), only decimal
    integers and ``true``/``false`` read as numbers and booleans (:data:`_DECIMAL_RE`),
    impossible timestamps named, and no merge keys (:data:`MERGE_KEY`)."""

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        """``<<`` is a key like any other, as in YAML 1.2: as a YAML 1.1 merge it copied the
        keys of its mapping into the entry's metadata without a word, and dropped those the
        entry already had (``session_id: s1`` then ``<<: {session_id: s9}``: s9 gone, past
        the check for a key written twice). Its value is kept as written."""


_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_BoundedLoader.add_constructor("tag:yaml.org,2002:bool", _construct_bool)
_BoundedLoader.add_constructor("tag:yaml.org,2002:float", _construct_float)
_BoundedLoader.add_constructor("tag:yaml.org,2002:timestamp", _construct_timestamp)
_BoundedLoader.add_constructor("tag:yaml.org,2002:merge", _construct_plain_key)
_BoundedLoader.add_constructor("tag:yaml.org,2002:value", _construct_plain_key)

#: The YAML 1.1 merge key, read as a key of its own (:meth:`_BoundedLoader.flatten_mapping`).
MERGE_KEY = "<<"


def _bounded_load(text: str) -> Any:
    loader = _BoundedLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_node(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


# Entry metadata as the writer emits it is a flat mapping of simple scalars: read that shape
# without building YAML node objects (the constructor is most of a reindex's parse time). A
# plain scalar here starts with a letter or "_" and holds no character YAML treats specially,
# so it can only be a string unless it is one of the bool/null words; single-quoted strings,
# flow lists of such scalars, the timestamps the writer emits (seconds, an optional fraction,
# an explicit offset) and plain decimal integers are read too. Anything else goes through
# PyYAML.
_PLAIN = r"[A-Za-z_][A-Za-z0-9_./@+-]*"
_QUOTED = r"'(?:[\t\x20-\x26\x28-\x7e\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]|'')*'"
_ITEM = rf"(?:{_PLAIN}|{_QUOTED})"
_STAMP = (r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})"
          r"(?:\.([0-9]{1,6}))?(?:(Z)|([-+])([0-9]{2}):([0-9]{2}))")
_FLAT_LINE_RE = re.compile(
    rf"^({_PLAIN}):[ ]+(?:({_QUOTED})|(\[(?:[ ]*{_ITEM}[ ]*(?:,[ ]*{_ITEM}[ ]*)*)?\])"
    rf"|({_PLAIN})|{_STAMP}|(0|[1-9][0-9]{{0,17}}))[ ]*$"
)
_ITEM_RE = re.compile(rf"[ ]*(?:({_QUOTED})|({_PLAIN}))[ ]*[,\]]")
_NOT_STR = frozenset((
    "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "true", "True", "TRUE",
    "false", "False", "FALSE", "on", "On", "ON", "off", "Off", "OFF", "null", "Null", "NULL",
))


def _flow_items(flow: str) -> list[str] | None:
    """The items of a flow list already matched by ``_FLAT_LINE_RE``; None when one is a
    bool/null word."""
    items: list[str] = []
    pos, end = 1, len(flow)
    if not flow[1:-1].strip():
        return items
    while pos < end:
        m = _ITEM_RE.match(flow, pos)
        assert m is not None  # the line's pattern already matched this list
        quoted, plain = m.group(1), m.group(2)
        if quoted is not None:
            items.append(quoted[1:-1].replace("''", "'"))
        elif plain in _NOT_STR:
            return None
        else:
            items.append(plain)
        pos = m.end()
    return items


def _stamp(groups: tuple[str | None, ...]) -> datetime | None:
    """What PyYAML's timestamp constructor gives for the matched parts; None when it would
    raise (a month 13, an offset of a day or more): PyYAML then reports it."""
    year, month, day, hour, minute, second, fraction, zulu, sign, tz_h, tz_m = groups
    try:
        tzinfo = UTC
        if not zulu:
            delta = timedelta(hours=int(tz_h or 0), minutes=int(tz_m or 0))
            tzinfo = timezone(-delta if sign == "-" else delta)
        return datetime(int(year or 0), int(month or 0), int(day or 0), int(hour or 0),
                        int(minute or 0), int(second or 0),
                        int((fraction or "").ljust(6, "0")), tzinfo=tzinfo)
    except ValueError:
        return None


def _flat_mapping(text: str) -> dict[str, Any] | None:
    """``text`` read as the flat ``key: scalar`` mapping the writer emits, or None when it is
    anything else (then PyYAML decides). Gives exactly what ``yaml.safe_load`` gives."""
    out: dict[str, Any] = {}
    if text.endswith("\n"):  # a file frontmatter's block ends with its last line's newline
        text = text[:-1]
    for line in text.split("\n"):
        m = _FLAT_LINE_RE.match(line)
        if m is None or m.group(1) in _NOT_STR:
            return None
        quoted, flow, plain, number = m.group(2), m.group(3), m.group(4), m.group(16)
        if quoted is not None:
            value: Any = quoted[1:-1].replace("''", "'")
        elif flow is not None:
            value = _flow_items(flow)
            if value is None:
                return None
        elif plain is not None:
            if plain in _NOT_STR:
                return None
            value = plain
        elif number is not None:
            value = int(number)
        else:
            value = _stamp(m.groups()[4:15])
            if value is None:
                return None
        if m.group(1) in out:  # a key written twice: PyYAML's path reports it
            return None
        out[m.group(1)] = value
    return out


def load_yaml(
    text: str, first_line: int, block: str = "metadata"
) -> tuple[Any, tuple[int, str] | None]:
    """Safe, bounded YAML loading that reports (file line, reason) instead of raising.

    ``block`` ("metadata" or "frontmatter") picks the size cap; see ``MAX_YAML_BYTES``.
    """
    limit = MAX_YAML_BYTES[block]
    if len(text) > limit or (len(text) * 4 > limit and _utf8_size(text) > limit):
        return None, (first_line, f"YAML block is over {limit // 1024} KiB; not read")
    if text:
        flat = _flat_mapping(text)
        if flat is not None:
            return flat, None
    try:
        return _bounded_load(text), None
    except YamlBoundError as exc:
        return None, (first_line + exc.line, f"YAML refused: {exc.reason}")
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        last = max(text.count("\n") - (1 if text.endswith("\n") else 0), 0)
        at = mark.line if mark is not None else 0
        if isinstance(exc, yaml.reader.ReaderError):  # a character YAML refuses: no mark,
            # only its offset; the block's first line sent a person looking for a NUL or an
            # ESC on the wrong line
            at = text.count("\n", 0, min(max(exc.position, 0), len(text)))
        line = first_line + min(at, last)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        return None, (line, f"invalid YAML: {problem}")
    except Exception as exc:  # lenient: yaml can raise odd errors on odd input
        return None, (first_line, f"invalid YAML: {exc}")


_OPEN_ANYWHERE_RE = re.compile(r"^<!--[ \t]*+entry:[ \t]*+([^\s>]*)[ \t]*+-->[ \t]*+\r?$",
                               re.M)


def duplicate_message(entry_id: str, first_line: int) -> str:
    return (f"duplicate entry id {entry_id} (first at line {first_line}; only that block is "
            "read, and nothing in this file is archived until one of them is renamed or removed)")


def duplicate_ids(text: str) -> dict[str, list[int]]:
    """Ids opened by more than one entry marker in ``text`` -> the 1-based lines of each.

    Writers that archive (``deprecated_entries`` keys name ids, not blocks) refuse such a file:
    the key would silently archive a block nobody indexed or merged.
    """
    lines: dict[str, list[int]] = {}
    line, pos = 1, 0
    for m in _OPEN_ANYWHERE_RE.finditer(text):
        line += text.count("\n", pos, m.start())
        pos = m.start()
        lines.setdefault(m.group(1), []).append(line)
    return {i: at for i, at in lines.items() if len(at) > 1}


def parse_entry_id(text: str) -> EntryId:
    """``EntryId.parse`` that also insists on the canonical spelling (ASCII digits, no extra
    leading zeros), so one entry can never be named two ways."""
    eid = EntryId.parse(text)
    if str(eid) != text:
        raise InvalidId(f"invalid entry id {quoted_value(text)}: write it as {eid}")
    return eid


def lookup_entry_id(text: str, ref: UserRef | None = None) -> str:
    """``text`` checked as the id of an entry to look up (of ``ref`` when known). Not of an
    id's form (``nonsense``): :class:`InvalidId`, the caller's mistake. Of the form but naming
    no entry that can exist (an impossible day such as ``in_20260230_0001``, a seq spelt with
    extra zeros): :class:`UnknownEntry`, as an id naming nothing is. The CLI, the HTTP API
    (404 ``unknown_entry``) and MCP all check the ids they look up here: the CLI called the
    impossible day a "bad date" where the API and MCP call it an unknown entry."""
    if not isinstance(text, str) or not ENTRY_ID_RE.fullmatch(text):
        EntryId.parse(text)  # raises InvalidId naming the expected form
    try:
        parse_entry_id(text)
    except InvalidId as exc:
        owner = f" for user {ref}" if ref is not None else ""
        raise UnknownEntry(f"no entry {text}{owner}: {exc}") from None
    return text


def mentioned_ids(text: str) -> set[str]:
    """Every entry id written anywhere in ``text`` (markers, frontmatter, even broken entries)."""
    return set(_ID_MENTION_RE.findall(text))


def highest_seqs(text: str) -> dict[str, int]:
    """The highest sequence number of every id stem (``ep_20261012_``) mentioned anywhere in
    ``text``: what the index remembers of a log, so that an id deleted by hand from its own
    file is still never allocated again while another log names it (``id_watermark``)."""
    out: dict[str, int] = {}
    for mention in mentioned_ids(text):
        stem, _, seq = mention.rpartition("_")
        stem += "_"
        out[stem] = max(out.get(stem, 0), int(seq))
    return out


def next_seq(log: DailyLog) -> int:
    """The next free sequence number of this file: one past every id of its kind and day that
    appears anywhere in it, so an id is never reused, not even one of a broken entry."""
    if log.kind is None or log.day is None:
        return 1
    stem = f"{log.kind.prefix}_{day_stamp(log.day)}_"
    seqs = [int(i[len(stem) :]) for i in mentioned_ids(log.text) if i.startswith(stem)]
    seqs += [int(k[len(stem) :]) for k in log.deprecated_entries if k.startswith(stem)]
    return max(seqs, default=0) + 1


def free_seq(log: DailyLog, count: int, floor: int, most: int) -> int | None:
    """The first of ``count`` sequence numbers, none below ``floor`` nor above ``most``, past
    every id an entry of this file has (opening markers, ``deprecated_entries`` keys) and
    named by no mention in it; None when there is no such run. For a file whose text mentions
    an id too large to go past (``…_999999999999999999`` in an Episode's content): one past
    every mention, as :func:`next_seq` gives, is no id at all."""
    if log.kind is None or log.day is None:
        return floor if floor + count - 1 <= most else None
    stem = f"{log.kind.prefix}_{day_stamp(log.day)}_"
    held = [*_OPEN_ANYWHERE_RE.findall(log.text), *log.deprecated_entries]
    seq = max([floor - 1, *(int(i[len(stem):]) for i in held
                            if i.startswith(stem) and _ID_MENTION_RE.fullmatch(i))]) + 1
    for named in sorted(int(i[len(stem):]) for i in mentioned_ids(log.text)
                        if i.startswith(stem)):
        if named >= seq + count:
            break
        seq = max(seq, named + 1)
    return seq if seq + count - 1 <= most else None


def _shown(value: Any) -> str:
    """A YAML value as a person wrote it, near enough: ``null``, ``true``, ``[a, b]``."""
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


def _code_point(char: str) -> str:
    """``U+202E (RIGHT-TO-LEFT OVERRIDE)``; controls have no Unicode name: ``U+0007 (control)``."""
    return f"U+{ord(char):04X} ({unicodedata.name(char, 'control')})"


def _as_day(value: Any) -> date | None:
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        try:
            return date.fromisoformat(value.strip())
        except ValueError:
            return None
    return None


def _date_only(value: object) -> bool:
    """Whether a timestamp as read from YAML names a day and no time: a plain ``2026-10-11``
    (YAML makes it a ``date``), or text ``fromisoformat`` reads as a date (``'2026-10-11'``,
    ``2026-W41-1``), each then taken as midnight UTC, a moment nobody wrote."""
    if isinstance(value, date):
        return not isinstance(value, datetime)
    if isinstance(value, str):
        try:
            date.fromisoformat(value.strip())
        except ValueError:
            return False
        return True
    return False


def header_text(text: str) -> str:
    """The text up to the end of the frontmatter (all of it when there is no closed one)."""
    first = text.find("\n", lead_end(text)[0])
    end = _HEADER_END_RE.search(text, first) if first >= 0 else None
    return text[: end.end()] if end else text


#: An entry marker line, opening or closing (``/``), as ``OPEN_RE`` / ``CLOSE_RE`` read it.
_MARKER_RE = re.compile(r"^<!--[ \t]*+(/?)entry:[ \t]*+([^\s>]*)[ \t]*+-->[ \t]*+\r?$", re.M)
#: The same line indented by spaces or tabs: not a marker (the writer does not escape such a
#: line of a section body, so reading it as one could split an entry), but outside every
#: entry, or where an entry's closing marker is missing, it is one a person indented.
_INDENTED_MARKER_RE = re.compile(
    r"^[ \t]++<!--[ \t]*+(/?)entry:[ \t]*+([^\s>]*)[ \t]*+-->[ \t]*+\r?$", re.M)
#: A line a person meant as an entry marker that is none, outside every readable entry: the
#: indented one above, or one with ``ENTRY``, a no-break space, ``--->`` or a note after it.
#: Not a last line with no line end: that may be a marker still being written.
_MISSHAPEN_MARKER_RE = re.compile(
    r"^[^\S\n]*+<!--[^\S\n]*+(/?)[^\S\n]*+entry[^\S\n]*+:[^\S\n]*+([a-z]++_\d++_\d++)"
    r"(?![^\s>-])[^\n]*(?=\n)", re.M | re.I)
#: The line that closes the file frontmatter, as :func:`frontmatter_bounds` reads it.
_FM_CLOSE_RE = re.compile(r"^(?:---|\.\.\.)[^\S\n]*$", re.M)
#: What follows ``<!--`` in an opening marker line cut short before its ``-->`` was written
#: (``entry:``, or part of it, then the id written so far: group 1).
_OPEN_TAIL_RE = re.compile(
    r"[ \t]*+(?:e(?:n(?:t(?:r(?:y(?::[ \t]*+([^\s>]*?)[ \t]*+-?-?)?)?)?)?)?)?")


def _opening_cut_short(text: str) -> str | None:
    """The id written so far ("" when none yet) when ``text`` ends inside an opening marker
    line, its unfinished last line (no line ending yet) being the start of
    ``<!-- entry:ID -->``: a writer caught between one entry's closing marker and the next
    one's opening marker. None otherwise."""
    last = text[text.rfind("\n") + 1 :]
    if not last:
        return None
    if len(last) < 4:
        return "" if "<!--".startswith(last) else None
    tail = _OPEN_TAIL_RE.fullmatch(last, 4) if last.startswith("<!--") else None
    return None if tail is None else tail.group(1) or ""


class _Marker(NamedTuple):
    line: int  # 0-based
    close: bool
    id: str
    start: int  # offsets of the marker in the text, its line ending excluded
    end: int


def _header_lines(text: str) -> list[str]:
    """The lines of the file frontmatter, its closing line included; only the first line
    when there is none (what :func:`frontmatter_bounds` needs to say so)."""
    lead = lead_end(text)[0]
    first = _LINE_RE.match(text, lead)
    if first is None:
        return split_lines(text[:lead])
    if bare(first.group()).lstrip("\ufeff").rstrip() != "---":
        return split_lines(text[: first.end()])
    close = _FM_CLOSE_RE.search(text, first.end())
    if close is None:
        return split_lines(text[: first.end()])
    end = text.find("\n", close.end())
    return split_lines(text[: len(text) if end < 0 else end + 1])


#: Default ``max_entry_bytes`` (the shipped ``limits.max_entry_bytes``; callers pass theirs).
MAX_ENTRY_BYTES = 256 << 10


#: The most problems one log lists one by one; the rest are counted in one more. A 17 MB log
#: of 300,000 unclosed entry markers listed 600,000 (148 MB of them in ``system.db``), and
#: ``status`` took three minutes to print them.
MAX_LISTED_PROBLEMS = 100


class _Parser:
    def __init__(self, text: str, path: str, max_entry_bytes: int = MAX_ENTRY_BYTES) -> None:
        self.text = text
        self.path = path
        self.max_entry_bytes = max_entry_bytes
        # Lines are only ever held for the frontmatter and for one entry at a time: a list of
        # every line of a 16 MB log of short lines took ~50x its size (786 MB), and the
        # per-line loop between entries ~6 s for one of blank lines.
        self.lines = _header_lines(text)  # the frontmatter's, closing line included
        self.bare = [bare(line) for line in self.lines]
        self.diagnostics: list[Diagnostic] = []
        #: problems past :data:`MAX_LISTED_PROBLEMS` (severity -> count), and the line of
        #: the first of them
        self.left_out: Counter[str] = Counter()
        self.left_out_from = 0
        #: stretches of text outside every entry found holding invisible characters
        self.hidden_outside = 0
        #: ids whose ``deprecated_entries`` value is no id at all (null, a number, a list)
        self.unreadable_archive: set[str] = set()

    def report(self, line: int, message: str, severity: str = "error") -> None:
        """One problem of the log; past :data:`MAX_LISTED_PROBLEMS` only counted (a fatal one
        is always listed: it decides whether the log is read)."""
        if severity != "fatal" and len(self.diagnostics) >= MAX_LISTED_PROBLEMS:
            if not self.left_out:
                self.left_out_from = line
            self.left_out[severity] += 1
            return
        self.diagnostics.append(Diagnostic(self.path, line, message, severity))

    def parse(self, *, entries: bool = True) -> DailyLog:
        log = DailyLog(self.path, None, None, {}, text=self.text)
        log.diagnostics = self.diagnostics
        body_start = self._frontmatter(log)
        if log.ok and entries:
            self._entries(log, body_start)
        elif entries:  # no entry is read, yet every one opened is still there
            log.unreadable = {m.group(2) for m in _MARKER_RE.finditer(self.text)
                              if not m.group(1)}
        if entries:
            self._separators()
        if self.left_out:
            errors, warnings = self.left_out["error"], self.left_out["warning"]
            counts = ", ".join(f"{n:,} {what}{'' if n == 1 else 's'}" for n, what in (
                (errors, "error"), (warnings, "warning")) if n)
            self.diagnostics.append(Diagnostic(
                self.path, self.left_out_from,
                f"{counts} more in this file from here on, not listed one by one (only the "
                f"first {MAX_LISTED_PROBLEMS} problems are): fix those and check it again",
                "error" if errors else "warning"))
        return log

    def _separators(self) -> None:
        """A warning per line (up to :data:`MAX_HIDDEN_LINES`, then one for the rest) holding
        a U+2028 or U+2029, naming its line and columns. The writer never writes one; by hand
        it is kept as written, one line here but two to YAML, editors and ``splitlines``: text
        after it that reads as a marker, a heading or a metadata key there is none here."""
        text = self.text
        number, counted, pos = 1, 0, 0
        reported, more_lines, more_from = 0, 0, 0
        while (found := _SEPARATOR_RE.search(text, pos)) is not None:  # one step a line
            number += text.count("\n", counted, found.start())
            counted = found.start()
            start = text.rfind("\n", 0, found.start()) + 1
            pos = text.find("\n", found.start())
            pos = len(text) if pos < 0 else pos
            if reported >= MAX_HIDDEN_LINES:
                more_lines, more_from = more_lines + 1, more_from or number
                continue
            reported += 1
            on_line = list(islice(_SEPARATOR_RE.finditer(text, start, pos), 4))
            shown = ", ".join(f"{_code_point(m.group())} at column {m.start() - start + 1}"
                              for m in on_line[:3])
            more = " and more" if len(on_line) > 3 else ""
            self.report(number, f"{shown}{more}: a line break to YAML, editors and "
                        "str.splitlines, none in this log (read as one line, kept as "
                        "written): write a line break or a space instead", "warning")
        if more_lines:
            self.report(more_from, f"line or paragraph separators on {more_lines} more lines "
                        "from here", "warning")

    # -- file frontmatter -------------------------------------------------------------------
    def _frontmatter(self, log: DailyLog) -> int:
        bounds = frontmatter_bounds(self.lines)
        if bounds is None:
            lead = _lead_count(self.lines)
            first = bare(self.lines[lead]).lstrip("\ufeff") if lead < len(self.lines) else ""
            if first.rstrip() == "---":
                self.report(lead + 1, "frontmatter is not closed by a '---' line", "fatal")
            elif first.startswith("---\r"):  # it does start with '---': say what is wrong
                self.report(lead + 1, "lines end in CR alone (classic Mac): only LF or CRLF "
                            "line endings are read; save the file with either", "fatal")
            elif not self.text.strip():
                log.emptied = True
                self.report(1, EMPTIED, "fatal")
            elif lead == MAX_LEAD_LINES:
                self.report(1, f"missing file frontmatter: more than {MAX_LEAD_LINES} blank "
                            "lines come before anything (the file must start with '---')",
                            "fatal")
            else:
                self.report(1, "missing file frontmatter (the file must start with '---')", "fatal")
            return 0
        start, end = bounds
        self._hidden([bare(line) for line in self.lines[start + 1 : end]], start + 1,
                     "file frontmatter", "(kept as written; it makes a value, an archive mark "
                     "among them, display or read differently from what is stored",
                     _FORMAT_RE)
        data, problem = load_yaml(
            "".join(self.lines[start + 1 : end]), start + 2, "frontmatter"
        )
        if problem:
            self.report(problem[0], f"file frontmatter: {problem[1]}", "fatal")
            return end + 1
        if data is None:
            data = {}
        if not isinstance(data, dict):
            self.report(start + 1, "file frontmatter must be a YAML mapping", "fatal")
            return end + 1
        log.frontmatter = {str(k): v for k, v in data.items()}
        self._file_identity(log, data)
        deprecated = data.get("deprecated_entries")
        if deprecated is not None and not isinstance(deprecated, dict):
            self.report(
                start + 1, "deprecated_entries must be a mapping of old id: new id", "fatal"
            )
        elif deprecated:
            for old, new in deprecated.items():
                if not isinstance(new, str):
                    # ``str(None)`` made it "archived toward 'None'": read as archived, for a
                    # value nobody can follow. Skipped instead, like any entry whose metadata
                    # cannot be trusted; the person's text stays as it is.
                    self.unreadable_archive.add(str(old))
                    self.report(
                        self._mention_line(str(old)),
                        f"deprecated_entries: {old} is archived toward {_shown(new)}, not an "
                        f"entry id; {old} is not read until its value names the entry that "
                        f"replaced it ('{UNDONE}' too), or the key is removed",
                    )
                    continue
                for value in (old, new) if new != UNDONE else (old,):
                    if not isinstance(value, str) or not _ID_MENTION_RE.fullmatch(value):
                        self.report(
                            start + 1,
                            f"deprecated_entries: {quoted_value(value)} is not an entry id",
                            "warning",
                        )
        return end + 1

    def _mention_line(self, text: str) -> int:
        """1-based line of the first frontmatter line after ``deprecated_entries`` that holds
        ``text`` (the key's own line when none does)."""
        first = self._key_line("deprecated_entries")
        bounds = frontmatter_bounds(self.lines)
        end = bounds[1] if bounds else 0
        return next((i + 1 for i in range(first - 1, end) if text in self.bare[i]), first)

    def _key_line(self, key: str) -> int:
        """1-based line of the top-level ``key:`` in the file frontmatter (1 when not found),
        so a problem with one field points where a person fixes it."""
        pattern = re.compile(rf"^(['\"]?){re.escape(key)}\1[ \t]*:")
        bounds = frontmatter_bounds(self.lines)
        end = bounds[1] if bounds else 0
        return next((i + 1 for i in range(1, end) if pattern.match(self.bare[i])), 1)

    def _file_identity(self, log: DailyLog, data: dict[Any, Any]) -> None:
        """Kind and day from the frontmatter, cross-checked with the file name (which wins:
        ids are located through it)."""
        fm_kind = Kind.from_file_type(data.get("type"))
        fm_day = _as_day(data.get("date"))
        name = re.split(r"[\\/]", self.path)[-1]
        m = _FILENAME_RE.fullmatch(name)
        name_kind = Kind.from_stem(m.group(1)) if m else None
        name_day = _as_day(m.group(2)) if m else None

        version = data.get("schema_version")
        if version is None:
            self.report(1, "frontmatter has no schema_version (assuming 1)", "warning")
        elif (type(version) is not int or version != SCHEMA_VERSION) and \
                _LEADING_ZERO_ONE_RE.match(self.bare[self._key_line("schema_version") - 1]):
            # ``01``: 1 with a leading zero, read as 1 (octal) before integers were decimal
            # only. Refused, it hid every entry of its day from a reindex and stopped every
            # write to the file, for one zero: read as 1, and lint names it.
            self.report(self._key_line("schema_version"), f"schema_version {version} is read "
                        "as 1: write it 1 (no leading zero)", "error")
        elif type(version) is not int or version != SCHEMA_VERSION:
            # ``type`` and not ``==``: ``true`` and ``1.0`` equal 1 in Python, and reading
            # them as 1 would guess at a file nobody wrote as version 1.
            shown = quoted_value(version) if isinstance(version, str) else _shown(version)
            self.report(
                self._key_line("schema_version"),
                f"unsupported schema_version {shown} (this version reads 1)",
                "fatal"
            )
        # An unknown type or unreadable date is fatal only where the file name does not say
        # it: where it does, the name wins as over a mismatched value, and a typo in one
        # frontmatter line no longer hid the whole day's entries from the index.
        if "type" in data and fm_kind is None:
            self.report(self._key_line("type"),
                        f"unknown file type {quoted_value(data.get('type'))}"
                        + (f" (read as {name_kind.file_type}, as the file name says)"
                           if name_kind else ""), "warning" if name_kind else "fatal")
        if "date" in data and fm_day is None:
            self.report(self._key_line("date"),
                        f"unreadable date {quoted_value(data.get('date'))}"
                        + (f" (read as {name_day}, as the file name says)" if name_day else ""),
                        "warning" if name_day else "fatal")
        if data.get("user_id") is None:  # ``user_id:`` left empty too: no owner is checked
            self.report(self._key_line("user_id"), "frontmatter has no user_id", "warning")
        folder_user = _folder_user(self.path)
        if folder_user is not None and data.get("user_id") is not None \
                and str(data["user_id"]) != folder_user:
            # the index takes a log's user from its folder: a log moved by hand into another
            # user's folder silently gave that user its entries
            self.report(self._key_line("user_id"),
                        f"user_id {quoted_value(data['user_id'])} is not the user of the folder "
                        f"it is in ({quoted_value(folder_user)}): its entries are read as "
                        "that user's", "warning")
        if name_kind and fm_kind and name_kind != fm_kind:
            self.report(self._key_line("type"),
                        f"type {fm_kind.file_type} does not match the file name", "warning")
        if name_day and fm_day and name_day != fm_day:
            self.report(self._key_line("date"), f"date {fm_day} does not match the file name",
                        "warning")
        log.kind = name_kind or fm_kind
        log.day = name_day or fm_day
        if log.kind is None:
            self.report(1, "cannot tell the kind of log (no 'type' in the frontmatter)", "fatal")
        if log.day is None:
            self.report(1, "cannot tell the day of the log (no 'date' in the frontmatter)", "fatal")

    # -- entries ------------------------------------------------------------------------------
    def _markers(self, start: int) -> Iterator[_Marker]:
        """Every entry marker from line ``start`` (0-based) on, in order: found by one regex
        over the text, never line by line."""
        pos = sum(len(line) for line in self.lines[:start])
        line = start
        for m in _MARKER_RE.finditer(self.text, pos):
            line += self.text.count("\n", pos, m.start())
            pos = m.start()
            yield _Marker(line, m.group(1) == "/", m.group(2), m.start(), m.end())

    def _indented(self, log: DailyLog, at: tuple[int, int], end: int) -> set[tuple[bool, str]]:
        """An error per entry marker indented by spaces or tabs, or else misshapen (see
        ``_MISSHAPEN_MARKER_RE``), from ``at`` (offset, 0-based line) to offset ``end``, text
        outside every readable entry; ``(closing, id)`` of each. The entry it opens or closes
        is not read: it was skipped without an error (not indexed, not searchable, not merged),
        or with a warning that named the wrong line. Its id is unreadable, as a broken entry's
        is: still in the file, never taken as deleted."""
        found: set[tuple[bool, str]] = set()
        pos, line = at
        matches = {m.start(): m for m in _MISSHAPEN_MARKER_RE.finditer(self.text, pos, end)}
        matches.update((m.start(), m) for m in _INDENTED_MARKER_RE.finditer(self.text, pos, end))
        for start in sorted(matches):
            m = matches[start]
            closing, entry_id = bool(m.group(1)), m.group(2)
            line += self.text.count("\n", pos, start)
            pos = start
            what = f"{'closing' if closing else 'opening'} marker of {quoted_value(entry_id)}"
            if m.re is _INDENTED_MARKER_RE:
                self.report(line + 1, f"{what} is indented: the entry is not read (kept as "
                            "written; remove the indentation before the marker)")
            else:
                marker = f"<!-- {'/' if closing else ''}entry:{entry_id} -->"
                self.report(line + 1, f"{what} is not written as {marker} alone on its "
                            f"line: the entry is not read (kept as written: "
                            f"{quoted_value(m.group().strip())})")
            found.add((closing, entry_id))
            log.unreadable.add(entry_id)
        return found

    def _outside(self, log: DailyLog, gap: tuple[int, int] | None,
                 end: int) -> tuple[set[tuple[bool, str]], bool]:
        """Report the text from ``gap`` (offset, 0-based line) to offset ``end``, outside
        every entry: its indented entry markers (:meth:`_indented`, whose findings it
        returns), else a warning when it looks like an entry that lost its markers: a line
        ``owner_id:`` or a ``## Subject`` / ``## <main section>`` heading (and True). Notes
        between entries are welcome (SPEC §3) and said nothing of; an entry pasted without its
        markers was not read, and ``lint`` said all was well."""
        if gap is None or log.kind is None:
            return set(), False
        self._hidden_outside(gap, end)
        indented = self._indented(log, gap, end)
        if indented:  # its entry's text is no entry without markers
            return indented, False
        names = {log.kind.main_section, "Subject"} if log.kind is Kind.EPISODE else {
            log.kind.main_section}
        pattern = _ENTRY_LIKE_RE.get(log.kind)
        if pattern is None:
            heads = "|".join(re.escape(n) for n in sorted(names))
            pattern = _ENTRY_LIKE_RE[log.kind] = re.compile(
                rf"^(?:##[ \t]+(?:{heads})[ \t]*\r?$|owner_id[ \t]*:)", re.M)
        found = pattern.search(self.text, gap[0], end)
        if found is not None:
            line = gap[1] + self.text.count("\n", gap[0], found.start()) + 1
            what = found.group().strip()
            self.report(line, f"{quoted_value(what)} outside any entry: it is not read, as an "
                        "entry without its <!-- entry:ID --> and <!-- /entry:ID --> markers "
                        "(kept as written; add the markers to read it)", "warning")
        return set(), found is not None

    def _hidden_outside(self, gap: tuple[int, int], end: int) -> None:
        """A warning when the text from ``gap`` (offset, 0-based line) to offset ``end``,
        outside every entry, holds characters of :data:`_HIDDEN_IN_BLOCK_RE`: naming its first
        line and the code points. Not read, but a NUL there made grep and git take the log
        for a binary file, an escape sequence rewrote the terminal of whoever ran ``cat``, and
        ``lint`` said nothing. Past :data:`MAX_HIDDEN_LINES` such stretches, one more warning."""
        found = list(islice(_HIDDEN_IN_BLOCK_RE.finditer(self.text, gap[0], end), 64))
        if not found:
            return
        self.hidden_outside += 1
        if self.hidden_outside > MAX_HIDDEN_LINES + 1:
            return
        line = gap[1] + self.text.count("\n", gap[0], found[0].start()) + 1
        if self.hidden_outside > MAX_HIDDEN_LINES:
            self.report(line, "more text outside the entries holds invisible characters "
                        "from here", "warning")
            return
        points = list(dict.fromkeys(m.group() for m in found))
        shown = ", ".join(_code_point(c) for c in points[:3])
        more = " and more" if len(points) > 3 else ""
        plural = "s" if len(points) > 1 else ""
        binary = "; a NUL makes grep and git take the log for a binary file" \
            if "\x00" in points else ""
        self.report(line, f"invisible character{plural} {shown}{more} outside any entry (not "
                    f"read, kept as written{binary}): remove it unless it is meant", "warning")

    def _entries(self, log: DailyLog, start: int) -> None:
        first_at: dict[str, int] = {}  # every opened id, parseable or not -> its first line
        deprecated = log.deprecated_entries
        # where text outside every entry starts (offset, 0-based line); None inside a broken
        # entry, whose text another problem names
        gap: tuple[int, int] | None = (sum(len(line) for line in self.lines[:start]), start)
        markers = self._markers(start)
        marker = next(markers, None)
        while marker is not None:
            if marker.close:
                # The text before it is read as no entry: an opening marker deleted by
                # mistake left the entry's text there unread, and only this marker was named.
                indented, entry_like = self._outside(log, gap, marker.start)
                if (False, marker.id) not in indented:
                    self.report(marker.line + 1, f"closing marker of {quoted_value(marker.id)} "
                                "without an opening one", "warning")
                if entry_like:  # its text is still there: kept indexed as it was, as an
                    # entry whose closing marker was lost is, never taken as deleted
                    log.unreadable.add(marker.id)
                gap = (marker.end, marker.line)
                marker = next(markers, None)
                continue
            self._outside(log, gap, marker.start)
            gap = None
            entry_id, i = marker.id, marker.line
            if entry_id in first_at:
                # A frontmatter key names an id, not a block: archiving one would archive both.
                self.report(i + 1, duplicate_message(entry_id, first_at[entry_id]))
            first_at.setdefault(entry_id, i + 1)
            closed = next(markers, None)
            # the entry's text up to the next marker, when that marker is not its own closing
            broken = (marker.end, i), len(self.text) if closed is None else closed.start
            if closed is None or not closed.close:
                if (True, entry_id) not in self._indented(log, *broken):
                    self.report(
                        i + 1, f"entry {quoted_value(entry_id)} is not closed by <!-- "
                               f"/entry:{entry_id} -->"
                    )
                if closed is None:  # the text ends inside this entry
                    log.open_at_end = entry_id
                log.unreadable.add(entry_id)
                marker = closed
                continue
            gap = (closed.end, closed.line)
            if closed.id != entry_id:
                indented = self._indented(log, *broken)
                if not {(True, entry_id), (False, closed.id)} <= indented:
                    self.report(
                        closed.line + 1,
                        f"closing marker names {quoted_value(closed.id)} but the open entry "
                        f"is {quoted_value(entry_id)}",
                    )
                # Either id may be the entry's (a typo in one marker): both are still in the
                # file, and neither is taken as deleted until the markers agree.
                log.unreadable |= {entry_id, closed.id}
                marker = next(markers, None)
                continue
            if first_at[entry_id] == i + 1:
                end = closed.end + (self.text[closed.end : closed.end + 1] == "\n")
                entry = self._entry(log, entry_id, i, self.text[marker.start : end])
                if entry is not None and entry.id not in self.unreadable_archive:
                    entry.deprecated_by = deprecated.get(entry.id)
                    log.entries.append(entry)
                else:
                    log.unreadable.add(entry_id)
            marker = next(markers, None)
        # An id read once is readable, whatever a later duplicate block of it holds.
        log.unreadable -= {entry.id for entry in log.entries}
        if log.open_at_end is None:
            # The next entry's opening marker is being written: what follows it in the file
            # is not there yet, it has not gone.
            log.open_at_end = _opening_cut_short(self.text)
            if log.open_at_end is not None:  # said, as an unclosed entry is: it may stay so
                self.report(self.text.count("\n") + 1,
                            "the text ends inside an entry marker (a file still being written, "
                            "or cut short): the entries it does not hold are kept indexed until "
                            "it is whole")
        if log.open_at_end is None:
            self._outside(log, gap, len(self.text))

    def _entry(self, log: DailyLog, entry_id: str, first: int, block: str) -> Entry | None:
        """One entry from the text of its ``block`` (opening marker to the end of the closing
        marker's line) starting at line ``first`` (0-based)."""
        line_no = first + 1
        try:
            eid = parse_entry_id(entry_id)
        except InvalidId as exc:
            self.report(line_no, str(exc))
            return None
        if eid.kind != log.kind or eid.day != log.day:
            self.report(line_no, f"entry id {entry_id} does not belong in this file (kind or date)")
            return None
        size = _utf8_size(block)
        if size > self.max_entry_bytes:
            self.report(line_no, f"entry {entry_id} is {size:,} bytes, over limits."
                        f"max_entry_bytes ({self.max_entry_bytes:,}); not read")
            return None

        lines = [bare(line) for line in split_lines(block)]  # block-local: 0 = opening marker
        last = len(lines) - 1
        k = 1
        while k < last and not lines[k].strip():
            k += 1
        if k >= last or lines[k].rstrip() != "---":
            self.report(line_no, f"entry {entry_id} has no '---' metadata block")
            return None
        meta_end = next((m for m in range(k + 1, last) if lines[m].rstrip() == "---"), None)
        if meta_end is None:
            self.report(first + k + 1, f"entry {entry_id}: metadata block is not closed by '---'")
            return None
        data, problem = load_yaml("\n".join(lines[k + 1 : meta_end]), first + k + 2)
        if problem:
            self.report(problem[0], f"entry {entry_id}: {problem[1]}")
            return None
        if data is None:
            data = {}
        if not isinstance(data, dict):
            self.report(first + k + 1, f"entry {entry_id}: metadata must be a YAML mapping")
            return None
        meta = {str(key): value for key, value in data.items()}

        missing = [key for key in REQUIRED_META if meta.get(key) in (None, "")]
        if missing:
            self.report(
                line_no, f"entry {entry_id}: missing required metadata {', '.join(missing)}"
            )
            return None
        read = parse_timestamp(meta["timestamp"])
        if read is None:
            self.report(line_no, f"entry {entry_id}: unreadable timestamp "
                                 f"{quoted_value(meta['timestamp'])}")
            return None
        form = timestamp_form_problem(meta["timestamp"]) if isinstance(
            meta["timestamp"], str) else None
        if form is not None:
            at = next((first + m + 1 for m in range(k + 1, meta_end)
                       if re.match(r"['\"]?timestamp['\"]?[ \t]*:", lines[m])), line_no)
            self.report(at, f"entry {entry_id}: timestamp {quoted_value(meta['timestamp'])} "
                            f"{form}; the entry is not read until it is fixed")
            return None
        if utc_day(read) is None:  # the rule new records follow; past it, UTC arithmetic fails
            self.report(line_no, f"entry {entry_id}: timestamp {format_timestamp(read)} "
                        f"{OUT_OF_RANGE}")
            return None

        sections = self._sections(entry_id, lines[meta_end + 1 : last], first + meta_end + 1)
        def key_line(key: str) -> int:
            written = re.compile(rf"^(['\"]?){re.escape(key)}\1[ \t]*:")
            return next((first + m + 1 for m in range(k + 1, meta_end)
                         if written.match(lines[m])), line_no)

        self._check(log, eid, meta, sections, line_no, key_line)
        if _HIDDEN_IN_BLOCK_RE.search(block):
            self._hidden(lines, first, f"entry {entry_id}", "in the text (kept as written; it "
                         "reaches narratives and search snippets")
        return Entry(entry_id, eid.kind, meta, sections, line=line_no, raw=bare(block))

    def _hidden(self, lines: list[str], first: int, what: str, why: str,
                pattern: re.Pattern[str] = _HIDDEN_RE) -> None:
        """One warning per line of ``lines`` (bare, the first at line ``first``, 0-based: an
        entry's from its opening marker, or the file frontmatter's) holding characters of
        ``pattern`` (:data:`_HIDDEN_RE`), naming their code points and columns; past
        :data:`MAX_HIDDEN_LINES` lines, one warning counts the rest. ``what``: whose lines
        (``entry ep_…``, ``file frontmatter``); ``why``: what the character does there. Found
        only by looking at the bytes, they would otherwise pass ``lint`` and reach
        narratives and snippets, or show an archive mark other than the one stored."""
        found = [(k, line) for k, line in enumerate(lines) if pattern.search(line)]
        for k, line in found[:MAX_HIDDEN_LINES]:
            points = list(dict.fromkeys(pattern.findall(line)))
            # where each first stands: a zero-width space shows nothing to look for
            shown = ", ".join(f"{_code_point(c)} at column {line.index(c) + 1}"
                              for c in points[:3])
            more = f" and {len(points) - 3} more" if len(points) > 3 else ""
            plural = "s" if len(points) > 1 else ""
            self.report(first + k + 1, f"{what}: invisible character{plural} {shown}{more} "
                        f"{why}: remove it unless it is meant)", "warning")
        if len(found) > MAX_HIDDEN_LINES:
            self.report(first + found[MAX_HIDDEN_LINES][0] + 1,
                        f"{what}: invisible characters on "
                        f"{len(found) - MAX_HIDDEN_LINES} more lines from here", "warning")

    def _sections(self, entry_id: str, lines: list[str], start: int) -> dict[str, str]:
        """The ``##`` sections of an entry's body ``lines`` (bare), the first at line ``start``
        (0-based)."""
        sections: dict[str, str] = {}
        name: str | None = None
        body: list[str] = []

        def flush() -> None:
            if name is not None:
                if name in sections:
                    self.report(
                        start + 1, f"entry {entry_id}: section {quoted_value(name)} repeated",
                        "warning"
                    )
                    sections[name] += "\n\n" + "\n".join(body).strip()
                else:
                    sections[name] = "\n".join(body).strip()

        preamble_reported = False
        for k, line in enumerate(lines, start):
            heading = HEADING_RE.match(line)
            if heading:
                flush()
                name, body = heading.group(1), []
            elif name is not None:
                body.append(unescape_body_line(line))
            elif line.strip() and not preamble_reported:
                # Kept in the file (and in Entry.raw) but not indexed.
                self.report(k + 1, f"entry {entry_id}: text before the first ## section", "warning")
                preamble_reported = True
        flush()
        return sections

    def _check(
        self, log: DailyLog, eid: EntryId, meta: dict[str, Any], sections: dict[str, str],
        line: int, key_line: Callable[[str], int],
    ) -> None:
        """Problems worth telling a person about that do not stop indexing (``key_line``: the
        1-based line of a metadata key, for a problem with its value)."""
        ts = meta["timestamp"]
        read = parse_timestamp(ts)
        if read is not None and _date_only(ts):
            shown = repr(ts) if isinstance(ts, str) else ts.isoformat()
            self.report(key_line("timestamp"), f"entry {eid}: timestamp {shown} has no time of "
                        f"day (read as {format_timestamp(read)})", "warning")
        elif isinstance(ts, str | datetime) and read is not None:
            raw_tz = ts.tzinfo if isinstance(ts, datetime) else None
            if isinstance(ts, str):
                as_written = read_iso_timestamp(ts)
                raw_tz = as_written.tzinfo if as_written is not None else None
            if raw_tz is None:
                self.report(key_line("timestamp"),
                            f"entry {eid}: timestamp has no UTC offset (read as UTC)", "warning")
        user = log.frontmatter.get("user_id")
        if user is not None and str(meta["owner_id"]) != str(user):
            self.report(
                key_line("owner_id"),
                f"entry {eid}: owner_id {quoted_value(meta['owner_id'])} is not the file's user "
                f"{quoted_value(user)}",
                "warning",
            )
        allowed = eid.kind.info.parent_types
        parent_type = meta.get("parent_type")  # a hand edit may make it a list or a mapping
        if allowed and not (isinstance(parent_type, str) and parent_type in allowed):
            self.report(
                key_line("parent_type"),
                f"entry {eid}: parent_type {quoted_value(parent_type)} is not one "
                f"of {sorted(allowed)}",
                "warning",
            )
        resolved_at = meta.get("resolved_at")
        if eid.kind is Kind.RELATION and isinstance(resolved_at, list | dict):
            # served as written by `relations` (`resolved_at: [1]`), and lint said nothing
            self.report(key_line("resolved_at"), f"entry {eid}: resolved_at is a YAML "
                        f"{_yaml_type(resolved_at)}, not a time: it is ignored (shown as none)",
                        "warning")
        for key in (*TEXT_KEYS, *_RECORD_TEXT_KEYS.get(eid.kind, ())):
            value = meta.get(key)
            if value is not None and meta_text(value) is None:
                how = "shown and indexed as none" if key in TEXT_KEYS else "shown as none"
                self.report(key_line(key), f"entry {eid}: {key} is a YAML "
                            f"{_yaml_type(value)}, not one value: it is ignored ({how})",
                            "warning")
            elif value is not None and not isinstance(value, str):
                self.report(key_line(key), f"entry {eid}: {key} is read as "
                            f"{json_got(value)}, not as the text written: put it in quotes",
                            "warning")
        # a narrative's ``sources`` too: ``sources: {a: b}`` was read as no sources, so the
        # narrative's sources went uncounted and uncited by explain, and lint said nothing
        narrative = eid.kind is Kind.EPISODE and parent_type == "cluster"
        for key in ID_LIST_KEYS if eid.kind.derived else ("sources",) if narrative else ():
            value = meta.get(key)
            items, ok = id_items(value)
            if not ok:
                self.report(key_line(key), f"entry {eid}: {key} is "
                            f"{_id_list_shape(value)}, not a list of ids (write [id, ...])",
                            "warning")
            elif (odd := next((i for i in items if not is_entry_id(i)), None)) is not None:
                # a typo or a user id in the list: cited as if deleted (`explain` said so,
                # and its record goes stale), and `lint` said nothing
                self.report(key_line(key), f"entry {eid}: {key} holds {quoted_value(odd)}, "
                            "which is no entry id (e.g. ep_20261012_0001): it cites nothing",
                            "warning")
        record = meta.get("provenance")
        if narrative and record is not None and (problem := _provenance_problem(record)):
            # read as no record (provenance.provenance): every sentence credited to all the
            # sources in explain and `provenance`, and lint said nothing
            self.report(key_line("provenance"), f"entry {eid}: provenance {problem} (read as "
                        "no record: every sentence is credited to all sources)", "warning")
        hashes = meta.get("evidence_hash")
        if eid.kind.derived and hashes is not None and not isinstance(hashes, dict):
            # read as no hash at all (provenance.evidence_hashes): an edit of a cited record
            # went unnoticed, the record never went stale for it, and lint said nothing
            self.report(key_line("evidence_hash"), f"entry {eid}: evidence_hash "
                        f"{quoted_value(hashes)} is not a mapping of each cited id to its "
                        "hash (read as none: an edit of a record it cites is not noticed)",
                        "warning")
        if "importance" in meta:
            value = meta["importance"]
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 10:
                # null and true in YAML's words: "importance None" named a value nobody wrote
                shown = quoted_value(value) if isinstance(value, str) else _shown(value)
                self.report(key_line("importance"), f"entry {eid}: importance "
                            f"{shown} is not a whole number 1-10 written in "
                            "decimal (not read: scored as if absent)", "warning")
        if MERGE_KEY in meta:
            self.report(key_line(MERGE_KEY), f"entry {eid}: '{MERGE_KEY}' is read as a key of "
                        "its own, not as a YAML merge (kept as written; write the keys it "
                        "holds in the metadata itself)", "warning")
        if eid.kind.derived and meta.get("depth") is not None:
            value = meta["depth"]
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                # read as 1 where tiers compare depths, and nothing said so until a run
                # refused a record for a depth nobody wrote
                self.report(key_line("depth"), f"entry {eid}: depth {quoted_value(value)} is "
                            "not a whole number of 1 or more written in decimal (read as 1; "
                            "a derived record is 1 + the deepest record it cites)", "warning")
        for key, problem in _choice_problems(eid.kind, meta, str(eid)):
            self.report(key_line(key), f"entry {eid}: {problem}", "warning")
        long_subject = subject_length_problem(sections.get("Subject", ""))
        if long_subject is not None:
            # kept, read and indexed as written: refusing it would lose the entry
            self.report(line, f"entry {eid}: subject {long_subject} (kept and indexed as "
                        "written; shorten it)", "warning")
        subject_lines = subject_line_count(sections.get("Subject", ""))
        if subject_lines > 1:
            # add, the API and MCP refuse it; written by hand it is read (one line in search
            # tables, a line break in JSON and briefings) and nothing said so
            self.report(line, f"entry {eid}: subject is {subject_lines} lines; it must be one "
                        "line (kept and indexed as written; join them)", "warning")
        if eid.kind is Kind.EPISODE and blank(sections.get("Subject", "")):
            # add, the API and MCP refuse an empty subject; written by hand the entry is read,
            # indexed, searched and merged with none (shown blank), and nothing said so
            what = "'## Subject' section is empty" if "Subject" in sections else (
                f"no '## Subject' section{_near_miss(sections, 'Subject')}")
            self.report(line, f"entry {eid}: {what}; an Episode needs a one-line subject, as "
                        "add requires (indexed and merged without one; write it)", "warning")
        main = eid.kind.main_section
        if main in sections and not sections[main]:  # it was "no '## Lesson' section"
            self.report(line, f"entry {eid}: '## {main}' section is empty (nothing to "
                        "index)", "warning")
        elif not sections.get(main):
            self.report(line, f"entry {eid}: no '## {main}' section (nothing to index"
                        f"{_near_miss(sections, main)})", "warning")


def _near_miss(sections: Mapping[str, str], name: str) -> str:
    """What to say of a section written like ``name`` but not as it (``## content``,
    ``## CONTENT``): the entry's text there is kept, but read as a section of its own, so
    none of it was indexed, and the warning did not say why."""
    for written in sections:
        if written != name and written.strip().casefold() == name.casefold():
            return f"; '## {written}' is not read as it: write '## {name}'"
    return ""


#: SPEC §10's ``status`` values per derived kind, as the tiers compare them (stripped, case
#: kept): any other is none of them, so ``status: zombie`` or ``Active`` left a lesson out of
#: every briefing and from provenance's checks, and lint said nothing.
STATUSES: dict[Kind, tuple[str, ...]] = {
    Kind.INSIGHT: ("active", "stale", "retired"),
    Kind.CONVICTION: ("active", "stale", "retired"),
    Kind.RELATION: ("active", "resolved", "stale", "retired"),
    Kind.LESSON: ("active", "contested", "stale", "retired"),
}


def _choice_problems(kind: Kind, meta: dict[str, Any],
                     entry_id: str = "") -> list[tuple[str, str]]:
    """A derived record's or task's enumerated keys holding a value no reader takes: its
    ``status``, a lesson's ``lesson_type`` (anything but ``avoid`` read as ``do``: an
    "avoid" lesson with a typo was served as one to follow) and ``confirmations``, a task's
    ``outcome`` (read as unknown: the task counts as neither a success nor a failure); and
    a conviction's ``key`` when there is none or it is no text (it is in no worldview); a
    lesson's ``contested_with`` naming ``entry_id`` itself, or a contested lesson's naming no
    rival (read as active). Each as (key, problem), reported on the key's line."""
    if kind not in STATUSES and kind is not Kind.TASK:
        return []  # an Episode or fact: none of these keys is read
    from everos_reflect.procedural.lessons import LESSON_TYPES, no_rival
    from everos_reflect.procedural.tasks import OUTCOMES

    found: list[tuple[str, str]] = []
    status = meta.get("status")
    # as every reader takes it (served_status): in any case (`status: ACTIVE` is served as
    # active), and a blank one as active, as when absent (it was "status '' is not one of")
    if kind in STATUSES and served_status(meta) not in STATUSES[kind]:
        found.append(("status", f"status {_is(status)} not one of "
                      f"{', '.join(STATUSES[kind])} (write one of them)"))
    key = meta.get("key")
    if kind is Kind.CONVICTION and key is not None and meta_text(key) is None:
        # `key: [a, b]` was read as the key "['a', 'b']", a slot nobody wrote
        found.append(("key", f"key must be a string, got a {_yaml_type(key)} (read as no key: "
                      "a conviction without one is in no worldview or briefing)"))
    elif kind is Kind.CONVICTION and key is not None and not isinstance(key, str):
        # `key: true` was read as the key "True", `key: 12` as "12": no key the daemon
        # writes (a letter first), nor what was written (beliefs.key_of)
        found.append(("key", f"key must be a string, got {json_got(key)} (read as no key: a "
                      "conviction without one is in no worldview or briefing; put it in "
                      "quotes)"))
    elif kind is Kind.CONVICTION and not (meta_text(key) or "").strip():
        # as beliefs.key_of reads it: a worldview holds the newest conviction of each key,
        # so one without is in no worldview and no briefing, and nothing said why
        found.append(("key", "no key: a conviction is current per key, so one without is "
                      "in no worldview or briefing (write one, e.g. key: identity)"))
    elif kind is Kind.CONVICTION and not CONVICTION_KEY_RE.fullmatch(key.strip()):
        # a control character ("\x1b[31m" in quotes), a space or 5,000 characters: no key
        # `keys` in ome.toml may name, so no run ever writes its next version
        found.append(("key", f"key {quoted_value(key.strip())} is not a key update_worldview "
                      "writes (a letter, then at most 63 letters, digits, _ or -): no run "
                      "revises this conviction, as ome.toml's keys cannot name it"))
    if kind is Kind.LESSON:
        kept = meta.get("lesson_type")
        if kept is not None and str(kept).strip().lower() not in LESSON_TYPES:
            found.append(("lesson_type",
                          f"lesson_type {_is(kept)} not do or avoid (read as do)"))
        rivals, rivals_ok = id_items(meta.get("contested_with"))
        if rivals_ok and entry_id in rivals:
            alone = served_status(meta) == "contested" and no_rival(entry_id, meta)
            found.append(("contested_with", f"contested_with names the lesson itself "
                          f"({entry_id}): a lesson is no rival of its own (not read as one"
                          f"{'; with no other rival it is read as active' if alone else ''})"))
        elif served_status(meta) == "contested" and no_rival(entry_id, meta):
            found.append(("contested_with", "status is contested but contested_with names no "
                          "rival (read as active: name the rival lesson, or write "
                          "status: active)"))
        count = meta.get("confirmations")
        if count is not None and (isinstance(count, bool) or not isinstance(count, int)
                                  or count < 0):
            found.append(("confirmations", f"confirmations {_is(count)} not a whole number "
                          "of 0 or more"))
    if kind is Kind.TASK:
        outcome = meta.get("outcome")
        if outcome is not None and str(outcome).strip().lower() not in OUTCOMES:
            found.append(("outcome", f"outcome {_is(outcome)} not one of "
                          f"{', '.join(OUTCOMES)} (read as unknown: neither a success nor a "
                          "failure to learn from)"))
    written = meta.get("insight_type")
    if kind is Kind.INSIGHT and written is not None and written not in INSIGHT_TYPES:
        # every reader asks `== "reconciliation"`: `Reconciliation`, `[reconciliation]` or
        # a typo made a reconciliation an ordinary insight (its depth cap, its label)
        found.append(("insight_type", f"insight_type {_is(written)} not one of "
                      f"{', '.join(INSIGHT_TYPES)} (read as reflection)"))
    written = meta.get("relation_type")
    if kind is Kind.RELATION and written != SELF_CONTRADICTION:
        # the tiers ask `== "self_contradiction"`: a relation of any other type, or none,
        # is in no census, never resolved by a reconciliation, and nothing said why
        found.append(("relation_type", f"relation_type {_is(written)} not "
                      f"{SELF_CONTRADICTION} (no tier reads this relation)" if written
                      is not None else f"no relation_type: write relation_type: "
                      f"{SELF_CONTRADICTION} (no tier reads a relation without it)"))
    if kind in (Kind.LESSON, Kind.TASK):
        problem = _task_type_problem(kind, meta.get("task_type"))
        if problem is not None:
            found.append(("task_type", problem))
    return found


def _provenance_problem(record: object) -> str | None:
    """What is wrong with the shape of a narrative's ``provenance`` as written (a mapping of
    ``content``, its Content's hash, and ``sentences``, one line of source ids per sentence),
    else None. A hash that no longer matches is a hand edit of the Content, no problem."""
    if not isinstance(record, dict):
        shape = "string" if isinstance(record, str) else _yaml_type(record)
        return (f"is a YAML {shape}, not the record a merge writes (content: hash, "
                "sentences: [ids, ...])")
    content, rows = record.get("content"), record.get("sentences")
    if content is None or meta_text(content) is None:
        return ("has no content hash" if content is None
                else f"content is a YAML {_yaml_type(content)}, not a hash")
    if not isinstance(rows, list) or not all(isinstance(r, str) and r.split() for r in rows):
        return ("sentences is not a list of lines of source ids, one per sentence"
                if rows is not None else "has no sentences")
    odd = next((i for r in rows for i in r.split() if not is_entry_id(i)), None)
    if odd is not None:
        return f"sentences hold {quoted_value(odd)}, which is no entry id"
    return None


def _is(value: object) -> str:
    """``'x' is`` of a value a person wrote, for a message going on "not one of …"; a list
    or mapping as ``["x"] is a YAML list,``: as JSON writes it, with YAML's word for it, where
    Python's ``['x']`` named nothing a person wrote."""
    if isinstance(value, list | dict):
        return f"{json_text(value)} is a YAML {_yaml_type(value)},"
    return f"{quoted_value(value)} is"


#: An insight's ``insight_type`` as SPEC §10 writes it; anything else is read as reflection.
INSIGHT_TYPES = ("reflection", "reconciliation")


def _task_type_problem(kind: Kind, value: object) -> str | None:
    """Why a lesson's or task's ``task_type`` names no task type anyone can ask for, if it
    does not: lessons are served per task type, named as ``lessons --task-type``, the API
    and the briefing take it (:func:`~everos_reflect.model.validate_name`), so a lesson of
    none, or of ``deploy prod``, was never served, and a task of one taught only such
    lessons, without a word. A list or mapping there is :data:`TEXT_KEYS`' to name."""
    text = meta_text(value)
    if value is not None and text is None:
        return None
    lesson = kind is Kind.LESSON
    if not (text or "").strip():
        whose = ("a lesson is served per task type, so one without is never served" if lesson
                 else "lessons are learned per task type, so a task without one teaches none")
        return f"no task_type: {whose} (write one, e.g. task_type: deploy)"
    try:
        validate_name((text or "").strip(), "task_type")
    except InvalidId as exc:
        whose = ("this lesson is never served" if lesson
                 else "no lesson learned from this task is ever served")
        return f"{exc}: no query can ask for this task type, so {whose}"
    return None


def is_entry_id(text: str) -> bool:
    """Whether ``text`` is an entry id that can exist (of the form, of a real day)."""
    try:
        parse_entry_id(text)
    except InvalidId:
        return False
    return True


def _yaml_type(value: object) -> str:
    """What YAML calls the type of a value a person wrote (for a lint message)."""
    names = {list: "list", dict: "mapping", set: "set", bytes: "binary"}
    return next((n for t, n in names.items() if isinstance(value, t)), type(value).__name__)


def _id_list_shape(value: object) -> str:
    """What a value that is no list of ids is, for a lint message."""
    if isinstance(value, list):
        inner = next(v for v in value if v is not None and meta_text(v) is None)
        return f"a list holding a YAML {_yaml_type(inner)}"
    return f"a YAML {_yaml_type(value)}"


#: Metadata whose value is text a person may well write bare, and YAML reads as something
#: else: ``session_id: 123`` is a number, ``true`` a bool, ``2026-10-12`` a date (``0123``,
#: ``1:20`` and ``yes`` stay text: :data:`_DECIMAL_RE`). Such a value is shown and searched
#: as what YAML made of it ("True"), with no word to say so; a warning names it. A list or
#: mapping there is no one value: it is read as absent (:func:`~everos_reflect.model.meta_text`),
#: and named.
TEXT_KEYS = ("session_id", "parent_id", "task_type")

#: A derived record's text-valued keys a person may write (SPEC §10: ``stale_reason``, an
#: insight's ``question``, a relation's ``resolution``), named as :data:`TEXT_KEYS` are when
#: YAML reads them as no text: ``question: [a, b]`` was answered by ``insights`` as a list,
#: ``stale_reason: 42`` as a number, and lint said nothing.
_RECORD_TEXT_KEYS: dict[Kind, tuple[str, ...]] = {
    Kind.INSIGHT: ("question", "stale_reason", "provider"),
    Kind.CONVICTION: ("stale_reason", "supersedes"),
    Kind.RELATION: ("stale_reason", "resolution"),
    Kind.LESSON: ("stale_reason", "supersedes"),
}

#: The id lists of a derived record (SPEC §10). A hand edit that makes one a mapping
#: (``evidence: {x: 1}``) is named: read as one id, its Python text was written back as one.
ID_LIST_KEYS = ("evidence", "contested_with", "between")


def _folder_user(path: str) -> str | None:
    """The user folder a daily log's path puts it in (``…/users/<user>/<kind folder>/<file>``),
    or None for a path outside that layout (``<text>``, a bare file name)."""
    parts = re.split(r"[\\/]", path)
    return parts[-3] if len(parts) >= 4 and parts[-4] == "users" and parts[-3] else None


def parse_log(
    text: str,
    path: str = "<text>",
    *,
    entries: bool = True,
    max_entry_bytes: int = MAX_ENTRY_BYTES,
) -> DailyLog:
    """Parse one daily-log file. Never raises; problems are in ``DailyLog.diagnostics``.

    ``entries=False`` reads only the file frontmatter (kind, day, ``deprecated_entries``,
    fatal problems): all a writer needs, at a fraction of the cost for a long file. An entry
    over ``max_entry_bytes`` (UTF-8, marker to marker) is an error and is not read.
    """
    try:
        if entries:
            return _Parser(text, path, max_entry_bytes).parse()
        log = _Parser(header_text(text), path).parse(entries=False)
        log.text = text
        return log
    except Exception as exc:  # a parser bug must not stop the daemon
        log = DailyLog(path, None, None, {}, text=text)
        log.diagnostics.append(Diagnostic(path, 1, f"the parser failed on this file: {brief(exc)}; it is left as it is: please report this", "fatal"))  # noqa: E501
        return log
