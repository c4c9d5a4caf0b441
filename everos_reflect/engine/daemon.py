"""``everos-reflect serve``: one process runs the cascade watcher, the scheduler and the API.

The daemon advertises itself in ``<root>/.index/daemon.json`` (pid, host, port, started_at;
removed at exit) so ``everos-reflect trigger`` can go through it instead of running a second
copy of a strategy in-process. SIGTERM/SIGINT stop it cleanly: running strategies are asked to
stop at their next safe point (``should_stop``), get a grace period, and anything still
running is recorded as abandoned — the strategy's own journal makes that safe.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import os
import signal
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import uvicorn

from everos_reflect.engine.engine import Engine, RunOutcome, _pid_alive
from everos_reflect.errors import ConfigError, EverosError, UnknownStrategy

if TYPE_CHECKING:
    from collections.abc import Callable

    from everos_reflect.runtime import Runtime

log = logging.getLogger(__name__)

STOP_GRACE_SECONDS = 30.0


def daemon_file(root: Path) -> Path:
    return Path(root) / ".index" / "daemon.json"


def read_daemon(root: Path) -> dict[str, Any] | None:
    """The running daemon serving ``root`` (its ``daemon.json``), or ``None``."""
    try:
        info = json.loads(daemon_file(root).read_text("utf-8"))
        pid = int(info["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return info if pid != os.getpid() and _pid_alive(pid) else None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse to expose the API beyond this machine without a token (SPEC §4)."""
    if not is_loopback(host) and not token:
        raise ConfigError([("everos.toml", "server.token",
                            f"required to serve on non-loopback host {host!r}; set [server] "
                            "token (or EVEROS_SERVER__TOKEN), or bind 127.0.0.1")])


def recover_interrupted(runtime: Runtime) -> int:
    """Ask every strategy to settle what a crash interrupted, at start-up rather than at its
    next run (:func:`recovery.recover_all`).

    Takes each strategy's lock without waiting: if a run in another process holds it, that run
    recovers itself. Returns how many interrupted units were settled.
    """
    from everos_reflect.engine.recovery import recover_all

    return sum(sum(c.values()) for c in recover_all(runtime, wait=0).values())


def serve(runtime: Runtime, *, host: str | None = None, port: int | None = None) -> None:
    """Run the daemon in the foreground until SIGTERM/SIGINT."""
    from everos_reflect.api.app import create_app
    from everos_reflect.engine.scheduler import Scheduler
    from everos_reflect.index.watcher import Watcher

    # APScheduler logs every job execution at INFO; the scheduler logs what matters itself.
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    cfg = runtime.settings.server
    host = host or cfg.host
    port = cfg.port if port is None else port
    check_bind(host, cfg.token)
    other = read_daemon(runtime.root)
    if other is not None:
        raise EverosError(f"a daemon (pid {other['pid']}) already serves {runtime.root} on "
                          f"{other['host']}:{other['port']}")

    engine = Engine(runtime)  # marks runs of a crashed daemon abandoned
    recover_interrupted(runtime)
    watcher = Watcher(runtime)
    scheduler = Scheduler(engine)
    server = _Server(uvicorn.Config(
        create_app(runtime, engine, scheduler), host=host, port=port, lifespan="off",
        timeout_graceful_shutdown=10, log_level="info",
    ), on_exit=engine.request_stop)

    # uvicorn re-raises the stop signal after its shutdown; these handlers absorb it so the
    # clean-up below runs (a second signal while cleaning up is also absorbed).
    previous = {sig: signal.signal(sig, _note_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    info_path = daemon_file(runtime.root)
    try:
        watcher.start()
        scheduler.start()
        info_path.parent.mkdir(parents=True, exist_ok=True)
        info_path.write_text(json.dumps({
            "pid": os.getpid(), "host": host, "port": port,
            "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "root": str(runtime.root),
        }), "utf-8")
        log.info("serving %s on http://%s:%s", runtime.root, host, port)
        server.run()
    finally:
        log.info("shutting down")
        scheduler.shutdown()
        engine.shutdown(timeout=STOP_GRACE_SECONDS)
        watcher.stop()
        with contextlib.suppress(FileNotFoundError):
            info = json.loads(info_path.read_text("utf-8"))
            if info.get("pid") == os.getpid():
                info_path.unlink()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        log.info("stopped")


def _note_signal(sig: int, frame: object) -> None:
    log.info("received %s while stopping; finishing clean-up", signal.Signals(sig).name)


class _Server(uvicorn.Server):
    """uvicorn, plus: on a stop signal, tell running strategies first."""

    def __init__(self, config: uvicorn.Config, on_exit: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_exit = on_exit

    def handle_exit(self, sig: int, frame: Any) -> None:
        self._on_exit()
        super().handle_exit(sig, frame)


def trigger_via_daemon(
    runtime: Runtime, name: str, *, force: bool, timeout: float
) -> RunOutcome | None:
    """Ask the daemon serving this root to run ``name``; ``None`` when no daemon answers."""
    info = read_daemon(runtime.root)
    if info is None:
        return None
    host = str(info.get("host") or "127.0.0.1")
    if host in {"0.0.0.0", "::", ""}:
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    headers = {}
    if runtime.settings.server.token:
        headers["Authorization"] = f"Bearer {runtime.settings.server.token}"
    try:
        resp = httpx.post(
            f"http://{host}:{info['port']}/api/v1/ome/trigger",
            json={"name": name, "force": force, "timeout": timeout},
            headers=headers, timeout=timeout + 30,
        )
    except httpx.TransportError as exc:
        log.warning("daemon pid %s did not answer (%s); running in-process", info["pid"], exc)
        return None
    body = resp.json() if resp.headers.get("content-type", "").startswith("application/json") \
        else {}
    if resp.status_code != 200:
        message = (body.get("error") or {}).get("message") or resp.text
        if resp.status_code == 404:
            raise UnknownStrategy(message)
        raise EverosError(f"daemon answered {resp.status_code}: {message}")
    fields = RunOutcome.__dataclass_fields__
    return RunOutcome(**{k: v for k, v in body.items() if k in fields})
