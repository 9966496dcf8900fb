"""The delivery client's connections: every address a webhook attempt connects to is checked.

A webhook's client (:class:`DeliveryClient`) keeps HTTP/1.1 connections of its own on trio's
streams, each carrying one attempt at a time. An attempt is one POST with headers the engine
made, whose answer's status, headers and first bytes are all it reads; for that, a client
library's layers cost more than the rest of the attempt: httpx's requests, cookies and response
wrapping a quarter of an attempt's CPU on loopback, then httpcore's pool a fifth of the served
process's, and httpcore's connection and h11 under it, without the pool, still two fifths of the
served process's CPU in the import-to-delivery pipeline (docs/performance.md, "Webhook engine
beyond Svix"): locks, traces, an event object and a validation per step, two writes a request.
Here a request is written in one write (head and body), and the answer's head parsed from the
bytes in one pass (:func:`_parse_head`); its body is framed by ``Content-Length``, chunked, or
read until the receiver closes, as RFC 9112 says a response's is.

A webhook's host is resolved at connection time and each address is checked before it is
connected to, so the address actually used is the one checked: a name that resolved to a public
address at registration and resolves to a private one now (DNS rebinding) is refused. TLS
verifies the certificate against the URL's host name (the server name of trio's ``SSLStream``).

Failures are httpcore's exceptions (``DELIVERY_ERRORS``), whose words the attempt log keeps:
httpcore stays for them and for its URL, not for its connections.
"""

from __future__ import annotations

import ipaddress
import re
import select
import ssl
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import httpcore
import httpx
import trio

from ledgerport.apps import Resolver

_IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
KEEPALIVE_EXPIRY = 30.0
"""Seconds an idle connection to a receiver is kept for the next attempt."""
HEAD_MAX = 16 * 1024
"""Bytes an answer's head (status line and headers) may take at most: h11's bound, which the
engine's client had before."""
READ_SIZE = 64 * 1024
"""Bytes asked of the socket a read."""

Headers = list[tuple[bytes, bytes]]


class TargetRefused(httpcore.ConnectError):
    """The webhook's host resolves only to addresses deliveries may not reach."""


DELIVERY_ERRORS = (
    httpcore.NetworkError,
    httpcore.ProtocolError,
    httpcore.UnsupportedProtocol,
    httpcore.ProxyError,
)
"""What an attempt's request can fail with, besides its timeout (the caller's cancel scope):
no connection, a connection lost or broken, an answer that is not HTTP."""

_STATUS_LINE = re.compile(rb"HTTP/1\.([0-9]) ([0-9]{3})(?: [^\r\n]*)?\r?")
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,16})[ \t]*(?:;[^\r\n]*)?\r?")
_HEADER_NAME = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_HEAD_END = re.compile(rb"\r?\n\r?\n")
_NO_BODY = frozenset({204, 304})


class DeliveryConnection:
    """One HTTP/1.1 connection to a receiver, carrying one request and its answer at a time
    (:meth:`send`, then :meth:`answer`); its client keeps it for the next while it is
    ``reusable`` and idle for less than KEEPALIVE_EXPIRY."""

    def __init__(self, origin: httpcore.Origin, stream: trio.abc.Stream) -> None:
        self.origin = origin
        self._stream = stream
        self._buffer = bytearray()
        self.reusable = False
        """Whether the last answer ended cleanly and the connection may carry another."""
        self.idle_since = 0.0

    def expired(self) -> bool:
        """Idle for KEEPALIVE_EXPIRY or more, or the receiver closed it (or sent something
        while no request was under way, which is no answer either): its socket is readable."""
        return time.monotonic() - self.idle_since >= KEEPALIVE_EXPIRY or _readable(self._stream)

    async def aclose(self) -> None:
        """Close at once: a TLS connection without a close_notify, which no receiver waits for
        (trio's ``https_compatible``), so closing never waits on the receiver."""
        self.reusable = False
        await trio.aclose_forcefully(self._stream)

    async def send(self, data: bytes) -> None:
        try:
            await self._stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise httpcore.WriteError(exc) from exc

    async def _more(self) -> bool:
        """Read what the receiver sent next into the buffer; False at its end of stream."""
        try:
            data = await self._stream.receive_some(READ_SIZE)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise httpcore.ReadError(exc) from exc
        self._buffer += data
        return bool(data)

    async def answer(self, *, to_head: bool = False) -> DeliveryResponse:
        """The answer's head (1xx informational answers passed over), its body to read from
        the answer (none, whatever it says, for an answer to a HEAD request: ``to_head``)."""
        while True:
            end = _HEAD_END.search(self._buffer)
            while end is None:
                if len(self._buffer) > HEAD_MAX:
                    raise httpcore.RemoteProtocolError("the answer's head is too long")
                if not await self._more():
                    raise httpcore.RemoteProtocolError(
                        "Server disconnected without sending a response."
                    )
                end = _HEAD_END.search(self._buffer)
            if end.start() > HEAD_MAX:
                raise httpcore.RemoteProtocolError("the answer's head is too long")
            head = bytes(self._buffer[: end.start()])
            del self._buffer[: end.end()]
            minor, status, headers = _parse_head(head)
            if 100 <= status < 200 and status != 101:
                continue  # informational: the answer follows
            return DeliveryResponse(self, minor, status, headers, to_head=to_head)

    def take(self, limit: int) -> bytes:
        """Up to ``limit`` bytes of what was read, taken out of the buffer."""
        data = bytes(self._buffer[:limit])
        del self._buffer[:limit]
        return data

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def line(self) -> bytes | None:
        """A line of what was read (without its end), taken out of the buffer; None when no
        whole line was read yet."""
        end = self._buffer.find(b"\n")
        if end < 0:
            if len(self._buffer) > HEAD_MAX:
                raise httpcore.RemoteProtocolError("a chunk's line is too long")
            return None
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 1]
        return line


