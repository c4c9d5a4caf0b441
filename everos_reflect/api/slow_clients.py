"""A deadline on reading each HTTP request whole, so a slow client cannot hold a connection.

uvicorn bounds only the idle time between two requests (``timeout_keep_alive``), and its
timer is cancelled by the first byte that arrives: a client that sent a request's headers or
body one byte a second held its connection (a socket, a file descriptor) for as long as it
liked, and enough of them exhausted the daemon's descriptors. :class:`DeadlineH11Protocol`
is uvicorn's own h11 protocol plus one timer: from a connection's start (and from the end of
each answer on a kept-alive one) the next request must have arrived whole, headers and body,
within :data:`REQUEST_READ_SECONDS`; else it is answered 408 and the connection closed. A
request received whole is never timed out here, however long the work it asks for takes.

The number of connections is bounded too (:data:`MAX_CONNECTIONS`): each one holds a file
descriptor for up to the deadline, and a few hundred clients connecting and sending nothing
exhausted the daemon's descriptors (the watcher, SQLite and LanceDB then failed to open
files). A connection beyond the bound is answered 503 at once, with a JSON error saying why,
and closed after :data:`REFUSED_LINGER_SECONDS`.

A request that is no valid HTTP/1.1 (a header block over h11's bound, a bad chunk size, two
``Content-Length`` headers, a byte over 0x7f in the request line) is answered as every other
bad request is (SPEC §7): a JSON error naming what is wrong, 431 for a header block too large,
else 400; the connection is closed :data:`REFUSED_LINGER_SECONDS` later, as a refused one is.
uvicorn answered a plain-text 400 "Invalid HTTP request received." for them all.
A header block is bounded however it arrives (:func:`_refuse_large_head`), not only while h11
waits for its end. So is what a chunked body sends besides its data (:class:`_Framing`): its
chunk extensions and trailer fields, which nothing here reads, are at most as large as a header
block in all, answered 431 past that. A body of 2,000 one-byte chunks each with a 10 KB
extension (20 MB sent for 2,000 bytes of data) was read to its end, and a trailer block that
arrived in one read was taken whatever its size.
"""

from __future__ import annotations

import ast
import asyncio
import json
import logging
import re

import h11
from uvicorn.protocols.http.h11_impl import STATUS_PHRASES, H11Protocol

from everos_reflect.model import quoted_value

log = logging.getLogger(__name__)

#: Seconds a client has to send one request whole (headers and body): generous for any
#: request within ``limits.max_request_bytes`` on a working link.
REQUEST_READ_SECONDS = 30.0

#: Connections the daemon holds at once; one more is answered 503 and closed. The admin API
#: serves a person, scripts and an agent or two on this machine: far below the usual limit of
#: 1,024 descriptors a process may hold, of which the index needs its share.
MAX_CONNECTIONS = 64

#: How long a connection answered 503 is kept open after the answer, its input thrown away:
#: closed with the client's request still unread, the kernel answers a reset, and the client
#: may lose the 503 for it.
REFUSED_LINGER_SECONDS = 1.0

#: At most one warning a minute about refused connections: a flood of clients is no flood of
#: log lines.
_REFUSAL_LOG_SECONDS = 60.0

#: States of the client's side in which h11 has not yet read a whole request.
_READING = (h11.IDLE, h11.SEND_BODY)


def _timeout_answer(seconds: float) -> bytes:
    body = json.dumps({"error": {"code": "request_timeout", "message": (
        f"the request was not received whole within {seconds:g} seconds")}}).encode()
    head = ("HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n")
    return head.encode() + body


def _busy_answer() -> bytes:
    body = json.dumps({"error": {"code": "too_many_connections", "message": (
        f"the daemon holds {MAX_CONNECTIONS} connections already, its most at once: "
        "try again once a client has closed one")}}).encode()
    head = ("HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nretry-after: 1\r\nconnection: close\r\n\r\n")
    return head.encode() + body


def _invalid_request(error: h11.RemoteProtocolError | None, reading: object,
                     limit: int) -> tuple[int, str, str]:
    """Status, code and message of the answer to a request h11 could not read (``reading``:
    the client's state when it failed)."""
    if error is not None and error.error_status_hint == 431:
        # in a body, h11's own bound (a size line or trailer block it waits for the end of)
        # and _Framing's are one bound: which one a request meets depends on the reads
        where = ("the chunk extensions and trailers of the request's body are"
                 if reading is h11.SEND_BODY else "the request's header block is")
        return 431, "headers_too_large", f"{where} over {limit:,} bytes"
    why = _readable(str(error)) if error is not None and str(error) else "it could not be read"
    return 400, "invalid_http", f"the request is no valid HTTP/1.1: {why}"


