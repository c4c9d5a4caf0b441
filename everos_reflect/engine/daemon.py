"""What the engine knows of the daemon, without knowing HTTP servers or the API.

The daemon (put together by :mod:`everos_reflect.serve`, the composition root above the
engine) advertises itself in ``<root>/.index/daemon.json``; this module reads that file,
checks a bind address, runs every strategy's recovery at start-up, and lets
``everos-reflect trigger`` go through a running daemon instead of running a second copy of a
strategy in-process.
"""

from __future__ import annotations

import fcntl
import ipaddress
import json
import logging
import os
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from everos_reflect.engine.engine import TIMEOUT, RunOutcome, _pid_alive
from everos_reflect.errors import EverosError, UnknownStrategy, describe
from everos_reflect.fileio import os_reason, read_config_bytes
from everos_reflect.model import quoted_value, shown_path

if TYPE_CHECKING:
    from everos_reflect.runtime import Runtime

log = logging.getLogger(__name__)

def daemon_file(root: Path) -> Path:
    return Path(root) / ".index" / "daemon.json"


def write_daemon(root: Path, info: Mapping[str, Any]) -> None:
    """Advertise this daemon in ``daemon.json``: written to a temp file and renamed over it, so
    a reader never sees half a file and a FIFO planted there is replaced, not opened (a plain
    write blocked ``serve`` for ever opening it)."""
    _replace(daemon_file(root), json.dumps(dict(info)))


def _replace(path: Path, text: str) -> None:
    """``path`` holding ``text``, written to a temp file renamed over it; a temp file that
    cannot be finished (a full disk) is removed, not left in the index for good."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, "utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def serve_pid_file(root: Path) -> Path:
    """The pid of the ``serve`` holding the root's serve lock (:func:`hold_serve_lock`), for
    the error a second ``serve`` prints; written again when the index is rebuilt."""
    return Path(root) / ".index" / "locks" / "serve.lock"


def hold_serve_lock(root: Path) -> int:
    """Lock ``root`` for this process's ``serve`` and note its pid (:func:`serve_pid_file`);
    the descriptor holding the lock (closing it lets go; so does the kernel when the process
    ends, however it ends: ``kill -9``). Another ``serve`` of ``root`` holding it is an error
    naming it: two started together both found no ``daemon.json`` (it is written once the
    daemon is up), and both served the root, each with its own watcher and scheduler, the
    first one's ``daemon.json`` overwritten by the second.

    The lock is an ``flock`` on the root folder itself, not on a file in ``.index/``: the index
    is derived and deleting it is always safe, and a lock file deleted with it let a second
    ``serve`` start beside the running one."""
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise EverosError(f"cannot open {shown_path(root)}: {os_reason(exc)}") from None
    try:
        _take_waiting_for_probes(fd)
    except BlockingIOError:
        os.close(fd)
        info = read_daemon(root)
        if info is not None:
            raise EverosError(f"a daemon (pid {info['pid']}) already serves {root} on "
                              f"{info['host']}:{info['port']}") from None
        holder = _lock_holder(root)
        if holder is None:
            raise EverosError(f"another process holds a lock on {root}, and no everos-reflect "
                              "serve noted there is alive (another program's flock on the "
                              "folder?): one daemon serves a root") from None
        raise EverosError(f"another everos-reflect serve ({holder}) is starting "
                          f"on or serving {root}: one daemon serves a root") from None
    except OSError as exc:
        os.close(fd)
        raise EverosError(f"cannot lock {shown_path(root)}: {os_reason(exc)}") from None
    try:
        note_serve_pid(root)
    except OSError as exc:
        os.close(fd)
        raise EverosError(f"cannot create {shown_path(serve_pid_file(root))}: "
                          f"{os_reason(exc)}") from None
    return fd


def note_serve_pid(root: Path) -> None:
    """Write this process's pid to :func:`serve_pid_file` (temp file and rename, as
    ``daemon.json``)."""
    _replace(serve_pid_file(root), f"{os.getpid()}\n")


#: How long :func:`hold_serve_lock` retries a held lock: a :func:`serve_lock_held` probe (a
#: ``status`` or ``trigger`` beside it) holds it shared for a moment, and is no daemon.
_PROBE_WAIT_SECONDS = 0.5


def _take_waiting_for_probes(fd: int) -> None:
    """``flock`` ``fd`` exclusive, retrying for :data:`_PROBE_WAIT_SECONDS`; a lock still held
    then raises :class:`BlockingIOError`."""
    deadline = time.monotonic() + _PROBE_WAIT_SECONDS
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.02)


def serve_lock_held(root: Path) -> bool:
    """Whether a ``serve`` of ``root`` is alive: it holds the root's lock
    (:func:`hold_serve_lock`) for its whole life. A ``daemon.json`` alone is no proof: a daemon
    killed with ``kill -9`` leaves it, and once the OS gives its pid to another process, that
    pid is alive. A lock that cannot be tested is taken as held, as before the lock existed."""
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # shared: never a serve's lock
    except OSError:  # BlockingIOError: held; any other error: cannot tell
        return True
    finally:
        os.close(fd)
    return False


def _noted_pid(root: Path) -> int | None:
    """The pid :func:`serve_pid_file` notes (None: no note, or none readable)."""
    try:
        data = read_config_bytes(serve_pid_file(root))
        text = (data or b"")[:32].decode("ascii").strip()
    except (OSError, ValueError):
        return None
    return int(text) if text.isdigit() else None


def _lock_holder(root: Path) -> str | None:
    """``pid N`` of the ``serve`` holding the root's lock (as it noted in
    :func:`serve_pid_file`); ``None`` when the pid noted there is no process: the note of a
    serve that stopped stays behind, and the lock is then another program's ``flock`` on the
    root folder, not a serve's."""
    pid = _noted_pid(root)
    if pid is None:
        return "pid not known yet"
    return f"pid {pid}" if _pid_alive(pid) else None