def _readable(stream: trio.abc.Stream) -> bool:
    """Whether the socket under ``stream`` has something to read (or was closed)."""
    while isinstance(stream, trio.SSLStream):
        stream = stream.transport_stream
    sock = getattr(stream, "socket", None)
    fileno = -1 if sock is None else sock.fileno()
    if fileno < 0:
        return True
    poll = select.poll()
    poll.register(fileno, select.POLLIN)
    return bool(poll.poll(0))


def _parse_head(head: bytes) -> tuple[int, int, Headers]:
    """The HTTP/1 minor version, status code and headers of an answer's head (its status
    line and header lines, without the blank line)."""
    lines = head.split(b"\n")
    status = _STATUS_LINE.fullmatch(lines[0])
    if status is None:
        raise httpcore.RemoteProtocolError(
            f"not an HTTP/1 status line: {lines[0][:100].decode('latin-1')!r}"
        )
    headers: Headers = []
    for line in lines[1:]:
        if line.endswith(b"\r"):
            line = line[:-1]
        name, colon, value = line.partition(b":")
        if not colon or _HEADER_NAME.fullmatch(name) is None:
            raise httpcore.RemoteProtocolError(
                f"malformed header line: {line[:100].decode('latin-1')!r}"
            )
        headers.append((name, value.strip(b" \t")))
    return int(status[1]), int(status[2]), headers


Framing = tuple[str, int]
"""How an answer's body ends: ("length", bytes), ("chunked", 0), ("close", 0) (when the
receiver closes) or ("none", 0)."""


def _framing(status: int, headers: Headers) -> Framing:
    """How the body of an answer to a POST ends (RFC 9112, 6.3)."""
    if status in _NO_BODY or 100 <= status < 200:
        return ("none", 0)
    length: int | None = None
    chunked = False
    for name, value in headers:
        lowered = name.lower()
        if lowered == b"transfer-encoding":
            if value.lower() != b"chunked" or chunked:
                raise httpcore.RemoteProtocolError("unsupported Transfer-Encoding")
            chunked = True
        elif lowered == b"content-length":
            if not value.isdigit() or (length is not None and int(value) != length):
                raise httpcore.RemoteProtocolError("bad Content-Length")
            length = int(value)
    if chunked:
        return ("chunked", 0)
    if length is not None:
        return ("length", length)
    return ("close", 0)


def _keeps_alive(minor: int, headers: Headers) -> bool:
    """Whether the receiver keeps the connection open after this answer: HTTP/1.1 without
    ``Connection: close``."""
    if minor < 1:
        return False
    for name, value in headers:
        if name.lower() == b"connection" and b"close" in value.lower():
            return False
    return True


