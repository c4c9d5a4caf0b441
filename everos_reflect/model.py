"""The vocabulary shared by every layer: tenants, entry kinds, ids and parsed entries.

Everything here is pure data and validation, no I/O, so the Markdown store, the indexes, the
strategies and the HTTP/CLI edges all agree on what an id or an entry is.
"""

from __future__ import annotations

import hashlib
import re
import shlex
import unicodedata
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from enum import StrEnum
from typing import Any

from everos_reflect.errors import InvalidEpisode, InvalidId, file_at

DEFAULT_APP = "default_app"
DEFAULT_PROJECT = "default_project"

#: app, project, user (and session) ids; also published in the OpenAPI schema.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"
_NAME_RE = re.compile(NAME_PATTERN)


#: The most characters of a bad value an error message quotes.
QUOTED_MAX = 60


def quoted(value: str, *, escape: bool = False) -> str:
    """``value`` quoted for an error message: its ``repr``, or for a longer one its first
    :data:`QUOTED_MAX` characters, ``…`` and its length (``'aaaa…' (5,000 characters)``).
    Messages quoted the whole value, so a 5,000-character ``--type`` made a 5,000-character
    error line (CLI, API and MCP alike). ``escape`` writes control and non-ASCII characters
    as escapes first (``\\x1b``), as an id's message does so that look-alikes are visible."""
    if not escape:
        if len(value) <= QUOTED_MAX:
            return _escaped(value, repr)
        return f"{_escaped(value[:QUOTED_MAX] + '…', repr)} ({len(value):,} characters)"
    # ascii(), not repr() of the escaped text: that escaped each escape's backslash again,
    # so an id holding ESC was named '\\x1b', as if its user had typed a backslash
    if len(_escaped(value)) - 2 <= QUOTED_MAX:
        return _escaped(value)
    cut, size = [], 0  # whole escapes only: the characters whose escapes fit
    for char in value:
        size += len(_escaped(char)) - 2
        if size > QUOTED_MAX:
            break
        cut.append(char)
    shown = _escaped("".join(cut))
    return f"{shown[:-1]}…{shown[-1]} ({len(value):,} characters)"


#: an escaped backslash (kept), or the escape of a byte that is not UTF-8 as Python holds it
_BYTE_ESCAPE = re.compile(r"(\\\\)|\\udc([89a-f][0-9a-f])")


def _escaped(value: str, quote: Callable[[str], str] = ascii) -> str:
    """``ascii(value)`` (or ``quote``'s), with each byte of a name that is not UTF-8 (a folder's, an
    argument's: ``os.fsdecode`` holds it as U+DC80–U+DCFF) written ``\\xff`` as
    :func:`path_text` writes it, the way a shell types it (``$'bad\\xffname'``). A user folder
    so named was reported as ``'bad\\udcffname'``, Python's inside, beside its path shown as
    ``bad\\xffname``."""
    return _BYTE_ESCAPE.sub(lambda m: m.group(1) or f"\\x{m.group(2)}", quote(value))


class ShownKey(str):
    """A key :func:`shown_key` made fit to show; shown again, it stays as it is."""


def shown_key(key: str) -> str:
    """A configuration key (``llm.model``, ``EVEROS_LLM__MODEL``, ``strategies.x.y``) as an
    error names it: as written when it is short and printable, else as :func:`quoted` writes
    it with escapes. A key is text of the file or the environment as much as a value is: an
    unknown 5,000-character key made a 5,000-character error line, and a quoted TOML key may
    hold a line break or a terminal escape, which the error printed raw. A key shown already
    is returned as it is: the problems of one strategy's table, gathered into ``ome.toml``'s
    error, were quoted a second time (``"'strategies.x.kkk…' (100,028 characters)" (84
    characters)``), the length named being the quote's."""
    if isinstance(key, ShownKey):
        return key
    if len(key) <= QUOTED_MAX and key.isprintable():
        return ShownKey(key)
    return ShownKey(quoted(key, escape=True))


#: The most characters of a path an error message shows whole.
PATH_SHOWN_MAX = 200
#: A byte of a path that is not UTF-8, as Python holds it (``os.fsdecode``: U+DC80–U+DCFF),
#: and how it is shown: ``\xff``.
BYTE_ESCAPES = {c: f"\\x{c - 0xDC00:02x}" for c in range(0xDC80, 0xDD00)}


def path_text(path: object) -> str:
    """``path`` as text any output can hold: each byte of it that is not UTF-8 written
    ``\\xff``, everything else as it is. Such a byte reached stdout raw (not UTF-8, and
    invalid in a ``--json`` document), error lines as Python's ``\\udcff``, and the API's
    ``status`` failed on it."""
    return str(path).translate(BYTE_ESCAPES)


def shown_path(path: object) -> str:
    """A path as an error names it: whole up to :data:`PATH_SHOWN_MAX` characters, else as
    :func:`quoted` writes a long value; a byte that is not UTF-8 as :func:`path_text` shows
    it. A path given on the command line is the user's text as much as a value: ``--root``
    of 5,000 characters made a 5,033-character error line ("File name too long: /tmp/zzzz…"),
    and "no memory root at …" named it twice."""
    text = path_text(path)
    return text if len(text) <= PATH_SHOWN_MAX else quoted(text, escape=True)


def shell_path(path: object) -> str:
    """A path as a command for the user to paste names it: quoted for a POSIX shell when it
    holds a space, a quote or another shell character. ``init`` printed ``enable
    reflect_episodes --root /tmp/my notes``, which a shell reads as two words. A path longer
    than :data:`PATH_SHOWN_MAX` is shown cut (:func:`shown_path`), as every message shows it.

    A byte that is not UTF-8, a line break or another character no line shows as itself is
    written in ``$'…'`` (bash, zsh, ksh, POSIX.1-2024 sh) as ``\\xff``, ``\\n``: inside
    ``'…'`` the shell took ``'/tmp/x\\xffy'`` for a backslash, an ``x`` and two ``f``, a root
    that does not exist."""
    text = str(path)
    if len(path_text(text)) > PATH_SHOWN_MAX:
        return shlex.quote(shown_path(text))
    return shell_word(text)


def shell_word(path: object) -> str:
    """``path`` whole as one shell word that reads back as exactly its bytes, as
    :func:`shell_path` writes it but never cut: for a command printed to be run (``init``'s
    ``enable … --root``), where a cut path names another folder."""
    text = str(path)
    if all(c.isprintable() and not 0xD800 <= ord(c) <= 0xDFFF for c in text):
        return shlex.quote(text)
    return "$'" + "".join(_ansi_c(c) for c in text) + "'"


#: Characters ``$'…'`` writes with a letter escape.
_ANSI_C_NAMED = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _ansi_c(char: str) -> str:
    """``char`` inside ``$'…'``: its letter escape, its bytes as ``\\xHH`` when it is no
    UTF-8 (a byte read as a surrogate escape) or shows as nothing, else as it is."""
    if char in _ANSI_C_NAMED:
        return _ANSI_C_NAMED[char]
    if 0xDC80 <= ord(char) <= 0xDCFF:
        return f"\\x{ord(char) - 0xDC00:02x}"
    if not char.isprintable():
        return "".join(f"\\x{b:02x}" for b in char.encode("utf-8", "surrogatepass"))
    return char


