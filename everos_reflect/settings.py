"""Settings: ``config/default.toml`` < ``<root>/everos.toml`` < ``EVEROS_<SECTION>__<KEY>``.

Parsing is pure (texts and an env mapping in, a frozen :class:`Settings` out) and separate from
finding the files, so it is tested without touching disk. Every problem found — TOML syntax,
unknown keys, wrong types, out-of-range values, in any layer — is collected and raised at once as
one :class:`~everos_reflect.errors.ConfigError`, each naming its file, key and reason. A reason
quotes the value it refuses short (:func:`~everos_reflect.model.quoted_value`: a 5,000-character
value made a 5,000-character error line) and never quotes a secret (:data:`SECRET_KEYS`).

The strategies live apart in ``<root>/ome.toml``: :func:`parse_ome` only checks its shape and
returns the raw tables, because each strategy declares and validates its own settings.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import ipaddress
import math
import os
import re
import sys
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, get_type_hints
from urllib.parse import urlsplit, urlunsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from everos_reflect.errors import ConfigError
from everos_reflect.fileio import not_utf8, os_reason, path_in_root, read_config_bytes
from everos_reflect.model import (
    QUOTED_MAX,
    must_not_be_empty,
    quoted_value,
    redacted_url,
    shown_key,
    unplain_number,
)
from everos_reflect.problem_words import (
    SHOWN_DIGITS_MAX,
    did_you_mean,
    one_of,
    shown_number,
    unknown,
)
from everos_reflect.typed_numbers import (
    NumberProblem,
    is_decimal,
    is_whole,
    whole_number,
    whole_words,
)

DEFAULT_FILE = "config/default.toml"
ENV_FILE = "environment"
ENV_PREFIX = "EVEROS_"
USER_FILE_NAME = "everos.toml"
OME_FILE_NAME = "ome.toml"

Problem = tuple[str, str, str]


# --- the schema: dataclass defaults mirror defaults/default.toml (a test pins them equal) ----


@dataclass(frozen=True)
class LLMSettings:
    provider: str = "extractive"
    model: str = "gpt-4o-mini"
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)  # a secret: kept out of logs
    timeout_seconds: float = 60.0
    max_retries: int = 3
    max_concurrency: int = 4
    max_prompt_tokens: int = 100_000
    interactive_timeout_seconds: float = 5.0


@dataclass(frozen=True)
class EmbeddingSettings:
    provider: str = "local"
    model: str = "all-MiniLM-L6-v2"
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)  # a secret: kept out of logs
    dimensions: int = 384
    batch_size: int = 32
    threads: int = 0  # 0: let onnxruntime decide
    low_memory: bool = True  # local model: int8 weights kept packed, no memory arena
    timeout_seconds: float = 30.0  # "openai": per request
    max_retries: int = 2  # "openai": retries of a failed request


@dataclass(frozen=True)
class ClusteringSettings:
    threshold: float = 0.55
    time_window_days: float = 7.0
    rejoin_threshold: float = 0.80
    #: mean cosine to a cluster's members an Episode needs to join it (0 = centroid only)
    member_threshold: float = 0.6


@dataclass(frozen=True)
class ServerSettings:
    host: str = "127.0.0.1"
    port: int = 8000
    token: str | None = field(default=None, repr=False)  # a secret: kept out of logs

    @property
    def is_loopback(self) -> bool:
        """Binding anything else exposes the API, which then needs a token (SPEC §7). Only
        ``localhost`` and literal loopback addresses count: a host name that merely starts
        with ``127.`` (``127.example.com``) resolves wherever its DNS says."""
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


@dataclass(frozen=True)
class SchedulerSettings:
    timezone: str = "UTC"


@dataclass(frozen=True)
class IndexSettings:
    watch_debounce_seconds: float = 0.5
    reconcile_interval_seconds: float = 60.0
    optimize_interval_seconds: float = 600.0
    search_mode: str = "hybrid"


@dataclass(frozen=True)
class LimitsSettings:
    """Sizes beyond which input is refused, not processed (docs/limits.md)."""

    max_request_bytes: int = 1 << 20
    max_entry_bytes: int = 256 << 10
    max_file_bytes: int = 16 << 20


@dataclass(frozen=True)
class Settings:
    llm: LLMSettings = LLMSettings()
    embedding: EmbeddingSettings = EmbeddingSettings()
    clustering: ClusteringSettings = ClusteringSettings()
    server: ServerSettings = ServerSettings()
    scheduler: SchedulerSettings = SchedulerSettings()
    index: IndexSettings = IndexSettings()
    limits: LimitsSettings = LimitsSettings()


SECTIONS: dict[str, type] = get_type_hints(Settings)


def _types(section: type) -> dict[str, Any]:
    return get_type_hints(section)


# --- value checks: each returns a reason when the value is unacceptable ----------------------

Check = Callable[[Any], str | None]


def _one_of(*choices: str) -> Check:
    def check(value: Any) -> str | None:
        return None if value in choices else one_of(choices, value)

    return check


class _Between:
    """A range check (:func:`between`). One whose words name the type too (``typed``: "a
    whole number from 1 to 65535") has its environment variable read by the reader of the
    command-line option of the same bounds, refusing what it refuses in its words."""

    def __init__(self, low: float, high: float, shown: str, above_low: bool,
                 typed: bool = False) -> None:
        self.low, self.high, self.shown, self.above_low = low, high, shown, above_low
        self.typed = typed

    def __call__(self, value: Any) -> str | None:
        low, high = self.low, self.high
        inside = (low < value if self.above_low else low <= value) and value <= high
        return None if inside else f"must be {self.shown}, got {shown_value(value)}"


def between(low: float, high: float, unit: str = "", *, above_low: bool = False,
            grouped: bool = True, shown: str | None = None, typed: bool = False) -> Check:
    """The check of a number that must lie from ``low`` to ``high`` (greater than ``low`` with
    ``above_low``): every bounded key's reason says the same thing the same way, "must be
    <range> (<unit>), got <value>", so a reader learns the range and what was refused at once.
    ``grouped`` writes the bounds with thousands separators; ``shown`` replaces the whole range
    text where it reads better otherwise ("a whole number from 1 to 65535")."""

    def number(n: float) -> str:
        return f"{n:,}" if grouped else str(n)

    if shown is None:
        shown = (f"greater than {number(low)} and at most {number(high)}" if above_low
                 else f"{number(low)} to {number(high)}")
        shown += f" ({unit})" if unit else ""
    return _Between(low, high, shown, above_low, typed)


#: Each retry waits up to 30 s: 10**9 of them retried a failing call for ever, and the run never
#: ended, holding its strategy's lock until a restart.
_llm_retries = between(0, 100)
#: Reflection drafts on that many threads, one connection each; the HTTP pool holds 1,000
#: connections, so more only start threads that wait for one.
_llm_concurrency = between(1, 1000, grouped=False)
#: The estimated tokens one request may hold (``llm/budget.py``): under 1,000 not even a
#: merge's own instructions fit, and every call would be refused unsent. (The bounds are
#: ``llm.budget``'s; not imported from there, as loading settings loads no provider.)
_prompt_tokens = between(1_000, 1_000_000_000, "estimated tokens of one request")


#: onnxruntime starts every intra-op thread it is given: 100,000 kept ``search`` spinning for
#: minutes without an answer. The bundled model gains nothing past a few dozen.
_threads = between(0, 256, shown="0 (automatic) to 256")
#: Texts embedded in one call. An OpenAI-compatible server takes at most 2,048 inputs a
#: request (a reindex past that failed every call), and the local model pads a batch to its
#: longest text, so 10**30 made one batch of every text of a reindex: memory grew with the root.
_batch_size = between(1, 2048, grouped=False)
#: Each embedding answer fills an array of (texts, dimensions) floats: 2**63 - 1 failed with a
#: ValueError traceback. The widest embedding models have a few thousand.
_dimensions = between(1, 65536, grouped=False)


#: Vector size of the bundled model, ``[embedding] provider = "local"`` (all-MiniLM-L6-v2):
#: the embedder's own ``DIM``, pinned equal by a test. ``dimensions`` cannot change it.
LOCAL_EMBEDDING_DIMENSIONS = 384
#: The bundled model, as the shipped ``default.toml`` names it.
LOCAL_EMBEDDING_MODEL = "all-MiniLM-L6-v2"
#: What ``[embedding] model`` may say with the local provider, compared case-insensitively:
#: the shipped name, its Hugging Face id, and the embedder's own ``name`` (recorded with every
#: vector) with and without its provider prefix; a test pins the last equal to the embedder's.
LOCAL_EMBEDDING_MODEL_NAMES = frozenset(name.lower() for name in (
    LOCAL_EMBEDDING_MODEL, f"sentence-transformers/{LOCAL_EMBEDDING_MODEL}",
    f"{LOCAL_EMBEDDING_MODEL}-int8", f"local:{LOCAL_EMBEDDING_MODEL}-int8"))


def _embedding_problems(values: dict[str, Any], origin: Mapping[str, tuple[str, str]],
                        refused: set[str]) -> list[Problem]:
    """``dimensions`` or ``model`` that the provider cannot honour. The local provider runs its
    bundled model whatever the keys say: ``dimensions = 768`` and ``model =
    "all-mpnet-base-v2"`` were accepted and ignored, and ``lint`` said all was well of settings
    with no effect (a reindex under them changed nothing). The openai provider asks its server
    for that model and size, and names its vectors by them. ``refused`` keys already have
    their problem."""
    if values.get("provider", "local") != "local" or "provider" in refused:
        return []
    problems: list[Problem] = []
    size = values.get("dimensions")
    if ("dimensions" in origin and "dimensions" not in refused
            and size != LOCAL_EMBEDDING_DIMENSIONS):
        file, shown = origin["dimensions"]
        problems.append((file, shown, f"the local provider's model ({LOCAL_EMBEDDING_MODEL}) "
                         f"makes {LOCAL_EMBEDDING_DIMENSIONS}-dimensional vectors, got "
                         f"{quoted_value(size)}: set {LOCAL_EMBEDDING_DIMENSIONS} or remove the "
                         "key (another size needs provider = \"openai\" and a model of that "
                         "size)"))
    model = values.get("model")
    if ("model" in origin and "model" not in refused and isinstance(model, str)
            and model.strip().lower() not in LOCAL_EMBEDDING_MODEL_NAMES):
        file, shown = origin["model"]
        problems.append((file, shown, f"the local provider runs only its bundled model "
                         f"({LOCAL_EMBEDDING_MODEL}), got {quoted_value(model)}: set "
                         f"\"{LOCAL_EMBEDDING_MODEL}\" or remove the key (another model needs "
                         "provider = \"openai\" and a server that serves it)"))
    return problems


def _timeout(value: Any) -> str | None:
    """A positive number of seconds, at most a day: larger finite values (1e308) overflow the
    socket layer's timeouts, and no single request should be waited on longer."""
    if value <= 0:
        return f"must be greater than 0, got {shown_value(value)}"
    return None if value <= 86400 else f"must be at most 86400 (a day), got {shown_value(value)}"


#: The widest ``[clustering] time_window_days``: a hundred years.
MAX_WINDOW_DAYS = 36_500
#: The longest period of ``[index] reconcile_interval_seconds`` and
#: ``optimize_interval_seconds``: a week.
MAX_INTERVAL_SECONDS = 604_800
#: The largest ``[limits]`` size: 1 GiB. A limit exists to keep a log, an entry or a request
#: out of memory; 10**30 was accepted and kept nothing out.
MAX_LIMIT_BYTES = 1 << 30


#: Days between an Episode and a cluster it may still join, at most a century (what "no time
#: limit" needs for any agent's memory): 1e300 was accepted, a window no timestamp arithmetic
#: should be asked to hold, meaning "for ever" with nothing saying so.
_window_days = between(0, MAX_WINDOW_DAYS, "a century of days", above_low=True)
_size_limit = between(1024, MAX_LIMIT_BYTES, "bytes; 1 GiB")
#: A wait after a file change, at most an hour: 1e300 never indexed an edit again, the pending
#: events piling up in memory while ``serve`` ran.
_debounce = between(0, 3600, "an hour", grouped=False)
#: A period of the daemon's background work, a second to a week: 1e-300 ran the full rescan
#: (or LanceDB's compaction) back to back, a core busy and the index growing; 1e300 was
#: accepted as a period no clock reaches: the rescan that catches missed edits never ran,
#: nothing saying so.
_interval = between(1, MAX_INTERVAL_SECONDS, "seconds; a week")
_fraction = between(0, 1, shown="in [0, 1]")
_unit_interval = between(0, 1, shown="in (0, 1]", above_low=True)
#: Said as ``serve --port`` says it (:func:`~everos_reflect.typed_numbers.whole_words`): the
#: file, the environment and the option refuse the same values in the same words.
_port = between(1, 65535, shown=whole_words(1, 65535).removeprefix("must be "), typed=True)


def _not_blank(value: Any) -> str | None:
    return None if value.strip() else "must not be empty"


#: The longest model name taken. Names of served models run to a hundred characters or so
#: (``org/family-size-variant``); the name goes into every request and is recorded with every
#: vector and audit row.
MAX_MODEL_NAME_CHARS = 256


def _model_name(value: Any) -> str | None:
    """A model's name: a 1 MB ``model`` was accepted, then sent with every call and written
    into every audit row (``[llm]``) or every indexed entry and vector (``[embedding]``)."""
    if not value.strip():
        return "must not be empty"
    if len(value) > MAX_MODEL_NAME_CHARS:
        return (f"must be a model's name of at most {MAX_MODEL_NAME_CHARS} characters, got "
                f"{quoted_value(value)}")
    if any(not c.isprintable() for c in value):
        return f"must be a model's name on one line, got {quoted_value(value)}"
    return None


#: The longest ``[server] host``: a DNS name is at most 253 characters, an address far less.
MAX_HOST_CHARS = 253
#: The longest ``base_url``: what servers and proxies take in a request line.
MAX_URL_CHARS = 2_048
#: The longest ``api_key`` or ``[server] token``: it travels in an Authorization header, and
#: ``serve`` refuses a header block over 16 KiB, so a longer token matched no request.
MAX_TOKEN_CHARS = 4_096


def host_problem(value: Any) -> str | None:
    """Why ``value`` is no host to bind, else ``None`` (``[server] host``, its variable and
    ``serve --host`` alike): not blank, and no white space or control character in it. An
    environment value with a stray space or line end (``EVEROS_SERVER__HOST=" 127.0.0.1"``)
    was taken as written: not loopback, so ``serve`` asked for a token, and with one it
    failed to resolve the name, neither saying which setting held what."""
    if not value.strip():
        return "must not be empty"
    if any(c.isspace() or not c.isprintable() for c in value):
        return f"must be a host name or address with no spaces, got {quoted_value(value)}"
    if len(value) > MAX_HOST_CHARS:
        return (f"must be a host name or address of at most {MAX_HOST_CHARS} characters, got "
                f"{quoted_value(value)}")
    return None


def _token(value: Any) -> str | None:
    """A bearer token a client can send: visible ASCII, no spaces. For an ``api_key`` (sent
    as our own Authorization header) a non-ASCII key failed every call as "the response body
    is not JSON ('ascii' codec can't encode ...)", a line break or NUL as "connection failed".
    For the server's ``token``: a blank one passed the
    "non-loopback needs a token" check and then matched no request (header values are trimmed),
    and a non-ASCII one never matched either (headers arrive as Latin-1): either way the API
    answered 401 to everyone with nothing saying why."""
    if value is None:
        return None
    if not value or not all("!" <= c <= "~" for c in value):
        return "must be visible ASCII characters without spaces (what a client can send)"
    if len(value) > MAX_TOKEN_CHARS:
        return (f"must be at most {MAX_TOKEN_CHARS:,} characters, got {len(value):,} (the "
                "value is not shown: it is a secret)")
    return None


#: A whole URL: a host, then no white space or control character anywhere. Only the start
#: was matched: "http://host/v1\n" passed, and every run then failed in httpx ("InvalidURL:
#: Invalid non-printable ASCII character") naming no setting.
_URL_RE = re.compile(r"https?://[^\s/\x00-\x1f\x7f]+[^\s\x00-\x1f\x7f]*")


def _url_authority_problem(value: str) -> str | None:
    """Why the host and port of a URL the pattern accepted cannot be connected to, or ``None``.
    "http://[::1/v1" (a bracket left open) or "http://h:abc/v1" passed: the HTTP client then
    refused it when the provider was built, and ``add`` printed a traceback; "http://h:99999"
    failed every call as "connection failed", retried, naming no setting."""
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError as exc:
        return f"not a valid URL ({exc})"
    if not parts.hostname:
        return "no host"
    return "port 0 cannot be connected to" if port == 0 else None


def _url(value: Any) -> str | None:
    if value is None:
        return None
    # credentials in the URL (user:secret@) are never shown (model.redacted_url)
    shown = quoted_value(redacted_url(value))
    if len(value) > MAX_URL_CHARS:
        return f"must be a URL of at most {MAX_URL_CHARS:,} characters, got {shown}"
    if not _URL_RE.fullmatch(value):
        return f"must be an http:// or https:// URL, got {shown}"
    problem = _url_authority_problem(value)
    return f"must be an http:// or https:// URL, got {shown}: {problem}" if problem else None


def _timezone(value: Any) -> str | None:
    if value == "":  # "unknown time zone ''" read as a misspelt name
        return must_not_be_empty("leave it out for UTC, or use an IANA name such as "
                                 "'Europe/Paris'")
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a name too long to look up
        return f"unknown time zone {quoted_value(value)}" + (
            _zone_meant(value) or " (use an IANA name such as 'UTC' or 'Europe/Paris')")
    if (placeholder := placeholder_zone(value)) is not None:
        return placeholder
    if not is_iana_zone(value):
        return (f"{quoted_value(value)} is not an IANA time zone name (use one such as 'UTC' "
                "or 'Europe/Paris')")
    return None


def _zone_meant(value: str) -> str:
    """`` (did you mean 'UTC'?)`` for the IANA zone ``value`` spells in other case or with
    spaces around it, else for the closest one, else ``""``. ``timezone = "utc"`` (or
    ``"europe/paris"``) was told "unknown time zone 'utc' (use an IANA name such as 'UTC' …)",
    the name it meant given as an example of another."""
    if len(value) > MAX_ZONE_GUESS_CHARS:
        return ""
    zones = _iana_zones() | {"UTC"}
    folded = value.strip().casefold()
    same = sorted(zone for zone in zones if zone.casefold() == folded)
    return f" (did you mean {same[0]!r}?)" if len(same) == 1 else did_you_mean(value, zones)


#: The longest time zone name a close one is looked for (the longest IANA name has 32).
MAX_ZONE_GUESS_CHARS = 64


def is_iana_zone(name: str) -> bool:
    """Whether ``name`` is a zone of the IANA database, not only a file ``ZoneInfo`` can load:
    ``localtime`` (a link to this machine's zone), ``posix/…`` and ``right/…`` (copies; the
    latter count leap seconds) load too, and ``localtime`` made the schedule follow whatever
    zone the host was set to, moved with it, and read as another zone on every other host.
    Nor is a placeholder that names no place (:data:`PLACEHOLDER_ZONES`)."""
    return name == "UTC" or name in _iana_zones()


#: Names the tz database holds that are no zone of any place: ``Factory`` is what a system
#: image is set to before anyone chose its zone (UTC, shown as "-00": "local time zone must
#: be set"). ``timezone = "Factory"`` was accepted, and the schedule ran on UTC while the
#: config read as if a zone had been chosen.
PLACEHOLDER_ZONES = frozenset({"Factory"})


def placeholder_zone(name: str) -> str | None:
    """Why ``name`` is refused as a time zone when it is one of :data:`PLACEHOLDER_ZONES`,
    else ``None``: config validation (``lint``, ``status``, the daemon) and the scheduler's
    triggers say it alike."""
    if name not in PLACEHOLDER_ZONES:
        return None
    return (f"{quoted_value(name)} is the tz database's placeholder for a zone nobody set "
            "(its clock is UTC shown as \"-00\"), not a place's zone: use 'UTC' or a zone such "
            "as 'Europe/Paris'")


@functools.cache
def _iana_zones() -> frozenset[str]:
    # available_timezones() leaves out posix/, right/ and posixrules, but not localtime
    return frozenset(available_timezones() - {"localtime"} - PLACEHOLDER_ZONES)


CHECKS: dict[tuple[str, str], Check] = {
    ("llm", "provider"): _one_of("extractive", "openai"),
    ("llm", "model"): _model_name,
    ("llm", "base_url"): _url,
    ("llm", "api_key"): _token,
    ("llm", "timeout_seconds"): _timeout,
    ("llm", "max_retries"): _llm_retries,
    ("llm", "max_concurrency"): _llm_concurrency,
    ("llm", "max_prompt_tokens"): _prompt_tokens,
    ("llm", "interactive_timeout_seconds"): _timeout,
    ("embedding", "provider"): _one_of("local", "openai"),
    ("embedding", "model"): _model_name,
    ("embedding", "base_url"): _url,
    ("embedding", "api_key"): _token,
    ("embedding", "dimensions"): _dimensions,
    ("embedding", "batch_size"): _batch_size,
    ("embedding", "threads"): _threads,
    ("embedding", "timeout_seconds"): _timeout,
    ("embedding", "max_retries"): _llm_retries,
    ("clustering", "threshold"): _unit_interval,
    ("clustering", "time_window_days"): _window_days,
    ("clustering", "rejoin_threshold"): _unit_interval,
    ("clustering", "member_threshold"): _fraction,
    ("server", "host"): host_problem,
    ("server", "port"): _port,
    ("server", "token"): _token,
    ("scheduler", "timezone"): _timezone,
    ("index", "watch_debounce_seconds"): _debounce,
    ("index", "reconcile_interval_seconds"): _interval,
    ("index", "optimize_interval_seconds"): _interval,
    ("index", "search_mode"): _one_of("hybrid", "vector", "keyword"),
    ("limits", "max_request_bytes"): _size_limit,
    ("limits", "max_entry_bytes"): _size_limit,
    ("limits", "max_file_bytes"): _size_limit,
}


# --- parsing ----------------------------------------------------------------------------------


_TOML_POS = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")


#: What ``tomllib.loads`` raises on text it cannot read: TOMLDecodeError (a ValueError), and
#: besides it RecursionError for arrays or inline tables nested past the interpreter's
#: recursion limit, and ValueError for an integer of more than 4,300 digits. Those two escaped
#: as they were: every command printed a traceback, and ``serve`` died on such an ome.toml.
TOML_ERRORS = (ValueError, RecursionError)


def toml_syntax_problem(file: str, exc: Exception, text: str | None = None) -> Problem:
    """Turn tomllib's message into (file, "line N", reason) so the line is easy to find;
    one that names a key in Python's words, or none, says it in TOML's (``text``: the file's
    text, to name the key set twice on that line: :func:`_toml_reason`)."""
    if isinstance(exc, RecursionError):
        return file, "(syntax)", ("TOML syntax error: arrays or inline tables nested too "
                                  "deeply to read")
    if not isinstance(exc, tomllib.TOMLDecodeError):
        return file, "(syntax)", f"TOML syntax error: {str(exc).split(';')[0][:200]}"
    message = str(exc)
    m = _TOML_POS.search(message)
    if m:
        reason = _toml_reason(message[: m.start()], text, int(m.group(1)))
        return file, f"line {m.group(1)}", f"TOML syntax error: {reason}"
    return file, "(syntax)", f"TOML syntax error: {message}"


#: tomllib's messages naming a key path as a Python tuple: "Cannot declare ('llm',) twice",
#: "Cannot mutate immutable namespace ('x',)".
_TOML_KEY_PATH = re.compile(r"^(Cannot declare|Cannot mutate immutable namespace) (\(.*\))"
                            r"( twice)?$")
#: A key TOML writes bare (without quotes).
_BARE_TOML_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _toml_key_path(parts: tuple[str, ...]) -> str:
    """A key path as TOML writes it: ``llm.max_retries``, ``a."b c"``."""
    return ".".join(p if _BARE_TOML_KEY.fullmatch(p) else quoted_value(p).replace("'", '"')
                    for p in parts)


def _toml_reason(reason: str, text: str | None, line: int) -> str:
    """tomllib's ``reason`` in TOML's words where it names a key in Python's (``('llm',)``)
    or names no key: "Cannot overwrite a value" said nothing of which, where the file's
    line 3 set ``max_retries`` a second time."""
    import ast

    found = _TOML_KEY_PATH.match(reason)
    if found is not None:
        try:
            parts = ast.literal_eval(found.group(2))
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return reason
        if not isinstance(parts, tuple) or not all(isinstance(p, str) for p in parts):
            return reason
        key = _toml_key_path(parts)
        if found.group(1) == "Cannot declare":
            return f"the table [{key}] is declared twice (each table's header is written once)"
        return (f"{key} was written whole on one line (an inline table or an array): no key "
                "can be added to it after")
    if reason != "Cannot overwrite a value":
        return reason
    lines = (text or "").splitlines()
    statement = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    if statement.startswith("["):
        name = statement.strip("[]").strip()
        return (f"[{name}] names a key that already has a value (each key is set once)"
                if name and '"' not in name and "'" not in name else
                "a table header names a key that already has a value (each key is set once)")
    key = statement.partition("=")[0].strip()
    if key and "=" in statement and '"' not in key and "'" not in key:
        return (f"cannot set {key}: it, or a key it is under, already has a value (each key "
                "is set once)")
    return "cannot set a key that already has a value (each key is set once)"


class TypedFloat(float):
    """A float of a config file or the environment kept with the text it was written as, when
    its ``repr`` is another text: a range check said "got 1e+21" of a ``1e21``, "got
    1.2345678901234568e+29" of a whole ``123456789012345678901234567890`` and "got 0.1" of
    a ``0.1000000000000000055511`` (:func:`shown_value` shows what was typed)."""

    written: str

    def __new__(cls, written: str) -> TypedFloat:
        value = super().__new__(cls, written)
        value.written = written
        return value


class WrittenFloat(TypedFloat):
    """A TOML float a float cannot hold as written, kept with its text: past the largest
    (``1e400``, read as infinity) or nonzero below the smallest above 0 (``1e-400``, read as
    0.0). A problem with one said "got a float: inf" or "got 0.0", a value nobody wrote
    (:func:`toml_value` shows what was, and why it is read otherwise).

    ``toml`` is False for an environment variable's, whose problem says what it would be
    read as without TOML's words (:func:`_env_number`)."""

    toml = True


#: A nonzero digit of a TOML float's significand (before its exponent).
_NONZERO_SIGNIFICAND = re.compile(r"^[^eE]*[1-9]")


def typed_float(text: str) -> float:
    """The float ``text`` (a TOML float, a whole number of a float key, an environment
    value) is, kept with ``text`` when it reads otherwise (:class:`TypedFloat`)."""
    value = float(text)
    if (math.isinf(value) and text.lstrip("+-") != "inf") or (
            value == 0 and _NONZERO_SIGNIFICAND.match(text)):
        return WrittenFloat(text)
    return value if repr(value) == text else TypedFloat(text)


def shown_value(value: object) -> str:
    """A refused config value as every range message shows it: a float as it was typed
    (:class:`TypedFloat`; why it reads otherwise when a float cannot hold it), a whole
    number of more than 15 digits compactly (``1.00e+21``, :func:`~everos_reflect.
    problem_words.shown_number`: it was printed whole), anything else as
    :func:`~everos_reflect.model.quoted_value` does."""
    if isinstance(value, TypedFloat):
        return toml_value(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return shown_number(value)
    return quoted_value(value)


def as_written(reason: str, value: object) -> str:
    """``reason`` (a check's "must be …, got <value>") ending in the value as typed when it
    was a float that reads otherwise (:class:`TypedFloat`): a range check said "got inf" of a
    1e400, "got 0.0" of a 1e-400 and "got 1e+21" of a 1e21."""
    if not isinstance(value, TypedFloat) or ", got " not in reason:
        return reason
    return f"{reason.rpartition(', got ')[0]}, got {toml_value(value)}"


def loads_toml(text: str) -> dict[str, Any]:
    """``tomllib.loads`` keeping the text of a float it cannot hold (:class:`WrittenFloat`),
    for every config file (``everos.toml``, ``ome.toml``, ``fleet.toml``)."""
    return tomllib.loads(text, parse_float=typed_float)


def _read_toml(text: str, file: str, problems: list[Problem]) -> dict[str, Any] | None:
    # A byte-order mark (Notepad's "UTF-8" before 2019, some Windows tools still) is not
    # content: tomllib refused it as "Invalid statement" on line 1, with nothing to see there.
    text = text.removeprefix("\ufeff")
    try:
        return loads_toml(text)
    except TOML_ERRORS as exc:
        problems.append(toml_syntax_problem(file, exc, text))
        return None


def expected_type(tp: Any) -> str:
    """What a key of type ``tp`` takes, in TOML's words (a float key takes an integer too)."""
    if tp == str | None:
        return "a string"
    return {str: "a string", int: "an integer", float: "a number", bool: "true or false",
            list: "an array", dict: "a table"}[tp]


#: TOML's word for each type :mod:`tomllib` reads a value as; a date-time before a date (a
#: ``datetime`` is a ``date``), a boolean before an integer (a ``bool`` is an ``int``).
_TOML_TYPES: tuple[tuple[type, str], ...] = (
    (bool, "a boolean"), (int, "an integer"), (float, "a float"), (str, "a string"),
    (dict, "a table"), (list, "an array"), (datetime.datetime, "a date-time"),
    (datetime.date, "a date"), (datetime.time, "a time"),
)


def toml_type(value: Any) -> str:
    """TOML's word for the type of ``value`` as :mod:`tomllib` reads it ("an integer", "a
    table"): the person wrote TOML, and "got str" or "got dict" are Python's words for it."""
    for kind, word in _TOML_TYPES:
        if isinstance(value, kind):
            return word
    return "a value of no TOML type"


def toml_value(value: Any) -> str:
    """``value`` as TOML writes it, on one line (a table inline: ``{a = 1}``), cut to
    :data:`~everos_reflect.model.QUOTED_MAX` characters and its length when longer: "got
    dict {'a': 1}" showed the Python repr of what the person wrote as TOML."""
    import tomlkit

    if isinstance(value, TypedFloat):
        written = value.written
        if is_whole(written.lstrip("+")):
            # a whole number of a float key, as an integer key's is shown: 1.00e+21; one
            # short enough as typed ("-0", "-007" of a variable were said "0" and "-7")
            with contextlib.suppress(ValueError):  # past the 4,300 digits int() reads
                number = int(written)
                if len(str(abs(number))) > SHOWN_DIGITS_MAX:
                    written = shown_number(number)
        if len(written) > QUOTED_MAX:
            written = f"{written[:QUOTED_MAX]}… ({len(written):,} characters)"
        if not isinstance(value, WrittenFloat):
            return written
        # a config file's value in TOML's words; a variable's in a person's: "TOML reads
        # it as -inf" was said of an environment variable, which is no TOML
        if math.isinf(value):
            read = (f"TOML reads it as {'-' if value < 0 else ''}inf" if value.toml else
                    f"it would be read as {'minus ' if value < 0 else ''}infinity")
            return f"{written} (past the largest number, about {sys.float_info.max:.2g}: {read})"
        read = "TOML reads it as 0.0" if value.toml else "it would be read as 0"
        return (f"{written} (below the smallest number above 0, about {math.ulp(0.0):.2g}: "
                f"{read})")
    try:
        if isinstance(value, dict):
            item: Any = tomlkit.inline_table()
            item.update(value)
        elif isinstance(value, list):
            item = tomlkit.array()
            item.extend(value)
        else:
            item = tomlkit.item(value)
        text = item.as_string()
    except (TypeError, ValueError):  # no TOML value (a caller's own): shown as any value is
        return quoted_value(value)
    if len(text) <= QUOTED_MAX:
        return text
    return f"{text[:QUOTED_MAX]}… ({len(text):,} characters)"


def toml_got(value: Any) -> str:
    """A refused value in TOML's words, its type and itself: ``a string: "ten"``."""
    return f"{toml_type(value)}: {toml_value(value)}"


#: Keys whose values are credentials. A problem with one names the type it was given, never
#: the value: "must be a string, got int 987654321" put a mistyped key into the error every
#: command prints and ``serve`` logs.
SECRET_KEYS = frozenset({("llm", "api_key"), ("embedding", "api_key"), ("server", "token")})
#: Keys whose values may carry credentials (``https://user:secret@host``): a value of the
#: wrong type is not shown either, as its userinfo cannot be told apart reliably.
URL_KEYS = frozenset({("llm", "base_url"), ("embedding", "base_url")})


def _check_type(value: Any, tp: Any, *, secret: bool = False) -> tuple[Any, str | None]:
    """Accept ``value`` for a field of type ``tp``; returns (normalised value, reason).
    A ``secret`` value is never part of the reason (:data:`SECRET_KEYS`)."""
    if tp is bool:
        ok = isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif tp is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        # a whole number kept as typed (past the largest float, read as inf, it was an
        # OverflowError, an "internal error")
        value = typed_float(str(value)) if ok and isinstance(value, int) else value
        if ok and not math.isfinite(value):
            return value, f"must be a finite number, got {toml_value(value)}"
    else:  # str or str | None; "" means "not set" for the optional ones
        ok = isinstance(value, str)
        if ok and tp is not str and value == "":
            value = None
    if ok:
        return value, None
    if secret:
        shown = f"{toml_type(value)} (the value is not shown: it is a secret)"
    else:
        shown = toml_got(value)
    return value, f"must be {expected_type(tp)}, got {shown}"


def _coerce_env(text: str, tp: Any, check: Check | None = None) -> tuple[Any, str | None]:
    """Environment values are strings: convert to the declared type or say why not. A
    number is read as a command-line option's is (:mod:`~everos_reflect.typed_numbers`): the
    digits 0-9, an optional ``-`` and, for a fraction, one ``.``. ``int()`` read ``" 8000"``,
    ``"+8000"`` and ``"1e3"`` (as a float), which ``serve --port`` refuses; a number out of
    shape is refused in the words of the key's range (``check``), as ``--port`` says it."""
    if tp in (int, float):
        return _env_number(text, tp, check)
    if tp is bool:
        # true or false, as everos.toml and the HTTP API write it: 1/yes/on and 0/no/off
        # were read too, spellings the file and the API refuse
        lowered = text.strip().lower()
        if lowered in {"true", "false"}:
            return lowered == "true", None
        if not text:
            return text, must_not_be_empty("true or false")
        return text, f"must be true or false, got {quoted_value(text)}"
    return _check_type(text, tp)


#: The longest whole number of a variable a refusal shows as typed (longer: as a number).
_TYPED_SHOWN_MAX = 40


def _env_number(text: str, tp: Any, check: Check | None) -> tuple[Any, str | None]:
    if tp is float and text.strip().lower().lstrip("+-") in {"nan", "inf", "infinity"}:
        return text, f"must be a finite number, got {text.strip()}"
    if isinstance(check, _Between) and check.typed and tp is int:
        try:  # as the option of the same bounds reads it, to the word (``serve --port``)
            return whole_number(text, int(check.low), int(check.high)), None
        except NumberProblem as exc:
            return text, str(exc)
    words = expected_type(tp)
    if not text:  # "must be a number, got ''" read as a misspelt number
        return text, must_not_be_empty(words)
    hint = unplain_number(text)
    refused = f"must be {words}, got {quoted_value(text)}" + (f" ({hint})" if hint else "")
    if not (is_whole(text) if tp is int else is_decimal(text)) or hint:
        return text, refused
    try:
        number = int(text) if tp is int else typed_float(text)
    except ValueError:  # more than 4,300 digits: no bound of any key is that long
        return text, refused
    if isinstance(number, WrittenFloat):
        number.toml = False  # a variable's: its problem is said without TOML's words
    if tp is int and check is not None and str(number) != text:
        # "-0", "-007": refused as typed. int() keeps neither the sign of a zero nor the
        # zeros in front, and "must be greater than 0, got 0" named a value nobody typed
        reason = check(number)
        if reason and ", got " in reason:
            shown = text if len(text) <= _TYPED_SHOWN_MAX else shown_value(number)
            return text, f"{reason.rpartition(', got ')[0]}, got {shown}"
    return number, None


def _merge_file(
    data: dict[str, Any],
    file: str,
    values: dict[str, dict[str, Any]],
    origin: dict[tuple[str, str], tuple[str, str]],
    problems: list[Problem],
) -> None:
    for section, table in data.items():
        homes = [name for name, cls in SECTIONS.items() if section in _types(cls)]
        if section not in SECTIONS and homes and not isinstance(table, dict):
            # Typically a key uncommented without its "[section]" header.
            where = " or ".join(f"[{h}]" for h in homes)
            problems.append((file, section, f"key outside any section; put it under {where}"))
            continue
        if section not in SECTIONS:
            problems.append((file, section, "unknown section (strategies belong in ome.toml)"
                             if section == "strategies" else unknown(
                                 "section", section, SECTIONS, list_few=True)))
            continue
        if not isinstance(table, dict):
            problems.append((file, section, f"must be a table [{section}], not a single value"))
            continue
        types = _types(SECTIONS[section])
        for key, raw in table.items():
            dotted = f"{section}.{key}"
            if key not in types:
                problems.append((file, dotted, unknown("key", key, types, list_few=True)))
                continue
            value, reason = _check_type(raw, types[key],
                                        secret=(section, key) in SECRET_KEYS | URL_KEYS)
            if reason:
                problems.append((file, dotted, reason))
                continue
            values[section][key] = value
            origin[(section, key)] = (file, dotted)


def _one_underscore_setting(name: str) -> str | None:
    """The settings variable ``name`` spells with one underscore between section and key
    (``EVEROS_LLM_API_KEY`` for ``EVEROS_LLM__API_KEY``), else ``None``. Such a variable was
    passed over as one that is no setting (as ``EVEROS_ROOT`` is): the key never reached the
    LLM, and ``lint`` said the configuration was fine."""
    rest = name[len(ENV_PREFIX):].lower()
    for section, cls in SECTIONS.items():
        key = rest.removeprefix(f"{section}_")
        if key != rest and key in _types(cls):
            return f"{ENV_PREFIX}{section.upper()}__{key.upper()}"
    return None


def _merge_env(
    env: Mapping[str, str],
    values: dict[str, dict[str, Any]],
    origin: dict[tuple[str, str], tuple[str, str]],
    problems: list[Problem],
) -> None:
    named: dict[tuple[str, str], str] = {}  # (section, key) -> the first variable naming it
    for name in sorted(env):
        # EVEROS_ROOT and friends have no "__": only EVEROS_<SECTION>__<KEY> are settings.
        if not name.startswith(ENV_PREFIX):
            continue
        if "__" not in name:
            if (meant := _one_underscore_setting(name)) is not None:
                problems.append((ENV_FILE, name, f"not read: a setting's variable has two "
                                 f"underscores between section and key (did you mean "
                                 f"{meant}?)"))
            continue
        section, _, key = name[len(ENV_PREFIX) :].lower().partition("__")
        # an empty part (EVEROS_LLM__, what a script joining an unset variable writes) was
        # "unknown key llm." or "unknown section ''", as if a name were misspelt
        if not section or (section in SECTIONS and not key):
            known = sorted(_types(SECTIONS[section]) if section else SECTIONS)
            after = name[: len(ENV_PREFIX) + len(section) + 2] if section else ENV_PREFIX
            problems.append((ENV_FILE, name, f"the {'key' if section else 'section'} after "
                             f"{after} is empty (known: {', '.join(known)})"))
            continue
        if section not in SECTIONS:
            problems.append((ENV_FILE, name,
                             unknown(f"section {quoted_value(section)}", section,
                                     SECTIONS, list_few=True)))
            continue
        types = _types(SECTIONS[section])
        if key not in types:
            shown = shown_key(f"{section}.{key}")
            problems.append((ENV_FILE, name, unknown(f"key {shown}", key, types, list_few=True)))
            continue
        # the name is read in any case: EVEROS_LLM__MODEL and EVEROS_llm__model are one
        # setting, and the one sorted last won without a word
        first = named.setdefault((section, key), name)
        if first != name:
            problems.append((ENV_FILE, name, f"{section}.{key} is set by {first} too: set it "
                             "by one variable"))
            continue
        value, reason = _coerce_env(env[name], types[key], CHECKS.get((section, key)))
        if reason:
            problems.append((ENV_FILE, name, reason))
            continue
        values[section][key] = value
        origin[(section, key)] = (ENV_FILE, name)


def parse_settings(
    default_text: str,
    user_text: str | None,
    env: Mapping[str, str],
    user_file: str = USER_FILE_NAME,
    *,
    default_file: str = DEFAULT_FILE,
) -> Settings:
    """Layer the shipped defaults, the user's file and the environment into :class:`Settings`.

    Raises :class:`ConfigError` listing every problem of every layer, each attributed to the
    layer that supplied the bad value.
    """
    values, origin, problems = _layers(default_text, user_text, env, user_file, default_file)
    refused: set[tuple[str, str]] = set()
    for (section, key), check in CHECKS.items():
        if key not in values[section]:
            continue
        value = values[section][key]
        reason = check(value) if value is not None else None
        if reason:
            reason = as_written(reason, value)
            file, shown = origin[(section, key)]
            problems.append((file, shown, reason))
            refused.add((section, key))
    problems += _embedding_problems(
        values["embedding"],
        {key: where for (section, key), where in origin.items() if section == "embedding"},
        {key for section, key in refused if section == "embedding"})

    if problems:
        raise ConfigError(problems)
    # A key absent from every layer keeps the dataclass default (pinned equal to default.toml).
    return Settings(**{name: SECTIONS[name](**values[name]) for name in SECTIONS})


def _layers(default_text: str, user_text: str | None, env: Mapping[str, str], user_file: str,
            default_file: str) -> tuple[dict[str, dict[str, Any]],
                                        dict[tuple[str, str], tuple[str, str]], list[Problem]]:
    """Each layer merged over the one below: the values by section, where each came from
    (file or environment, and the key or variable as written there) and every problem."""
    problems: list[Problem] = []
    values: dict[str, dict[str, Any]] = {name: {} for name in SECTIONS}
    origin: dict[tuple[str, str], tuple[str, str]] = {}
    for text, file in ((default_text, default_file), (user_text, user_file)):
        if text is None:
            continue
        data = _read_toml(text, file, problems)
        if data is not None:
            _merge_file(data, file, values, origin, problems)
    _merge_env(env, values, origin, problems)
    return values, origin, problems


def setting_rows(root: str | os.PathLike[str], section: str,
                 env: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Each key of ``section`` of ``everos.toml``: what it takes, its shipped default, the
    value in force for ``root`` and where that comes from (``default``, ``everos.toml`` or
    the ``EVEROS_…`` variable), and what it is for (the shipped file's comment). A secret is
    shown as set or not, never its value; a URL without its password.

    Without it a person asking which model or threshold a root runs with read the shipped
    defaults, ``everos.toml`` and the environment and layered them in their head. A key whose
    value is refused (in ``everos.toml`` or its variable) is shown with its default and the
    reason under ``problem``: ``settings`` is what a person runs to find what is wrong, and
    it refused to run at all, as every command does."""
    shown = config_file(root, USER_FILE_NAME)
    default_text = packaged_text("default.toml")
    user_text = _read_user_file(Path(root) / USER_FILE_NAME, shown)
    env = os.environ if env is None else env
    values, origin, _ = _layers(default_text, user_text, env, shown, DEFAULT_FILE)
    try:  # every problem, a value out of its range as well as one of the wrong type
        parse_settings(default_text, user_text, env, shown)
        problems: list[Problem] = []
    except ConfigError as exc:
        problems = exc.problems
    refused: dict[tuple[str, str], list[str]] = {}
    for file, where, reason in problems:
        dotted = (where[len(ENV_PREFIX):].lower().replace("__", ".", 1) if file == ENV_FILE
                  else where)
        sect, _, key = dotted.partition(".")
        refused.setdefault((sect, key), []).append(
            f"{where}: {reason}" if file == ENV_FILE else f"{file}: {reason}")
    defaults = Settings()
    helps = _default_comments(default_text)
    rows = []
    for key, tp in _types(SECTIONS[section]).items():
        value = values[section].get(key, getattr(getattr(defaults, section), key))
        file, written = origin.get((section, key), (DEFAULT_FILE, key))
        source = ("default" if file == DEFAULT_FILE else written if file == ENV_FILE
                  else USER_FILE_NAME)
        row = {"key": key, "takes": expected_type(tp),
               "default": _shown_setting(section, key, getattr(getattr(defaults, section), key)),
               "value": _shown_setting(section, key, value), "from": source,
               "secret": (section, key) in SECRET_KEYS, "help": helps.get((section, key))}
        if (section, key) in refused:
            row["problem"] = "; ".join(refused[(section, key)])
        rows.append(row)
    return rows


def _shown_setting(section: str, key: str, value: Any) -> Any:
    """``value`` as ``settings`` may print it: a secret as ``(set)`` (or None, not set), a URL
    as :func:`_shown_url` writes it."""
    if value in (None, ""):
        return None
    if (section, key) in SECRET_KEYS:
        return "(set)"
    if (section, key) in URL_KEYS and isinstance(value, str):
        return _shown_url(value)
    return value


def _shown_url(url: str) -> str:
    """``url`` with ``***`` for its password and for the values of its query string and
    fragment, as every error writes a URL (:func:`~everos_reflect.model.redacted_url`), its
    user name and host kept as written: ``http://me:***@[::1]:8080/v1?api_key=***``. It
    masked the password alone, so a key given in the query string (as some gateways take
    it) was printed in clear, and the host was rebuilt from its parts, which dropped an IPv6
    host's brackets (``me:***@::1:8080``)."""
    parts = urlsplit(url)
    user, at, host = parts.netloc.rpartition("@")
    if at and ":" in user:
        user = f"{user.split(':', 1)[0]}:***"
    shown = urlunsplit(parts._replace(netloc=f"{user}{at}{host}", query="", fragment=""))
    if parts.query or "?" in url:
        shown += "?" + "&".join(f"{p.split('=', 1)[0]}=***" if "=" in p else "***" if p else ""
                                for p in parts.query.split("&"))
    if parts.fragment or "#" in url:
        shown += "#" + ("***" if parts.fragment else "")
    return shown


def _default_comments(text: str) -> dict[tuple[str, str], str]:
    """The comment after each key of the shipped ``default.toml``, and the indented comment
    lines that carry it on, by (section, key): what each setting is for, written once, there
    (read with tomlkit, which keeps comments)."""
    import tomlkit
    from tomlkit.items import Comment, Table

    helps: dict[tuple[str, str], str] = {}
    for section, table in tomlkit.parse(text).items():
        if not isinstance(table, Table):
            continue
        last: tuple[str, str] | None = None
        for key, item in table.value.body:
            if key is not None:
                comment = item.trivia.comment.lstrip("#").strip()
                last = (section, key.key) if comment else None
                if comment:
                    helps[(section, key.key)] = comment
            elif isinstance(item, Comment) and last is not None and item.trivia.indent:
                helps[last] += " " + item.trivia.comment.lstrip("#").strip()
            else:
                last = None
    return helps


# --- ome.toml: the strategies -----------------------------------------------------------------


def parse_ome(text: str, file: str = OME_FILE_NAME) -> dict[str, dict[str, Any]]:
    """Return ``{strategy name: raw table}`` from an ``ome.toml`` text.

    Only the shape is checked here (a ``[strategies]`` table of tables); each strategy validates
    its own values, because only it knows them.
    """
    problems: list[Problem] = []
    data = _read_toml(text, file, problems)
    if data is None:
        raise ConfigError(problems)
    for key in data:
        if key != "strategies":
            hint = did_you_mean(key, ["strategies"])
            problems.append((file, key, f"unknown top-level key{hint}; use [strategies.<name>]"))
    strategies = data.get("strategies", {})
    result: dict[str, dict[str, Any]] = {}
    if not isinstance(strategies, dict):
        problems.append((file, "strategies", "must be a table of [strategies.<name>] tables, "
                         f"got {toml_got(strategies)}"))
    else:
        for name, table in strategies.items():
            if isinstance(table, dict):
                result[name] = table
            else:
                problems.append((file, f"strategies.{name}", "must be a table "
                                 f"[strategies.<name>], got {toml_got(table)}"))
    if problems:
        raise ConfigError(problems)
    return result


# --- finding the files ------------------------------------------------------------------------


def packaged_text(name: str) -> str:
    """A file shipped in ``everos_reflect/defaults`` (works from a wheel or a checkout)."""
    return resources.files("everos_reflect").joinpath("defaults", name).read_text("utf-8")


def config_text(data: bytes, file: str) -> str:
    """A configuration file's ``data`` as text, or :class:`ConfigError` naming the line and
    column of its first byte that is not UTF-8 (or that it is UTF-16), as a daily log's is.
    ``enable`` and a daemon reloading ``ome.toml`` said "'utf-8' codec can't decode byte 0xff
    in position 0", the settings "not UTF-8 text: invalid start byte": no line, no cause."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, problem = not_utf8(data, exc)
        raise ConfigError([(file, f"line {line}", problem)]) from None


def config_file(root: str | os.PathLike[str], name: str) -> str:
    """How a problem names the root's configuration file ``name``: in the root
    (:func:`~everos_reflect.fileio.path_in_root`), as ``lint`` and the API name its logs. It
    was named by its absolute path (``/home/u/.everos/ome.toml: …``) in every command's
    error, ``status`` and each root of ``fleet status``."""
    return path_in_root(Path(root) / name, root)


def _read_user_file(path: Path, shown: str) -> str | None:
    try:
        data = read_config_bytes(path)
        return None if data is None else config_text(data, shown)
    except OSError as exc:
        raise ConfigError([(shown, "(file)", os_reason(exc))]) from exc


def load_settings(root: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> Settings:
    """Settings for a memory root: shipped defaults, ``<root>/everos.toml``, then ``env``."""
    shown = config_file(root, USER_FILE_NAME)
    return parse_settings(
        packaged_text("default.toml"),
        _read_user_file(Path(root) / USER_FILE_NAME, shown),
        os.environ if env is None else env,
        shown,
    )


def load_ome(root: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """The raw strategy tables of ``<root>/ome.toml``; ``{}`` when there is no such file."""
    shown = config_file(root, OME_FILE_NAME)
    text = _read_user_file(Path(root) / OME_FILE_NAME, shown)
    return {} if text is None else parse_ome(text, shown)


def everos_toml_template() -> str:
    """The ``everos.toml`` that ``init`` writes: the shipped defaults, every line commented out.

    Users then uncomment only what they override, as SPEC §4 asks.
    """
    lines = [
        "# everos-reflect settings for this memory root.",
        "# Every key is optional: uncomment a line to override the shipped default shown.",
        "# Environment variables EVEROS_<SECTION>__<KEY> (e.g. EVEROS_LLM__API_KEY) win over",
        "# this file.",
        "",
    ]
    body = packaged_text("default.toml")
    body = body[body.index("\n[") + 1 :]  # drop the shipped file's own "never edit" header
    for line in body.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            lines.append(line)
        else:
            lines.append(f"# {line}")
    return "\n".join(lines) + "\n"