class DeliveryResponse:
    """An answer's status and headers, and its body read chunk by chunk (:meth:`chunk`),
    after which the connection is reusable if the answer said so and was read to its end."""

    def __init__(
        self,
        connection: DeliveryConnection,
        minor: int,
        status: int,
        headers: Headers,
        *,
        to_head: bool = False,
    ) -> None:
        self.connection = connection
        self.status = status
        self.headers = headers
        self._kind, self._left = ("none", 0) if to_head else _framing(status, headers)
        self._keep = status != 101 and _keeps_alive(minor, headers)
        self._cut = False
        self._ended = False
        self._trailers = False
        """A chunked body's last chunk was read: its trailer lines are next."""

    def cut(self) -> None:
        """Read nothing more from the receiver: what was read already is still answered,
        then :meth:`chunk` fails with ``httpcore.ReadError``; the connection is closed."""
        self._cut = True

    @property
    def ended(self) -> bool:
        return self._ended

    async def _more(self) -> bool:
        if self._cut:
            raise httpcore.ReadError("the answer was read as far as it is kept")
        return await self.connection._more()

    async def chunk(self) -> bytes:
        """The body's next bytes; b"" once it ended."""
        if self._ended:
            return b""
        connection = self.connection
        if self._kind == "none":
            return self._end()
        if self._kind == "length":
            if not self._left:
                return self._end()
            if not connection.buffered and not await self._more():
                raise httpcore.RemoteProtocolError(
                    "peer closed connection without sending complete message body"
                )
            data = connection.take(self._left)
            self._left -= len(data)
            return data
        if self._kind == "close":
            if not connection.buffered and not await self._more():
                self._keep = False
                return self._end()
            return connection.take(connection.buffered)
        return await self._chunked()

    async def _chunked(self) -> bytes:
        connection = self.connection
        while True:
            if self._left > 0:
                if not connection.buffered and not await self._more():
                    raise httpcore.RemoteProtocolError(
                        "peer closed connection without sending complete message body"
                    )
                data = connection.take(self._left)
                self._left -= len(data)
                if not self._left:
                    self._left = -1  # the chunk's line end follows
                return data
            line = connection.line()
            if line is None:
                if not await self._more():
                    raise httpcore.RemoteProtocolError(
                        "peer closed connection without sending complete message body"
                    )
                continue
            if self._left == -1:  # the end of a chunk's data
                if line not in (b"", b"\r"):
                    raise httpcore.RemoteProtocolError("a chunk's data did not end its line")
                self._left = 0
            elif self._trailers:
                if line in (b"", b"\r"):
                    return self._end()
            else:
                size = _CHUNK_SIZE.fullmatch(line)
                if size is None:
                    raise httpcore.RemoteProtocolError("bad chunk size line")
                self._left = int(size[1], 16)
                self._trailers = not self._left

    def _end(self) -> bytes:
        self._ended = True
        self.connection.reusable = self._keep and not self._cut
        return b""


def stop_reading(response: DeliveryResponse) -> bool:
    """Read nothing more of ``response`` from its receiver: what was already received is still
    answered, then the read fails with ``httpcore.ReadError`` and the connection is closed.
    False when the response is not a delivery client's."""
    if not isinstance(response, DeliveryResponse):
        return False
    response.cut()
    return True


async def _connect(
    origin: httpcore.Origin,
    *,
    allow: Callable[[_IPAddress], bool],
    resolver: Resolver,
    ssl_context: ssl.SSLContext,
) -> trio.abc.Stream:
    """A connection to ``origin``'s host on one of its checked addresses, with TLS for
    https."""
    host = origin.host.decode("ascii")
    port = origin.port
    try:
        addresses = [str(ipaddress.ip_address(host))]
    except ValueError:
        try:
            addresses = await resolver(host, port)
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
    allowed = [a for a in addresses if allow(ipaddress.ip_address(a.split("%", 1)[0]))]
    if not allowed:
        raise TargetRefused(
            f"{host} resolves only to addresses webhooks may not reach"
            " (private, loopback, link-local, multicast or reserved)"
        )
    failure: BaseException | None = None
    for address in allowed:
        try:
            stream: trio.abc.Stream = await trio.open_tcp_stream(address, port)
        except OSError as exc:
            failure = exc
            continue
        if origin.scheme != b"https":
            return stream
        tls = trio.SSLStream(
            stream, ssl_context, server_hostname=host, https_compatible=True, server_side=False
        )
        try:
            await tls.do_handshake()
        except (trio.BrokenResourceError, OSError) as exc:
            await trio.aclose_forcefully(stream)
            raise httpcore.ConnectError(exc) from exc
        except BaseException:
            await trio.aclose_forcefully(stream)
            raise
        return tls
    assert failure is not None
    raise httpcore.ConnectError(failure) from failure


