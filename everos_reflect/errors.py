"""Domain exceptions.

The core raises these; only the CLI and HTTP layers turn them into messages, exit codes and
status codes. Each carries a message a user can act on.
"""

from __future__ import annotations

import re
import sqlite3
import sys
from typing import Any


class EverosError(Exception):
    """Base class: every error the product reports to a user."""


#: Exceptions whose message says by itself what went wrong (``database is locked``, a
#: library's "connection refused"): shown as it is, without the exception's type.
_SAYS_IT_ALL = (ValueError, RuntimeError, sqlite3.Error)


def describe(exc: BaseException) -> str:
    """``exc`` as an audit row, a run record, ``runs``, ``status`` and an API or MCP answer
    say why something failed, in the words a person reads: a domain error by its own message
    (written for a user); an ``OSError`` by its cause and the path it concerns (``No space
    left on device: /r/u/episodes/episode-2026-10-12.md``), as every command names one; a
    message that says it all (a ``ValueError``'s, a library's ``RuntimeError``) alone. Only
    what is a defect of the program says so, with its type: ``internal error (KeyError:
    'between')``. Each read ``OSError: [Errno 28] No space left on device`` or ``ValueError:
    …``: a Python class name and an errno number where the cause says it all. The log keeps
    the type and the traceback."""
    if isinstance(exc, EverosError):
        return str(exc)
    outside = _outside(exc)
    cause = getattr(exc, "cause", None)
    if outside and isinstance(cause, BaseException) and cause is not exc:
        return describe(cause)  # Ray's error for a task that raised: what the task raised
    if isinstance(exc, OSError):
        from everos_reflect.fileio import os_error_text  # fileio imports this module

        return os_error_text(exc)
    text = str(exc).strip()
    if outside:  # the first line: a Ray error goes on with the remote traceback
        return text.splitlines()[0] if text else in_words(type(exc))
    if text and isinstance(exc, _SAYS_IT_ALL):
        return text
    return f"internal error ({type(exc).__name__}{f': {text}' if text else ''})"


#: Errors of the libraries the product talks through: the HTTP client's transport (the
#: daemon, a provider) and Ray's (a fleet worker that died). What they say is about the
#: connection or the worker, not a defect here, so they are said as their message is, like
#: an ``OSError``. Looked up in ``sys.modules`` only: an error of a library never imported
#: cannot have been raised, and importing one here would cost every command its start-up.
_OUTSIDE = (("httpx", "TransportError"), ("ray.exceptions", "RayError"))


def _outside(exc: BaseException) -> bool:
    for module, name in _OUTSIDE:
        kind = getattr(sys.modules.get(module), name, None)
        if isinstance(kind, type) and isinstance(exc, kind):
            return True
    return False


def in_words(kind: type) -> str:
    """An error class that came without a message, as words (``ReadError`` -> ``read
    error``): a library's ``ReadError()`` or ``TimeoutError()`` said nothing at all (an empty
    reason), or its bare class name."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", kind.__name__).lower()


#: The most characters of an unexpected error's text an answer to a client carries.
BRIEF_MAX = 500


def brief(exc: Exception, most: int = BRIEF_MAX) -> str:
    """:func:`describe` of ``exc`` as an answer to a client shows an error it did not cause:
    one line, at most ``most`` characters and how many were left off. The log keeps the
    whole text with the traceback. An unexpected error's text is not bounded by anything the
    client sent: an ``OSError`` naming a long path, a library error quoting a whole record,
    an embedding server's error page became an MCP error or an ``index_error`` of any size."""
    text = " ".join(describe(exc).split())
    if len(text) <= most:
        return text
    return f"{text[:most]}… ({len(text) - most:,} more characters in the log)"


class InvalidId(EverosError, ValueError):
    """An app, project, user or entry id that is not allowed (e.g. a path trick)."""


class InvalidRequest(EverosError, ValueError):
    """A request parameter the core refuses (a blank query, a budget out of range): 422 at
    the API, as a field the request model refuses is, not the 400 of other domain errors."""


class InvalidSearch(InvalidRequest):
    """A search parameter out of its range: a ``ValueError`` to a library caller, a domain
    error (4xx, one CLI line) to the edges, which also check it before calling."""


class InvalidEpisode(EverosError, ValueError):
    """A new Episode's field is unusable; ``field`` names it so each edge can say it its way."""

    def __init__(self, field: str, reason: str) -> None:
        self.field, self.reason = field, reason
        super().__init__(f"{field}: {reason}")