def clear_daemon(root: Path) -> None:
    """Remove ``daemon.json`` at shutdown if it still names this process. Anything unreadable
    there (not JSON, not a regular file) is left alone rather than raised: this runs in the
    shutdown's ``finally`` and must not skip the clean-up after it."""
    path = daemon_file(root)
    try:
        data = read_config_bytes(path)
        if data is not None and json.loads(data.decode("utf-8")).get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError, AttributeError) as exc:
        log.warning("left %s as it is: %s", path, exc)


#: A host name ``trigger`` may put in a URL: letters, digits, dots and hyphens, as a bind
#: address is (an IP literal is checked as one).
_HOST_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?")


def address_problem(info: Mapping[str, Any]) -> str | None:
    """Why ``daemon.json``'s ``host`` and ``port`` are no address to call (None: they are).
    The file is text under the root: a port ``"80@host"`` sent ``trigger``'s request, with
    the API token, to that host, and a port ``"abc"`` raised a traceback out of ``trigger``."""
    port, host = info.get("port"), info.get("host")
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        return f"port {quoted_value(port)} is no port number"
    if host is None or host == "":
        return None
    if not isinstance(host, str):
        return f"host {quoted_value(host)} is no host"
    try:
        ipaddress.ip_address(host.removeprefix("[").removesuffix("]"))
    except ValueError:
        if not _HOST_NAME.fullmatch(host):
            return f"host {quoted_value(host)} is no host name or address"
    return None


