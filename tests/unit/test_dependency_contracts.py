"""What ledgerport relies on in its dependencies' private parts, one test per behaviour.

A few modules replace or reach into code that their libraries do not promise to keep:

- ``storage/_loop.py``: trio_asyncio's loop (``_main_loop_one``, ``_timer_handle_cancelled``,
  its ``_timers`` heap) and asyncio's ``TimerHandle._cancelled``;
- ``http/_input.py``: Quart's form loading (``_load_form_data``, ``_form``, ``_files``), its
  body's state (``_data``, ``_complete``, ``_must_raise``) and blueprint chain
  (``quart.helpers._split_blueprint_path``), quart-trio's form parser;
- ``http/_json.py``: Quart's JSON provider, which is Flask's (``_app``,
  ``_prepare_response_obj``), and Quart-Schema's conversion of answers (``app.make_response``);
- ``http/_document.py``: Quart-Schema's OpenAPI provider (``build_paths``, ``_app``);
- ``http/_app.py``: the template context processor Flask's blueprint class gives each blueprint
  (``flask.templating._default_template_ctx_processor``), which it leaves out;
- ``server/_wire.py``: quart-trio's ASGI connection (``__call__`` copied with one change, and
  a body's messages added as ``handle_messages`` adds them) and hypercorn's connection classes
  and task group (``tests/unit/test_wire.py`` holds hypercorn's, with the lean classes driven
  by hypercorn's own), ``serve.py`` hypercorn's worker on sockets of its own.

Each test is named for the behaviour relied on and asserts it on the library alone, so a release
that changes it fails here, naming the module that relies on it, before a user's install does.
pyproject.toml bounds each of these libraries; a release is admitted once these tests pass on it.
What we asked the maintainers for is in docs/upstream/.
"""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import inspect
import json
import textwrap
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import flask.json.provider
import flask.templating
import hypercorn.config
import hypercorn.trio.run
import hypercorn.trio.task_group
import hypercorn.trio.tcp_server
import pydantic
import pytest
import quart
import quart.datastructures
import quart.helpers
import trio
import trio_asyncio
import trio_asyncio._base as trio_asyncio_base
from quart import Blueprint, Response, request
from quart.asgi import ASGIHTTPConnection
from quart_schema import QuartSchema
from quart_schema.openapi import OpenAPIProvider
from quart_trio import QuartTrio
from quart_trio.asgi import TrioASGIHTTPConnection
from quart_trio.formparser import TrioFormDataParser
from quart_trio.wrappers import TrioRequest
from werkzeug.datastructures import MultiDict
from werkzeug.exceptions import RequestEntityTooLarge
from werkzeug.routing.rules import Rule

from ..asgi_scopes import http_scope

TIMEOUT = 10.0


def _relied_on(module: str, what: str) -> str:
    return (
        f"{module} relies on {what}: read the module and its docs/upstream/ report"
        " before admitting this release"
    )


# trio_asyncio: storage/_loop.py ------------------------------------------------------------------

LOOP = "storage/_loop.py"
Step = Callable[[Any, bool], Awaitable[None]]


def _trio_asyncio_class(name: str) -> ast.ClassDef:
    """trio_asyncio's own source of ``name`` in ``trio_asyncio/_base.py``, as released (the
    class itself may have been patched by the time this runs)."""
    tree = ast.parse(Path(inspect.getfile(trio_asyncio_base)).read_text(encoding="utf-8"))
    (found,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name]
    return found


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
    found = [
        n
        for n in cls.body
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == name
    ]
    assert len(found) == 1, _relied_on(LOOP, f"trio_asyncio's {cls.name}.{name}")
    return found[0]


async def _in_the_loops_task(
    monkeypatch: pytest.MonkeyPatch, experiment: Callable[[Any, Step], Awaitable[Any]]
) -> tuple[Any, list[bool]]:
    """``experiment(loop, step)`` run inside a trio_asyncio loop's own task at its first turn,
    where nothing else takes its callbacks; ``step`` is the ``_main_loop_one`` found on the
    loop's class (trio_asyncio's, or storage's wrapper of it, which answers ``no_wait`` alike).
    Answers what it returned, and the ``no_wait`` of every step the loop took."""
    base = trio_asyncio_base.BaseTrioEventLoop
    step: Step = base._main_loop_one
    taken: list[bool] = []
    outcome: dict[str, Any] = {}
    done = trio.Event()

    async def probe(self: Any, no_wait: bool = False) -> None:
        taken.append(no_wait)
        if not done.is_set():
            try:
                outcome["value"] = await experiment(self, step)
            except Exception as exc:
                outcome["error"] = exc
            done.set()
        await step(self, no_wait)

    monkeypatch.setattr(base, "_main_loop_one", probe)
    with trio.fail_after(TIMEOUT):
        async with trio_asyncio.open_loop() as loop:
            assert isinstance(loop, base)
            await trio_asyncio.aio_as_trio(asyncio.sleep)(0)  # the loop has run a callback
            assert done.is_set(), _relied_on(LOOP, "the loop calling _main_loop_one on its class")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value"), taken


