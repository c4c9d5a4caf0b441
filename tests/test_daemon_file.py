"""``daemon.json`` is written by rename and cleared without raising: a FIFO planted there made
``serve`` hang for ever opening it for writing, and an unreadable file raised out of the
shutdown's ``finally`` before the signal handlers were restored. And ``serve`` on a
non-loopback host without a token is refused before anything starts, in one line."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli import engine_cmds
from everos_reflect.cli.main import cli
from everos_reflect.engine.daemon import clear_daemon, daemon_file, write_daemon
from everos_reflect.errors import EverosError
from tests.daemon_lock import serve_lock


def _within(seconds: float, fn, *args) -> None:  # type: ignore[no-untyped-def]
    """Run ``fn`` in a thread and fail (instead of freezing the suite) if it blocks."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            fn(*args)
        except BaseException as exc:  # re-raised in the test thread
            errors.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"{fn.__name__} blocked for more than {seconds} s"
    if errors:
        raise errors[0]


def test_a_fifo_planted_at_daemon_json_is_replaced_not_opened(tmp_path: Path) -> None:
    path = daemon_file(tmp_path)
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    _within(10, write_daemon, tmp_path, {"pid": os.getpid(), "port": 8000})
    assert path.is_file()
    assert json.loads(path.read_text("utf-8")) == {"pid": os.getpid(), "port": 8000}
    assert [p.name for p in path.parent.iterdir()] == ["daemon.json"]  # no temp file left


def test_clear_removes_only_this_processes_file(tmp_path: Path) -> None:
    write_daemon(tmp_path, {"pid": os.getpid() + 1})
    clear_daemon(tmp_path)
    assert daemon_file(tmp_path).exists()  # another daemon's advertisement stays
    write_daemon(tmp_path, {"pid": os.getpid()})
    clear_daemon(tmp_path)
    assert not daemon_file(tmp_path).exists()
    clear_daemon(tmp_path)  # nothing there: nothing to do


def test_clear_leaves_an_unreadable_file_without_raising(tmp_path: Path) -> None:
    path = daemon_file(tmp_path)
    path.parent.mkdir(parents=True)
    for content in (b"{not json", b"[1, 2]", b"\xff\xfe"):
        path.write_bytes(content)
        clear_daemon(tmp_path)
        assert path.read_bytes() == content
    path.unlink()
    os.mkfifo(path)
    _within(10, clear_daemon, tmp_path)
    assert path.exists()


@pytest.mark.parametrize(("args", "env", "host"), [
    (["--host", "0.0.0.0"], {}, "'0.0.0.0'"),
    ([], {"EVEROS_SERVER__HOST": "::"}, "'::'"),
])
def test_serve_on_a_public_host_without_a_token_names_every_place_a_token_can_come_from(
    root: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], env: dict[str, str], host: str
) -> None:
    # It said "invalid configuration: everos.toml: server.token: …": not which everos.toml,
    # and nothing in the configuration was invalid when the host came from --host.
    monkeypatch.delenv("EVEROS_SERVER__TOKEN", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(engine_cmds, "configure_logging", lambda: None)
    result = CliRunner().invoke(cli, ["serve", "--root", str(root), *args])
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    line = lines[0]
    assert "invalid configuration" not in line
    for needed in (f"non-loopback host {host}", "token under [server] in "
                   f"{root / 'everos.toml'}", "EVEROS_SERVER__TOKEN", "--host 127.0.0.1"):
        assert needed in line, line
    assert not daemon_file(root).exists()


@pytest.mark.parametrize(("address", "problem"), [
    ({"host": "127.0.0.1", "port": "80@evil.example"},
     "port '80@evil.example' is no port number"),
    ({"host": "127.0.0.1", "port": "abc"}, "port 'abc' is no port number"),
    ({"host": "127.0.0.1", "port": None}, "port None is no port number"),
    ({"host": "127.0.0.1", "port": 70000}, "port 70000 is no port number"),
    ({"host": "127.0.0.1", "port": True}, "port True is no port number"),
    ({"host": "evil.example/x?", "port": 8000}, "host 'evil.example/x?' is no host name or "
                                                "address"),
    ({"host": ["::1"], "port": 8000}, "host ['::1'] is no host"),
])
def test_trigger_never_calls_an_address_a_damaged_daemon_json_makes_up(
    root: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
    address: dict[str, object], problem: str,
) -> None:
    # daemon.json is text under the root: a port "80@evil.example" made the URL
    # http://127.0.0.1:80@evil.example/..., and trigger sent the run request with the API
    # token (Authorization: Bearer) to evil.example; a port "abc" raised httpx.InvalidURL as a
    # traceback. Such a file names no daemon: trigger runs in-process, saying why.
    import httpx

    monkeypatch.setenv("EVEROS_SERVER__TOKEN", "s3cret")
    daemon_file(root).write_text(json.dumps({"pid": os.getppid(), **address}), "utf-8")
    calls: list[object] = []
    monkeypatch.setattr(httpx, "post", lambda *a, **k: calls.append((a, k)))
    result = CliRunner().invoke(cli, ["trigger", "revalidate_insights", "--force", "--root",
                                      str(root)])
    assert result.exit_code == 0, result.output
    assert calls == []
    assert "[in-process]" in result.stdout and "Traceback" not in result.output
    assert f"ignoring {daemon_file(root)}: {problem}" in caplog.text


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "[::1]", "localhost", "my-host.lan", "",
                                  None])