def read_daemon(root: Path) -> dict[str, Any] | None:
    """The running daemon serving ``root`` (its ``daemon.json``), or ``None``; also ``None``,
    with a warning, for a file whose address is no address (:func:`address_problem`), and
    for one no live ``serve`` stands behind (:func:`serve_lock_held`, and the pid the lock's
    holder noted, :func:`serve_pid_file`)."""
    try:
        data = read_config_bytes(daemon_file(root))  # a FIFO planted there: never a hang
        if data is None:
            return None
        info = json.loads(data.decode("utf-8"))
        pid = int(info["pid"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if pid == os.getpid() or not _pid_alive(pid):
        return None
    served = info.get("root")
    if _another_folder(served, root):
        # copied in with the .index (`cp -r root copy`) while that root's daemon runs: asked
        # to trigger, it ran the strategy on its own root
        log.warning("ignoring %s: it names the daemon of %s", shown_path(daemon_file(root)),
                    served)
        return None
    problem = address_problem(info)
    if problem is not None:
        log.warning("ignoring %s: %s", shown_path(daemon_file(root)), problem)
        return None
    if not serve_lock_held(root):  # left by a daemon that died, its pid given out again
        return None
    if _noted_pid(root) not in (None, pid):
        # the lock is a new serve's, still starting (it writes daemon.json once it is up):
        # the file is the one a killed serve left, naming a port nobody may listen on
        return None
    return info


def _another_folder(named: object, root: Path) -> bool:
    """Whether ``named`` (a daemon.json's ``root``) is a folder here other than ``root``. One
    not found (a path in the daemon's container, a file without ``root``) tells nothing."""
    if not isinstance(named, str) or not os.path.isabs(named):
        return False
    try:
        return not os.path.samefile(named, root)
    except (OSError, ValueError):
        return False


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None, settings_file: str = "everos.toml") -> None:
    """Refuse to expose the API beyond this machine without a token (SPEC §4).

    The one line names every place a token can come from (the ``[server]`` key ``token`` in
    ``settings_file``, the variable ``EVEROS_SERVER__TOKEN``) and the other way out (a loopback
    host). Not a :class:`ConfigError`: with ``--host`` nothing in the configuration is invalid,
    and "invalid configuration: everos.toml: server.token" named neither the root's file nor
    the variable as a place to set it.
    """
    if not is_loopback(host) and not token:
        raise EverosError(f"refusing to serve on non-loopback host {quoted_value(host)} without "
                          f"an API token: set token under [server] in {shown_path(settings_file)} "
                          "or the environment variable EVEROS_SERVER__TOKEN, or bind a loopback "
                          "host (--host 127.0.0.1)")


def recover_interrupted(runtime: Runtime) -> int:
    """Ask every strategy to settle what a crash interrupted, at start-up rather than at its
    next run (:func:`recovery.recover_all`).

    Takes each strategy's lock without waiting: if a run in another process holds it, that run
    recovers itself. Returns how many interrupted units were settled.
    """
    from everos_reflect.engine.recovery import recover_all

    return sum(sum(c.values()) for c in recover_all(runtime, wait=0).values())


def _address(info: Mapping[str, Any]) -> str:
    """``http://host:port`` of the daemon ``info`` advertises (a wildcard bind: loopback)."""
    host = str(info.get("host") or "127.0.0.1")
    if host in {"0.0.0.0", "::", ""}:
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{info['port']}"


def _headers(runtime: Runtime) -> dict[str, str]:
    token = runtime.settings.server.token
    return {"Authorization": f"Bearer {token}"} if token else {}


#: How long a command that reports (``status``, ``strategies``) waits for the daemon's answer.
ASK_TIMEOUT_SECONDS = 10.0


class DaemonStrategies:
    """What the daemon serving a root runs: its strategy rows (``rows``; the last good
    ``ome.toml`` when the file turned invalid), or why it could not say (``problem``)."""

    def __init__(self, info: Mapping[str, Any], rows: list[dict[str, Any]] | None = None,
                 problem: str | None = None) -> None:
        self.pid = info.get("pid")
        self.rows, self.problem = rows, problem


def strategies_via_daemon(runtime: Runtime) -> DaemonStrategies | None:
    """Ask the daemon serving this root which strategies it runs, and how; ``None`` when no
    daemon serves it. A daemon that does not answer, or answers with an error, is reported
    (``problem``), never taken for no daemon: its strategies run whatever ``ome.toml`` says."""
    info = read_daemon(runtime.root)
    if info is None:
        return None
    import httpx  # the client side only, as in trigger_via_daemon

    from everos_reflect.status import rows_of_document

    try:
        resp = httpx.get(f"{_address(info)}/api/v1/ome/strategies", headers=_headers(runtime),
                         timeout=ASK_TIMEOUT_SECONDS, trust_env=False)
        if resp.status_code != 200:
            return DaemonStrategies(info, problem=f"it answered {resp.status_code}: "
                                    f"{_message(resp)}")
        rows = rows_of_document(resp.json()["data"])
    except httpx.HTTPError as exc:
        return DaemonStrategies(info, problem=f"it did not answer ({exc})")
    except (ValueError, KeyError, TypeError) as exc:
        return DaemonStrategies(info, problem=f"its answer could not be read ({exc})")
    return DaemonStrategies(info, rows)


def _message(resp: Any) -> str:
    """The ``error.message`` of an API error answer, else its text."""
    try:
        return str(resp.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return quoted_value(resp.text)


def trigger_via_daemon(
    runtime: Runtime, name: str, *, force: bool, timeout: float
) -> RunOutcome | None:
    """Ask the daemon serving this root to run ``name``; ``None`` when no daemon serves it or
    the request could not reach it (nothing ran there: the caller runs it in-process). Once
    the daemon has the request, it is never run here too: a slow answer is a ``timeout``
    outcome, a broken connection an error."""
    info = read_daemon(runtime.root)
    if info is None:
        return None
    # httpx (with the rich/pygments console it pulls in, ~3 MB resident) only for the client
    # side: the daemon itself imports this module and never calls out.
    import httpx

    try:
        resp = httpx.post(
            f"{_address(info)}/api/v1/ome/trigger",
            json={"name": name, "force": force, "timeout": timeout},
            headers=_headers(runtime), timeout=timeout + 30,
            # the daemon is this root's, on this machine: never through HTTP_PROXY (set for
            # the LLM), which cannot reach its loopback address
            trust_env=False,
        )
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:  # the request never reached it
        log.warning("the daemon (pid %s) could not be reached (%s); running in-process",
                    info["pid"], exc)
        return None
    except httpx.TimeoutException:
        # It took the request and has not answered within the run's wait and 30 s more: its
        # run may be going on, or start later. Running in-process here ran the strategy a
        # second time once the daemon's run was done, or answered "busy" beside it, after
        # saying "did not answer; running in-process".
        return RunOutcome(TIMEOUT, name, error=(
            f"the daemon (pid {info['pid']}) took the request but did not answer within "
            f"{timeout + 30:g} s: its run may go on; `everos-reflect runs` shows how it ends. "
            "Nothing was run in this process"))
    except httpx.TransportError as exc:  # the connection broke after the request was sent
        raise EverosError(
            f"the daemon (pid {info['pid']}) took the request, then the connection broke "
            f"before it answered ({describe(exc)}): whether it ran is not known; "
            "`everos-reflect runs` shows. Nothing was run in this process") from None
    try:
        body = resp.json() if resp.headers.get("content-type", "").startswith(
            "application/json") else {}
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    if resp.status_code != 200:
        error = body.get("error")
        message = (error.get("message") if isinstance(error, dict) else None) or resp.text
        if resp.status_code == 404:
            raise UnknownStrategy(message)
        raise EverosError(f"daemon answered {resp.status_code}: {message}")
    fields = RunOutcome.__dataclass_fields__
    try:
        return RunOutcome(**{k: v for k, v in body.items() if k in fields})
    except TypeError:
        # another server on the port a stale daemon.json names (its pid reused since): a
        # TypeError traceback out of trigger
        raise EverosError(
            f"the daemon (pid {info['pid']}) at {_address(info)} answered with no run "
            f"outcome: {_message(resp)}; if no daemon serves this root, "
            f"{shown_path(daemon_file(runtime.root))} is left over: remove it") from None