#: The most names (unknown parameters, fields) one error message lists.
NAMES_MAX = 5


def shown_names(names: Iterable[str], most: int = NAMES_MAX) -> str:
    """Names a client chose (query parameters, body keys), each as :func:`shown_key` writes it,
    the first ``most`` of them and how many more: ``a, b and 2,995 more``. A 5,000-character
    query parameter name made a 5,102-character 422 body, and 3,000 unknown ones a 26 kB one."""
    names = list(names)
    shown = ", ".join(shown_key(name) for name in names[:most])
    rest = len(names) - most
    return f"{shown} and {rest:,} more" if rest > 0 else shown


#: A URL's ``scheme://`` (optional) and its userinfo, up to the last ``@``: credentials.
_USERINFO_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)?.*@", re.DOTALL)


def redacted_url(url: str) -> str:
    """``url`` with its userinfo (``user:secret@``) written ``***@``, for an error or a log:
    ``https://***@host/v1``. A ``base_url`` may carry credentials; a URL error and a provider
    failure showed them. Everything up to the last ``@`` counts as userinfo, so a password
    holding ``@`` or ``/`` (unencoded: the URL is wrong, and its error must show it) is
    never shown either. The values of its query string and its fragment are written ``***``
    too (``?api_key=***``): some gateways take the key there."""
    url = _USERINFO_RE.sub(lambda m: f"{m.group(1) or ''}***@", url, count=1)
    base, mark, rest = url.partition("?")
    if mark:
        query, hash_, fragment = rest.partition("#")
        pairs = [f"{p.split('=', 1)[0]}=***" if "=" in p else "***" if p else ""
                 for p in query.split("&")]
        url = base + "?" + "&".join(pairs) + hash_ + ("***" if fragment else "")
    else:
        base, hash_, fragment = url.partition("#")
        url = base + hash_ + ("***" if fragment else "")
    return url


def quoted_value(value: object) -> str:
    """:func:`quoted` for a value of any type (a request field, a YAML value, an LLM reply): a
    string as :func:`quoted` writes it, anything else as its ``repr``, cut the same way when
    longer (a list of 5,000 items is as long a line as a 5,000-character string)."""
    if isinstance(value, str):
        return quoted(value)
    text = repr(value)
    if len(text) <= QUOTED_MAX:
        return text
    return f"{text[:QUOTED_MAX]}… ({len(text):,} characters)"


def json_type(value: object) -> str:
    """JSON's (and YAML's) word for the type of ``value`` as :mod:`json` or YAML reads it: a
    request's field, a model's reply, a log's metadata ("got null", not Python's "got
    NoneType")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, date):  # YAML reads 2026-10-12 as a date
        return "a date"
    return "a value"


def json_got(value: object) -> str:
    """What was given instead, in JSON's words: its type and itself as JSON writes it, cut to
    :data:`QUOTED_MAX` characters (``a number: 3``, ``an array: [1, 2]``, ``null``). Every
    "must be a string, got …" says it so: Python's type names ("got int", "got NoneType")
    named nothing a person or a client wrote."""
    return json_type(value) if value is None else f"{json_type(value)}: {json_text(value)}"


def json_text(value: object) -> str:
    """``value`` as JSON writes it (a date in ISO form), cut to :data:`QUOTED_MAX` characters;
    what is no JSON (bytes of a raw body, a YAML set) as :func:`quoted_value` shows it. A
    list a person wrote is ``["x"]`` this way, not Python's ``['x']``."""
    import json

    if isinstance(value, date):
        text = value.isoformat()
    elif isinstance(value, float) and type(value).__repr__ is not float.__repr__:
        text = repr(value)  # a number kept as the client wrote it (json writes 1e3 as 1000.0)
    else:
        try:
            text = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError):  # not JSON (bytes of a raw body): as any value is shown
            return quoted_value(value)
    if len(text) > QUOTED_MAX:
        text = f"{text[:QUOTED_MAX]}… ({len(text):,} characters)"
    return text


def unplain_number(text: str) -> str | None:
    """Why ``text``, a number a person typed (an environment variable, a query string), is
    not written plainly, else ``None``. Python's ``int()``/``float()`` read ``1_0`` as 10 and
    Arabic-Indic or full-width digits as ASCII ones: ``limit=1_0`` returned ten rows, a typo
    for 1 or 0 read as a setting nobody wrote. Digits 0-9, no ``_``; the reader checks the rest."""
    if not text.isascii():
        return "write it with the digits 0-9"
    if "_" in text:
        return "write it without '_' between digits"
    return None


def must_not_be_empty(takes: str = "") -> str:
    """How every edge says a value given as ``""`` is empty: ``must not be empty``, and what
    the field takes when that helps (``must not be empty (one of: success, failure)``, ``(a
    whole number from 1 to 1000)``). Given ``''``, a choice said "must be one of …; got ''",
    a number "…, got ''" and an id "use 1-128 characters": each read as a value misspelt
    where none was given."""
    return f"must not be empty ({takes})" if takes else "must not be empty"


def empty_id(what: str, takes: str = "") -> str:
    """``invalid entry id '': must not be empty``: an id (``what``) given as ``""``, in one
    wording for user ids, entry ids, relation ids and strategy names, at every edge."""
    return f"invalid {what} '': {must_not_be_empty(takes)}"


def validate_name(value: object, what: str = "user_id") -> str:
    """Return ``value`` if it is a safe app/project/user id, else raise :class:`InvalidId`.

    Checked before any path is built, so ``../x``, ``a/b``, ``.``, control characters and
    look-alike unicode never reach the filesystem.
    """
    if not isinstance(value, str):
        raise InvalidId(f"{what} must be a string, got {json_got(value)}")
    if not value:  # named as empty: "use 1-128 characters" read as a bad spelling of an id
        raise InvalidId(empty_id(what))
    if value in {".", ".."} or not _NAME_RE.fullmatch(value):
        raise InvalidId(
            f"invalid {what} {quoted(value, escape=True)}: use 1-128 characters from "
            "A-Z a-z 0-9 _ . -, "
            "starting with a letter or digit"
        )
    return value


#: The one ``relation_type`` SPEC §10 defines: the contradiction and reconcile tiers read
#: relations of it alone (``lint`` names any other).
SELF_CONTRADICTION = "self_contradiction"


@dataclass(frozen=True)
class KindInfo:
    """Everything the layers need to know about one kind of record, in one row.

    ``stem`` names the files (``<stem>-YYYY-MM-DD.md``), ``folder`` holds them under the user's
    folder, ``file_type`` is the frontmatter ``type``, ``main`` the section that carries the
    record's text, ``table`` its LanceDB table, ``parent_types`` the allowed ``parent_type``
    values (empty: not checked), ``derived`` whether the daemon derives it (SPEC §10 metadata).
    """

    prefix: str
    folder: str
    stem: str
    file_type: str
    main: str
    table: str
    parent_types: frozenset[str] = frozenset()
    derived: bool = False