async def test_trio_asyncio_runs_every_callback_through_main_loop_one_on_its_class(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """storage/_loop.py replaces ``BaseTrioEventLoop._main_loop_one`` on the class: the loop
    must look it up there for each callback, waiting (``no_wait`` false) while it runs and
    without waiting as it drains at its end."""
    cls = _trio_asyncio_class("BaseTrioEventLoop")
    arguments = _method(cls, "_main_loop_one").args
    assert [a.arg for a in arguments.args] == ["self", "no_wait"], _relied_on(
        LOOP, "_main_loop_one(self, no_wait=False)"
    )

    async def nothing(loop: Any, step: Step) -> None:
        return None

    _, taken = await _in_the_loops_task(monkeypatch, nothing)
    assert taken[0] is False, _relied_on(LOOP, "the loop's run waiting in _main_loop_one")
    assert taken[-1] is True, _relied_on(LOOP, "the loop's end draining with no_wait=True")


async def test_trio_asyncio_main_loop_one_without_waiting_runs_one_ready_callback_or_would_block(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """storage/_loop.py calls ``_main_loop_one(loop, True)`` after each callback the loop waited
    for, until ``trio.WouldBlock``: each such call runs one ready callback, in order."""

    async def run_ready(loop: Any, step: Step) -> list[object]:
        ran: list[str] = []
        loop.call_soon(ran.append, "first")
        loop.call_soon(ran.append, "second")
        seen: list[object] = []
        for _ in range(3):
            try:
                await step(loop, True)
            except trio.WouldBlock:
                seen.append("would block")
                break
            seen.append(list(ran))
        return seen

    seen, _ = await _in_the_loops_task(monkeypatch, run_ready)
    assert seen == [["first"], ["first", "second"], "would block"], _relied_on(
        LOOP, "_main_loop_one(no_wait=True) running one ready callback, else raising WouldBlock"
    )


async def test_trio_asyncio_timers_wait_in_a_heap_list_and_a_cancelled_one_is_skipped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """storage/_loop.py drops cancelled timers from ``loop._timers`` before their deadline and
    heapifies the rest: that heap must be a ``heapq`` list of asyncio's ``TimerHandle``, earliest
    first, from which a cancelled timer (``_cancelled``) is skipped, not run, when it comes due,
    so dropping it early changes nothing."""

    async def timers(loop: Any, step: Step) -> dict[str, Any]:
        ran: list[str] = []
        later = loop.call_later(3600, ran.append, "later")
        cancelled = loop.call_later(0, ran.append, "cancelled")
        cancelled.cancel()
        await step(loop, True)  # each turn takes one queued timer into the heap
        await step(loop, True)
        heap = loop._timers
        seen: dict[str, Any] = {
            "heap": (type(heap), [h is cancelled for h in heap], {id(h) for h in heap}),
            "flag": cancelled._cancelled,
        }
        await step(loop, True)  # the cancelled one is due: popped, not run
        seen["after"] = (list(ran), [h is later for h in loop._timers])
        due = loop.call_later(0, ran.append, "due")
        await step(loop, True)
        await step(loop, True)
        seen["due"] = (list(ran), due in loop._timers)
        later.cancel()
        return seen

    seen, _ = await _in_the_loops_task(monkeypatch, timers)
    kind, earliest_first, _ = seen["heap"]
    assert kind is list, _relied_on(LOOP, "loop._timers being a list kept with heapq")
    assert earliest_first == [True, False], _relied_on(LOOP, "loop._timers, earliest first")
    assert seen["flag"] is True, _relied_on(LOOP, "asyncio's TimerHandle._cancelled")
    assert seen["after"] == ([], [True]), _relied_on(
        LOOP, "a cancelled timer popped from loop._timers and not run"
    )
    assert seen["due"] == (["due"], False), _relied_on(LOOP, "a due timer popped and run")


async def test_trio_asyncio_timer_handle_cancelled_is_a_no_op_that_asyncio_calls_on_cancel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """storage/_loop.py replaces ``_timer_handle_cancelled`` to count cancellations: trio_asyncio's
    own must do nothing (so nothing is lost), and asyncio's ``TimerHandle.cancel`` must call it
    with the handle."""
    cls = _trio_asyncio_class("BaseTrioEventLoop")
    own = _method(cls, "_timer_handle_cancelled")
    body = [
        n for n in own.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))
    ]
    assert [a.arg for a in own.args.args] == ["self", "handle"], _relied_on(
        LOOP, "_timer_handle_cancelled(self, handle)"
    )
    assert [type(n) for n in body] == [ast.Pass], _relied_on(
        LOOP, "trio_asyncio's _timer_handle_cancelled doing nothing"
    )

    told: list[tuple[Any, Any]] = []

    def record(self: Any, handle: Any) -> None:
        told.append((self, handle))

    monkeypatch.setattr(trio_asyncio_base.BaseTrioEventLoop, "_timer_handle_cancelled", record)

    async def cancel_one(loop: Any, step: Step) -> tuple[Any, Any]:
        handle = loop.call_later(3600, lambda: None)
        handle.cancel()
        return loop, handle

    (loop, handle), _ = await _in_the_loops_task(monkeypatch, cancel_one)
    assert isinstance(handle, asyncio.TimerHandle)
    assert told == [(loop, handle)], _relied_on(
        LOOP, "asyncio's TimerHandle.cancel calling loop._timer_handle_cancelled(handle)"
    )