def test_a_daemon_json_with_a_real_address_is_read(root: Path, host: object) -> None:
    from everos_reflect.engine.daemon import read_daemon

    info = {"pid": os.getppid(), "host": host, "port": 8000}
    daemon_file(root).write_text(json.dumps(info), "utf-8")
    with serve_lock(root):
        assert read_daemon(root) == info


def test_serve_on_a_port_another_process_holds_starts_nothing_and_says_so(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # It recovered, started the watcher and scheduler, wrote daemon.json and logged "serving
    # … on http://127.0.0.1:P" before uvicorn found the port taken and exited 3 with no error
    # line of its own.
    import socket

    from everos_reflect import serve as serve_module
    from everos_reflect.engine import engine as engine_module

    started: list[str] = []
    monkeypatch.setattr(engine_module.Engine, "__init__",
                        lambda self, *a, **k: started.append("engine"))
    monkeypatch.setattr(serve_module, "recover_interrupted", lambda rt: started.append("rec"))
    monkeypatch.setattr(engine_cmds, "configure_logging", lambda: None)
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        result = CliRunner().invoke(cli, ["serve", "--root", str(root), "--port", str(port)])
    assert result.exit_code == 1, result.output
    assert result.stderr.strip().splitlines() == [
        f"error: cannot listen on 127.0.0.1:{port}: Address already in use (another process "
        "may hold the port: choose another with --port or [server] port)"]
    assert started == [] and not daemon_file(root).exists()


@pytest.mark.parametrize("answer", [
    {"text": "<html>It works!</html>", "headers": {"content-type": "text/html"}},
    {"json": {"hello": "world"}},
    {"text": "{not json", "headers": {"content-type": "application/json"}},
])
def test_trigger_names_an_answer_that_is_no_run_outcome(
        root: Path, monkeypatch: pytest.MonkeyPatch, answer: dict[str, object]) -> None:
    # another server now on the port a stale daemon.json names (its pid reused): its 200
    # answer raised a TypeError (or a JSON decode error) traceback out of trigger
    import httpx

    daemon_file(root).write_text(json.dumps({"pid": os.getppid(), "host": "127.0.0.1",
                                             "port": 8000}), "utf-8")
    monkeypatch.setattr(httpx, "post", lambda url, **k: httpx.Response(
        200, request=httpx.Request("POST", url), **answer))
    with serve_lock(root):
        result = CliRunner().invoke(cli, ["trigger", "revalidate_insights", "--root",
                                          str(root)])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: the daemon (pid {os.getppid()}) at http://127.0.0.1:8000 "
                           "answered with no run outcome: ")


