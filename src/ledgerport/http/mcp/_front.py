"""A ``tools/call`` to ``/mcp`` answered in front of the application: its data API call is the
one request the application answers for it.

An agent's tool call is one data API call wrapped in JSON-RPC. Answered as a route, it is two
requests in the application (``/mcp``'s, whose handler then makes the data API's), and costs
about half as much again as the same call made to the data API. Here, in front of the
application's ASGI callable, the ``/mcp`` request a tool call comes in is read and handed to
the SDK's single-exchange driver (``_exchange``) at once; the tool's data API call then carries
the request's token, DPoP proof, address and host, and is authenticated, limited, gated and
answered as any data API call (``_dispatch``), as made in the place of ``POST /mcp``
(``PRESENTED_AS``: the proof names that request, and a refused token's challenge names the MCP
server's metadata). What the application would add to the ``/mcp`` answer is added here: the
service's headers, the data API call's ``RateLimit-*`` and ``DPoP-Nonce``, and the ``/mcp``
request's metrics. A token the data API refuses (401) is the ``/mcp`` request's 401, with its
challenge.

Anything else goes to the application as it came, its body replayed: a request with an
``Origin`` (checked there) or a query string (the application's checks of a URL apply), a body
that does not fit the bounds below, any message but a handshake-era ``tools/call`` asking for
JSON, and a call that made no data API call (an unknown tool, arguments no request can be made
of, params the SDK refuses): the application's ``/mcp`` route authenticates the request first,
so a refused token is answered as such whatever the message. No data API call has been made when
a request goes on, so nothing is made or counted twice.
"""

from __future__ import annotations

import math
import time
from collections.abc import MutableMapping
from typing import Any, Final

import trio
from quart import Quart
from werkzeug.datastructures import Headers

from ledgerport.server import MANAGEMENT, replaying

from .._context import PLATFORM_KEY
from .._headers import API_CSP, SECURITY_HEADERS
from . import _exchange, _server
from ._blueprint import MCP_PATH, blueprint

_CARRIED: Final = frozenset({b"authorization", b"dpop", b"x-forwarded-for", b"host"})
"""The ``/mcp`` request's headers its data API call carries: the token, the proof, the client's
address through a trusted proxy, the host."""
_KEPT: Final = frozenset(
    {b"ratelimit-limit", b"ratelimit-remaining", b"ratelimit-reset", b"dpop-nonce"}
)
"""The data API call's answer headers that go on the ``/mcp`` answer (and its challenge, when
the token was refused)."""
_SERVICE_HEADERS: Final = (
    *((name.lower().encode(), value.encode()) for name, value in SECURITY_HEADERS.items()),
    (b"content-security-policy", API_CSP.encode()),
)
_KEPT_REFUSED: Final = _KEPT | {b"www-authenticate"}

ASGIApp = Any


class InFront:
    """The application's ASGI callable with ``/mcp``'s tool calls answered in front of it."""

    def __init__(self, app: Quart, inner: ASGIApp) -> None:
        self._app = app
        self._inner = inner

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if (
            scope["type"] != "http"
            or scope["path"] != MCP_PATH
            or scope["method"] != "POST"
            or scope.get("query_string")
            or scope.get(MANAGEMENT, False)
        ):
            await self._inner(scope, receive, send)
            return
        headers = Headers(
            [(name.decode("latin-1"), value.decode("latin-1")) for name, value in scope["headers"]]
        )
        read = await self._read_body(headers, receive)
        if (
            read
            and read[-1]["type"] == "http.request"
            and not read[-1].get("more_body", False)
            and await self._answer(scope, headers, b"".join(m.get("body", b"") for m in read), send)
        ):
            return
        await self._inner(scope, replaying(read, receive), send)  # type: ignore[arg-type]

    async def _read_body(self, headers: Headers, receive: Any) -> list[dict[str, Any]]:
        """The messages of the request's body, read when it may be a tool call to answer here:
        none for a request with an ``Origin`` or a declared length past the application's
        bound; else until the body ends, the first that is not a part of it, or the bound (or
        the application's body timeout) is reached, whichever comes first."""
        if "origin" in headers:
            return []
        length = headers.get("content-length")
        bound = self._app.config["MAX_CONTENT_LENGTH"] or math.inf
        if length is not None and (not length.isdigit() or int(length) > bound):
            return []
        read: list[dict[str, Any]] = []
        size = 0
        with trio.move_on_after(self._app.config["BODY_TIMEOUT"] or math.inf):
            while True:
                message: dict[str, Any] = await receive()
                read.append(message)
                size += len(message.get("body", b""))
                if (
                    message["type"] != "http.request"
                    or not message.get("more_body", False)
                    or size > bound
                ):
                    break
        return read

    async def _answer(
        self, scope: MutableMapping[str, Any], headers: Headers, raw: bytes, send: Any
    ) -> bool:
        """Answer the request when it is a tool call that made its data API call; False, with
        nothing sent, for any other."""
        exchange = _exchange.tool_call_of(raw, headers)
        if exchange is None:
            return False
        started = time.perf_counter()
        carried = [(name, value) for name, value in scope["headers"] if name in _CARRIED]
        call = _server.InPlace(carried, ("POST", MCP_PATH, blueprint.name))
        metrics = self._app.extensions[PLATFORM_KEY].metrics
        metrics.http_in_flight.inc()
        try:
            with _server.serving(self._app, scope, call):
                async with self._app.app_context():
                    body = await _exchange.answer(_server.SERVER, *exchange)
            made = call.answer
            if made is None:
                return False
            status, kept = (200, _KEPT) if made.status != 401 else (401, _KEPT_REFUSED)
            if status == 401:  # the token refused: the request's own refusal, with its challenge
                body = made.raw
            extra = [(name, value) for name, value in made.headers if name in kept]
            await send(
                {
                    "type": "http.response.start",
                    "status": status,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                        *_SERVICE_HEADERS,
                        *extra,
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body, "more_body": False})
            metrics.request_answered(MCP_PATH, "POST", status, time.perf_counter() - started)
            return True
        finally:
            metrics.http_in_flight.dec()