#: The most problems a :class:`ConfigError`'s message names; it counts the rest. An
#: ``ome.toml`` of 20,000 misspelt keys (170 KB) made a message of 9 MB: one error line of
#: every command, and repeated in each strategy's row of ``status --json`` (75 MB).
MAX_PROBLEMS_SHOWN = 20


class ConfigError(EverosError):
    """Invalid configuration; ``problems`` lists every (file, key, reason) found at once (``lint``
    shows each), the message the first :data:`MAX_PROBLEMS_SHOWN` of them."""

    def __init__(self, problems: list[tuple[str, str, str]]) -> None:
        from everos_reflect.model import shown_key  # model imports this module

        # a key is named short and printable (model.shown_key), as a value is quoted
        self.problems = [(file, shown_key(key), reason) for file, key, reason in problems]
        lines = [f"{file}: {key}: {reason}"
                 for file, key, reason in self.problems[:MAX_PROBLEMS_SHOWN]]
        more = len(self.problems) - len(lines)
        if more:
            lines.append(f"and {more:,} more problem{'s' if more > 1 else ''}")
        super().__init__("invalid configuration: " + "; ".join(lines))


def file_at(path: object, line: int) -> str:
    """Where a problem is, as ``lint``, errors and diagnostics all say it: ``path:line``, or
    the path alone for a problem of the whole file (line 0: a symlink leading out of the
    root, a lock not had, a file too large): "episode-….md:0: …" named a line no file has."""
    return f"{path}:{line}" if line > 0 else str(path)


class MarkdownError(EverosError):
    """A daily-log file that cannot be parsed well enough to be changed safely."""

    def __init__(self, path: str, line: int, reason: str) -> None:
        self.path, self.line, self.reason = path, line, reason
        super().__init__(f"{file_at(path, line)}: {reason}")


class TooLarge(EverosError):
    """Input over a configured size limit; ``limit`` names the setting (``limits.<key>``)."""

    def __init__(self, what: str, size: int, limit: str, allowed: int) -> None:
        self.what, self.size, self.limit, self.allowed = what, size, limit, allowed
        super().__init__(f"{what} is {size:,} bytes, over {limit} ({allowed:,})")


class NoRoomToWithdraw(TooLarge):
    """A log's frontmatter cannot take the ``deprecated_entries`` keys that would withdraw the
    entries an append makes (the YAML value bound): refused as a log with no bytes to spare
    is, so a Reflection merge is rejected before it writes what it could not withdraw."""

    def __init__(self, reason: str) -> None:
        self.what, self.size, self.limit, self.allowed = "the log's frontmatter", 0, "", 0
        EverosError.__init__(self, f"the log's frontmatter cannot take the keys that would "
                                   f"withdraw these entries ({reason})")


class UnknownEntry(EverosError, KeyError):
    """No entry with that id exists for that user."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else "unknown entry"


class UnknownStrategy(EverosError, KeyError):
    """No strategy is registered under that name."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown strategy"


class ProviderUnavailable(EverosError):
    """An LLM or embedding provider failed or answered something unusable.

    ``usage`` holds the tokens of the replies that did arrive and were refused (they were
    paid for), so a run's ``max_tokens`` counts them; ``None`` when none arrived.
    ``permanent`` says the server refused the request itself (HTTP 400, 413, 422: too long,
    malformed, content refused): sending the same input again gets the same answer, while an
    outage, a bad key or a rate limit says nothing about the input.
    """

    usage: Any = None
    permanent: bool = False


#: The most characters of a server's or model's own text (an error body, a refusal, a
#: rejected value) kept in a failure: a server's 1 MB error text was carried whole into every
#: retry's log line, the run record, the audit row of each skipped cluster and the API answer.
MAX_PROBLEM_CHARS = 300


