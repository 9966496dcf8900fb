"""``/mcp``: the Model Context Protocol over Streamable HTTP, with the data API's tokens.

The official SDK speaks the protocol: its low-level ``Server`` with the tools of ``_tools``, and
its Streamable HTTP session manager in stateless mode with JSON answers, run for each request
inside the request's own task (anyio on trio), so a request needs no session and no task
outlives it. The route hands it the request as ASGI and answers what it sends; a
handshake-era ``tools/call`` is answered by the SDK's single-exchange driver instead
(``_exchange``), with no transport of its own, and in front of the application at that
(``_front``: the tool's data API call is then the one request the application answers, and
authenticates the token itself, made in the place of ``POST /mcp``).

Every request is authenticated as a data API call is, by the same function
(``api._auth.authenticate_bearer``: the token and the limits, and whatever that check comes to
hold, such as a sender-constrained token's proof), and counted as one call: a tool call is one
request. A 401 names this resource's metadata
(``/.well-known/oauth-protected-resource/mcp``, RFC 9728). A tool call is
then made as its data API call (``_dispatch``), so the data API's gates refuse it as they
would the same call; a refusal is a tool result with ``isError`` carrying the data API's
message, the limits' refusal of a tool call included.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final, cast

import mcp_types as types
import orjson
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from quart import Quart, Response, current_app, request

from ledgerport import __version__, auth, storage

from .._browser import is_service_origin
from .._envelopes import envelope
from .._errors import answer_for
from ..api._auth import authenticate_bearer
from . import _dispatch, _exchange
from ._tools import DataTool, read_tools

TOOLS_KEY: Final = "ledgerport.mcp.tools"
"""The application's tools and their SDK descriptions, read once from its URL map."""

_GATE_REFUSALS: Final = (auth.RateLimited, storage.StorageUnavailable)
"""What the token's check can refuse a valid request for: a tool call's refusal is its result."""


@dataclass(frozen=True)
class _Tools:
    by_name: dict[str, DataTool]
    listed: types.ListToolsResult


@dataclass
class InPlace:
    """A tool call answered in front of the application (``_front``): the ``/mcp`` request's
    headers its data API call carries, the method, path and blueprint that call is made in the
    place of, and the call's answer once it is made."""

    carried: list[tuple[bytes, bytes]]
    presented: tuple[str, str, str]
    answer: _dispatch.Answer | None = None


@dataclass(frozen=True)
class _Request:
    """What a tool call needs of its ``/mcp`` request: its authenticated grant (or what refused
    it), or, answered in front of the application, what its data API call carries."""

    app: Quart
    grant: auth.AccessGrant | None
    refusal: BaseException | None
    scope: MutableMapping[str, Any]
    in_place: InPlace | None = None


_CURRENT: ContextVar[_Request] = ContextVar("ledgerport_mcp_request")


@contextmanager
def serving(
    app: Quart,
    scope: MutableMapping[str, Any],
    in_place: InPlace | None = None,
    *,
    grant: auth.AccessGrant | None = None,
    refusal: BaseException | None = None,
) -> Iterator[None]:
    """The SDK's handlers serving the request of ``scope``: authenticated by the route
    (``grant``, or the ``refusal`` its tool calls answer), or ``in_place`` in front of ``app``."""
    token = _CURRENT.set(_Request(app, grant, refusal, scope, in_place))
    try:
        yield
    finally:
        _CURRENT.reset(token)


def tools_of(app: Quart) -> _Tools:
    """The tools of ``app``'s data API (built on first use, then kept with the application)."""
    found = app.extensions.get(TOOLS_KEY)
    if found is None:
        by_name = read_tools(app)
        listed = types.ListToolsResult(
            tools=[
                types.Tool(
                    name=tool.name,
                    description=tool.description,
                    input_schema=tool.input_schema,
                    output_schema=tool.output_schema,
                    annotations=types.ToolAnnotations(
                        read_only_hint=tool.verb != "create",
                        destructive_hint=False,
                        idempotent_hint=tool.verb != "create",
                        open_world_hint=False,
                    ),
                )
                for tool in by_name.values()
            ]
        )
        found = app.extensions[TOOLS_KEY] = _Tools(by_name, listed)
    return found


def _message(body: Any) -> str:
    """The data API envelope's message as one line of text."""
    message = body.get("message") if isinstance(body, dict) else None
    if isinstance(message, list):
        return "; ".join(str(part) for part in message)
    return str(message) if message is not None else "The data API refused the call"


def _refused(body: Any, text: str) -> types.CallToolResult:
    """A refusal as a tool result: the message, then the whole envelope as JSON."""
    return types.CallToolResult(
        content=[types.TextContent(text=_message(body)), types.TextContent(text=text)],
        is_error=True,
    )