def _head_bytes(request: h11.Request) -> int:
    """The size of ``request``'s request line and header block as sent (less any blanks h11
    trimmed around header values)."""
    line = len(request.method) + len(request.target) + len(request.http_version) + 9
    return line + sum(len(name) + len(value) + 4
                      for name, value in request.headers.raw_items()) + 2


def _refuse_large_head(request: h11.Request, limit: int) -> None:
    """Raise h11's own "431" error for a header block over ``limit`` bytes. h11 bounds only
    a block it is still waiting for the end of: one that arrived whole in a single read (up
    to 256 KiB, as the event loop reads) was accepted however large, so whether a 60 KiB
    block was answered 431 or served depended on how the network cut it."""
    size = _head_bytes(request)
    if size > limit:
        raise h11.RemoteProtocolError(f"the header block is {size:,} bytes",
                                      error_status_hint=431)


#: Bytes a chunk may take besides its data without counting as extension: its size in hex (8
#: digits for any chunk under 4 GiB) and the line ends after the size and after the data.
#: Allowed per piece of data h11 hands on (a chunk is one piece or more, never none), so a
#: chunk whose size line and data arrive in two reads is not counted short.
_CHUNK_FRAMING_BYTES = 12


class _Framing:
    """Counts what one request's body sends besides its data, as h11 consumes it: chunk-size
    lines with their extensions, line ends, the trailer block. h11 reads past extensions and
    trailers, and bounds a line or a trailer block only while it waits for its end, so a
    body of tiny chunks with long extensions went on for as long as the client sent it."""

    def __init__(self, limit: int) -> None:
        self.limit, self.sent, self.pieces = limit, 0, 0

    def count(self, event: object, consumed: int) -> None:
        """``event`` took ``consumed`` bytes of the connection's input; h11's "431" error
        once the extensions and trailers are over the bound."""
        if isinstance(event, h11.Data):
            consumed -= len(event.data)
            self.pieces += 1
        self.sent += max(0, consumed)
        if self.sent > self.limit + _CHUNK_FRAMING_BYTES * self.pieces:
            raise h11.RemoteProtocolError(
                f"chunk extensions and trailers over {self.limit:,} bytes",
                error_status_hint=431)


#: h11's words for what it read: "illegal chunk header: bytearray(b'zz\\r\\n')"
_H11_BYTES = re.compile(r": (?:bytearray\()?b(['\"])(.*?)\1\)?$")


def _readable(why: str, most: int = 200) -> str:
    """h11's reason, the bytes it quotes as text, bounded (they are the client's)."""
    def text(match: re.Match[str]) -> str:
        try:
            data = ast.literal_eval(f"b{match.group(1)}{match.group(2)}{match.group(1)}")
        except (SyntaxError, ValueError):
            return match.group(0)
        # a byte that is no UTF-8 as the byte it is ('\xff'), not as U+FFFD, which the
        # client never sent; a request line holding one is told how to send it
        shown = quoted_value(data.decode("utf-8", "surrogateescape"))
        if why.startswith("illegal request line") and not data.isascii():
            shown += (" (a request line is ASCII: percent-encode every other byte of the "
                      "target, as %C3%A9 for é)")
        return f" {shown}"

    why = _H11_BYTES.sub(text, why)
    return why if len(why) <= most else why[:most] + "…"


#: What uvicorn logs, with nothing else, of each request h11 cannot read.
_UVICORN_INVALID = "Invalid HTTP request received."


class _QuietInvalid:
    """uvicorn's logger for a connection, without its line of a request h11 cannot read: that
    line ("Invalid HTTP request received.", a WARNING of ``uvicorn.error``) said neither what
    was refused nor whose request it was, and named an error where a client sent bad bytes.
    :meth:`DeadlineH11Protocol.send_400_response` logs its own line instead."""

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger

    def __getattr__(self, name: str) -> object:
        return getattr(self._logger, name)

    def warning(self, msg: object, *args: object, **kwargs: object) -> None:
        if msg != _UVICORN_INVALID:
            self._logger.warning(msg, *args, **kwargs)  # type: ignore[arg-type]