# Quart and quart-trio: http/_input.py ------------------------------------------------------------

INPUT = "http/_input.py"
URL_ENCODED = "application/x-www-form-urlencoded"


class _FormLoadsRecorded(TrioRequest):
    """A request whose form loading is replaced, as http/_input.py's ``CheckedRequest`` does."""

    loads = 0
    before: tuple[object, object] = (False, False)

    async def _load_form_data(self) -> None:
        type(self).loads += 1
        type(self).before = (self._form, self._files)
        if self._form is None:
            self._form = self.parameter_storage_class([("from", "override")])
            self._files = self.parameter_storage_class()


async def test_quart_request_reads_form_files_and_values_through_load_form_data() -> None:
    """http/_input.py's ``CheckedRequest._load_form_data`` parses a URL-encoded form itself: Quart
    must reach the form through that method for ``form``, ``files``, ``values`` and
    ``get_data(parse_form_data=True)``, start with ``_form`` None, and answer ``_form`` and
    ``_files`` as the method left them."""
    app = QuartTrio("contracts")
    app.request_class = _FormLoadsRecorded
    _FormLoadsRecorded.loads = 0
    with trio.fail_after(TIMEOUT):
        async with app.test_request_context(
            "/", method="POST", data=b"a=1", headers={"Content-Type": URL_ENCODED}
        ):
            assert _FormLoadsRecorded.loads == 0
            form = await request.form
            assert _FormLoadsRecorded.before == (None, None), _relied_on(
                INPUT, "Request._form and _files being None until the form is loaded"
            )
            files = await request.files
            values = await request.values
            await request.get_data(parse_form_data=True)
    assert list(form.items(multi=True)) == [("from", "override")], _relied_on(
        INPUT, "Request.form answering the _form that _load_form_data set"
    )
    assert isinstance(files, MultiDict), _relied_on(
        INPUT, "Request.files answering the _files that _load_form_data set"
    )
    assert not files
    assert values.get("from") == "override"
    assert _FormLoadsRecorded.loads == 4, _relied_on(
        INPUT, "form, files, values and get_data(parse_form_data=True) calling _load_form_data"
    )


async def test_quart_trio_parses_other_forms_with_its_parser_class_positionally() -> None:
    """http/_input.py's ``_CheckedFormDataParser`` overrides ``TrioFormDataParser.parse(body,
    mimetype, content_length, options)`` to check multipart fields: quart-trio's own form
    loading (``super()._load_form_data()``) must make its parser from
    ``form_data_parser_class`` and call ``parse`` with those four, keeping what it returns."""
    calls: list[tuple[object, ...]] = []

    class Recording(TrioFormDataParser):
        async def parse(
            self,
            body: Any,
            mimetype: str,
            content_length: int | None,
            options: dict[str, str] | None = None,
        ) -> tuple[MultiDict[str, Any], MultiDict[str, Any]]:
            calls.append((mimetype, content_length, options))
            return await super().parse(body, mimetype, content_length, options)

    class Parsed(TrioRequest):
        form_data_parser_class = Recording

    own = inspect.signature(TrioFormDataParser.parse)
    assert list(own.parameters) == ["self", "body", "mimetype", "content_length", "options"], (
        _relied_on(INPUT, "FormDataParser.parse(body, mimetype, content_length, options)")
    )
    app = QuartTrio("contracts")
    app.request_class = Parsed
    body = b'--b\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n--b--\r\n'
    with trio.fail_after(TIMEOUT):
        async with app.test_request_context(
            "/",
            method="POST",
            data=body,
            headers={
                "Content-Type": "multipart/form-data; boundary=b",
                "Content-Length": str(len(body)),
            },
        ):
            form = await request.form
    assert calls == [("multipart/form-data", len(body), {"boundary": "b"})], _relied_on(
        INPUT, "quart-trio's _load_form_data calling form_data_parser_class(...).parse"
    )
    assert list(form.items(multi=True)) == [("a", "1")]


async def test_quart_request_splits_its_blueprint_chain_with_split_blueprint_path() -> None:
    """http/_input.py's ``CheckedRequest.blueprints`` answers ``_split_blueprint_path(name)``
    (kept per name) where Quart's property computes it each time: the helper must be there,
    take the name and answer nearest first, as ``Request.blueprints`` does."""
    split = quart.helpers._split_blueprint_path
    assert list(inspect.signature(split).parameters) == ["name"], _relied_on(
        INPUT, "quart.helpers._split_blueprint_path(name)"
    )
    outer, inner = Blueprint("outer", __name__), Blueprint("inner", __name__)

    @inner.route("/nested")
    async def nested() -> str:
        return ""

    outer.register_blueprint(inner, url_prefix="/inner")
    app = QuartTrio("contracts")
    app.register_blueprint(outer, url_prefix="/outer")
    with trio.fail_after(TIMEOUT):
        async with app.test_request_context("/outer/inner/nested"):
            assert request.blueprint == "outer.inner"
            quarts = request.blueprints
    assert split("outer.inner") == quarts == ["outer.inner", "outer"], _relied_on(
        INPUT, "Request.blueprints being _split_blueprint_path(request.blueprint)"
    )


