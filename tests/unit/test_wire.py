"""hypercorn's HTTP/1.1 connections as ``ledgerport serve`` runs them (server._wire).

``CoalescingH11Protocol`` writes what hypercorn's own protocol writes, byte for byte, in fewer
writes: a whole answer in one, a streamed one with its head in the first part's write, never an
empty write. ``IdleTimer`` keeps hypercorn's keep-alive rules (closed after the timeout idle, at
once when the server stops while idle, after the answer when it stops while busy) with one task
for the connection's life. ``LeanTaskGroup`` queues a request's messages read together before
the application runs, and still waits on a full queue; ``OneTaskHTTPConnection`` adds a body's
messages that have arrived before the handler runs, and ``ConnectionGuard`` offers them except
during a send. Driven with hypercorn's own classes, the timer on trio's MockClock.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import h11
import hypercorn.config
import hypercorn.protocol
import hypercorn.trio
import hypercorn.trio.run
import hypercorn.trio.tcp_server
import pytest
import trio
import trio.testing
from hypercorn.config import Config
from hypercorn.events import Closed, Event, RawData, Updated
from hypercorn.protocol.h11 import H11Protocol
from hypercorn.trio.task_group import TaskGroup
from hypercorn.trio.worker_context import EventWrapper, WorkerContext
from hypercorn.typing import ConnectionState
from hypercorn.utils import wrap_app
from quart import request
from quart_trio import QuartTrio

from ledgerport.server import (
    CoalescingH11Protocol,
    ConnectionGuard,
    IdleTimer,
    LeanTaskGroup,
    LeanTCPServer,
    OneTaskHTTPConnection,
    lean_connections,
)

from ..asgi_scopes import http_scope

App = Callable[[Any, Any, Any], Awaitable[None]]


def _answer(status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None) -> App:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": headers or [(b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})

    return app


def _streamed(parts: list[bytes], between: trio.Event) -> App:
    """An answer sent in ``parts`` (chunked), waiting for ``between`` after the first."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for index, part in enumerate(parts):
            await send({"type": "http.response.body", "body": part, "more_body": True})
            if index == 0:
                await between.wait()
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    return app


GET = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
HEAD = b"HEAD /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


async def _writes(
    protocol_class: type[H11Protocol],
    app: App,
    request: bytes = GET,
    *,
    between: Any = None,
    group_class: type[TaskGroup] = TaskGroup,
) -> list[bytes]:
    """What ``protocol_class`` writes to the connection answering ``request`` with ``app``
    (``between``: an async callable run once the first write is seen, before the answer ends),
    the connection's tasks in a ``group_class``."""
    writes: list[bytes] = []
    recycled = trio.Event()
    first = trio.Event()

    async def send(event: Event) -> None:
        if isinstance(event, RawData):
            writes.append(event.data)
            first.set()
        elif (isinstance(event, Updated) and event.idle) or isinstance(event, Closed):
            recycled.set()  # ready for the next request, or closing the connection

    config = Config()
    async with group_class() as group:
        protocol = protocol_class(
            wrap_app(app, config.wsgi_max_body_size, "asgi"),
            config,
            WorkerContext(None),
            group,
            ConnectionState({}),
            False,
            ("127.0.0.1", 50000),
            ("127.0.0.1", 8000),
            send,
        )
        await protocol.initiate()
        await protocol.handle(RawData(request))
        if between is not None:
            with trio.fail_after(5):
                await first.wait()
            await between(writes)
        with trio.fail_after(5):
            await recycled.wait()
        await protocol.handle(Closed())
    return writes


def _parsed(data: bytes, method: bytes = b"GET") -> tuple[int, bytes]:
    """The status and body of the one response in ``data``, parsed as a client would."""
    client = h11.Connection(h11.CLIENT)
    client.send(h11.Request(method=method, target="/healthz", headers=[("Host", "127.0.0.1")]))
    client.send(h11.EndOfMessage())
    client.receive_data(data)
    status, body = 0, b""
    while True:
        event = client.next_event()
        if isinstance(event, h11.Response):
            status = event.status_code
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            return status, body
        else:
            raise AssertionError(f"incomplete response: {event!r} after {data!r}")


@pytest.fixture
def one_date(monkeypatch: pytest.MonkeyPatch) -> None:
    """hypercorn's Date header the same for every answer: the bytes of two answers made a
    second apart are compared."""
    monkeypatch.setattr(hypercorn.config, "time", lambda: 1_790_000_000.0)


