"""ASGI wrappers between hypercorn and the application, for two faults of that stack.

``ConnectionGuard`` lets hypercorn finish its work on a connection at the end of a response
(recycle it for the next request, or close it), which quart-trio otherwise cancels half-way.
``AccessLog`` writes the access log, one line per request, in place of hypercorn's, which
writes some requests twice. Both work around faults reported in docs/upstream/quart-trio.md and
docs/upstream/hypercorn.md.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

import trio
from hypercorn.typing import (
    ASGIReceiveCallable,
    ASGIReceiveEvent,
    ASGISendCallable,
    ASGISendEvent,
    HTTPScope,
)

from ledgerport.ops import loggable

from ._asgi import HttpWrapper, arrived

log = logging.getLogger("ledgerport.access")

_HTTP1 = frozenset({"1.0", "1.1"})


class ConnectionGuard(HttpWrapper):
    """Keeps hypercorn's end-of-response work on a connection from being cancelled.

    Hypercorn completes a response inside the application's last ``send``: still in that call,
    it hands the application ``http.disconnect``, then recycles the connection for its next
    request or, when the request's body has not all arrived, closes it
    (``H11Protocol._maybe_recycle``). quart-trio answers ``http.disconnect`` by cancelling the
    request's tasks, the one inside that ``send`` included
    (``TrioASGIHTTPConnection.handle_messages``), so hypercorn's work stops at its next
    checkpoint. A response sent before the body arrived (a 401 before the handler reads the
    body, a 405, an OPTIONS) then leaves its connection neither closed nor served: a client that
    sends the body and its next request waits until it gives up. After any other request the
    keep-alive timer is not restarted, so an idle connection stays open until the client
    closes it.

    Here ``http.disconnect`` reaches the application only once no ``send`` is in progress, so
    hypercorn's work completes. A response that starts before the request's body has arrived
    also says ``Connection: close`` (on HTTP/1), since hypercorn closes that connection rather
    than read the rest of the body: the client learns it from the response instead of from a
    failed reuse. The body is not awaited: answering without taking a possibly large upload is
    the point of an early answer.

    Its ``receive`` offers what has already arrived (``arrived``), as hypercorn's does, except
    while a ``send`` is in progress (a disconnect taken then would not wait for it).
    """

    async def http(
        self, scope: HTTPScope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> None:
        sends = 0
        """Sends in progress (quart makes one at a time)."""
        returned: trio.Event | None = None
        """Set once no send is in progress, for an ``http.disconnect`` that came during one."""
        # HTTP/1 only: on HTTP/2 a body left unread ends just its stream, and the Connection
        # header is forbidden.
        body_pending = scope["http_version"] in _HTTP1 and _declares_body(scope["headers"])

        def seen(message: ASGIReceiveEvent) -> ASGIReceiveEvent:
            nonlocal body_pending
            if message["type"] == "http.request" and not message.get("more_body", False):
                body_pending = False
            return message

        async def guarded_receive() -> ASGIReceiveEvent:
            nonlocal returned
            message = seen(await receive())
            if message["type"] == "http.disconnect":
                while sends:  # the send in progress, if any, has returned
                    returned = trio.Event()
                    await returned.wait()
            return message

        def arrived_unless_sending() -> ASGIReceiveEvent | None:
            # Nothing is taken while a send is in progress: a disconnect waits for it.
            if sends:
                return None
            message = arrived(receive)
            return None if message is None else seen(message)

        guarded_receive.arrived = arrived_unless_sending  # type: ignore[attr-defined]

        async def guarded_send(message: ASGISendEvent) -> None:
            nonlocal sends
            if message["type"] == "http.response.start" and body_pending:
                message = {**message, "headers": [*message["headers"], (b"connection", b"close")]}
            # Counted rather than locked: a lock's acquire is a turn of the event loop, for
            # every send of every request.
            sends += 1
            try:
                await send(message)
            finally:
                sends -= 1
                if not sends and returned is not None:
                    returned.set()

        await self._app(scope, guarded_receive, guarded_send)


def _declares_body(headers: Iterable[tuple[bytes, bytes]]) -> bool:
    """Whether the request's headers announce a body (h11 has checked the values' syntax)."""
    for name, value in headers:
        if name == b"transfer-encoding" or (name == b"content-length" and int(value) > 0):
            return True
    return False


class AccessLog(HttpWrapper):
    """Writes one access-log line per HTTP request, once the application is done with it.

    Hypercorn's own access log (left off in ``serve.py``) writes a request twice when the client
    closes the connection while hypercorn is still finishing the response: with status ``-``
    when it sees the close (``HTTPStream.handle`` on ``StreamClosed``), then with the status
    when the response completes (``HTTPStream._send_closed``). Here the line is written once,
    when the application returns, in hypercorn's default format; its status is ``-`` when the
    application sent no response (the client went away first). The request's data in it
    (method, path, referer, user agent) is redacted and its control characters escaped, so no
    request can put a token into the log or forge a line of it.
    """

    async def http(
        self, scope: HTTPScope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> None:
        status = size = "-"

        async def observed_send(message: ASGISendEvent) -> None:
            nonlocal status, size
            if message["type"] == "http.response.start":
                status = str(message["status"])
                size = _header(message["headers"], b"content-length")
            await send(message)

        try:
            await self._app(scope, receive, observed_send)
        finally:
            _log_request(scope, status, size)


def _log_request(scope: HTTPScope, status: str, size: str) -> None:
    client = scope["client"]
    log.info(
        '%s - - %s "%s %s %s" %s %s "%s" "%s"',
        f"{client[0]}:{client[1]}" if client else "-",
        time.strftime("[%d/%b/%Y:%H:%M:%S %z]"),
        loggable(scope["method"]),
        loggable(scope["path"]),
        scope["http_version"],
        status,
        size,
        loggable(_header(scope["headers"], b"referer")),
        loggable(_header(scope["headers"], b"user-agent")),
    )


def _header(headers: Iterable[tuple[bytes, bytes]], name: bytes) -> str:
    """The last value of header ``name``, or ``-``."""
    found = "-"
    for key, value in headers:
        if key.lower() == name:
            found = value.decode("latin-1")
    return found
