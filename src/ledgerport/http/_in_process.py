"""The data API called from inside the process: how a hosted function's ``context.api`` reaches
it. The call goes through the whole application (routing, the token's gates, versions, rate
limits, the error envelope) over ASGI, without a socket.

Only the data API: a path reaches the application when the application's URL map routes it to
an endpoint of the data API blueprint (``http/api/``), so a data API route added later is
reachable with no list to keep, and nothing else is (``/metrics``, the operator, developer and
OAuth endpoints, the pages, the document). Anything else is answered here, 404 in the envelope,
as a route that does not exist; the application never sees it. The path is matched as it will
be sent, after the client has normalized it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, MutableMapping
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import httpx
from quart import Quart
from werkzeug.exceptions import HTTPException, MethodNotAllowed
from werkzeug.routing import MapAdapter, RoutingException

from ledgerport.runtime import ApiAnswer, ApiCall, DataApi

from ._context import FROM_A_RUN
from ._envelopes import envelope
from .api import blueprint as api_blueprint

IN_PROCESS_CLIENT = ("127.0.0.1", 0)
"""The address a run's calls come from as the ASGI scope says it. No per-IP budget counts
them: the scope is marked (``FROM_A_RUN``), and a run's calls count against its app's budgets
only."""
TIMEOUT = 30.0


@asynccontextmanager
async def in_process_api(app: Quart, base_url: str) -> AsyncIterator[DataApi]:
    """``(token, call) -> answer`` over ``app``'s data API, for the lifetime of the context."""

    async def marked(scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        await app({**scope, FROM_A_RUN: True}, receive, send)  # type: ignore[arg-type]

    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=marked, client=IN_PROCESS_CLIENT),
        base_url=base_url,
        timeout=TIMEOUT,
    ) as client:
        yield _caller(client, app, urlsplit(base_url).netloc)


def _routes_to_data_api(adapter: MapAdapter, path: str, method: str) -> bool:
    """Whether ``method path`` is routed to an endpoint of the data API blueprint. A path of the
    data API asked with a method it lacks is still the data API's (which answers the 405)."""
    try:
        endpoint, _ = adapter.match(path, method=method)
    except MethodNotAllowed as wrong:
        return any(
            _routes_to_data_api(adapter, path, allowed)
            for allowed in wrong.valid_methods or ()
            if allowed != method
        )
    except (HTTPException, RoutingException):
        return False  # no route, or a redirect to another path
    return str(endpoint).rpartition(".")[0] == api_blueprint.name


def _seconds(value: str | None) -> float | None:
    """A Retry-After of whole seconds (what the data API sends), else None."""
    return float(value) if value is not None and value.isdigit() else None


def _policy_name(value: str | None) -> str | None:
    """The name a RateLimit-Policy header gives its budget (``"name";q=..;w=..``), else None."""
    if value is None or not value.startswith('"'):
        return None
    name, quote, _ = value[1:].partition('"')
    return name if quote else None


def _caller(client: httpx.AsyncClient, app: Quart, host: str) -> DataApi:
    async def call(token: str, api_call: ApiCall) -> ApiAnswer:
        path = api_call.path
        if not path.startswith("/") or path.startswith("//"):
            return ApiAnswer(400, {"statusCode": 400, "message": "the path must start with one /"})
        headers = {"Authorization": f"Bearer {token}"}
        if api_call.body is not None:
            headers["Content-Type"] = "application/json"
        request = client.build_request(
            api_call.method, path, content=api_call.body, headers=headers
        )
        adapter = app.url_map.bind(host)
        if not _routes_to_data_api(adapter, request.url.path, request.method):
            params = (request.method, request.url.path)
            return ApiAnswer(404, envelope(404, f"Cannot {params[0]} {params[1]}", params=params))
        response = await client.send(request)
        try:
            answer = response.json() if response.content else None
        except json.JSONDecodeError:
            answer = response.text
        return ApiAnswer(
            response.status_code,
            answer,
            _seconds(response.headers.get("Retry-After")),
            _policy_name(response.headers.get("RateLimit-Policy")),
        )

    return call