def client_text(client: tuple[str, int] | None) -> str:
    """``127.0.0.1:50312`` (``[::1]:50312``) for a connection's peer, ``a client`` when the
    transport does not say."""
    if not client:
        return "a client"
    host, port = client[0], client[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class DeadlineH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline on reading each request and a bound on the
    connections held at once, answering a request that is no valid HTTP in JSON (module
    docstring)."""

    _deadline: asyncio.TimerHandle | None = None
    _refused = False
    _last_refusal_logged: float | None = None  # class-wide: loop time of the last warning
    #: why h11 could not read the last request (and the client's state then), for its answer
    _protocol_error: tuple[h11.RemoteProtocolError, object] | None = None
    #: what the body of the request being read sends besides its data
    _framing: _Framing | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if not isinstance(self.logger, _QuietInvalid):
            self.logger = _QuietInvalid(self.logger)  # type: ignore[assignment]
        super().connection_made(transport)
        read = self.conn.next_event

        def next_event() -> object:  # uvicorn catches h11's error and keeps nothing of it
            reading = self.conn.their_state
            unread = len(self.conn._receive_buffer)
            try:
                event = read()
                if isinstance(event, h11.Request):
                    _refuse_large_head(event, self.conn._max_incomplete_event_size)
                    self._framing = _Framing(self.conn._max_incomplete_event_size)
                elif reading is h11.SEND_BODY and self._framing is not None:
                    self._framing.count(event, unread - len(self.conn._receive_buffer))
                return event
            except h11.RemoteProtocolError as exc:
                self._protocol_error = (exc, reading)
                raise

        self.conn.next_event = next_event  # type: ignore[method-assign]
        if len(self.connections) > MAX_CONNECTIONS:
            self._refuse()
            return
        self._arm()

    def data_received(self, data: bytes) -> None:
        if not self._refused:  # a refused connection's request was answered already
            super().data_received(data)

    def _refuse(self) -> None:
        self._refused = True
        now = self.loop.time()
        last = DeadlineH11Protocol._last_refusal_logged
        if last is None or now - last >= _REFUSAL_LOG_SECONDS:
            DeadlineH11Protocol._last_refusal_logged = now
            log.warning("refusing connections beyond %d at once (answered 503)",
                        MAX_CONNECTIONS)
        self.transport.write(_busy_answer())
        self._linger()

    def _linger(self) -> None:
        """Close after :data:`REFUSED_LINGER_SECONDS`, the client's input thrown away till then
        (the answer written): closed while the client is still sending (a body cut off at a
        bound), the kernel answers a reset, and the client may lose the answer for it (its
        send failing first)."""
        self._refused = True
        self._disarm()
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self._deadline = self.loop.call_later(REFUSED_LINGER_SECONDS, self.transport.close)

    def send_400_response(self, msg: str) -> None:
        error, reading = self._protocol_error or (None, None)
        status, code, message = _invalid_request(error, reading,
                                                 self.conn._max_incomplete_event_size)
        # one line, at INFO as uvicorn's access line of any other refused request: the
        # client's fault, not the daemon's; the message is bounded and the log's formatter
        # escapes what it holds
        log.info("refused a request from %s: %s (answered %d)", client_text(self.client),
                 message, status)
        body = json.dumps({"error": {"code": code, "message": message}}).encode()
        headers = [(b"content-type", b"application/json"),
                   (b"content-length", str(len(body)).encode()), (b"connection", b"close")]
        for event in (h11.Response(status_code=status, headers=headers,
                                   reason=STATUS_PHRASES[status]),
                      h11.Data(data=body), h11.EndOfMessage()):
            self.transport.write(self.conn.send(event))
        self._linger()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        # read whole (or the connection is done); a refused one keeps its closing timer
        if self.conn.their_state not in _READING and not self._refused:
            self._disarm()

    def on_response_complete(self) -> None:
        # before uvicorn starts on a pipelined request (which may be read whole at once)
        self._arm()
        super().on_response_complete()

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(REQUEST_READ_SECONDS, self._on_deadline,
                                              REQUEST_READ_SECONDS)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _on_deadline(self, seconds: float) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        log.warning("closed the connection of %s: its request was not received whole "
                    "within %g seconds", client_text(self.client), seconds)
        cycle = self.cycle
        if cycle is None or cycle.response_complete or not cycle.response_started:
            self.transport.write(_timeout_answer(seconds))  # no answer of ours under way
        if cycle is not None and not cycle.response_complete:
            # a route waiting for the rest of the body is told the client is gone; it
            # writes nothing more to this connection
            cycle.disconnected = True
            cycle.message_event.set()
        self.transport.close()
