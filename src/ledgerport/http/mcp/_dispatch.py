"""A tool call made as the data API call it names, through the application itself.

The call goes over ASGI, without a socket, to the same application that serves the data API:
routing, the API version, the scope and role gates, the body's validation, the plan's limits,
the Idempotency-Key of a write, the error envelope, the metrics (``http_requests`` counts it
under the data API's route) and the access log (one line, from the MCP client's address). The
token was authenticated, and the call counted against the limits, by the ``/mcp`` request that
carries it: the grant rides in the scope (``CALLER_GRANT``), so neither happens twice. A call
answered in front of the application (``_front``) carries the token itself and is authenticated
and counted as any data API call, made in the place of ``POST /mcp`` (``PRESENTED_AS``).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any
from urllib.parse import urlencode

import orjson
from quart import Quart
from werkzeug.datastructures import Headers

from ledgerport import auth
from ledgerport.server import AccessLog

from .._context import CALLER_GRANT, PRESENTED_AS
from .._envelopes import envelope
from ._tools import ID_ARGUMENT, DataTool

ACCESS_LOGGED = "ledgerport.mcp.access_logged"
"""The application's ASGI callable wrapped in the access log, built once per application."""


async def _no_push(path: str, headers: Any) -> None:
    return None


@dataclass(frozen=True)
class Answer:
    """The data API's answer: its status and its body as it was written."""

    status: int
    raw: bytes
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    made: bool = True
    """Whether the call was made (False: its arguments make no request)."""

    @cached_property
    def body(self) -> Any:
        """The body's JSON (None when it had none), read when asked for: a successful answer's
        body goes into the tool result as it was written."""
        return orjson.loads(self.raw) if self.raw else None

    @property
    def text(self) -> str:
        return self.raw.decode()

    @property
    def is_object(self) -> bool:
        """Whether the body is a JSON object: the data API writes its JSON with orjson, which
        starts an object with its brace."""
        return self.raw[:1] == b"{"


class BadArguments(Exception):
    """Arguments no request can be made of: the data API's 400 envelope says why."""

    def __init__(self, messages: list[str]) -> None:
        super().__init__("; ".join(messages))
        self.messages = messages


def _text(value: Any, name: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise BadArguments([f"{name} must be a string"])
    return str(value)


def _request_parts(
    tool: DataTool, arguments: Mapping[str, Any]
) -> tuple[str, str, list[tuple[bytes, bytes]], bytes]:
    """The path, query string, headers and body of the data API call ``arguments`` make."""
    rest = dict(arguments)
    path = tool.path
    if tool.path_argument is not None:
        if ID_ARGUMENT not in rest:
            raise BadArguments([f"{ID_ARGUMENT} is required"])
        value = _text(rest.pop(ID_ARGUMENT), ID_ARGUMENT)
        if not value or "/" in value or not value.isprintable():
            raise BadArguments([f"{ID_ARGUMENT} must be one record's id"])
        path = tool.target({ID_ARGUMENT: value})
    query: list[tuple[str, str]] = []
    for name in tool.query:
        if name in rest:
            value = rest.pop(name)
            values = value if isinstance(value, list) else [value]
            query.extend((name, _text(one, name)) for one in values)
    headers: list[tuple[bytes, bytes]] = []
    for name, header in tool.headers.items():
        if name in rest:
            headers.append((header.lower().encode(), _text(rest.pop(name), name).encode()))
    body = b""
    if tool.body:
        body = orjson.dumps(rest)
        headers.append((b"content-type", b"application/json"))
    elif rest:
        raise BadArguments([f"{name} Extra inputs are not permitted" for name in sorted(rest)])
    return path, urlencode(query), headers, body


def _access_logged(app: Quart) -> AccessLog:
    """``app`` answering a request whose body is at hand, its line written to the access log."""
    logged = app.extensions.get(ACCESS_LOGGED)
    if logged is None:

        async def answer(scope: Any, receive: Any, send: Any) -> None:
            """The request answered as quart's ASGI connection answers it (the request made
            from the scope, ``handle_request``, the response sent), in the calling task: the
            body comes whole in one message, and no disconnect is to be watched for."""
            request = app.request_class(
                scope["method"],
                scope["scheme"],
                scope["path"],
                scope["query_string"],
                Headers(
                    [
                        # As quart's connection makes a request: its address first, which is
                        # what ``request.remote_addr`` reads.
                        ("Remote-Addr", (scope.get("client") or ["<local>"])[0]),
                        *((k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]),
                    ]
                ),
                scope["root_path"],
                scope["http_version"],
                max_content_length=app.config["MAX_CONTENT_LENGTH"],
                body_timeout=app.config["BODY_TIMEOUT"],
                send_push_promise=_no_push,
                scope=scope,
            )
            request.body.append((await receive())["body"])
            request.body.set_complete()
            response = await app.handle_request(request)
            data: bytes = await response.get_data(as_text=False)  # type: ignore[misc]
            await send(
                {
                    "type": "http.response.start",
                    "status": response.status_code,
                    "headers": [
                        (b"content-length", str(len(data)).encode()),
                        *(
                            (name.lower().encode("latin-1"), value.encode("latin-1"))
                            for name, value in response.headers.items()
                            if name.lower() != "content-length"
                        ),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": data, "more_body": False})

        logged = app.extensions[ACCESS_LOGGED] = AccessLog(answer)
    return logged


async def call_data_api(
    app: Quart,
    tool: DataTool,
    arguments: Mapping[str, Any],
    grant: auth.AccessGrant | None,
    outer: Mapping[str, Any],
    *,
    in_place: tuple[Sequence[tuple[bytes, bytes]], tuple[str, str, str]] | None = None,
) -> Answer:
    """Make ``tool``'s data API call with ``arguments`` for ``grant``, as the request whose
    ASGI scope is ``outer`` (its address, scheme and host) would. Without a grant, the call is
    ``in_place``: it carries the given headers of that request (its token and proof), and is
    authenticated and counted as made in the place of the given method, path and blueprint."""
    try:
        path, query, headers, body = _request_parts(tool, arguments)
    except BadArguments as bad:
        return Answer(400, orjson.dumps(envelope(400, bad.messages)), made=False)
    if in_place is None:
        carried: Sequence[tuple[bytes, bytes]] = [
            (name, value) for name, value in outer.get("headers", ()) if name == b"host"
        ]
    else:
        carried = in_place[0]
    scope: MutableMapping[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": tool.method,
        "scheme": outer.get("scheme", "http"),
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": outer.get("root_path", ""),
        "headers": [*carried, *headers, (b"content-length", str(len(body)).encode())],
        "client": outer.get("client"),
        "server": outer.get("server"),
        "extensions": {},
    }
    if grant is not None:
        scope[CALLER_GRANT] = grant
    if in_place is not None:
        scope[PRESENTED_AS] = in_place[1]
    status = 500
    chunks: list[bytes] = []
    answered: list[tuple[bytes, bytes]] = []

    async def send(message: MutableMapping[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
            answered.extend(message["headers"])
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    # An application context of its own: the call's ``g`` (its timer, its headers) is not the
    # /mcp request's, which the request context would otherwise share.
    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async with app.app_context():
        await _access_logged(app)(scope, receive, send)  # type: ignore[arg-type]
    return Answer(status, b"".join(chunks), answered)