class Kind(StrEnum):
    """The kinds of daily log (SPEC §2, §3, §10). Their on-disk names live in :data:`KINDS`."""

    EPISODE = "episode"
    ATOMIC_FACT = "atomic_fact"
    INSIGHT = "insight"
    CONVICTION = "conviction"
    RELATION = "relation"
    TASK = "task"
    LESSON = "lesson"

    @property
    def info(self) -> KindInfo:
        return KINDS[self]

    @property
    def prefix(self) -> str:
        return KINDS[self].prefix

    @property
    def folder(self) -> str:
        return KINDS[self].folder

    @property
    def stem(self) -> str:
        """The file-name stem: ``worldview`` for convictions, the kind's value otherwise."""
        return KINDS[self].stem

    @property
    def file_type(self) -> str:
        """The ``type`` written in a daily log's frontmatter."""
        return KINDS[self].file_type

    @property
    def main_section(self) -> str:
        """The ``##`` section holding the record's text (what ``Entry.content`` returns)."""
        return KINDS[self].main

    @property
    def table(self) -> str:
        """The LanceDB table holding this kind's vectors."""
        return KINDS[self].table

    @property
    def derived(self) -> bool:
        return KINDS[self].derived

    def filename(self, day: date) -> str:
        return f"{self.stem}-{day.isoformat()}.md"

    @classmethod
    def from_prefix(cls, prefix: str) -> Kind:
        kind = _BY_PREFIX.get(prefix)
        if kind is None:
            raise InvalidId(f"unknown entry id prefix {quoted_value(prefix)}")
        return kind

    @classmethod
    def from_stem(cls, stem: str) -> Kind | None:
        return _BY_STEM.get(stem)

    @classmethod
    def from_file_type(cls, file_type: object) -> Kind | None:
        return next((k for k in cls if KINDS[k].file_type == file_type), None)


#: The one registry of kinds: a new tier adds a row here and a member to :class:`Kind`.
KINDS: dict[Kind, KindInfo] = {
    Kind.EPISODE: KindInfo(
        "ep", "episodes", "episode", "episode_daily", "Content", "episodes",
        frozenset({"memcell", "cluster"}),
    ),
    Kind.ATOMIC_FACT: KindInfo(
        "af", ".atomic_facts", "atomic_fact", "atomic_fact_daily", "Fact", "atomic_facts",
        frozenset({"episode"}),
    ),
    Kind.INSIGHT: KindInfo(
        "in", ".insights", "insight", "insight_daily", "Insight", "insights", derived=True
    ),
    Kind.CONVICTION: KindInfo(
        "wv", ".worldview", "worldview", "conviction_daily", "Conviction", "convictions",
        derived=True,
    ),
    Kind.RELATION: KindInfo(
        "rel", ".relations", "relation", "relation_daily", "Relation", "relations", derived=True
    ),
    Kind.TASK: KindInfo("tk", "tasks", "task", "task_daily", "Goal", "tasks"),
    Kind.LESSON: KindInfo(
        "ls", ".lessons", "lesson", "lesson_daily", "Lesson", "lessons", derived=True
    ),
}
_BY_PREFIX = {info.prefix: kind for kind, info in KINDS.items()}
_BY_STEM = {info.stem: kind for kind, info in KINDS.items()}
_PREFIXES = "|".join(sorted((i.prefix for i in KINDS.values()), key=len, reverse=True))
_STEMS = "|".join(sorted((i.stem for i in KINDS.values()), key=len, reverse=True))

#: Most digits of an id's sequence number: far beyond any real log (a 16 MiB day file holds
#: well under a million entries) and within a signed 64-bit integer. Unbounded, a hand-written
#: id of 5,000 digits passed the pattern and then broke ``int()`` (Python refuses more than
#: 4,300 digits): the whole file was "internal parser error", appends to it and API look-ups of
#: such an id raised ValueError (HTTP 500).
SEQ_MAX_DIGITS = 18
ENTRY_ID_RE = re.compile(rf"^({_PREFIXES})_([0-9]{{8}})_([0-9]{{4,{SEQ_MAX_DIGITS}}})$")
#: Any entry id written inside a text (frontmatter, markers, an LLM reply).
ID_MENTION_RE = re.compile(rf"\b(?:{_PREFIXES})_[0-9]{{8}}_[0-9]{{4,{SEQ_MAX_DIGITS}}}\b",
                           re.ASCII)
#: What a conviction key may look like (SPEC §10 ``keys``; written as metadata and shown in
#: prompts): here, below the strategies, so that the parser's lint of a key reads it too.
CONVICTION_KEY_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
#: A daily-log file name: group 1 the stem, group 2 the date.
LOG_FILENAME_RE = re.compile(rf"^({_STEMS})-(\d{{4}}-\d{{2}}-\d{{2}})\.md$")


def log_name_match(name: str) -> re.Match[str] | None:
    """``name`` matched as a daily log's (:data:`LOG_FILENAME_RE`) whose date is one of the
    calendar, else ``None``: "episode-2026-02-30.md" is no day's log. Listed as a log, it
    was never indexed (no day to index it under) nor recorded, so ``status`` and a fleet's
    probe said the index was behind by it for good, even right after ``reindex``."""
    m = LOG_FILENAME_RE.fullmatch(name)
    if m is None:
        return None
    try:
        date.fromisoformat(m.group(2))
    except ValueError:
        return None
    return m


@dataclass(frozen=True, order=True)
class UserRef:
    """One user's memory inside one tenant; the unit Reflection works on."""

    app: str
    project: str
    user_id: str

    def __post_init__(self) -> None:
        validate_name(self.app, "app_id")
        validate_name(self.project, "project_id")
        validate_name(self.user_id, "user_id")

    @classmethod
    def of(cls, user_id: str, app: str | None = None, project: str | None = None) -> UserRef:
        """The user ``user_id`` of ``app``/``project`` (None: the default tenant). An empty
        app or project is refused as any id that cannot be one: taken for "not given", ``add
        --app ''`` wrote into default_app, where the API refuses ``"app_id": ""``."""
        return cls(DEFAULT_APP if app is None else app,
                   DEFAULT_PROJECT if project is None else project, user_id)

    def __str__(self) -> str:
        return f"{self.app}/{self.project}/{self.user_id}"


def day_stamp(day: date) -> str:
    """``YYYYMMDD`` always 8 digits (``strftime('%Y')`` drops the zeros of years before 1000 on
    glibc, which wrote ids the parser then refused)."""
    return f"{day.year:04d}{day.month:02d}{day.day:02d}"


def indexed_text(subject: str | None, summary: str | None, content: str | None) -> str:
    """The text an entry is embedded and full-text indexed by: its non-empty Subject, Summary
    and Content, one per line. Also what a caller embeds ahead of the index (the Reflection
    guard warms the cache with a narrative before it is written), so both hit one cache key."""
    return "\n".join(p for p in (subject, summary, content) if p)

def malformed_relation_id(value: object) -> str:
    """The one message for a value without a relation id's form, where only a relation id
    is taken (``resolve``, the API's ``/relations/{rel_id}/resolve``): the CLI gave an
    Episode's id as the example. ``""`` is said to be empty (:func:`empty_id`)."""
    if value == "":
        return empty_id("relation id")
    return f"invalid relation id {quoted_value(value)}: expected e.g. rel_20261012_0001"


def malformed_entry_id(value: object) -> str:
    """The one message for a value without an entry id's form, at every edge: the API and
    MCP gave an insight's id as the example, the CLI an Episode's. ``""`` is said to be
    empty (:func:`empty_id`): ``undo ''`` was "invalid entry id '': expected e.g. …"."""
    if value == "":
        return empty_id("entry id")
    return f"invalid entry id {quoted_value(value)}: expected e.g. ep_20261012_0001"


