"""``everos-reflect serve``: the composition root that puts the daemon together.

One process runs the cascade watcher (:mod:`index.watcher`), the strategy engine and its
scheduler (:mod:`engine`) and the HTTP API (:mod:`api.app`). This module sits above all three:
the engine knows nothing of HTTP, the API is handed the engine it reports on, and only here are
they wired and started in order — recovery first, then watcher and scheduler, then the server —
and stopped in reverse.

The daemon advertises itself in ``<root>/.index/daemon.json`` (pid, host, port, started_at;
removed at exit) so ``everos-reflect trigger`` can go through it instead of running a second
copy of a strategy in-process. SIGTERM/SIGINT/SIGHUP stop it cleanly: running strategies are
asked to stop at their next safe point (``should_stop``), get a grace period, and anything
still running is recorded as abandoned — each strategy's ``recover`` hook makes that safe.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import uvicorn

from everos_reflect.engine.daemon import (
    check_bind,
    clear_daemon,
    hold_serve_lock,
    note_serve_pid,
    read_daemon,
    recover_interrupted,
    write_daemon,
)
from everos_reflect.engine.engine import Engine
from everos_reflect.errors import EverosError, IndexReadOnly
from everos_reflect.fileio import os_reason
from everos_reflect.settings import USER_FILE_NAME

if TYPE_CHECKING:
    from everos_reflect.runtime import Runtime

log = logging.getLogger(__name__)

STOP_GRACE_SECONDS = 30.0

#: How often a serving daemon checks its root is still the folder it locked.
GUARD_SECONDS = 1.0

#: The signals that stop the daemon cleanly (uvicorn handles the first two while it serves).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def serve(runtime: Runtime, *, host: str | None = None, port: int | None = None) -> None:
    """Run the daemon in the foreground until SIGTERM/SIGINT."""
    from everos_reflect.embedding.heap import cap_arenas

    cfg = runtime.settings.server
    host = cfg.host if host is None else host
    port = cfg.port if port is None else port
    check_bind(host, cfg.token, str(runtime.root / USER_FILE_NAME))  # before anything starts
    if runtime.read_only:  # it started, then failed writing daemon.json on the way out
        raise IndexReadOnly(runtime.index_dir)

    # before the daemon's threads start: they share two glibc heaps instead of one each
    cap_arenas()

    # APScheduler logs every job execution at INFO; the scheduler logs what matters itself.
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    other = read_daemon(runtime.root)
    if other is not None:
        raise EverosError(f"a daemon (pid {other['pid']}) already serves {runtime.root} on "
                          f"{other['host']}:{other['port']}")
    # one serve per root, also for two started together (neither has written daemon.json)
    lock = hold_serve_lock(runtime.root)
    try:
        st = os.fstat(lock)
        _serve(runtime, host, port, held=(st.st_dev, st.st_ino))
    finally:
        os.close(lock)


def root_replaced(root: os.PathLike[str], held: tuple[int, int] | None) -> bool:
    """Whether the path ``root`` names another folder (or file) than ``held``, the (device,
    inode) of the folder this serve locked: ``mv ROOT ROOT.old && cp -a ROOT.old ROOT``, a
    backup restored over an ``rm -rf``. The lock stays on the old folder, so a second ``serve``
    of the path starts beside this one. A root not there at all (moved away, a mount lost)
    is not replaced: the watcher waits for it to come back."""
    if held is None:
        return False
    try:
        st = os.stat(root)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) != held


def _replaced_message(root: os.PathLike[str]) -> str:
    return (f"the memory root {root} was replaced by another folder while this daemon served "
            "it (its lock is on the folder it started on, no longer there): stopping; start "
            "serve again to serve the folder there now")


def _serve(runtime: Runtime, host: str, port: int, *,
           held: tuple[int, int] | None = None) -> None:
    """:func:`serve`, once it holds the root's serve lock (on the folder ``held`` names: a
    root replaced by another folder stops the daemon, :func:`root_replaced`)."""
    from everos_reflect.api.app import create_app
    from everos_reflect.engine.scheduler import Scheduler
    from everos_reflect.index.watcher import Watcher

    # the port first: on one another process holds, nothing is recovered, watched, scheduled
    # or advertised (it was all started, "serving … on" logged, then uvicorn exited 3)
    sock = listen_socket(host, port)
    engine = Engine(runtime)  # marks runs of a crashed daemon abandoned
    recover_interrupted(runtime)  # every strategy's recover() hook, before anything reads
    info = {"pid": os.getpid(), "host": host, "port": port,
            "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "root": str(runtime.root)}
    def advertise_again() -> None:
        """An index deleted by hand took daemon.json (`trigger` would run in-process) and
        the pid note a second serve names this one by with it."""
        note_serve_pid(runtime.root)
        write_daemon(runtime.root, info)

    watcher = Watcher(runtime, on_index_rebuilt=advertise_again)
    guard_done = threading.Event()
    scheduler = Scheduler(engine)
    server = _Server(uvicorn_config(create_app(runtime, engine, scheduler), host, port),
                     on_exit=engine.request_stop,
                     must_stop=lambda: (_replaced_message(runtime.root)
                                        if root_replaced(runtime.root, held) else None))

    def on_signal(sig: int, frame: object) -> None:
        """A second signal while cleaning up is absorbed, so the clean-up below runs
        (uvicorn handles SIGTERM and SIGINT while it serves: :meth:`_Server.handle_exit`).
        One while the daemon still starts (watching a large root's folders takes seconds)
        stops it: absorbed too, it was lost, and the daemon served on for good. SIGHUP
        (the terminal closed, an SSH session dropped), which uvicorn leaves alone, stops
        it as SIGTERM does: it killed the daemon on the spot, with no clean-up at all."""
        name = signal.Signals(sig).name
        if server.should_exit:
            log.info("received %s while stopping; finishing clean-up", name)
            return
        log.info("received %s; stopping" if server.started else
                 "received %s while starting; stopping", name)
        server.should_exit = True  # uvicorn, if it starts anyway, stops at once
        engine.request_stop()

    # a signal ignored from the start stays ignored: `nohup everos-reflect serve` outlives
    # the terminal, as nohup promises
    previous = {sig: signal.signal(sig, on_signal) for sig in STOP_SIGNALS
                if signal.getsignal(sig) != signal.SIG_IGN}
    try:
        watcher.start()
        scheduler.start()
        write_daemon(runtime.root, info)
        if not server.should_exit and not server.stop_if_must():
            log.info("serving %s on http://%s:%s", runtime.root, host, port)
            server.guard(guard_done)
            server.run(sockets=[sock])
    finally:
        guard_done.set()
        sock.close()
        log.info("shutting down")
        scheduler.shutdown()
        engine.shutdown(timeout=STOP_GRACE_SECONDS)
        watcher.stop()
        clear_daemon(runtime.root)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        log.info("stopped")
    if server.failure is not None:  # not a stop asked for: exit status 1
        raise EverosError(server.failure)


def listen_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port`` for uvicorn to serve on (as uvicorn binds one: IPv6
    when the host has a colon, address reuse on), or one line naming the address and why not
    (a port another process holds, an address this machine does not have)."""
    sock = socket.socket(family=socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.removeprefix("[").removesuffix("]"), port))
    except OSError as exc:
        sock.close()
        raise EverosError(f"cannot listen on {host}:{port}: {os_reason(exc)} "
                          f"({_listen_hint(exc)})") from None
    sock.set_inheritable(True)
    return sock