async def test_quart_request_reads_json_through_get_json() -> None:
    """http/_input.py refuses NUL in JSON bodies by overriding ``get_json``: ``request.json``
    (which Quart-Schema's validation also reads through ``get_json``) must call it."""
    asked: list[bool] = []

    class Recorded(TrioRequest):
        async def get_json(
            self, force: bool = False, silent: bool = False, cache: bool = True
        ) -> Any:
            asked.append(force)
            return await super().get_json(force=force, silent=silent, cache=cache)

    app = QuartTrio("contracts")
    app.request_class = Recorded
    with trio.fail_after(TIMEOUT):
        async with app.test_request_context("/", method="POST", json={"a": 1}):
            assert await request.json == {"a": 1}
    assert asked == [False], _relied_on(INPUT, "Request.json calling get_json()")


# quart-trio: server/_wire.py ---------------------------------------------------------------------

WIRE = "server/_wire.py"
QUART_TRIO_CALL = """
async def __call__(self, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
    request = self._create_request_from_scope(send)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(self.handle_messages, nursery, request, receive)
        nursery.start_soon(self.handle_request, nursery, request, send)
"""
"""quart-trio's ``TrioASGIHTTPConnection.__call__``, which ``OneTaskHTTPConnection`` copies
with its last line awaited instead of started."""


def test_quart_trio_http_connection_is_the_one_http_wire_copies() -> None:
    """server/_wire.py's ``OneTaskHTTPConnection.__call__`` is quart-trio's with the answer awaited
    in the calling task: quart-trio's must still be that (any change is one to carry over), and
    ``handle_messages`` and ``handle_request`` take the nursery they cancel. The behaviour is
    tests/unit/test_wire.py's ``test_one_task_*``."""
    own = textwrap.dedent(inspect.getsource(TrioASGIHTTPConnection.__call__))
    assert own.strip() == QUART_TRIO_CALL.strip(), _relied_on(
        WIRE, "TrioASGIHTTPConnection.__call__ as OneTaskHTTPConnection copied it"
    )
    for name, last in (("handle_messages", "receive"), ("handle_request", "send")):
        parameters = list(inspect.signature(getattr(TrioASGIHTTPConnection, name)).parameters)
        assert parameters == ["self", "nursery", "request", last], _relied_on(
            WIRE, f"TrioASGIHTTPConnection.{name}(nursery, request, {last})"
        )
    creates = list(inspect.signature(TrioASGIHTTPConnection._create_request_from_scope).parameters)
    assert creates == ["self", "send"], _relied_on(WIRE, "_create_request_from_scope(send)")


async def test_quart_reads_a_body_by_appending_its_messages_and_completing_it_at_its_end() -> None:
    """server/_wire.py's ``_take_arrived_body`` adds the body's messages that have already
    arrived to the request as quart's ``handle_messages`` adds them: each message's ``body``
    appended, the body complete at the one without ``more_body``, a disconnect ending the
    reading. And the body keeps what arrived in ``_data``, tells it whole by ``_complete`` (an
    event with ``is_set``) and holds in ``_must_raise`` the error an await raises (a body past
    the largest allowed): server/_wire.py and http/_input.py's ``CheckedRequest._arrived`` read
    those."""
    app = QuartTrio("contracts")
    app.config["MAX_CONTENT_LENGTH"] = 8
    messages: list[dict[str, Any]] = [
        {"type": "http.request", "body": b"a=1&", "more_body": True},
        {"type": "http.request", "more_body": True},
        {"type": "http.request", "body": b"b=2", "more_body": False},
        {"type": "http.disconnect"},
    ]

    async def receive() -> Any:
        return messages.pop(0)

    async def send(message: Any) -> None:
        pass

    async with app.test_request_context("/", method="POST"):
        connection = TrioASGIHTTPConnection(app, http_scope("POST"))  # type: ignore[arg-type]
        made = connection._create_request_from_scope(send)
        body = made.body
        assert body._must_raise is None
        assert not body._complete.is_set(), _relied_on(WIRE, "Body._complete unset until the end")
        with trio.fail_after(TIMEOUT):
            await ASGIHTTPConnection.handle_messages(connection, made, receive)
        assert not messages, _relied_on(WIRE, "handle_messages returning at a disconnect")
        assert body._complete.is_set(), _relied_on(WIRE, "set_complete at the body's end")
        assert bytes(body._data) == b"a=1&b=2", _relied_on(
            WIRE, "each message's body appended to Body._data, a missing one as none"
        )
        with trio.fail_after(TIMEOUT):
            assert await body == b"a=1&b=2", _relied_on(INPUT, "an awaited body being _data")
    large = TrioRequest.body_class(None, 8)
    large.append(b"a=123456789")
    assert large._complete.is_set()
    assert isinstance(large._must_raise, RequestEntityTooLarge), _relied_on(
        INPUT, "Body._must_raise holding the error of a body past the largest allowed"
    )
    with trio.fail_after(TIMEOUT), pytest.raises(RequestEntityTooLarge):
        await large