def not_an_episode_id(value: object) -> str:
    """Why an entry id of another kind (``in_…``) is refused where a merged narrative's is
    wanted (``undo``): one message for the CLI and the API, which said it in two ways."""
    return (f"invalid episode id {quoted_value(value)}: a merged narrative is an episode, e.g. "
            "ep_20261012_0001")


@dataclass(frozen=True)
class EntryId:
    """A parsed ``<prefix>_<YYYYMMDD>_<NNNN>`` id: the date names the file that holds it."""

    kind: Kind
    day: date
    seq: int

    @classmethod
    def parse(cls, text: str) -> EntryId:
        m = ENTRY_ID_RE.fullmatch(text) if isinstance(text, str) else None
        if not m:
            raise InvalidId(malformed_entry_id(text))
        digits = m.group(2)
        try:  # the same dates strptime("%Y%m%d") reads from 8 digits, at a tenth of its cost
            day = date(int(digits[:4]), int(digits[4:6]), int(digits[6:]))
        except ValueError as exc:
            # "bad date" named no part of it: which of month 13 or February 30 it was
            day_text = f"{digits[:4]}-{digits[4:6]}-{digits[6:]}"
            raise InvalidId(f"invalid entry id {quoted_value(text)}: its day "
                            f"{_no_such_moment(day_text) or 'is not a date'}") from exc
        return cls(Kind.from_prefix(m.group(1)), day, int(m.group(3)))

    def __str__(self) -> str:
        return f"{self.kind.prefix}_{day_stamp(self.day)}_{self.seq:04d}"


def id_order(entry_id: str) -> tuple[int, str, str, int, str]:
    """A sort key that orders entry ids as they were allocated: by kind prefix, day, then
    sequence as a number (``…_9999`` before ``…_10000``, which text order puts first); a
    text that is no id sorts after every id, by its text."""
    m = ENTRY_ID_RE.fullmatch(entry_id) if isinstance(entry_id, str) else None
    if m is None:
        return (1, "", "", 0, str(entry_id))
    return (0, m.group(1), m.group(2), int(m.group(3)), "")


#: A fraction of a second past its sixth digit (what a ``datetime`` cannot hold).
_PAST_MICROSECONDS = re.compile(r"([.,][0-9]{6})[0-9]+")


def read_iso_timestamp(text: str) -> datetime | None:
    """``text`` read as written (naive when it has no offset), or ``None``: what
    :func:`parse_timestamp` and the parser's missing-offset warning both read. ``z`` counts as
    ``Z`` (RFC 3339 §5.6 allows ``t`` and ``z`` in lower case; Python 3.11's ``fromisoformat``
    takes ``t`` but not ``z``), and a fraction is cut to the microsecond."""
    cut = _PAST_MICROSECONDS.sub(r"\1", text.strip())
    try:
        return datetime.fromisoformat(cut.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None


def parse_timestamp(value: object) -> datetime | None:
    """Read an ISO 8601 timestamp (YAML may already have made it a datetime).

    A naive value is taken as UTC; anything unreadable gives ``None`` so the caller can report it.
    A fraction of a second is read to the microsecond, the digits past the sixth dropped
    (rounded down, as YAML's own timestamps are): ``09:00:00.123456789`` is ``09:00:00.123456``.
    Rounded to nearest, ``23:59:59.9999995`` would move into the next day, and out of the daily
    log that holds it; ISO 8601 allows any number of digits, so none is refused.
    """
    if isinstance(value, datetime):
        ts = value
    elif isinstance(value, date):
        ts = datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        read = read_iso_timestamp(value)
        if read is None:
            return None
        ts = read
    else:
        return None
    return ts if ts.tzinfo else ts.replace(tzinfo=UTC)


#: The forms of ISO 8601 a hand-written timestamp may take (SPEC §3: "ISO 8601 with offset"):
#: a calendar, compact or week date, then ``T`` (or a space, as RFC 3339 allows) and a time,
#: then an offset of hours and minutes (a space before it is what YAML's own timestamps take).
#: ``datetime.fromisoformat`` reads more than this: any one character between date and time
#: (``2026-10-11X09:00``) and offsets with seconds (``+05:30:15``), neither of them ISO 8601.
_HAND_TIMESTAMP_RE = re.compile(
    r"(?:\d{4}-\d{2}-\d{2}|\d{8}|\d{4}-?W\d{2}(?:-?\d)?)"
    r"(?:(?P<sep>.)\d{2}(?::?\d{2}(?::?\d{2}(?:[.,]\d+)?)?)?"
    r"(?: ?(?P<offset>[Zz]|[+-]\d{2}(?::?\d{2})?(?P<seconds>:?\d{2}(?:[.,]\d+)?)?))?)?",
    re.ASCII | re.DOTALL)


def timestamp_form_problem(text: str) -> str | None:
    """Why a timestamp a person wrote as text is not one SPEC §3 allows though
    :func:`parse_timestamp` reads it, or ``None``. Without this check ``2026-10-11X09:00``
    and ``+05:30:15`` were indexed without a word; the parser makes them errors at their line,
    never a guess."""
    found = _HAND_TIMESTAMP_RE.fullmatch(text.strip())
    if found is None:
        return f"is not an ISO 8601 date and time ({TIMESTAMP_EXAMPLE})"
    if found.group("sep") not in (None, "T", "t", " "):
        return (f"separates the date and the time with {found.group('sep')!r}: ISO 8601 takes "
                f"'T' (or a space) ({TIMESTAMP_EXAMPLE})")
    if found.group("seconds"):
        return (f"has a UTC offset with seconds ({found.group('offset')}): ISO 8601 offsets "
                f"are hours and minutes, like +05:30")
    return None


#: A new record's timestamp as SPEC §3 writes it: ISO 8601 extended date and time (minutes at
#: least, ``T`` or a space between) with an offset (``Z`` or ``±HH:MM``). A fraction of a
#: second is kept as given (:func:`format_timestamp`), to the microsecond: digits past the
#: sixth that are not zeros are refused, never dropped unsaid.
_NEW_TIMESTAMP_RE = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,](?P<fraction>\d+))?)?"
    r"(?P<offset>Z|[+-]\d{2}:\d{2})?",
    re.ASCII | re.IGNORECASE)
TIMESTAMP_EXAMPLE = "e.g. 2026-10-12T09:30:00+02:00"


_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")
#: The date, time and offset of a timestamp as ISO 8601 shapes them, whatever their numbers.
_SHAPED_RE = re.compile(
    r"(?P<date>(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2}))"
    r"(?:[T ](?P<time>(?P<hour>\d{2}):(?P<minute>\d{2})(?::(?P<second>\d{2}))?)"
    r"(?:[.,]\d+)?(?P<offset>[+-](?P<oh>\d{2}):(?P<om>\d{2}))?)?",
    re.ASCII)


def _no_such_moment(text: str) -> str | None:
    """Why ``text``, shaped as ISO 8601 writes a date (and a time and an offset), names no
    moment: ``2026-02-30 is not a date (February has 28 days in 2026)``. It was said to be
    "not ISO 8601", which it is: a person looked for a typo in its form, not in its day."""
    shaped = _SHAPED_RE.match(text)
    if shaped is None:
        return None
    problem = _shaped_problem(shaped)
    if problem is None:
        return None
    part, why = problem  # the whole value first when the part refused is not all of it
    return f"{part} {why}" if part == text else f"{quoted_value(text)}: {part} {why}"