@pytest.mark.parametrize(
    ("app", "request_bytes", "status", "body"),
    [
        (_answer(200, b'{"status":"ok"}'), GET, 200, b'{"status":"ok"}'),
        (_answer(404, b'{"message":"Not found"}'), GET, 404, b'{"message":"Not found"}'),
        (_answer(204, b"", []), GET, 204, b""),
        (_answer(200, b"", [(b"content-length", b"0")]), GET, 200, b""),
        (_answer(200, b"not sent to a HEAD", [(b"content-length", b"18")]), HEAD, 200, b""),
        (_answer(200, b"chunked", []), GET, 200, b"chunked"),
    ],
    ids=["body", "error", "no-content", "empty", "head", "chunked"],
)
async def test_a_whole_answer_is_one_write_of_the_bytes_hypercorn_writes(
    app: App, request_bytes: bytes, status: int, body: bytes, one_date: None
) -> None:
    coalesced = await _writes(CoalescingH11Protocol, app, request_bytes)
    stock = await _writes(H11Protocol, app, request_bytes)
    assert len(coalesced) == 1, coalesced
    assert coalesced[0] == b"".join(stock)
    assert _parsed(coalesced[0], request_bytes.split(b" ")[0]) == (status, body)


async def test_a_streamed_answer_goes_out_with_its_head_in_the_first_parts_write() -> None:
    async def after_the_first_write(writes: list[bytes]) -> None:
        # The head and the first part are out before the app sends anything more.
        assert len(writes) == 1
        assert writes[0].startswith(b"HTTP/1.1 200 ")
        assert writes[0].endswith(b"\r\n5\r\nfirst\r\n")  # the first chunk
        go_on.set()

    go_on = trio.Event()
    writes = await _writes(
        CoalescingH11Protocol,
        _streamed([b"first", b"second"], go_on),
        between=after_the_first_write,
    )
    assert len(writes) == 3  # head with the first part, the second part, the last chunk
    assert all(writes)
    assert _parsed(b"".join(writes)) == (200, b"firstsecond")


async def test_an_answer_after_a_failure_of_the_app_is_the_500_hypercorn_writes(
    one_date: None,
) -> None:
    async def failing(scope: Any, receive: Any, send: Any) -> None:
        raise RuntimeError("the app failed before answering")

    coalesced = await _writes(CoalescingH11Protocol, failing)
    stock = await _writes(H11Protocol, failing)
    assert b"".join(coalesced) == b"".join(stock)
    assert _parsed(b"".join(coalesced))[0] == 500


class _Connection:
    """An IdleTimer's connection: when it was closed, on trio's clock."""

    def __init__(self) -> None:
        self.terminated = EventWrapper()
        self.closed_at: float | None = None
        self.timer = IdleTimer(5.0, self.terminated, self._close)

    async def _close(self) -> None:
        assert self.closed_at is None, "closed twice"
        self.closed_at = trio.current_time()

    async def idle(self, group: TaskGroup) -> None:
        await self.timer.restart(group, self._close)


async def _run(
    steps: Callable[[_Connection, TaskGroup], Awaitable[None]],
) -> _Connection:
    connection = _Connection()
    async with TaskGroup() as group:
        await steps(connection, group)
    return connection


TIMER_RULES = [
    # (what happens to the connection, in order; when its timer closes it, None: never)
    # "idle": an answer has gone (restart); "busy": a request arrives (stop); a number: seconds
    # pass; "stopping": the server stops; "fired": the deadline's wait is cancelled, as trio
    # does when its time comes, before the timer's task runs again; "closed": hypercorn
    # closes the connection (end).
    (["idle", 4.9], 5.0),
    (["idle"] + [3, "busy", 1, "idle"] * 50, 50 * 4 + 5.0),
    (["idle", 1, "busy", 3600, "idle"], 3601 + 5.0),
    (["idle", 4, "fired", "busy", "idle"], 4 + 5.0),
    (["idle", 2, "stopping"], 2.0),
    (["idle", 1, "busy", "stopping", 30, "idle"], 31.0),
    (["idle", "busy", 1, "closed"], None),
    (["idle", "busy", "stopping", 1, "closed"], None),
]
"""The keep-alive rules hypercorn's own timer keeps, held to IdleTimer."""