async def test_hypercorn_trio_task_group_queues_the_apps_messages_in_a_memory_channel() -> None:
    """server/_wire.py's ``LeanTaskGroup`` and ``arrived`` (server/_asgi.py) take what
    hypercorn's trio task group answers and hands the app apart: ``spawn_app`` answers a
    trio memory channel's bound ``send`` and gives the app the bound ``receive`` of the same
    channel, so a message put with ``send_nowait`` is the app's next and one queued can be
    taken with ``receive_nowait``."""
    config = hypercorn.config.Config()
    received: list[Any] = []

    async def app(scope: Any, receive: Any, send: Any, sync_spawn: Any, call_soon: Any) -> None:
        received.append(receive)
        received.append(await receive())

    async def ignore(event: Any) -> None:
        pass

    async with hypercorn.trio.task_group.TaskGroup() as group:
        put = await group.spawn_app(app, config, {"type": "http"}, ignore)  # type: ignore[arg-type]
        assert isinstance(put.__self__, trio.MemorySendChannel), _relied_on(  # type: ignore[attr-defined]
            WIRE, "spawn_app answering a trio memory channel's send"
        )
        put.__self__.send_nowait({"type": "http.request", "body": b"x"})  # type: ignore[attr-defined]
    receive, message = received
    assert isinstance(receive.__self__, trio.MemoryReceiveChannel), _relied_on(
        WIRE, "the app's receive being a trio memory channel's"
    )
    assert message == {"type": "http.request", "body": b"x"}


def test_hypercorn_trio_tcp_server_makes_a_connections_task_group_by_its_modules_name() -> None:
    """server/_wire.py's ``lean_connections`` sets ``hypercorn.trio.tcp_server.TaskGroup``:
    ``TCPServer.run`` must make each connection's task group by that name, when it runs."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(hypercorn.trio.tcp_server.TCPServer.run)))
    calls = [
        node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    ]
    assert "TaskGroup" in calls, _relied_on(WIRE, "TCPServer.run calling the module's TaskGroup")


# Flask's JSON provider, as Quart's: http/_json.py ------------------------------------------------

JSON_MODULE = "http/_json.py"


async def test_flask_json_provider_prepares_an_answer_and_knows_its_app() -> None:
    """http/_json.py's provider overrides ``response`` and, as Flask's does, takes what to write
    from ``_prepare_response_obj(args, kwargs)`` and the response class and debug flag from
    ``self._app``. Quart's ``make_response`` must answer a dict through ``app.json.response``."""
    app = QuartTrio("contracts")
    provider = app.json
    assert isinstance(provider, flask.json.provider.DefaultJSONProvider)
    prepare = provider._prepare_response_obj
    prepared = (prepare(({"a": 1},), {}), prepare((1, 2), {}), prepare((), {"a": 1}))
    assert prepared == ({"a": 1}, (1, 2), {"a": 1}), _relied_on(
        JSON_MODULE, "_prepare_response_obj(args, kwargs): one argument, several, or keywords"
    )
    assert provider._app.response_class is app.response_class, _relied_on(
        JSON_MODULE, "JSONProvider._app being the application"
    )
    assert provider._app.debug is app.debug
    assert (provider.compact, provider.mimetype) == (None, "application/json")

    answered: list[object] = []
    base: Any = type(provider)

    class Recording(base):  # type: ignore[misc]
        def response(self, *args: Any, **kwargs: Any) -> Response:
            answered.append(self._prepare_response_obj(args, kwargs))
            return super().response(*args, **kwargs)  # type: ignore[no-any-return]

    app.json = Recording(app)
    with trio.fail_after(TIMEOUT):
        async with app.app_context():
            made = await app.make_response({"b": 2})
    assert answered == [{"b": 2}], _relied_on(
        JSON_MODULE, "make_response(dict) calling json.response"
    )
    assert json.loads(await made.get_data()) == {"b": 2}


# Quart-Schema: http/_json.py and http/_document.py ----------------------------------------------

OPENAPI = "http/_document.py"


class _Model(pydantic.BaseModel):
    name: str


@dataclasses.dataclass
class _Point:
    x: int


def _schema_app(**options: Any) -> tuple[QuartTrio, QuartSchema]:
    app = QuartTrio("contracts")
    extension = QuartSchema(app, **options)

    @app.route("/things/<int:thing>")
    async def thing(thing: int) -> dict[str, int]:
        return {"thing": thing}

    return app, extension