def _shaped_problem(shaped: re.Match[str]) -> tuple[str, str] | None:
    """The part of :data:`_SHAPED_RE`'s match that names nothing real, and why."""
    import calendar

    year, month, day = (int(shaped.group(k)) for k in ("year", "month", "day"))
    said = shaped.group("date")
    if not 1 <= month <= 12:
        return said, f"is not a date (there is no month {month}: months are 01-12)"
    if year == 0:
        return said, "is not a date (years are 0001-9999)"
    days = calendar.monthrange(year, month)[1]
    if not 1 <= day <= days:
        return said, f"is not a date ({_MONTHS[month - 1]} has {days} days in {year})"
    if shaped.group("time") is not None and (
            int(shaped.group("hour")) > 23 or int(shaped.group("minute")) > 59
            or int(shaped.group("second") or 0) > 59):
        return shaped.group("time"), "is not a time of day (00:00:00 to 23:59:59)"
    if shaped.group("offset") is not None and (int(shaped.group("oh")) > 23
                                               or int(shaped.group("om")) > 59):
        return shaped.group("offset"), "is not a UTC offset (-23:59 to +23:59)"
    return None


def parse_new_timestamp(value: str | datetime) -> datetime:
    """The timestamp of a new Episode or task record (CLI, API, MCP), or ``ValueError`` with
    the reason, quoting ``value``.

    Stricter than :func:`parse_timestamp`, which reads what a person wrote in a log: SPEC §3
    says a timestamp is ISO 8601 *with offset*. ``datetime.fromisoformat`` also reads a date
    alone (written as midnight UTC), an ISO week date (``2026-W41-1``, its Monday) and a time
    with no offset (taken as UTC), each a guess at a moment nobody stated. A ``datetime`` from
    Python code is taken as it is (naive as UTC)."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str):
        raise ValueError(f"must be text, got {json_got(value)}")
    text = value.strip()
    if not text:  # "'' is not ISO 8601" named a format where nothing was given
        raise ValueError("must not be empty (leave it out for the time now)")
    match = _NEW_TIMESTAMP_RE.fullmatch(text)
    parsed = parse_timestamp(text.replace(",", ".")) if match else None
    if match is None or parsed is None:
        raise ValueError(_no_such_moment(text) or (
            f"{quoted_value(value)} is not ISO 8601 with a date, a time and an offset "
            f"({TIMESTAMP_EXAMPLE})"))
    if match.group("offset") is None:
        raise ValueError(f"{quoted_value(value)} has no UTC offset: add Z or one like +02:00 "
                         f"({TIMESTAMP_EXAMPLE})")
    fraction = match.group("fraction") or ""
    if fraction[6:].strip("0"):
        raise ValueError(f"{quoted_value(value)} has a fraction of a second of {len(fraction)} "
                         "digits: a record keeps 6 at most (microseconds); round it")
    return parsed


#: Why :func:`utc_day` refused a timestamp, for the writers' error messages.
OUT_OF_RANGE = "is outside years 1-9999 once converted to UTC"


def utc_day(ts: datetime) -> date | None:
    """The UTC calendar day of ``ts``, the day file a new record goes to.

    ``None`` when that day falls outside years 1-9999 (``0001-01-01T00:00+14:00`` is still year 0
    in UTC), so a writer can refuse the timestamp with a clear error instead of overflowing.
    """
    try:
        return ts.astimezone(UTC).date()
    except OverflowError:
        return None


def new_record_time(
    timestamp: str | datetime | None, now: datetime | None,
    error: type[InvalidEpisode] = InvalidEpisode,
) -> tuple[datetime, date]:
    """When a new Episode or task record happened and the UTC day file it goes to.

    ``None`` means now (``now`` in tests). One place for the rules both writers follow, so an
    Episode and a task record refuse the same timestamps with the same words; ``error`` is the
    writer's exception class, raised naming the ``timestamp`` field."""
    if timestamp is None:
        ts = now or datetime.now(UTC)
    else:
        try:
            ts = parse_new_timestamp(timestamp)
        except ValueError as exc:
            raise error("timestamp", str(exc)) from None
    day = utc_day(ts)
    if day is None:
        raise error("timestamp", f"{quoted_value(timestamp)} {OUT_OF_RANGE}")
    return ts, day


def format_timestamp(ts: datetime, *, fraction: bool = False) -> str:
    """The one timestamp form the daemon writes: ISO 8601, seconds, explicit offset.

    ``fraction`` keeps a fraction of a second ``ts`` has (to the millisecond when it is
    whole milliseconds): for a moment a person or client gave (``...T10:00:00.123Z`` of a
    JavaScript ``toISOString``), written as given rather than silently cut to the second. The
    daemon's own clock readings are written to the second."""
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    if fraction and ts.microsecond:
        return ts.isoformat(timespec="milliseconds" if ts.microsecond % 1000 == 0
                            else "microseconds")
    return ts.isoformat(timespec="seconds")


def normalize_text(text: str) -> str:
    return unicodedata.normalize("NFC", " ".join(text.split()))


def text_hash(text: str) -> str:
    """Identifies the text an embedding was made from (whitespace and NFC-insensitive)."""
    return hashlib.sha256(normalize_text(text).encode()).hexdigest()[:32]


_CONTAINERS = (list, dict, set, frozenset, tuple)


def stable_str(value: Any) -> str:
    """``str(value)``, except that the items of a set (a YAML ``!!set``, at any depth) come in
    sorted order, so the text is the same in every process.

    ``str`` of a set follows the per-process string hash seed (``PYTHONHASHSEED``): a
    hand-written ``tags: !!set {a, b}`` gave each new process another content hash, so every
    sync re-wrote the entry to the index and a crashed merge's recovery took the unchanged
    source for an edited one. Values without a set give exactly ``str(value)``, so their
    stored hashes stay valid."""
    text = str(value)
    if not isinstance(value, _CONTAINERS) or ("{" not in text and "set()" not in text):
        return text  # the text of any set holds one of these: none, so no set inside
    return _stable_repr(value)


def _stable_repr(value: Any) -> str:
    """``repr(value)`` with set items sorted (by their own stable text). Recursion is bounded:
    parsed values nest at most ``parser.MAX_YAML_DEPTH`` deep."""
    if isinstance(value, set | frozenset):
        if not value:
            return "set()" if isinstance(value, set) else "frozenset()"
        items = "{" + ", ".join(sorted(_stable_repr(v) for v in value)) + "}"
        return items if isinstance(value, set) else f"frozenset({items})"
    if isinstance(value, list):
        return "[" + ", ".join(_stable_repr(v) for v in value) + "]"
    if isinstance(value, tuple):
        inner = ", ".join(_stable_repr(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_stable_repr(k)}: {_stable_repr(v)}"
                               for k, v in value.items()) + "}"
    return repr(value)


#: YAML scalars whose text is the value a person meant, once put in quotes (``true`` → True,
#: a bare date): read as their text, with a lint warning (parser.TEXT_KEYS).
_TEXT_SCALARS = (str, int, float, date)  # bool is an int; datetime a date


