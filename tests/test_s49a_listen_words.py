"""``serve`` that cannot listen says why in words that fit the cause: a host name that does not
resolve, or an address this machine does not have, was told "(another process may hold the
port: choose another with --port …)", sending a person after a port that was never the
problem. A port in use keeps that hint (tests/test_daemon_file.py)."""

from __future__ import annotations

import errno
import socket

import pytest

from everos_reflect.errors import EverosError
from everos_reflect.serve import listen_socket


def test_a_host_name_that_does_not_resolve_is_named_as_such(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def unknown(self: socket.socket, address: object) -> None:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket.socket, "bind", unknown)
    with pytest.raises(EverosError) as caught:
        listen_socket("no-such-host.invalid", 8000)
    assert str(caught.value) == (
        "cannot listen on no-such-host.invalid:8000: Name or service not known (the host name "
        "does not resolve to an address: give an address of this machine with --host or "
        "[server] host)")


def test_an_address_this_machine_does_not_have_is_named_as_such(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def absent(self: socket.socket, address: object) -> None:
        raise OSError(errno.EADDRNOTAVAIL, "Cannot assign requested address")

    monkeypatch.setattr(socket.socket, "bind", absent)
    with pytest.raises(EverosError) as caught:
        listen_socket("10.255.255.1", 8000)
    assert str(caught.value) == (
        "cannot listen on 10.255.255.1:8000: Cannot assign requested address (this machine "
        "has no such address: give one of its own with --host or [server] host)")


def test_a_port_in_use_keeps_its_hint() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        with pytest.raises(EverosError) as caught:
            listen_socket("127.0.0.1", port)
    assert str(caught.value).endswith(
        "(another process may hold the port: choose another with --port or [server] port)")