async def test_quart_schema_converts_answers_in_the_apps_make_response_and_not_plain_ones() -> None:
    """http/_json.py's ``skip_conversion_of_plain_answers`` sends a plain answer (a dict, a list,
    text, bytes, a response, with plain status and headers) to Quart's own ``make_response`` and
    anything else to Quart-Schema's: Quart-Schema must convert in the ``make_response`` it sets
    on the application, and its conversion must make no other answer of a plain one."""
    app, _ = _schema_app()
    assert "make_response" in vars(app), _relied_on(
        JSON_MODULE, "QuartSchema setting app.make_response on the application"
    )
    converting = app.make_response
    plain = type(app).make_response.__get__(app)
    answers: list[Any] = [
        {"name": "a", "snake_case": {"model": _Model(name="b"), "point": _Point(1)}},
        [1, "two", {"three_and": 3.0}],
        "text",
        b"bytes",
        ({"a": 1}, 201),
        ({"a": 1}, 202, {"X-Extra": "yes"}),
        ({"a": 1}, {"X-Extra": "yes"}),
    ]
    with trio.fail_after(TIMEOUT):
        async with app.app_context():
            answers.append(Response("made", status=418))
            for answer in answers:
                one, other = await converting(answer), await plain(answer)
                assert (one.status_code, list(one.headers.items()), await one.get_data()) == (
                    other.status_code,
                    list(other.headers.items()),
                    await other.get_data(),
                ), _relied_on(JSON_MODULE, f"Quart-Schema leaving {answer!r} as Quart makes it")
            converted = await converting(_Model(name="c"))
            assert json.loads(await converted.get_data()) == {"name": "c"}, _relied_on(
                JSON_MODULE, "Quart-Schema converting a model in app.make_response"
            )
            with pytest.raises(TypeError):
                await plain(_Model(name="c"))


APP_MODULE = "http/_app.py"


async def test_quart_blueprints_bring_flasks_sync_context_processor_which_adds_nothing() -> None:
    """http/_app.py's ``render_without_flasks_context`` leaves out, by its identity, the
    template context processor each blueprint brings from Flask's blueprint class: it must be
    Flask's default, sync (quart-trio runs it on a thread), adding nothing under Quart, while
    Quart's own async default gives templates ``g`` and ``request``."""
    flasks = flask.templating._default_template_ctx_processor
    app = QuartTrio("contracts")
    app.register_blueprint(Blueprint("probe", __name__))
    assert app.template_context_processors["probe"] == [flasks], _relied_on(
        APP_MODULE, "a blueprint registering Flask's default context processor under its name"
    )
    assert not inspect.iscoroutinefunction(flasks), _relied_on(
        APP_MODULE, "Flask's default context processor being sync"
    )
    with trio.fail_after(TIMEOUT):
        async with app.test_request_context("/"):
            assert flasks() == {}, _relied_on(APP_MODULE, "Flask's processor adding nothing")
            context: dict[str, Any] = {}
            app.template_context_processors.pop("probe")
            await app.update_template_context(context)
            assert {"g", "request"} <= set(context), _relied_on(
                APP_MODULE, "Quart's own default context processor at the application"
            )


async def test_quart_schema_json_provider_is_flasks_with_a_default_for_models() -> None:
    """http/_json.py subclasses the provider Quart-Schema installs (``type(app.json)``), made as
    ``cls(app)``, and hands orjson its ``default`` for what is not plain JSON."""
    app, _ = _schema_app()
    provider_class = type(app.json)
    assert issubclass(provider_class, flask.json.provider.DefaultJSONProvider), _relied_on(
        JSON_MODULE, "Quart-Schema's JSON provider being a DefaultJSONProvider"
    )
    again = provider_class(app)
    assert again.default(_Model(name="d")) == {"name": "d"}, _relied_on(
        JSON_MODULE, "the provider's default writing a pydantic model"
    )
    assert again.default(_Point(2)) == {"x": 2}


async def test_quart_schema_openapi_document_is_built_rule_by_rule_with_build_paths() -> None:
    """http/_document.py's ``DocumentProvider`` (``openapi_provider_class``) rewrites each route's
    part of the document in ``build_paths(rule)`` and reads the routes from ``self._app``:
    Quart-Schema must make it as ``cls(app, extension)`` and build ``schema()`` from what
    ``build_paths`` answers for each route."""
    seen: list[str] = []

    class Recording(OpenAPIProvider):
        def build_paths(self, rule: Rule) -> tuple[dict[str, Any], dict[str, Any]]:
            seen.append(rule.rule)
            assert self._app.view_functions[rule.endpoint] is not None
            paths, components = super().build_paths(rule)
            for item in paths.values():
                for operation in item.values():
                    operation["x-seen"] = True
            return paths, components

    parameters = list(inspect.signature(OpenAPIProvider.__init__).parameters)
    assert parameters == ["self", "app", "extension"], _relied_on(
        OPENAPI, "OpenAPIProvider(app, extension)"
    )
    app, extension = _schema_app(openapi_provider_class=Recording)
    assert isinstance(extension.openapi_provider, Recording)
    assert extension.openapi_provider._app.url_map is app.url_map, _relied_on(
        OPENAPI, "OpenAPIProvider._app being the application"
    )
    with trio.fail_after(TIMEOUT):
        async with app.app_context():
            document = extension.openapi_provider.schema()
    assert "/things/<int:thing>" in seen, _relied_on(OPENAPI, "schema() calling build_paths(rule)")
    assert document["paths"]["/things/{thing}"]["get"]["x-seen"] is True, _relied_on(
        OPENAPI, "schema() keeping what build_paths answered"
    )