def meta_text(value: Any) -> str | None:
    """A metadata value that should be one piece of text (``session_id``, ``parent_id``,
    ``parent_type``, ``task_type``) as text, or None when it is none at all.

    A hand-written list or mapping (``session_id: [a, b]``) is no single value: ``str`` gave
    its Python repr (``"['a', 'b']"``), shown by search and stored in the index as if it had
    been written so. It is read as absent instead (lint names it); so is ``!!binary``."""
    if value is None or not isinstance(value, _TEXT_SCALARS):
        return None
    return str(value)


def served_status(meta: Mapping[str, Any]) -> str:
    """A derived record's ``status`` as every reader takes it (the briefing, lessons,
    ``search``, the tiers, provenance, ``insights``, ``worldview``): in any case and without
    surrounding spaces (a person writes ``Active``), ``active`` when absent or blank (no
    status written; ``lint`` takes a blank one so too). One reader, so that a record one of them
    serves is not left out, or left unchecked, by another: the tiers and provenance read a
    blank status as "", so such a record was served as active and never marked stale."""
    value = meta.get("status")
    if value is not None and meta_text(value) is None:
        # a list or mapping by hand is none of the statuses: it was read (and shown by
        # explain) as its Python text, "['x']"; now as JSON writes it, '["x"]' (lint names it)
        return json_text(value)
    return (str(value).strip().lower() if value is not None else "") or "active"


def id_items(value: Any) -> tuple[list[str], bool]:
    """A metadata id list (``evidence``, ``contested_with``, ``between``, ``sources``) as its
    ids, and whether it reads as one: None is none, one scalar a list of it (a hand edit's
    ``evidence: tk_1``); a mapping, set or ``!!binary`` there, or a list holding one, is not.

    Such a value was read as one id, its Python repr (``"{'x': 1}"``): an id nobody wrote,
    which the daemon then wrote back into the list. Its readers use the ids and, where they
    would rewrite the list, leave the entry alone when it is not one (lint names it)."""
    items = value if isinstance(value, list) else [] if value is None else [value]
    texts = [meta_text(v) for v in items]
    ok = all(t is not None or v is None for t, v in zip(texts, items, strict=True))
    return [t.strip() for t in texts if t is not None and t.strip()], ok


@dataclass
class Entry:
    """One parsed entry of a daily log.

    ``meta`` keeps every metadata key in file order, unknown ones included; ``sections`` maps
    each ``## Heading`` to its body (stripped), also in file order. ``raw`` is the exact text
    from the opening marker to the end of the closing marker, so writers can leave it untouched.
    """

    id: str
    kind: Kind
    meta: dict[str, Any]
    sections: dict[str, str]
    line: int = 0
    raw: str = ""
    deprecated_by: str | None = None

    @property
    def timestamp(self) -> datetime | None:
        # Parsed once per value: the indexer, the clustering service and the planners each
        # read it. The memo (outside the dataclass fields: not compared, copied or dumped)
        # holds the raw value it was parsed from, so a changed ``meta`` is parsed again.
        raw = self.meta.get("timestamp")
        memo = self.__dict__.get("_timestamp_memo")
        if memo is not None and memo[0] is raw:
            return memo[1]
        value = parse_timestamp(raw)
        self.__dict__["_timestamp_memo"] = (raw, value)
        return value

    @property
    def subject(self) -> str:
        return self.sections.get("Subject", "")

    @property
    def content(self) -> str:
        """The entry's main text: the section its kind names (Content, Fact, Insight, ...)."""
        return self.sections.get(self.kind.main_section, "")

    @property
    def parent_type(self) -> str | None:
        return meta_text(self.meta.get("parent_type"))

    @property
    def parent_id(self) -> str | None:
        return meta_text(self.meta.get("parent_id"))

    @property
    def session_id(self) -> str | None:
        return meta_text(self.meta.get("session_id"))

    @property
    def sources(self) -> list[str]:
        return id_items(self.meta.get("sources"))[0]

    @property
    def search_text(self) -> str:
        """What gets embedded and full-text indexed."""
        return indexed_text(self.subject, self.sections.get("Summary", ""), self.content)

    @property
    def content_hash(self) -> str:
        """Changes whenever anything that is indexed changes (text or metadata).

        Stringifying ``meta`` is safe only because the parser bounds it: no aliases, a capped
        block size and depth (``parser.MAX_YAML_*``), so its text form is never much bigger than
        the bytes it was read from.
        """
        h = hashlib.sha256()
        h.update(repr(sorted((str(k), stable_str(v)) for k, v in self.meta.items())).encode())
        h.update(repr(list(self.sections.items())).encode())
        return h.hexdigest()[:32]

    @property
    def text_hash(self) -> str:
        """Changes only when the embedded text changes: decides whether to re-embed.

        Hashed once per text (NFC and a sha256 of a whole Episode cost more than clustering
        it): the memo keeps the section strings it was computed from and is used only while
        the entry still holds those very objects (strings are immutable; holding references
        costs no copy of the text)."""
        sections, kind = self.sections, self.kind
        subject, summary = sections.get("Subject"), sections.get("Summary")
        content = sections.get(kind.main_section)
        memo = self.__dict__.get("_text_hash_memo")
        if (memo is not None and memo[0] is kind and memo[1] is subject
                and memo[2] is summary and memo[3] is content):
            return memo[4]
        value = text_hash(self.search_text)
        self.__dict__["_text_hash_memo"] = (kind, subject, summary, content, value)
        return value


@dataclass
class Diagnostic:
    """A problem found in a file: where, and why. Lenient parsing reports, never raises."""

    path: str
    line: int
    message: str
    severity: str = "error"  # "error": not indexed / skipped; "warning": indexed anyway

    def __str__(self) -> str:
        return f"{file_at(self.path, self.line)}: {self.severity}: {self.message}"


@dataclass
class DailyLog:
    """A parsed daily-log file: frontmatter, entries in file order, and diagnostics."""

    path: str
    kind: Kind | None
    day: date | None
    frontmatter: dict[str, Any]
    entries: list[Entry] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    text: str = ""
    #: The id of an entry the text ends inside (its closing marker never comes), or the part
    #: of it written so far ("" for none) when the text ends inside an opening marker: a
    #: file caught mid-write, or one whose last marker was lost.
    open_at_end: str | None = None
    #: Ids whose opening marker is in the text but whose entry could not be read (its metadata
    #: broken by a hand edit, its closing marker lost, a timestamp refused ...), and every
    #: opened id of a log whose frontmatter cannot be read. Such an entry is still there, only
    #: unreadable until it is fixed: never to be taken as deleted.
    unreadable: set[str] = field(default_factory=set)
    #: The file's bytes were never parsed (over ``limits.max_file_bytes``, not UTF-8, a
    #: symlink leading outside the root): which entries it holds is unknown, so none of the
    #: ids that name it may be taken as deleted while it stays so.
    unread: bool = False
    #: The file holds nothing but white space (``> log``, a save cut short): no frontmatter,
    #: and no entry either, so every id that named it is gone from it.
    emptied: bool = False

    @property
    def deprecated_entries(self) -> dict[str, str]:
        """``old id -> new id`` from the frontmatter. A value that is not text (``null``, a
        number, a list) is left out: the parser reports it and does not read that entry."""
        value = self.frontmatter.get("deprecated_entries") or {}
        if not isinstance(value, dict):
            return {}
        return {str(k): v for k, v in value.items() if isinstance(v, str)}

    @property
    def ok(self) -> bool:
        """False when the file as a whole could not be understood (it is then left alone)."""
        return not any(d.severity == "fatal" for d in self.diagnostics)

    @property
    def whole(self) -> bool:
        """Whether every entry the file holds was read or named: False when it was not read
        (:attr:`unread`), its frontmatter is broken (not :attr:`ok`) or its text ends inside
        an entry (:attr:`open_at_end`: what came after is not there). An id of the file
        missing from a log not whole is not known to be deleted."""
        return self.ok and not self.unread and self.open_at_end is None