def _listen_hint(exc: OSError) -> str:
    """What to do about a bind that failed, by its cause: every failure was told "another
    process may hold the port", also a host name that does not resolve and an address this
    machine does not have, where the port was never the problem."""
    if isinstance(exc, socket.gaierror):
        return ("the host name does not resolve to an address: give an address of this "
                "machine with --host or [server] host")
    if exc.errno == errno.EADDRNOTAVAIL:
        return "this machine has no such address: give one of its own with --host or [server] host"
    return "another process may hold the port: choose another with --port or [server] port"


def uvicorn_config(app: Any, host: str, port: int) -> uvicorn.Config:
    """uvicorn's settings for the daemon. ``log_config=None``: uvicorn sets up no logging of
    its own, so its lines (startup, each request) reach the daemon's handler and are stamped
    as every other line (``cli.common.configure_logging``: UTC, with the zone). Its default
    printed them with no time at all, beside the daemon's local-time lines. ``http``: a client
    has a deadline to send each request whole (:mod:`~everos_reflect.api.slow_clients`)."""
    from everos_reflect.api.slow_clients import DeadlineH11Protocol

    return uvicorn.Config(app, host=host, port=port, lifespan="off", http=DeadlineH11Protocol,
                          timeout_graceful_shutdown=10, log_level="info", log_config=None)


class _Server(uvicorn.Server):
    """uvicorn, plus: on a stop signal, tell running strategies first; stop on its own when
    ``must_stop`` says why (:meth:`guard`: the root replaced)."""

    def __init__(self, config: uvicorn.Config, on_exit: Callable[[], None],
                 must_stop: Callable[[], str | None] = lambda: None) -> None:
        super().__init__(config)
        self._on_exit = on_exit
        self._must_stop = must_stop
        #: why the daemon stopped on its own (exit status 1), if it did
        self.failure: str | None = None

    def handle_exit(self, sig: int, frame: Any) -> None:
        if not self.should_exit:
            log.info("received %s; stopping", signal.Signals(sig).name)
        self._on_exit()
        super().handle_exit(sig, frame)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """uvicorn's, without raising the signals it caught again once it stopped: the
        daemon has acted on them, and :func:`_serve`'s handler took the one raised again
        for a second signal, logging "received SIGTERM while stopping" after one SIGTERM."""
        with super().capture_signals():
            try:
                yield
            finally:
                self._captured_signals.clear()

    def stop_if_must(self) -> bool:
        """Whether the daemon must stop (:attr:`failure`: said in the log once, and the
        daemon stopping)."""
        if self.failure is None:
            self.failure = self._must_stop()
            if self.failure is not None:
                log.error("%s", self.failure)
                self.should_exit = True
                self._on_exit()
        return self.failure is not None

    def guard(self, done: threading.Event) -> threading.Thread:
        """A thread asking :meth:`stop_if_must` once a second until ``done`` is set or the
        daemon stops: one of its own, so a root on a network mount that hangs holds it, not
        the event loop every request and a stop signal need."""
        def watch() -> None:
            while not done.wait(GUARD_SECONDS) and not self.should_exit:
                self.stop_if_must()

        thread = threading.Thread(target=watch, name="root-guard", daemon=True)
        thread.start()
        return thread


__all__ = ["STOP_GRACE_SECONDS", "serve"]