def clipped(text: str, limit: int = MAX_PROBLEM_CHARS) -> str:
    """``text``, or its first ``limit`` characters saying how long it was."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


class StrategyBusy(EverosError):
    """A run of that strategy is already in progress (possibly in another process)."""


class ProvenanceBusy(EverosError):
    """Another provenance check of the root held its lock past the wait: nothing was checked;
    try again once it has finished."""


class UndoRefused(EverosError):
    """An undo the entry's state refuses, the request itself being well formed: a later
    merge built on it (unless told to cascade), an entry that is no merged narrative, a merge
    already undone or withdrawn by an interrupted merge. The API answers 409
    ``undo_refused`` (these three were a 400 ``bad_request``, the code of a malformed
    request)."""


class ResolveRefused(EverosError):
    """A relation cannot be resolved as asked (already resolved, not a relation, empty note)."""


class NeverIndexed(EverosError):
    """A read of the index of a read-only root that has none (a read-only mount, another
    user's root, never indexed): nothing here can build it. Every edge says so in the same
    words, instead of an error about the index folder it could not create ("unable to open
    database file", "Read-only file system: .index/lancedb")."""

    def __init__(self, root: str) -> None:
        super().__init__(f"{root} is read-only here and was never indexed: there is no index "
                         "to read; run `everos-reflect reindex` where the root can be written")


class IndexUnreadable(EverosError, sqlite3.DatabaseError):
    """``system.db`` is not a readable SQLite database (overwritten, truncated, corrupted).

    Still a ``sqlite3.DatabaseError``, so readers that degrade on a database error (``status``
    counting from Markdown instead) keep doing so; commands that need the index fail with it.

    Never replaced automatically: besides the derived index it holds the audit, the run
    history and the merge journal, which Markdown cannot give back.
    """

    def __init__(self, path: object, reason: object) -> None:
        super().__init__(
            f"{path} is not a readable SQLite database ({reason}); it also holds the audit and "
            "run history, so it is not replaced automatically: move it aside, then "
            "`everos-reflect reindex` rebuilds the index from Markdown"
        )


class VectorIndexUnreadable(EverosError):
    """A LanceDB table under ``<root>/.index/lancedb`` cannot be read: its files were
    overwritten, truncated or deleted. Unlike ``system.db`` it is derived from Markdown alone,
    so the message says to rebuild it (``reindex``); the API answers 503, not the client's
    fault."""

    def __init__(self, table: str, exc: BaseException) -> None:
        reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        super().__init__(f"the {table} vector index is unreadable ({reason}): it is derived "
                         "from Markdown, run `everos-reflect reindex` to rebuild it")


class RootGone(EverosError):
    """The memory root a runtime opened was moved or deleted while in use. Nothing is
    written at its old path any more: an index created there would make an empty folder pass
    for the root (the fleet then found it ``ok`` and idle on every run)."""


class UserGone(EverosError):
    """A derived record (insight, conviction, relation, lesson) is not written for a user
    whose folder is gone: deleted or renamed by a person while the record was derived from
    its Episodes or tasks. Written, it made the folder again, holding text drawn from the
    records the person had just removed."""


class NoRoot(RootGone):
    """The memory root's folder does not exist: nothing is read from it, and nothing is
    created there by a read (a mistyped ``--root`` or ``EVEROS_ROOT`` made an empty root)."""


class IndexUnavailable(EverosError, sqlite3.OperationalError):
    """``system.db`` cannot be opened or written at all: a read-only mount, a full disk, a
    folder where the file goes. Still a ``sqlite3.OperationalError``, so readers that fall
    back on Markdown when the index fails keep doing so; everything else reports it as one
    line (CLI) or a 503 (API, MCP) naming the file, instead of a traceback."""

    def __init__(self, path: object, reason: object) -> None:
        super().__init__(f"cannot open the index {path}: {reason} (the folder must exist, be "
                         "writable and have room)")


class IndexRebuilding(EverosError):
    """The index was deleted or replaced while the daemon ran, and is being rebuilt from the
    Markdown: a request that needs it gets this (a 503) after a short wait, rather than an
    answer from a half-built index or LanceDB's error about files that are gone."""

    def __init__(self, path: object, *, reindex: bool = False) -> None:
        what = "is being rebuilt by a reindex" if reindex else (
            "was deleted or replaced and is being rebuilt")
        super().__init__(f"the index {path} {what} from the Markdown: try again in a moment")


class EmbedderMismatch(EverosError):
    """The vector index holds vectors of another dimension than this process's embedder
    makes: a ``reindex`` with other embedding settings (hash and MiniLM, 16 and 384) rebuilt
    it under a running ``serve``. LanceDB refused each query ("query dim(16) doesn't match
    the column ... dim(384)"), a 500; it says which embedder made what, and what to do."""

    def __init__(self, stored_dim: int, stored_model: str | None, name: str, dim: int) -> None:
        made = f" made by {stored_model}" if stored_model else ""
        super().__init__(
            f"the vector index holds {stored_dim}-dimensional vectors{made}, but this process "
            f"embeds with {name} ({dim} dimensions): the index was rebuilt with other "
            "embedding settings; restart with the settings it was built with, or run "
            "`everos-reflect reindex` with these")


class IndexReadOnly(EverosError):
    """A write to the index of a root this process cannot write (a read-only mount, another
    user's root). Such a root is still searched and read as its index was last built; what
    would change it is refused with this one line instead of an error about a lock file."""

    def __init__(self, path: object) -> None:
        super().__init__(f"the index {path} is read-only here (a read-only mount or another "
                         "user's files): it is read as last built; run this where the root "
                         "can be written")
