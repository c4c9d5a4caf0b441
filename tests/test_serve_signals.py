"""``serve`` stopped by SIGTERM while it is still starting (watching the root's folders,
scheduling, advertising itself): the signal stops it, instead of being taken for one sent
during the shutdown and swallowed, the daemon then serving on for good."""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from everos_reflect import serve as serve_module
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.engine.daemon import daemon_file
from everos_reflect.index.watcher import Watcher
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings

#: How long the test lets a daemon that missed the signal serve before stopping it itself.
FAILSAFE_SECONDS = 20.0


@pytest.fixture
def runtime(root: Path) -> Iterator[Runtime]:
    rt = Runtime(root, Settings(), embedder=HashEmbedder())
    yield rt
    rt.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_while_serve_starts_stops_it(
        runtime: Runtime, sig: signal.Signals, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    failsafe: list[threading.Timer] = []
    start = Watcher.start

    def start_then_signal(self: Watcher) -> None:
        start(self)
        os.kill(os.getpid(), sig)  # while the watcher starts: a large root takes seconds
        # a daemon that missed the signal is stopped by a second one, later
        timer = threading.Timer(FAILSAFE_SECONDS, os.kill, (os.getpid(), signal.SIGTERM))
        timer.daemon = True
        timer.start()
        failsafe.append(timer)

    monkeypatch.setattr(Watcher, "start", start_then_signal)
    # as from a terminal: a test run in the background (a CI runner, `cmd &` in a script)
    # inherits SIGINT ignored, and serve rightly leaves an ignored signal ignored
    defaults = {signal.SIGTERM: signal.SIG_DFL, signal.SIGINT: signal.default_int_handler}
    inherited = {s: signal.signal(s, handler) for s, handler in defaults.items()}
    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    caplog.set_level(logging.INFO)
    try:
        serve_module.serve(runtime, host="127.0.0.1", port=_free_port())
    finally:
        for timer in failsafe:
            timer.cancel()
        after = {s: signal.getsignal(s) for s in previous}
        for s, handler in inherited.items():
            signal.signal(s, handler)
    assert failsafe, "the watcher never started"
    assert "Started server process" not in caplog.text, "it served after the stop signal"
    assert not daemon_file(runtime.root).exists()
    assert after == previous
