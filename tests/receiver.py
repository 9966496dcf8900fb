"""A real webhook receiver on loopback for the tests: an HTTP/1.1 server (trio and h11) that
records every request and answers as the test scripts it (a status, a delay, a body, an answer
that never ends, or a dropped connection), with keep-alive like a real server."""

from __future__ import annotations

import functools
import ssl
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import h11
import trio

READ_SIZE = 65536
FILLER = b"x" * 65536
"""What an endless answer sends, again and again."""


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class Answer:
    status: int = 200
    delay: float = 0.0
    drop: bool = False
    """Close the connection without answering."""
    body: bytes = b'{"ok":true}'
    """The answer's body, with its Content-Length (none for 204 and 304)."""
    endless: bool = False
    """Send ``body`` chunked, then FILLER without end, until the client closes."""
    stall: bool = False
    """Send ``body`` chunked, then nothing more: the answer never ends."""
    close: bool = False
    """Answer with ``Connection: close``, then close the connection."""
    hang_up: bool = False
    """Answer as if the connection stayed open, then close it (as a server's keep-alive
    timeout does between two requests)."""
    headers: tuple[tuple[str, str], ...] = ()
    """Headers of the answer's own (``Retry-After``), sent after its Content-Length."""
    until: trio.Event | None = None
    """Answer only once this is set (after ``delay``): the test holds the request as long as
    it needs, whatever the machine's load."""


@dataclass
class Receiver:
    """What arrived, and how the next requests are answered (``script`` first, then
    ``default``)."""

    port: int = 0
    received: list[Received] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)
    """time.perf_counter() of each request's arrival, in the order of ``received``."""
    script: list[Answer] = field(default_factory=list)
    default: Answer = field(default_factory=Answer)
    answer_for: Callable[[Received], Answer] | None = None
    connections: int = 0
    streamed: int = 0
    """Bytes of body sent by endless answers before their client closed."""
    cut_off: int = 0
    """Endless answers whose client closed the connection."""
    _arrived: trio.Event = field(default_factory=trio.Event)
    _cut: trio.Event = field(default_factory=trio.Event)

    tls: ssl.SSLContext | None = None
    """Serve HTTPS with this (server) context instead of plain HTTP."""
    handshakes_failed: int = 0
    """TLS connections whose client gave up in the handshake (it refused the certificate)."""

    @property
    def url(self) -> str:
        scheme = "https" if self.tls is not None else "http"
        return f"{scheme}://127.0.0.1:{self.port}/hook"

    def _answer(self, request: Received) -> Answer:
        if self.script:
            return self.script.pop(0)
        if self.answer_for is not None:
            return self.answer_for(request)
        return self.default

    async def wait_for(self, count: int, within: float = 10.0) -> list[Received]:
        """Wait until ``count`` requests arrived in all."""
        with trio.fail_after(within):
            while len(self.received) < count:
                self._arrived = trio.Event()
                await self._arrived.wait()
        return self.received

    async def wait_cut_off(self, within: float = 10.0) -> None:
        """Wait until a client closed an endless answer."""
        with trio.fail_after(within):
            await self._cut.wait()

    async def _serve(self, tcp: trio.SocketStream) -> None:
        self.connections += 1
        stream: trio.abc.Stream = tcp
        if self.tls is not None:
            stream = trio.SSLStream(tcp, self.tls, server_side=True)
            try:
                await stream.do_handshake()
            except trio.BrokenResourceError:
                self.handshakes_failed += 1
                await tcp.aclose()
                return
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                request = await self._read_request(conn, stream)
                if request is None:
                    return
                self.received.append(request)
                self.arrivals.append(time.perf_counter())
                self._arrived.set()
                answer = self._answer(request)
                if answer.delay:
                    await trio.sleep(answer.delay)
                if answer.until is not None:
                    await answer.until.wait()
                if answer.drop:
                    return
                if answer.endless or answer.stall:
                    await self._stream(conn, stream, answer)
                    return
                body = b"" if answer.status in (204, 304) else answer.body
                headers = [("content-length", str(len(body)))] if body else []
                headers += answer.headers
                if answer.close:
                    headers.append(("connection", "close"))
                answer_bytes = b"".join(
                    conn.send(event) or b""
                    for event in (
                        h11.Response(status_code=answer.status, headers=headers),
                        h11.Data(data=body),
                        h11.EndOfMessage(),
                    )
                )
                await stream.send_all(answer_bytes)
                if conn.our_state is h11.MUST_CLOSE or answer.hang_up:
                    return
                conn.start_next_cycle()
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.RemoteProtocolError):
            return
        finally:
            await stream.aclose()

    async def _stream(self, conn: h11.Connection, stream: trio.abc.Stream, answer: Answer) -> None:
        """An answer whose body goes on (FILLER without end) or stops short (``stall``)."""
        head = h11.Response(status_code=answer.status, headers=[("transfer-encoding", "chunked")])
        await stream.send_all(
            (conn.send(head) or b"") + (conn.send(h11.Data(data=answer.body)) or b"")
        )
        self.streamed += len(answer.body)
        if answer.stall:
            await trio.sleep_forever()
        try:
            while True:
                await stream.send_all(conn.send(h11.Data(data=FILLER)) or b"")
                self.streamed += len(FILLER)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.cut_off += 1
            self._cut.set()
            raise

    async def _read_request(self, conn: h11.Connection, stream: trio.abc.Stream) -> Received | None:
        head: h11.Request | None = None
        body = b""
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await stream.receive_some(READ_SIZE)
                conn.receive_data(data)
                if not data and head is None:
                    return None
                continue
            if isinstance(event, h11.Request):
                head = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                assert head is not None
                headers = {k.decode().lower(): v.decode() for k, v in head.headers}
                return Received(head.target.decode(), headers, body)
            elif isinstance(event, h11.ConnectionClosed):
                return None


@asynccontextmanager
async def receiving(tls: ssl.SSLContext | None = None) -> AsyncIterator[Receiver]:
    """A receiver listening on a free loopback port for the context's length (HTTPS with
    ``tls``, a server context)."""
    receiver = Receiver(tls=tls)
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, receiver._serve, 0, host="127.0.0.1")
        )
        receiver.port = listeners[0].socket.getsockname()[1]
        yield receiver
        nursery.cancel_scope.cancel()