@pytest.mark.parametrize(
    ("events", "closed_after"),
    TIMER_RULES,
    ids=[
        "closed-after-the-timeout-idle",
        "each-answer-gives-the-whole-timeout-again",
        "never-closed-while-a-request-is-served",
        "a-deadline-that-fired-as-a-request-came-and-went-waits-again",
        "a-stopping-server-closes-an-idle-connection-at-once",
        "a-stopping-server-closes-a-busy-one-once-its-answer-has-gone",
        "a-closed-connection-ends-its-timer-without-closing",
        "a-connection-closed-while-the-server-stops-ends-its-timer",
    ],
)
async def test_the_idle_timer_keeps_hypercorns_keep_alive_rules(
    autojump_clock: trio.testing.MockClock, events: list[str | float], closed_after: float | None
) -> None:
    async def steps(connection: _Connection, group: TaskGroup) -> None:
        for event in events:
            if isinstance(event, int | float):
                await trio.sleep(event)
            elif event == "idle":
                await connection.idle(group)
            elif event == "busy":
                await connection.timer.stop()
            elif event == "stopping":
                await connection.terminated.set()
            elif event == "fired":
                scope = connection.timer._scope
                assert scope is not None
                scope.cancel()
            else:
                assert event == "closed"
                connection.timer.end()

    started = trio.current_time()
    with trio.fail_after(100_000):  # on the MockClock: a timer that never ends fails the test
        connection = await _run(steps)
    seconds = sum(event for event in events if isinstance(event, int | float))
    if closed_after is None:
        assert connection.closed_at is None
        assert trio.current_time() == pytest.approx(started + seconds)  # its task ended
    else:
        assert connection.closed_at == pytest.approx(started + closed_after)