@dataclass(frozen=True)
class NewEpisode:
    """A validated Episode ready to append: the day file it goes to, its metadata, sections."""

    day: date
    meta: dict[str, Any]
    sections: dict[str, str]


#: Control characters no user text written to a daily log may hold: everything below U+0020 but
#: tab, line feed and carriage return, DEL, and the C1 controls U+0080-U+009F. A NUL sent through
#: the API was written into the Markdown as it was, which then became a "binary file" to grep
#: and git; an ESC (or its one-byte C1 form, CSI U+009B) drove the terminal of whoever printed
#: it; a NEL (U+0085) is a line break to YAML and to ``str.splitlines``, so other readers of the
#: log split a line the parser reads as one. The LLM reply path (``llm.tasks``) refuses the
#: same set.
CONTROL_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")

#: :data:`CONTROL_CHARS` as the inside of a JSON Schema (ECMA 262) character class.
CONTROL_CLASS = "\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f\\u007f-\\u009f"


#: A lone surrogate: what Python makes of a byte that is not UTF-8 in a command-line argument
#: (``add --subject $'\xff'``). No UTF-8 file can hold it: writing one raised a bare
#: ``UnicodeEncodeError`` (a traceback) halfway through an append, and searching for one a
#: ``TypeError`` from the tokenizer.
SURROGATES = re.compile("[\ud800-\udfff]")


#: Longest subject, in characters: one line that names an Episode (the heading a person scans in
#: search results, briefings and ``worldview``), as a merge's title is bounded. Unbounded, an
#: ``add --subject`` of 100,000 characters was written and embedded. ``add``, the API and MCP
#: refuse a longer one; ``lint`` reports one written by hand (kept and read as written).
MAX_SUBJECT_CHARS = 500


def subject_length_problem(subject: str) -> str | None:
    """Why ``subject`` is too long for a subject, or None, in the API's words
    (:func:`too_long`): ``add --subject`` said "is 501 characters; the most is 500" where the
    API said "must be at most 500 characters, got 501"."""
    if len(subject) > MAX_SUBJECT_CHARS:
        return too_long(MAX_SUBJECT_CHARS, len(subject))
    return None


def subject_line_count(subject: str) -> int:
    """How many lines ``subject`` spans, broken at any of :data:`LINE_BREAK_RE` (as ``add``
    refuses them), blank ones included; 0 for no subject. A subject must be one line."""
    return len(LINE_BREAK_RE.split(subject)) if subject else 0


def one_line_subject(text: str) -> str:
    """``text`` as a subject Reflection may write: white space runs made one space and, past
    :data:`MAX_SUBJECT_CHARS`, cut with an ellipsis. A merge takes its title from a source's
    subject (the extractive provider, the fallback), and a hand-written one may be longer."""
    flat = " ".join(text.split())
    if len(flat) <= MAX_SUBJECT_CHARS:
        return flat
    return flat[: MAX_SUBJECT_CHARS - 1].rstrip() + "\u2026"


#: Longest search query: the embedder reads a query's first 256 tokens, and a keyword search
#: over thousands of terms ranks nothing better. Unbounded, a 5 MB query (over MCP, which has
#: no body limit) took 8 s of search. Held by ``search`` itself, so the CLI, API and MCP agree.
MAX_QUERY_CHARS = 10_000
#: The most entries a listing answers by default (``limit``), and at most (``total`` counts
#: them all), at every edge: the MCP tools ``lessons`` and ``insights`` answered every one,
#: into the prompt of the agent that asked (3,000 lessons citing 200 tasks each: 13 MB); the
#: CLI's ``reports``/``runs`` took up to 1,000,000/10,000 rows where the API took 1,000.
LIST_LIMIT, MAX_LIST_LIMIT = 50, 1000
#: The most tokens a briefing may be given (``max_tokens``; ``briefing --max-tokens``).
MAX_BRIEFING_TOKENS = 32000
#: The most ids of one listed lesson's or insight's ``evidence`` (and a lesson's rivals) an
#: answer holds (``evidence_count`` counts them all; ``explain ID`` gives the whole tree), as
#: a briefing item's. Here, not at the edges, so that the insight views a strategy layer
#: builds can keep to it.
MAX_LISTED_EVIDENCE = 20
#: The longest ``trigger`` waits for its run, in seconds (``timeout``; ``--timeout``).
MAX_TRIGGER_WAIT = 86400
#: Longest briefing query (the briefing routes by the words of a question, not a document).
MAX_BRIEFING_QUERY_CHARS = 2_000


def too_long(most: int, given: int) -> str:
    """``must be at most 2,000 characters, got 3,000``: a text over its bound, as every edge
    says it (the API's schema, MCP, the CLI and the library)."""
    return f"must be at most {most:,} characters, got {given:,}"


def query_length_problem(query: str, most: int) -> str | None:
    """Why ``query`` is too long to search with, or None: the API's words (:func:`too_long`),
    where ``search`` and ``briefing`` said "query is 10,001 characters; the most is
    10,000"."""
    if len(query) > most:
        return f"query: {too_long(most, len(query))}"
    return None


def escaped_byte(char: str) -> int | None:
    """The byte ``char`` stands for when it is one Python's ``surrogateescape`` made of a byte
    that is not UTF-8 (U+DC80-U+DCFF: a command-line argument's, an environment variable's, a
    file name's), else ``None``."""
    code = ord(char) if len(char) == 1 else 0
    return code - 0xDC00 if 0xDC80 <= code <= 0xDCFF else None


def surrogate_problem(value: str) -> str | None:
    """``"holds the byte 0xFF, which is not UTF-8 text"`` for the first lone surrogate of
    ``value`` that stands for a byte (:func:`escaped_byte`), as the user's file or terminal
    holds it: it was named "U+DCFF", Python's inside, which is in no file. Any other lone
    surrogate (a library caller's text) is named by its code point. ``None`` when it has
    none."""
    found = SURROGATES.search(value)
    if found is None:
        return None
    byte = escaped_byte(found.group())
    if byte is not None:
        return f"holds the byte 0x{byte:02X}, which is not UTF-8 text"
    return f"holds U+{ord(found.group()):04X}, a lone surrogate, which is not text"


#: What breaks a line somewhere: a line feed, a carriage return (the writer turns a lone one
#: into a line feed, so ``--subject $'a\rb'`` was written as a subject of two lines), and the
#: Unicode line and paragraph separators (line breaks to YAML, ``str.splitlines`` and editors).
LINE_BREAK_RE = re.compile("[\n\r\u2028\u2029]")