def _refusal_envelope(error: BaseException) -> dict[str, Any]:
    """``error`` in the envelope the data API answers it with."""
    answer = answer_for(error)
    return envelope(
        answer.status,
        answer.text(error),
        code=answer.code,
        params=answer.arguments(error),
        details=answer.details(error),
    )


async def _list_tools(
    ctx: Any, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return tools_of(_CURRENT.get().app).listed


async def _call_tool(
    ctx: Any, params: types.CallToolRequestParams
) -> types.CallToolResult | dict[str, Any]:
    current = _CURRENT.get()
    tool = tools_of(current.app).by_name.get(params.name)
    if tool is None:
        body = envelope(404, f"Unknown tool: {params.name}")
        return _refused(body, orjson.dumps(body).decode())
    in_place = current.in_place
    if in_place is None and current.grant is None:
        body = _refusal_envelope(current.refusal or auth.InvalidAccessToken("no token"))
        return _refused(body, orjson.dumps(body).decode())
    # In front of the application the call authenticates its own token (no grant here).
    answer = await _dispatch.call_data_api(
        current.app,
        tool,
        params.arguments or {},
        current.grant,
        current.scope,
        in_place=None if in_place is None else (in_place.carried, in_place.presented),
    )
    if in_place is not None and answer.made:
        in_place.answer = answer
    if answer.status >= 300 or not answer.is_object:
        return _refused(answer.body, answer.text)
    # The result's wire form as a mapping: the SDK copies a mapping as it is, where a model's
    # dump would walk the structured content once more.
    return _exchange.tool_result(answer.raw)


SERVER: Final = Server(
    "ledgerport",
    version=__version__,
    instructions=(
        "The books of one business, as the access token's user and app may reach them: list,"
        " get and create each kind of record, and read the business's events."
    ),
    on_list_tools=_list_tools,
    # A mapping is a result the SDK's runner takes as it is (``test_mcp_*``), beside its models.
    on_call_tool=_call_tool,  # type: ignore[arg-type]
)
"""The protocol's server: stateless, its handlers read the request they serve (``_CURRENT``)."""
# The SDK wraps every message in an OpenTelemetry span by default, a no-op until an exporter is
# installed; the service reports through its metrics and access log and installs none, so the
# span middleware is dropped, as the SDK documents for opting out (``test_mcp_*``).
SERVER.middleware.clear()


def _is_tool_call(raw: bytes) -> bool:
    try:
        message = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    return isinstance(message, dict) and message.get("method") == "tools/call"


async def _through_sdk(scope: MutableMapping[str, Any], raw: bytes) -> Response:
    """The SDK's answer to the request (``scope`` and its body ``raw``) as a Quart response."""
    manager = StreamableHTTPSessionManager(SERVER, json_response=True, stateless=True)
    status = 500
    headers: list[tuple[bytes, bytes]] = []
    chunks: list[bytes] = []
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if delivered:
            return {"type": "http.disconnect"}
        delivered = True
        return {"type": "http.request", "body": raw, "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        nonlocal status, headers
        if message["type"] == "http.response.start":
            status = message["status"]
            headers = list(message.get("headers", ()))
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    async with manager.run():
        await manager.handle_request(scope, receive, send)
    response = Response(b"".join(chunks), status=status)
    for name, value in headers:
        if name.lower() not in (b"content-length", b"date", b"server"):
            response.headers[name.decode("latin-1")] = value.decode("latin-1")
    return response


FOREIGN_ORIGIN: Final = (
    "Request refused: its Origin is not the service's own. A browser page may send requests to"
    " the MCP server from the service's origin only (the Streamable HTTP transport's guard"
    " against DNS rebinding)"
)


async def serve_mcp() -> Response:
    """Answer one request of the protocol: authenticate it, then let the SDK answer it.

    A request sent by a browser page of another origin is refused first (403): the protocol's
    transport requires the ``Origin`` to be checked, so that a page whose host name was made to
    resolve to a local server (DNS rebinding) cannot reach it. A client that is not a browser
    sends no ``Origin``."""
    origin = request.headers.get("Origin")
    if origin is not None and not is_service_origin(origin):
        raise auth.CrossSiteRequest(FOREIGN_ORIGIN)
    raw = cast(bytes, await request.get_data(as_text=False))
    exchange = _exchange.tool_call_of(raw, request.headers)
    grant = refusal = None
    try:
        grant = await authenticate_bearer()
    except _GATE_REFUSALS as refused:
        if exchange is None and not _is_tool_call(raw):
            raise
        refusal = refused
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    scope: dict[str, Any] = dict(request.scope)
    with serving(app, scope, grant=grant, refusal=refusal):
        if exchange is not None:
            answer = await _exchange.answer(SERVER, *exchange)
            return Response(answer, status=200, content_type="application/json")
        return await _through_sdk(scope, raw)