async def test_one_task_keeps_the_time_of_every_request(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def steps(connection: _Connection, group: TaskGroup) -> None:
        await connection.idle(group)
        for _ in range(100):
            await connection.timer.stop()
            await trio.lowlevel.checkpoint()
            await connection.idle(group)
            await trio.lowlevel.checkpoint()
        assert group._nursery is not None
        assert len(group._nursery.child_tasks) == 1

    await _run(steps)


@pytest.fixture
def lean(monkeypatch: pytest.MonkeyPatch) -> None:
    """hypercorn serving with the lean classes (``lean_connections``) for the test, and its own
    classes put back after it."""
    for module, name in (
        (hypercorn.trio.run, "TCPServer"),
        (hypercorn.protocol, "H11Protocol"),
        (hypercorn.trio.tcp_server, "TaskGroup"),
    ):
        monkeypatch.setattr(module, name, getattr(module, name))
    lean_connections()


@pytest.mark.usefixtures("lean")
def test_serving_uses_the_lean_classes_for_each_connection() -> None:
    assert getattr(hypercorn.trio.run, "TCPServer") is LeanTCPServer  # noqa: B009
    assert getattr(hypercorn.trio.tcp_server, "TaskGroup") is LeanTaskGroup  # noqa: B009
    wrapper = hypercorn.protocol.ProtocolWrapper(
        wrap_app(_answer(200, b""), 0, "asgi"),
        Config(),
        WorkerContext(None),
        TaskGroup(),
        ConnectionState({}),
        False,
        None,
        None,
        _discard,
    )
    assert type(wrapper.protocol) is CoalescingH11Protocol


async def _discard(event: Event) -> None:
    pass


def _one_task_app(handler: Callable[[], Awaitable[str]]) -> QuartTrio:
    app = QuartTrio("one-task")
    app.asgi_http_class = OneTaskHTTPConnection
    app.route("/")(handler)
    return app


async def _call(app: QuartTrio, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What ``app`` sends answering a GET / whose receive gives ``messages`` then waits."""
    sent: list[dict[str, Any]] = []
    incoming = list(messages)

    async def receive() -> dict[str, Any]:
        if incoming:
            return incoming.pop(0)
        await trio.sleep_forever()
        raise AssertionError("not reached")  # pragma: no cover

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = http_scope("GET")
    with trio.fail_after(5):
        await app(scope, receive, send)  # type: ignore[arg-type]
    return sent


async def test_one_task_answers_the_request_in_the_task_that_called() -> None:
    tasks: list[trio.lowlevel.Task] = []

    async def handler() -> str:
        tasks.append(trio.lowlevel.current_task())
        return "answered"

    caller = trio.lowlevel.current_task()
    sent = await _call(_one_task_app(handler), [{"type": "http.request", "body": b""}])
    assert tasks == [caller]
    assert sent[0]["type"] == "http.response.start"
    assert sent[0]["status"] == 200
    assert b"".join(m.get("body", b"") for m in sent[1:]) == b"answered"


async def test_one_task_a_disconnect_cancels_the_answer() -> None:
    cancelled = False

    async def handler() -> str:
        nonlocal cancelled
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            cancelled = True
            raise
        raise AssertionError("not reached")  # pragma: no cover

    sent = await _call(
        _one_task_app(handler),
        [{"type": "http.request", "body": b""}, {"type": "http.disconnect"}],
    )
    assert cancelled
    assert sent == []


@pytest.mark.usefixtures("lean")
async def test_a_client_gone_mid_answer_holds_neither_connection_nor_shutdown() -> None:
    """A real hypercorn serving with the lean classes: a client sends a request and leaves
    while it is answered. Once the answer is over, the server stops at once: no timer task of
    that connection is left waiting for a next request that cannot come."""
    answered = trio.Event()

    async def slow(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        try:
            await trio.sleep(0.3)
        finally:
            answered.set()
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.graceful_timeout = 60
    config.accesslog = None
    stop = trio.Event()
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            binds = await nursery.start(
                functools.partial(hypercorn.trio.serve, slow, config, shutdown_trigger=stop.wait)
            )
            host, port = binds[0].removeprefix("http://").rsplit(":", 1)
            stream = await trio.open_tcp_stream(host, int(port))
            await stream.send_all(GET)
            await stream.aclose()  # gone before the answer
            await answered.wait()
            await trio.sleep(0.2)  # the answer's end is handled
            stopped_at = trio.current_time()
            stop.set()
    assert trio.current_time() - stopped_at < 10


POST = (
    b"POST /form HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 7\r\n\r\na=1&b=2"
)


@pytest.mark.parametrize(
    ("group_class", "queued"),
    [(TaskGroup, {1, 2}), (LeanTaskGroup, {2})],
    ids=["hypercorn", "lean"],
)
async def test_a_body_read_with_its_head_is_queued_whole_before_the_app_runs(
    group_class: type[TaskGroup], queued: set[int]
) -> None:
    """hypercorn's protocol handing a request read in one piece (head, body, end), twenty
    times: with hypercorn's task group the app's task may run after the body's message,
    before its end's (a put takes a turn of the scheduler, whose order trio varies); with the
    lean one both are queued whenever it first runs."""
    seen: list[int] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(receive.__self__.statistics().current_buffer_used)
        while (await receive()).get("more_body", False):
            pass
        await _answer(204, b"", [])(scope, receive, send)

    for _ in range(20):
        await _writes(CoalescingH11Protocol, app, POST, group_class=group_class)
    assert set(seen) == queued


async def test_a_lean_put_takes_no_turn_while_the_queue_has_room_and_waits_when_it_has_none(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Back-pressure is hypercorn's: a put into a full queue waits until the app takes one."""
    config = Config()
    config.max_app_queue_size = 1
    release = trio.Event()
    received: list[Any] = []

    async def app(scope: Any, receive: Any, send: Any, sync_spawn: Any, call_soon: Any) -> None:
        await release.wait()
        received.extend([await receive(), await receive()])

    async def ignore(event: Any) -> None:
        pass

    async with LeanTaskGroup() as group, trio.open_nursery() as nursery:
        put = await group.spawn_app(app, config, {"type": "http"}, ignore)  # type: ignore[arg-type]
        with trio.testing.assert_no_checkpoints():
            await put({"type": "http.request", "body": b"a", "more_body": True})
        second = trio.Event()

        async def put_second() -> None:
            await put({"type": "http.request", "body": b"b", "more_body": False})
            second.set()

        nursery.start_soon(put_second)
        await trio.sleep(1)
        assert not second.is_set(), "a put into a full queue waits"
        release.set()
        with trio.fail_after(5):
            await second.wait()
    assert [m["body"] for m in received] == [b"a", b"b"]


def _form_app() -> tuple[QuartTrio, list[bool]]:
    """An app answering ``POST /`` with its body; the list tells, for each request, whether the
    body had all arrived when the handler started."""
    app = QuartTrio("bodies")
    app.asgi_http_class = OneTaskHTTPConnection
    whole_at_start: list[bool] = []

    @app.post("/")
    async def echo() -> bytes:
        whole_at_start.append(request.body._complete.is_set())
        return await request.get_data(cache=True, as_text=False, parse_form_data=False)

    return app, whole_at_start


async def _call_queued(
    app: QuartTrio, queued: list[dict[str, Any]], later: Sequence[dict[str, Any]] = ()
) -> list[dict[str, Any]]:
    """What ``app`` sends answering a ``POST /`` whose messages ``queued`` wait in hypercorn's
    queue (a memory channel) before the app runs, and ``later`` come once the app waits."""
    sent: list[dict[str, Any]] = []
    put, take = trio.open_memory_channel[dict[str, Any]](10)
    for message in queued:
        put.send_nowait(message)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def arrive_later() -> None:
        await trio.testing.wait_all_tasks_blocked()
        for message in later:
            await put.send(message)

    scope = http_scope("POST")
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(arrive_later)
            await app(scope, take.receive, send)  # type: ignore[arg-type]
    return sent


def _body_of(sent: list[dict[str, Any]]) -> tuple[int, bytes]:
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


_PARTS = [
    {"type": "http.request", "body": b"a=1", "more_body": True},
    {"type": "http.request", "body": b"&b=2", "more_body": True},
    {"type": "http.request", "body": b"", "more_body": False},
]


@pytest.mark.parametrize(
    ("arrived", "whole_at_start"),
    [(3, True), (1, False), (0, False)],
    ids=["arrived-whole", "arriving", "not-yet"],
)
async def test_one_task_reads_the_body_that_arrived_before_the_handler_and_the_rest_after(
    arrived: int, whole_at_start: bool
) -> None:
    """The body's messages queued before the app runs (``arrived`` of them) are the request's
    when the handler starts; the rest come as they arrive. Either way the handler reads it
    whole."""
    app, seen = _form_app()
    sent = await _call_queued(app, _PARTS[:arrived], _PARTS[arrived:])
    assert _body_of(sent) == (200, b"a=1&b=2")
    assert seen == [whole_at_start]


async def test_one_task_a_disconnect_that_arrived_with_the_body_still_cancels_the_answer() -> None:
    app, whole_at_start = _form_app()
    sent = await _call_queued(
        app,
        [{"type": "http.request", "body": b"a=1", "more_body": True}, {"type": "http.disconnect"}],
    )
    assert sent == []
    assert whole_at_start == [False]


async def test_one_task_a_body_that_arrived_past_the_largest_is_refused() -> None:
    app, _ = _form_app()
    app.config["MAX_CONTENT_LENGTH"] = 4
    sent = await _call_queued(
        app,
        [
            {"type": "http.request", "body": b"a=123", "more_body": True},
            {"type": "http.request", "body": b"", "more_body": False},
        ],
    )
    assert sent[0]["status"] == 413


async def test_the_guard_offers_what_has_arrived_except_during_a_send() -> None:
    """``ConnectionGuard``'s receive offers a message that has already arrived (``arrived``),
    counting a body's end taken so as arrived (no ``Connection: close`` on the answer), and
    nothing while a send is in progress, when a disconnect must wait for the send."""
    put, take = trio.open_memory_channel[dict[str, Any]](10)
    body = {"type": "http.request", "body": b"a=1", "more_body": False}
    put.send_nowait(body)
    put.send_nowait({"type": "http.disconnect"})
    seen: list[Any] = []
    started: list[dict[str, Any]] = []
    sending, release = trio.Event(), trio.Event()

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        seen.append(receive.arrived())

        async def during() -> None:
            await sending.wait()
            seen.append(receive.arrived())
            release.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(during)
            await send({"type": "http.response.start", "status": 200, "headers": []})
        seen.append(receive.arrived())

    async def send(message: dict[str, Any]) -> None:
        started.append(message)
        sending.set()
        await release.wait()

    scope = {
        "type": "http",
        "http_version": "1.1",
        "method": "POST",
        "headers": [(b"host", b"127.0.0.1"), (b"content-length", b"3")],
    }
    with trio.fail_after(5):
        await ConnectionGuard(inner)(scope, take.receive, send)  # type: ignore[arg-type]
    assert seen == [body, None, {"type": "http.disconnect"}]
    assert (b"connection", b"close") not in started[0]["headers"]