@pytest.mark.parametrize(("error", "text", "code", "said"), [
    ("ReadTimeout", "no answer", 5,
     "took the request but did not answer within 150 s: its run may go on"),
    ("RemoteProtocolError", "no answer", 1,
     "took the request, then the connection broke before it answered (no answer)"),
    # an error without text was named by its class alone: "(ReadError)"
    ("ReadError", "", 1, "took the request, then the connection broke before it answered "
                         "(read error)"),
    ("ConnectError", "no answer", 0, None),
])
def test_trigger_runs_in_process_only_when_the_daemon_never_got_the_request(
        root: Path, monkeypatch: pytest.MonkeyPatch, error: str, text: str, code: int,
        said: str | None) -> None:
    # a daemon slower than the wait and 30 s more was taken for no daemon ("did not answer;
    # running in-process"): the strategy ran here once the daemon's run was done, a second
    # time, or answered "busy" beside it
    import httpx

    from everos_reflect.engine import engine as engine_module

    daemon_file(root).write_text(json.dumps({"pid": os.getppid(), "host": "127.0.0.1",
                                             "port": 8000}), "utf-8")

    def post(url: str, **kwargs: object) -> httpx.Response:
        raise getattr(httpx, error)(text, request=httpx.Request("POST", url))

    monkeypatch.setattr(httpx, "post", post)
    here: list[str] = []
    real = engine_module.Engine.trigger
    monkeypatch.setattr(engine_module.Engine, "trigger",
                        lambda self, name, **k: here.append(name) or real(self, name, **k))
    with serve_lock(root):
        result = CliRunner().invoke(cli, ["trigger", "revalidate_insights", "--force",
                                          "--timeout", "120", "--root", str(root)])
    assert result.exit_code == code, result.output
    if said is None:  # it never reached the daemon: run here, as before
        assert here == ["revalidate_insights"] and "[in-process]" in result.stdout
        return
    assert here == []
    assert f"the daemon (pid {os.getppid()}) {said}" in result.stderr
    assert "Nothing was run in this process" in result.stderr
    if code == 5:
        assert result.stdout == "revalidate_insights: timeout [daemon]\n"


def test_a_second_serve_of_a_root_still_starting_is_refused_naming_the_first(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Two serve started together both found no daemon.json (written once the daemon is up)
    # and both served the root: two watchers, two schedulers firing every cron job, the first
    # one's daemon.json overwritten by the second's.
    from everos_reflect import serve as serve_module
    from everos_reflect.engine.daemon import hold_serve_lock

    started: list[str] = []
    monkeypatch.setattr(serve_module, "listen_socket", lambda *a: started.append("listen"))
    monkeypatch.setattr(engine_cmds, "configure_logging", lambda: None)
    first = hold_serve_lock(root)  # what the first serve holds from before it listens
    try:
        result = CliRunner().invoke(cli, ["serve", "--root", str(root), "--port", "1"])
    finally:
        os.close(first)
    assert result.exit_code == 1, result.output
    assert result.stderr.strip().splitlines() == [
        f"error: another everos-reflect serve (pid {os.getpid()}) is starting on or serving "
        f"{root}: one daemon serves a root"]
    assert started == [] and not daemon_file(root).exists()


def test_a_second_serve_names_the_daemon_up_by_its_address(root: Path) -> None:
    import subprocess
    import sys

    from everos_reflect.engine.daemon import hold_serve_lock

    # another process serving the root: its lock held, its daemon.json written
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from everos_reflect.engine.daemon import "
         "hold_serve_lock; hold_serve_lock(sys.argv[1]); print('held', flush=True); "
         "time.sleep(60)", str(root)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        write_daemon(root, {"pid": holder.pid, "host": "127.0.0.1", "port": 8123,
                            "root": str(root)})
        with pytest.raises(EverosError) as caught:
            hold_serve_lock(root)
        assert str(caught.value) == (f"a daemon (pid {holder.pid}) already serves {root} on "
                                     "127.0.0.1:8123")
        holder.kill()  # kill -9: the lock goes with the process, daemon.json stays behind
        holder.wait(10)
        os.close(hold_serve_lock(root))  # the next serve starts
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(10)
