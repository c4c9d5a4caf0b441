"""A request h11 cannot read is logged as one line saying what was refused and whose request
it was, at INFO (a client's fault, as uvicorn's access line of any refused request): uvicorn
logged "Invalid HTTP request received." at WARNING of ``uvicorn.error`` for each, naming
neither, beside the JSON 400 the daemon answered."""

from __future__ import annotations

import logging

import pytest

from tests.test_serve_header_block import answer_in_one_read


def test_a_request_h11_cannot_read_is_one_info_line_naming_it_and_its_client(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    status, body, closed = answer_in_one_read(b"GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n")
    assert status == b"HTTP/1.1 400 Bad Request" and closed
    assert b"invalid_http" in body
    lines = [r for r in caplog.records if r.name.startswith(("uvicorn", "everos_reflect"))]
    assert [(r.levelno, r.getMessage()) for r in lines] == [
        (logging.INFO, "refused a request from 127.0.0.1:40000: the request is no valid "
                       "HTTP/1.1: illegal header line 'Bad Header' (answered 400)")]
    assert all(r.exc_info is None for r in caplog.records)
    assert "Invalid HTTP request received." not in caplog.text


def test_a_header_block_too_large_is_logged_as_what_it_answered(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    status, _, _ = answer_in_one_read(b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70_000
                                      + b"\r\n\r\n")
    assert status.startswith(b"HTTP/1.1 431")
    (line,) = [r for r in caplog.records if r.name.startswith(("uvicorn", "everos_reflect"))]
    assert line.levelno == logging.INFO
    assert line.getMessage().startswith("refused a request from 127.0.0.1:40000: the request's "
                                        "header block is over ")
    assert line.getMessage().endswith(" bytes (answered 431)")


def test_other_warnings_of_uvicorn_still_reach_the_log(caplog: pytest.LogCaptureFixture) -> None:
    # only uvicorn's one line of a request it cannot read is dropped: an upgrade it does not
    # serve is still said
    caplog.set_level(logging.DEBUG)
    answer_in_one_read(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\n"
                       b"Upgrade: websocket\r\n\r\n")
    assert "Unsupported upgrade request." in caplog.text


@pytest.mark.parametrize(("client", "shown"), [
    (("127.0.0.1", 5), "127.0.0.1:5"), (("::1", 5), "[::1]:5"), (None, "a client")])
def test_a_client_is_shown_as_a_url_writes_it(client: tuple[str, int] | None, shown: str) -> None:
    from everos_reflect.api.slow_clients import client_text

    assert client_text(client) == shown
