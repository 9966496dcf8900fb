"""A ``tools/call`` to ``/mcp`` answered in front of the application: one request in it, the call's.

(prototype)
"""

from __future__ import annotations

import time
from collections.abc import MutableMapping
from typing import Any

import trio
from quart import Quart

from ledgerport.server import MANAGEMENT

from . import _exchange, _server

_PASSED = (b"authorization", b"dpop", b"x-forwarded-for", b"host")


class McpFront:
    def __init__(self, app: Quart, inner: Any) -> None:
        self._app = app
        self._inner = inner

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if (
            scope["type"] != "http"
            or scope["path"] != "/mcp"
            or scope["method"] != "POST"
            or scope.get(MANAGEMENT, False)
        ):
            return await self._inner(scope, receive, send)
        headers = dict(scope["headers"])
        if b"origin" in headers:
            return await self._inner(scope, receive, send)
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        raw = b"".join(chunks)
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": raw, "more_body": False}

        from werkzeug.datastructures import Headers

        exchange = _exchange.tool_call_of(
            raw, Headers([(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]])
        )
        if exchange is None:
            return await self._inner(scope, replay, send)
        started = time.perf_counter()
        passed = [(k, v) for k, v in scope["headers"] if k in _PASSED]
        holder = _server.FrontCall(passed)
        token = _server._CURRENT.set(_server._Request(self._app, None, None, scope, holder))
        try:
            async with self._app.app_context():
                answer = await _exchange.answer(_server.SERVER, *exchange)
        finally:
            _server._CURRENT.reset(token)
        if holder.answer is None:
            return await self._inner(scope, replay, send)
        if holder.answer.status == 401:
            status, out, body = 401, holder.headers, holder.answer.raw
        else:
            status, out, body = 200, [h for h in holder.headers if h[0].startswith(b"ratelimit-")], answer
        out = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"x-frame-options", b"DENY"),
            (b"x-content-type-options", b"nosniff"),
            (b"referrer-policy", b"no-referrer"),
            (b"content-security-policy", b"default-src 'none'; frame-ancestors 'none'"),
            *out,
        ]
        metrics = self._app.extensions["ledgerport.platform"].metrics
        metrics.http_requests.labels("/mcp", "POST", str(status)).inc()
        metrics.http_latency.labels("/mcp", "POST").observe(time.perf_counter() - started)
        await send({"type": "http.response.start", "status": status, "headers": out})
        await send({"type": "http.response.body", "body": body, "more_body": False})
