"""Opening files a person (or another program) may have replaced with something that is not a
regular file: a FIFO blocks ``open()`` for ever, ``/dev/zero`` never ends, a device may do
anything. Every file the product reads from a memory root goes through here."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from everos_reflect.errors import EverosError, in_words
from everos_reflect.model import quoted_value, shown_path

#: Largest configuration file read (``everos.toml``, ``ome.toml``, ``fleet.toml``,
#: ``daemon.json``): a hundred times the longest real one, so reading it whole is harmless.
MAX_CONFIG_BYTES = 1 << 20
#: Bytes :func:`read_at_most` reads at a time.
READ_CHUNK = 1 << 20


class NotRegularFile(OSError):
    """A folder, FIFO, socket or device stands where a file was expected."""


class OutsideRoot(OSError):
    """The file opened is outside the memory root: a symlink swapped in for a log after the
    path was checked (:func:`open_regular` with ``within``)."""


#: What :class:`OutsideRoot` says of the file (the words the store's symlink check uses).
LEADS_OUTSIDE = "it is a symlink leading outside the memory root"


def open_regular(path: str | os.PathLike[str], within: str | None = None) -> BinaryIO:
    """Open a file for reading, refusing anything but a regular file (:class:`NotRegularFile`)
    without ever blocking: a FIFO named like a log would hang a plain ``open()`` — and the
    watcher — forever. With ``within`` (a real folder path), a file that turns out to be
    outside it once open is refused too (:class:`OutsideRoot`): a log swapped for a symlink to
    ``/etc/shadow`` between the store's check of its path and this open was read, and
    indexed, as the log."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a socket (or a device with nothing behind it)
            raise NotRegularFile(errno.EINVAL, "not a regular file", str(path)) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(errno.EINVAL, "not a regular file", str(path))
        if within is not None and _opened_outside(fd, st, within):
            raise OutsideRoot(errno.EACCES, LEADS_OUTSIDE, str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _opened_outside(fd: int, st: os.stat_result, within: str) -> bool:
    """Whether the open file ``fd`` (``st``) is somewhere outside the folder ``within``, as the
    kernel names it (``/proc/self/fd``). False where that cannot be told (no ``/proc``, a
    name that is not the very file: another mount namespace): the path's check stands."""
    try:
        where = os.readlink(f"/proc/self/fd/{fd}")
        if not os.path.samestat(os.stat(where), st):
            return False
    except OSError:
        return False
    return not (where == within or where.startswith(within.rstrip(os.sep) + os.sep))


def read_at_most(fh: BinaryIO, count: int) -> bytes:
    """Up to ``count`` bytes of ``fh``, read in pieces of at most :data:`READ_CHUNK`: a plain
    ``read(count)`` allocates ``count`` bytes up front, so a large ``limits.max_file_bytes``
    (2**62, 1 TiB) raised MemoryError, or OverflowError past 2**63, at every log read. Every
    read bounded by that limit goes through here (the store, the indexer, the id watermark)."""
    parts: list[bytes] = []
    left = count
    while left > 0:
        part = fh.read(min(left, READ_CHUNK))
        if not part:
            break
        parts.append(part)
        left -= len(part)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def not_utf8(data: bytes, exc: UnicodeDecodeError) -> tuple[int, str]:
    """(line, problem) for the first byte of ``data`` that is not UTF-8: ``"file is not valid
    UTF-8: byte 0xe9 at column 17 (invalid continuation byte; save it as UTF-8)"``. A log
    saved as Latin-1 or Windows-1252 is refused whole; the line and column say where to look
    (the index only said "at byte 468", the store only its line)."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):  # Notepad's "Unicode", PowerShell's `>`
        return 1, "file is UTF-16 text, not UTF-8 (save it as UTF-8)"
    start = data.rfind(b"\n", 0, exc.start) + 1
    column = len(data[start:exc.start].decode("utf-8", "replace")) + 1
    return (data.count(b"\n", 0, exc.start) + 1,
            f"file is not valid UTF-8: byte 0x{data[exc.start]:02x} at column {column} "
            f"({exc.reason}; save it as UTF-8)")


def read_config_bytes(path: str | os.PathLike[str]) -> bytes | None:
    """A configuration file's bytes, ``None`` when there is no such file.

    Raises ``OSError`` (with a ``strerror`` a person can act on) for anything but a regular
    file, or one over :data:`MAX_CONFIG_BYTES`: read with a plain ``read_text()``, an
    ``ome.toml`` made a FIFO hung every command and the daemon's reload for ever, and one
    linked to ``/dev/zero`` filled the memory."""
    try:
        fh = open_regular(path)
    except FileNotFoundError:
        return None
    with fh:
        data = fh.read(MAX_CONFIG_BYTES + 1)
    if len(data) > MAX_CONFIG_BYTES:
        raise OSError(errno.EFBIG, f"larger than {MAX_CONFIG_BYTES:,} bytes", str(Path(path)))
    return data


def expand_user(path: str | os.PathLike[str], what: str = "path") -> Path:
    """``Path(path).expanduser()``, or :class:`EverosError` naming ``what`` and the path when
    its ``~`` cannot be expanded (``~nosuchuser/x``; ``~`` with no ``HOME`` and no password
    entry): ``pathlib`` raises a bare ``RuntimeError`` there, which every command printed as
    a traceback."""
    try:
        return Path(path).expanduser()
    except RuntimeError:
        user = str(path).split("/", 1)[0]
        raise EverosError(f"{what} {quoted_value(str(path))}: no home folder is known for "
                          f"{quoted_value(user)}") from None


def broken_link(path: str | os.PathLike[str],
                root: str | os.PathLike[str] | None = None) -> str | None:
    """What ``path`` is, in words, when it is a symlink that leads nowhere it can follow:
    ``a symlink loop``, or ``a symlink to <target>, which does not exist`` (the target named
    in ``root`` when it is inside it: :func:`path_in_root`); None for anything else. Such a
    link where a log or a folder of logs goes hides what it stands for, and every write
    there fails on it."""
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symlink loop"
        if not os.path.islink(path):
            return None
        full = os.path.join(os.path.dirname(os.path.abspath(path)), os.readlink(path))
        return f"a symlink to {path_in_root(os.path.normpath(full), root)}, which does not exist"
    return None


def what_stands(path: str | os.PathLike[str],
                root: str | os.PathLike[str] | None = None) -> str:
    """What stands at ``path`` where a regular file or a folder was wanted, in words for the
    start of a sentence that goes on (``a folder``, ``a FIFO (named pipe)``,
    :func:`broken_link`'s words and a comma …), as ``lint``, ``status`` and ``undo`` say
    it."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        broken = broken_link(path, root)
        if broken is None:
            return "not a regular file"
        return broken if broken == "a symlink loop" else f"{broken},"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISREG(mode):
        return "a file"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file"


def denied_folder(path: str | os.PathLike[str]) -> str | None:
    """Why this process may not list or enter the folder at ``path`` (the OS's words,
    "Permission denied"), or None: no folder there, or one it may open."""
    try:
        if not stat.S_ISDIR(os.stat(path).st_mode):
            return None
        with os.scandir(path):
            pass
    except PermissionError as exc:
        return exc.strerror or os.strerror(errno.EACCES)
    except OSError:
        return None
    return None if os.access(path, os.X_OK) else os.strerror(errno.EACCES)


def not_a_folder(path: str | os.PathLike[str]) -> Path | None:
    """The first of ``path`` and the folders above it that exists and is not a folder (a file
    where ``.index/locks`` goes, say), else None."""
    path = Path(os.fsdecode(path))
    for step in [*reversed(path.parents), path]:
        try:
            if not step.is_dir() and step.exists():
                return step
        except OSError:
            return None
    return None


def in_the_way(path: Path, root: str | os.PathLike[str] | None = None) -> str:
    """How an error names ``path``, which is not a folder where one is needed."""
    return (f"{path_in_root(path, root)} is not a folder, and a folder is needed there: "
            "move it aside")


def path_in_root(path: str | os.PathLike[str], root: str | os.PathLike[str] | None) -> str:
    """How a message names ``path``: relative to the memory ``root`` when it is inside it (as
    ``lint``, ``status`` and the API name logs), else whole; bounded by :func:`shown_path`.
    The CLI named a log replaced by a folder or a socket by its absolute path where ``lint``
    and the API named it in the root."""
    full = Path(os.fsdecode(path))
    if root is not None:
        for base in dict.fromkeys((Path(root), Path(os.path.realpath(root)))):
            try:
                rel = full.relative_to(base)
            except ValueError:
                continue
            if rel.parts:
                return shown_path(rel)
    return shown_path(full)


def os_error_text(exc: OSError, root: str | os.PathLike[str] | None = None) -> str:
    """One line saying what went wrong, naming the path (in ``root``: :func:`path_in_root`):
    a file in the place of a folder is named as such. An ``OSError``'s own text is an errno
    (``[Errno 17] File exists: '/r/.index/locks'``; ``Not a directory:
    /r/.index/sqlite/system.db``, which names a file that is not there and not the one in
    the way). The CLI, the API and MCP all say it so."""
    if exc.filename is None:
        return os_reason(exc)
    if isinstance(exc, (FileExistsError, NotADirectoryError)):
        blocker = not_a_folder(exc.filename)
        if blocker is not None:
            return in_the_way(blocker, root)
    return f"{os_reason(exc)}: {path_in_root(exc.filename, root)}"


def os_reason(exc: OSError) -> str:
    """What an ``OSError`` says went wrong: its ``strerror``, else the system's words for its
    errno (or for the one number it was raised with: ``OSError(28)`` was said as ``28``), else
    its text, else its class in words (``TimeoutError()`` said nothing: an empty reason
    reached the run record and the API answer). What a problem that names its file already
    (a config file's) says of it."""
    if exc.strerror:
        return exc.strerror
    if exc.errno:  # its text is "[Errno 5]" alone
        return os.strerror(exc.errno)
    if len(exc.args) == 1 and type(exc.args[0]) is int and exc.args[0] > 0:  # OSError(28)
        return os.strerror(exc.args[0])
    return str(exc).strip() or in_words(type(exc))


def error_text(exc: Exception, root: str | os.PathLike[str] | None = None) -> str:
    """``exc`` as a report names a problem: :func:`os_error_text` of an ``OSError`` (its path
    in ``root``), the message of any other."""
    return os_error_text(exc, root) if isinstance(exc, OSError) else str(exc)