# hypercorn: serve.py (server/_wire.py's classes are tests/unit/test_wire.py's) -------------------

SERVE = "serve.py"


def test_hypercorn_worker_serves_sockets_bound_beforehand() -> None:
    """serve.py binds its sockets before it opens the store (``Config.create_sockets``) and
    hands them to ``hypercorn.trio.run.worker_serve`` with its own shutdown trigger and task
    status, where hypercorn's public ``serve`` binds them itself."""
    parameters = inspect.signature(hypercorn.trio.run.worker_serve).parameters
    assert list(parameters)[:2] == ["app", "config"]
    for name in ("sockets", "shutdown_trigger", "task_status"):
        assert parameters[name].kind is inspect.Parameter.KEYWORD_ONLY, _relied_on(
            SERVE, f"worker_serve(..., {name}=...)"
        )
    config = hypercorn.config.Config()
    config.bind = ["127.0.0.1:0"]
    sockets = config.create_sockets()
    try:
        assert [s.getsockname()[0] for s in sockets.insecure_sockets] == ["127.0.0.1"], _relied_on(
            SERVE, "Config.create_sockets() binding without listening"
        )
        assert sockets.secure_sockets == []
        assert sockets.quic_sockets == []
    finally:
        for sock in sockets.insecure_sockets:
            sock.close()


# mini-racer: runtime/sandbox.py ------------------------------------------------------------------

SANDBOX = "runtime/sandbox.py"


def _in_mini_racer(experiment: Callable[[Any], Awaitable[Any]]) -> Any:
    """``experiment(racer)`` on an asyncio loop of its own, as the sandbox worker runs V8."""

    async def main() -> Any:
        from py_mini_racer import MiniRacer

        racer = MiniRacer()
        try:
            return await asyncio.wait_for(experiment(racer), TIMEOUT)
        finally:
            racer.close()

    return asyncio.run(main())


def test_mini_racer_notification_hands_its_arguments_as_one_array_on_the_loop() -> None:
    """The way out is ``Context._register_js_notification``: a JS function that returns at once
    and calls ours on the worker's loop with a handle that ``_value_handle_to_python`` turns
    into an array of the arguments, each read by ``get_object_item``."""
    from py_mini_racer import JSArray

    async def experiment(racer: Any) -> Any:
        context = racer._ctx
        loop = asyncio.get_running_loop()
        called: asyncio.Future[tuple[Any, ...]] = loop.create_future()

        def notified(handle: Any) -> None:
            assert asyncio.get_running_loop() is loop, _relied_on(SANDBOX, "the loop it runs on")
            given = context._value_handle_to_python(handle)
            assert isinstance(given, JSArray), _relied_on(SANDBOX, "the arguments as an array")
            called.set_result(tuple(context.get_object_item(given, i) for i in range(3)))

        with context._register_js_notification(notified) as notify:
            racer.eval("this")["__notify"] = notify
            returned = racer.eval("__notify('report', 'run_1', '{\"ok\":true}')")
            return returned, await called

    returned, arguments = _in_mini_racer(experiment)
    assert returned is None or type(returned).__name__ == "JSUndefinedType", _relied_on(
        SANDBOX, "a notification returning at once, with nothing"
    )
    assert arguments == ("report", "run_1", '{"ok":true}'), _relied_on(
        SANDBOX, "the notification's arguments, read one by one"
    )


def test_mini_racer_reads_the_notifications_arguments_without_the_guests_prototypes() -> None:
    """The argument array is V8's own: reading its elements consults no getter a guest put on
    ``Array.prototype``, so a guest cannot see or change what the harness passes out."""

    async def experiment(racer: Any) -> Any:
        context = racer._ctx
        called: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def notified(handle: Any) -> None:
            given = context._value_handle_to_python(handle)
            called.set_result(context.get_object_item(given, 0))

        with context._register_js_notification(notified) as notify:
            racer.eval("this")["__notify"] = notify
            racer.eval(
                "var seen = 0;"
                " Object.defineProperty(Array.prototype, '0', {configurable: true,"
                " get() { seen++; return 'forged'; }, set(v) { seen++; }});"
                " Array.prototype.push = function () { seen++; return 0; };"
                ' __notify(\'{"kind":"api"}\')'
            )
            return await called, racer.eval("seen")

    first, seen = _in_mini_racer(experiment)
    assert (first, seen) == ('{"kind":"api"}', 0), _relied_on(
        SANDBOX, "an argument array built without Array.prototype"
    )


# mcp (the official SDK): http/mcp/ --------------------------------------------------------------

MCP_SERVER = "http/mcp/_server.py"
MCP_EXCHANGE = "http/mcp/_exchange.py"
MCP_DISPATCH = "http/mcp/_dispatch.py"
_TOOL_SEEN: ContextVar[str] = ContextVar("tool_seen")


def _mcp_server(result: Any) -> Any:
    import mcp_types
    from mcp.server.lowlevel import Server

    async def list_tools(ctx: Any, params: Any) -> Any:
        tool = mcp_types.Tool(name=_TOOL_SEEN.get(), input_schema={"type": "object"})
        return mcp_types.ListToolsResult(tools=[tool])

    async def call_tool(ctx: Any, params: Any) -> Any:
        return result

    return Server("contract", on_list_tools=list_tools, on_call_tool=call_tool)


