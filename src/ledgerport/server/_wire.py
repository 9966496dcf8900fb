"""hypercorn's HTTP/1.1 connections, with less work for each request.

Three costs every request paid in hypercorn, whatever the application did, and what replaces
them (:func:`lean_connections` installs them; ``ledgerport serve`` calls it before it serves):

- **A response in three sends.** hypercorn writes each event of a response to the socket as h11
  makes it: the status line and headers, then the body, then the end of the message. An answer
  Quart gives whole (every answer of this service: none streams) so took two socket writes and
  a third, empty, send, each with the connection's send lock, a shielded cancel scope and a
  turn of the event loop. :class:`CoalescingH11Protocol` holds the head until the first part of
  the body (or the end of the message) and writes them together, and sends nothing for an end
  that h11 frames as no bytes (a body of known length). A response that did stream would have
  its head wait for its first part of the body, which is when a client could use it.
- **A task for each request's idle timer.** hypercorn stops a connection's keep-alive timer as
  a request arrives and starts it again when the response has gone, by cancelling one task and
  starting another. :class:`IdleTimer` is one task for the connection's life whose deadline the
  requests move.
- **A turn of the scheduler for each message of a request.** hypercorn hands the application
  its request's body and end through a trio memory channel, whose ``send`` takes a turn of the
  scheduler after each message, so the application's task could run between the body and its
  end. :class:`LeanTaskGroup` puts a message without that turn while the application's queue
  has room (and waits as before when it has none).

The first two were nearly a fifth of the instructions of a ``GET /healthz`` (docs/performance.md).

And in Quart, :class:`OneTaskHTTPConnection` answers each request in the task hypercorn gave it,
where quart-trio started a task for it beside the one that listens for the client's disconnect;
and it adds to the request the messages of its body that have already arrived (all of a small
one, which comes with its request's head) before the handler runs, so that the handler reads
the body without waiting for that other task's turn.

These subclass private parts of hypercorn and quart-trio: tests/unit/test_wire.py and
tests/unit/test_dependency_contracts.py pin what they rely on, pyproject.toml bounds the
releases, and docs/upstream/hypercorn.md and docs/upstream/quart-trio.md are the reports to their
maintainers.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any

import h11
import hypercorn.protocol
import hypercorn.trio.run
import hypercorn.trio.task_group
import hypercorn.trio.tcp_server
import trio
from hypercorn.events import Closed, Event, RawData
from hypercorn.protocol.events import Body, EndBody, Response
from hypercorn.protocol.events import Event as StreamEvent
from hypercorn.protocol.h11 import H11Protocol
from hypercorn.trio.tcp_server import TCPServer
from hypercorn.trio.worker_context import TrioSingleTask
from hypercorn.typing import ASGIReceiveCallable, ASGISendCallable, TaskGroup
from quart.wrappers import Request
from quart_trio.asgi import TrioASGIHTTPConnection

from ._asgi import arrived, replaying


class CoalescingH11Protocol(H11Protocol):
    """hypercorn's HTTP/1.1 protocol, writing a response's head with its first bytes after."""

    _held: bytes = b""
    """The head of the response being sent, not yet written."""

    async def stream_send(self, event: StreamEvent) -> None:
        if isinstance(event, Response) and event.status_code >= 200:
            send = self.send

            async def hold(sent: Event) -> None:
                if isinstance(sent, RawData):
                    self._held += sent.data
                else:
                    await send(sent)

            self.send = hold
            try:
                await super().stream_send(event)
            finally:
                self.send = send
        elif isinstance(event, Body | EndBody):
            data = self._framed(h11.Data(data=event.data) if isinstance(event, Body) else _END)
            held, self._held = self._held, b""
            if held or data:
                await self.send(RawData(data=held + data))
        else:
            if self._held:
                held, self._held = self._held, b""
                await self.send(RawData(data=held))
            await super().stream_send(event)

    def _framed(self, event: h11.Data | h11.EndOfMessage) -> bytes:
        """``event``'s bytes, as hypercorn's ``_send_h11_event`` makes them (none when the
        peer's side of the connection has failed)."""
        try:
            return self.connection.send(event) or b""
        except h11.LocalProtocolError:
            if self.connection.their_state != h11.ERROR:
                raise
            return b""


_END = h11.EndOfMessage()


class OneTaskHTTPConnection(TrioASGIHTTPConnection):
    """quart-trio's HTTP request handling, answering in the calling task: the request is
    answered in the body of the nursery where quart-trio started a second task for it. As
    before, the answer sent (or a failure) ends the wait for the client's disconnect, and a
    disconnect cancels the answer."""

    async def __call__(self, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        request = self._create_request_from_scope(send)
        receive = _take_arrived_body(request, receive)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.handle_messages, nursery, request, receive)
            await self.handle_request(nursery, request, send)


def _take_arrived_body(request: Request, receive: ASGIReceiveCallable) -> ASGIReceiveCallable:
    """The messages of ``request``'s body that have already arrived (``arrived``), added to it
    as quart's ``handle_messages`` adds them, without waiting: a handler reading a body that
    came with its request's head finds it whole, where it would wait for the task reading the
    messages to have its turn. Answers what ``handle_messages`` is to read the rest from:
    ``receive``, after any message taken here that was not the body's (a disconnect)."""
    body = request.body
    while not body._complete.is_set():
        message = arrived(receive)
        if message is None:
            break
        if message["type"] != "http.request":
            return replaying([message], receive)
        body.append(message.get("body", b""))
        if not message.get("more_body", False):
            body.set_complete()
    return receive


class LeanTaskGroup(hypercorn.trio.task_group.TaskGroup):
    """hypercorn's task group of a connection, whose ``spawn_app`` answers a put of the
    request's messages that takes no turn of the scheduler while the application's queue has
    room: a request's head, body and end, read from the socket together, are all queued before
    the application's task first runs."""

    async def spawn_app(self, *args: Any, **kwargs: Any) -> Callable[[Any], Awaitable[None]]:
        put = await super().spawn_app(*args, **kwargs)
        channel = put.__self__  # type: ignore[attr-defined]

        async def put_at_once(message: Any) -> None:
            try:
                channel.send_nowait(message)
            except trio.WouldBlock:
                await put(message)

        return put_at_once


class IdleTimer(TrioSingleTask):
    """One connection's keep-alive timer: closes the connection once it has been idle for
    ``timeout`` seconds, or at once when the server stops (``terminated``) while it is idle; a
    connection busy with a request when the server stops is closed when it goes idle. As
    hypercorn's own timer does, through the same calls (``restart`` as a response has gone,
    ``stop`` as a request arrives), with one task waiting the connection's whole life and each
    call moving its deadline."""

    def __init__(
        self,
        timeout: float,
        terminated: Any,
        close: Callable[[], Awaitable[None]],
    ) -> None:
        super().__init__()
        self._timeout = timeout
        self._terminated = terminated
        """hypercorn's event of a stopping server (its ``wait()`` returns once it is set)."""
        self._close = close
        self._deadline = math.inf
        """When the connection is closed if no request comes; never while one is served."""
        self._scope: trio.CancelScope | None = None
        self._became_idle: trio.Event | None = None
        """Set by the next ``restart``, while the server stops with a request being served."""
        self._ended = False

    async def restart(self, task_group: TaskGroup, action: Callable[..., Any]) -> None:
        self._deadline = trio.current_time() + self._timeout
        if self._scope is None:
            self._scope = trio.CancelScope(deadline=self._deadline)
            task_group.spawn(self._watch)
        else:
            self._scope.deadline = self._deadline
        if self._became_idle is not None:
            self._became_idle.set()

    async def stop(self) -> None:
        self._deadline = math.inf
        if self._scope is not None:
            self._scope.deadline = math.inf

    def end(self) -> None:
        """The connection is closed: the timer's task ends, closing nothing."""
        self._ended = True
        if self._scope is not None:
            self._scope.cancel()
        if self._became_idle is not None:
            self._became_idle.set()

    async def _watch(self) -> None:
        while True:
            assert self._scope is not None
            with self._scope:
                await self._terminated.wait()
            if self._ended:
                return
            if not self._scope.cancelled_caught:  # the server stops
                while self._deadline == math.inf:  # a request is being served
                    self._became_idle = trio.Event()
                    await self._became_idle.wait()
                    if self._ended:
                        return
                break
            if trio.current_time() >= self._deadline:
                break
            # A request came and went after the deadline had fired: wait for the new one.
            self._scope = trio.CancelScope(deadline=self._deadline)
        with trio.CancelScope(shield=True):
            await self._close()


class LeanTCPServer(TCPServer):
    """hypercorn's connection handler, with an :class:`IdleTimer` for its keep-alive timer.

    The timer's task lives as long as the connection, so it ends when the connection is closed:
    a client that leaves while its request is served gets no ``restart`` after the answer, only
    the close, and a timer still waiting would keep the connection's tasks (and the server's
    shutdown) waiting with it."""

    idle_task: IdleTimer

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.idle_task = IdleTimer(
            self.config.keep_alive_timeout, self.context.terminated, self._initiate_server_close
        )

    async def protocol_send(self, event: Event) -> None:
        if isinstance(event, Closed):
            self.idle_task.end()
        await super().protocol_send(event)


def lean_connections() -> None:
    """Serve HTTP/1.1 connections with :class:`LeanTCPServer`, :class:`CoalescingH11Protocol`
    and :class:`LeanTaskGroup` (hypercorn looks each up by these names as each connection
    opens)."""
    hypercorn.trio.run.TCPServer = LeanTCPServer  # type: ignore[attr-defined]
    hypercorn.trio.tcp_server.TaskGroup = LeanTaskGroup  # type: ignore[attr-defined]
    hypercorn.protocol.H11Protocol = CoalescingH11Protocol  # type: ignore[attr-defined]