class DeliveryClient:
    """One webhook's client: its own keep-alive HTTP/1.1 connections to checked addresses, each
    carrying one attempt at a time.

    The engine bounds a webhook's attempts itself, so all this client does is hand an attempt
    the connection used last (the least likely to have been closed by the receiver's own
    keep-alive timeout), after checking that it was not closed meanwhile (its socket is not
    readable: a poll), and take it back when the answer ended cleanly. No pool goes over its
    connections per request (httpcore's polled every idle one, twice a request).

    ``ssl_context`` (from :func:`verifying_context`) is shared: building one reads the CA
    bundle, tens of ms."""

    def __init__(
        self,
        *,
        max_connections: int,
        allow: Callable[[_IPAddress], bool],
        resolver: Resolver,
        ssl_context: ssl.SSLContext,
    ) -> None:
        self._max_idle = max_connections
        self._allow = allow
        self._resolver = resolver
        self._ssl_context = ssl_context
        self._idle: list[DeliveryConnection] = []
        """Connections no attempt is using, the last used at the end."""
        self._closed = False

    async def _connection(self, origin: httpcore.Origin) -> DeliveryConnection:
        """The last used idle connection to ``origin`` still open, else a new one; the idle
        connections passed over are closed."""
        while self._idle:
            connection = self._idle.pop()
            if connection.origin == origin and not connection.expired():
                return connection
            await connection.aclose()
        stream = await _connect(
            origin, allow=self._allow, resolver=self._resolver, ssl_context=self._ssl_context
        )
        return DeliveryConnection(origin, stream)

    @asynccontextmanager
    async def stream(
        self,
        url: httpcore.URL,
        *,
        headers: Headers,
        content: bytes,
        written: Callable[[], None] = lambda: None,
        method: bytes = b"POST",
    ) -> AsyncIterator[DeliveryResponse]:
        """The answer to a ``method`` request (a webhook attempt's POST; a function's fetch
        another) of ``content`` with ``headers`` to ``url``, on a connection of its own until
        the block is left; ``written`` is called once the request is written (the attempt
        only waits for its answer then)."""
        if self._closed:
            raise RuntimeError("the delivery client is closed")
        request = request_bytes(url, headers, content, method)
        connection = await self._connection(url.origin)
        connection.reusable = False
        written_whole = True
        try:
            try:
                await connection.send(request)
            except httpcore.WriteError:
                # A receiver may answer before it has read the whole request, and close: its
                # answer is still read (as httpcore did), and the connection not used again.
                written_whole = False
            written()
            answer = await connection.answer(to_head=method == b"HEAD")
        except BaseException:
            await connection.aclose()
            raise
        try:
            yield answer
        finally:
            if (
                written_whole
                and connection.reusable
                and answer.ended
                and not self._closed
                and len(self._idle) < self._max_idle
            ):
                connection.idle_since = time.monotonic()
                self._idle.append(connection)
            else:
                await connection.aclose()

    async def aclose(self) -> None:
        """Close the idle connections; one still in use is closed when its answer ends."""
        self._closed = True
        idle, self._idle = self._idle, []
        for connection in idle:
            await connection.aclose()


def request_bytes(
    url: httpcore.URL, headers: Headers, content: bytes, method: bytes = b"POST"
) -> bytes:
    """A request's bytes: its request line, ``headers`` and ``content``. A method that is not
    a token, or a name or value that would end its line or hold a NUL, is refused
    (``httpcore.LocalProtocolError``): the endpoint's own headers were checked when it was
    registered, a fetch's by the engine, this is the last guard."""
    if _HEADER_NAME.fullmatch(method) is None:
        raise httpcore.LocalProtocolError("the request's method is malformed")
    lines = [method, b" ", url.target, b" HTTP/1.1\r\n"]
    for name, value in headers:
        lines += (name, b": ", value, b"\r\n")
    lines.append(b"\r\n")
    head = b"".join(lines)
    if head.count(b"\n") != len(headers) + 2 or head.count(b"\r") != len(headers) + 2:
        raise httpcore.LocalProtocolError("a request header holds a line break")
    if b"\0" in head or any(_HEADER_NAME.fullmatch(name) is None for name, _ in headers):
        raise httpcore.LocalProtocolError("a request header is malformed")
    return head + content


def verifying_context() -> ssl.SSLContext:
    """The TLS context every delivery client uses: certificates verified against the CA
    bundle httpx uses, host names checked."""
    return httpx.create_ssl_context()