#: Every character ``str.splitlines`` (and, for U+0085, U+2028 and U+2029, YAML) ends a line at
#: besides ``\n`` and ``\r``. A daily log's lines end at ``\n`` only, so text holding one is
#: one line to the parser and two to those readers: a marker-looking text after a U+2028 read
#: as a marker line of its own in an editor, ``splitlines`` and YAML. The writer writes each
#: as a line break (:data:`LINE_BREAKS_AS_NEWLINES`); a hand-written U+2028 or U+2029 is a
#: ``lint`` warning (the others are already, as invisible characters).
OTHER_LINE_BREAKS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
#: ``str.translate`` table: each of :data:`OTHER_LINE_BREAKS` as the line break it means (a
#: paragraph separator as a blank line, which ends a paragraph in Markdown).
LINE_BREAKS_AS_NEWLINES = {ord(c): "\n" for c in OTHER_LINE_BREAKS} | {0x2029: "\n\n"}


#: The bidi classes of the explicit embeddings, overrides and isolates (U+202A-U+202E,
#: U+2066-U+2069): they display the text after them in another order than it is stored and
#: read ("Trojan Source"). The implicit marks (LRM, RLM, ALM) are ordinary right-to-left
#: writing and are not among them.
_EXPLICIT_BIDI = frozenset({"LRE", "RLE", "LRO", "RLO", "PDF", "LRI", "RLI", "FSI", "PDI"})
#: The format characters ordinary writing needs although they show nothing themselves: the
#: joiners (emoji sequences, Persian and Indic spelling) and the soft hyphen (a hyphen where a
#: line breaks). Every other invisible one is refused (:func:`hidden_format`).
_WRITING_FORMAT = frozenset("\u00ad\u200c\u200d")


#: The characters of :func:`hidden_format`, as the inside of a regular expression's class, to
#: find them in a whole log at once (the parser warns of those a hand edit wrote). Listed, as
#: deciding it at import would look up every code point (a sixth of a second for each
#: command); ``tests/test_hidden_format_logs.py`` pins it to :func:`hidden_format` over every
#: code point, so a Unicode update that adds one fails there.
HIDDEN_FORMAT_CLASS = ("\u180e\u200b\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff"
                       "\ufff9-\ufffb\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
                       "\U000e0001\U000e0020-\U000e007f")


def hidden_format(char: str) -> bool:
    """Whether ``char`` is an invisible formatting character no new text may hold: a Unicode
    format character (``Cf``) that is a bidi embedding, override or isolate, or that shows
    nothing and takes no part in the order of the text (bidi class ``BN`` or ``ON``: zero-width
    space, word joiner, BOM, tag characters, interlinear annotation), but the joiners and the
    soft hyphen. The format characters that show a sign (the Arabic number signs) or are
    ordinary right-to-left marks (bidi class ``L``, ``R``, ``AL``, ``AN``) are text. Such a
    character makes a record read differently from what it stores: reordered on screen, or
    words no one sees that a search or a model reads."""
    if char in _WRITING_FORMAT or unicodedata.category(char) != "Cf":
        return False
    return unicodedata.bidirectional(char) in _EXPLICIT_BIDI | {"BN", "ON"}


def hidden_format_problem(value: str, shown: str = "") -> str | None:
    """``"holds U+202E (RIGHT-TO-LEFT OVERRIDE) at character 7, an invisible formatting
    character ..."`` for the first :func:`hidden_format` character of ``value`` (characters
    counted from 1) that ``shown`` does not hold, ``None`` when it has none. ``shown``: the
    text a model was given, whose characters a reply copying it may keep (a narrative
    restating a hand-written source; ``lint`` warns of the source). Only the distinct
    characters of a text that is not ASCII are looked up."""
    if value.isascii():
        return None
    found = [c for c in set(value) if hidden_format(c) and c not in shown]
    if not found:
        return None
    at = min(value.index(c) for c in found)
    char = value[at]
    name = unicodedata.name(char, "format character")
    return (f"holds U+{ord(char):04X} ({name}) at character {at + 1:,}, an invisible "
            "formatting character that makes the text display or read differently from what "
            "is stored: remove it")


def control_problem(value: str) -> str | None:
    """``"holds the control character U+0000"`` for the first control character of ``value``
    (see :data:`CONTROL_CHARS`), or what :func:`surrogate_problem` or
    :func:`hidden_format_problem` says; ``None`` when it has none of them. Every edge words it
    the same way."""
    found = query_control_problem(value)
    if found is None:  # a text of nothing but invisible ones is refused as empty, as before
        return surrogate_problem(value) or (None if blank(value) else
                                            hidden_format_problem(value))
    return found


def query_control_problem(query: str) -> str | None:
    """``"holds the control character U+0000"`` for the first :data:`CONTROL_CHARS` character
    of a ``search`` or ``briefing`` query, ``None`` when it has none. A NUL or an ESC was
    searched for (an ESC alone answered every Episode, as a query that said something); an
    invisible formatting character is not refused in a query (an emoji's joiner is one)."""
    found = CONTROL_CHARS.search(query)
    return None if found is None else f"holds the control character U+{ord(found.group()):04X}"


def blank(text: str) -> bool:
    """Whether ``text`` shows nothing: only white space and invisible format characters
    (zero-width space, joiners, word joiner, soft hyphen, BOM, bidi marks; Unicode ``Cf``).
    ``str.strip`` keeps those, so a subject or content of one U+200B was taken as text and
    written: an entry that reads as empty everywhere it is shown."""
    return all(c.isspace() or unicodedata.category(c) == "Cf" for c in text)


def new_episode(
    ref: UserRef,
    *,
    subject: str,
    content: str,
    timestamp: str | datetime | None = None,
    session_id: str | None = None,
    importance: int | None = None,
    now: datetime | None = None,
) -> NewEpisode:
    """Validate and shape an ordinary (``memcell``) Episode, as the CLI and the API add them.

    One place decides what a new Episode looks like, so ``everos-reflect add`` and
    ``POST /api/v1/memory/episodes`` cannot drift apart. Raises :class:`InvalidEpisode`.
    """
    for name, text in (("subject", subject), ("content", content)):
        problem = control_problem(text) if isinstance(text, str) else None
        if problem is not None:
            raise InvalidEpisode(name, problem)
    subject, content = subject.strip(), content.strip()
    if blank(subject):
        raise InvalidEpisode("subject", "must not be empty")
    if LINE_BREAK_RE.search(subject):
        raise InvalidEpisode("subject", "must be one line")
    problem = subject_length_problem(subject)
    if problem is not None:
        raise InvalidEpisode("subject", problem)
    if blank(content):
        raise InvalidEpisode("content", "must not be empty")
    ts, day = new_record_time(timestamp, now)
    if session_id is not None:
        validate_name(session_id, "session_id")
    if importance is not None:
        from everos_reflect.typed_numbers import whole_value_problem  # it imports this module

        if (problem := whole_value_problem(importance, 1, 10)) is not None:
            raise InvalidEpisode("importance", problem)  # as the API and --importance say it
    meta: dict[str, Any] = {"owner_id": ref.user_id,
                            "timestamp": format_timestamp(ts, fraction=timestamp is not None)}
    if session_id is not None:
        meta["session_id"] = session_id
    meta["parent_type"] = "memcell"
    meta["parent_id"] = session_id or f"mc_{uuid.uuid4().hex[:12]}"
    if importance is not None:
        meta["importance"] = importance
    return NewEpisode(day, meta, {"Subject": subject, "Content": content})