async def test_mcp_stateless_json_manager_runs_in_the_request_task_under_trio() -> None:
    """``serve_mcp`` makes a StreamableHTTPSessionManager for each request (stateless, JSON
    answers), runs it within the request on trio, and its handlers read what the request set
    in a ContextVar: anyio's tasks on trio start in a copy of the caller's context."""
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    body = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}).encode()
    scope = http_scope(
        "POST",
        "/mcp",
        headers=[
            (b"content-type", b"application/json"),
            (b"accept", b"application/json"),
            (b"mcp-protocol-version", b"2025-11-25"),
        ],
        client=("127.0.0.1", 1),
        server=("127.0.0.1", 2),
    )
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    token = _TOOL_SEEN.set("seen_in_the_handler")
    try:
        with trio.fail_after(TIMEOUT):
            manager = StreamableHTTPSessionManager(
                _mcp_server(None), json_response=True, stateless=True
            )
            async with manager.run():
                await manager.handle_request(scope, receive, send)
    finally:
        _TOOL_SEEN.reset(token)
    assert sent[0]["status"] == 200, _relied_on(MCP_SERVER, "a stateless manager run per request")
    answer = json.loads(b"".join(m.get("body", b"") for m in sent[1:]))
    assert answer["result"]["tools"][0]["name"] == "seen_in_the_handler", _relied_on(
        MCP_SERVER, "the handlers running in a copy of the request task's context"
    )


def test_mcp_servers_default_middleware_is_only_the_span_one_dropped_by_clearing() -> None:
    """``_server`` clears ``Server.middleware`` to drop the SDK's OpenTelemetry span middleware,
    which the SDK documents as its one default entry: a middleware the SDK added later would
    be dropped with it unseen."""
    from mcp.server._otel import OpenTelemetryMiddleware

    middleware = _mcp_server(None).middleware
    assert [type(one) for one in middleware] == [OpenTelemetryMiddleware], _relied_on(
        MCP_SERVER, "the span middleware as the default's only entry"
    )


async def test_mcp_serve_one_answers_a_tools_call_in_the_callers_task_taking_a_mapping() -> None:
    """``_exchange`` answers a handshake-era ``tools/call`` with ``runner.serve_one`` (a born-ready
    ``Connection.from_envelope``, a dispatch context of its own) in the request's task, and
    ``_server`` returns a tool's result as a mapping, which the runner copies as it is."""
    from mcp.server.connection import Connection
    from mcp.server.runner import serve_one
    from mcp.shared.transport_context import TransportContext

    @dataclasses.dataclass
    class Exchange:
        transport: TransportContext
        request_id: int = 1
        message_metadata: None = None
        can_send_request: bool = False

    result = {
        "content": [{"type": "text", "text": "{}"}],
        "structuredContent": {"id": "cus_1"},
        "isError": False,
    }
    task = trio.lowlevel.current_task()
    seen: list[Any] = []

    async def call_tool(ctx: Any, params: Any) -> Any:
        seen.append(trio.lowlevel.current_task())
        return result

    server = _mcp_server(result)
    server.add_request_handler(
        "tools/call", server.get_request_handler("tools/call").params_type, call_tool
    )
    with trio.fail_after(TIMEOUT):
        answer = await serve_one(
            server,
            Exchange(TransportContext(kind="streamable-http", can_send_request=False)),
            "tools/call",
            {"name": "get_customer", "arguments": {}},
            connection=Connection.from_envelope("2025-11-25", None, None),
            lifespan_state={},
        )
    assert seen == [task], _relied_on(MCP_EXCHANGE, "serve_one running the handler in its caller")
    assert answer == result, _relied_on(MCP_SERVER, "a mapping result taken as it is")


async def test_quart_request_in_a_pushed_app_context_has_a_g_of_its_own() -> None:
    """``_dispatch`` answers a tool's data API call with ``app.handle_request`` inside the /mcp
    request, within ``app.app_context()``: the call's ``g`` (its timer, its headers) is not the
    outer request's."""
    app = QuartTrio(__name__)
    seen: list[str | None] = []

    @app.get("/inner")
    async def inner() -> str:
        seen.append(getattr(quart.g, "mark", None))
        return "ok"

    @app.get("/outer")
    async def outer() -> str:
        quart.g.mark = "outer"
        async with app.app_context():
            request = app.request_class(
                "GET",
                "http",
                "/inner",
                b"",
                quart.datastructures.Headers(),
                "",
                "1.1",
                send_push_promise=None,  # type: ignore[arg-type]
                scope={},  # type: ignore[arg-type]
            )
            request.body.set_complete()
            await app.handle_request(request)
        seen.append(quart.g.mark)
        return "ok"

    with trio.fail_after(TIMEOUT):
        response = await app.test_client().get("/outer")
    assert response.status_code == 200
    assert seen == [None, "outer"], _relied_on(MCP_DISPATCH, "a pushed app context's own g")
