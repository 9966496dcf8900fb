"""The data API called from inside the process: how a hosted function's ``context.api`` reaches
it. The call goes through the whole application (routing, the token's gates, versions, rate
limits, the error envelope) over ASGI, without a socket."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx

IN_PROCESS_CLIENT = ("127.0.0.1", 0)
"""The address a run's calls come from, as the rate limits see it."""
TIMEOUT = 30.0

ApiCaller = Callable[[str, str, str, str | None], Awaitable[tuple[int, Any]]]


@asynccontextmanager
async def in_process_api(app: Any, base_url: str) -> AsyncIterator[ApiCaller]:
    """``(token, method, path, body JSON or None) -> (status, body)`` over ``app``, for the
    lifetime of the context."""
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app, client=IN_PROCESS_CLIENT),
        base_url=base_url,
        timeout=TIMEOUT,
    ) as client:
        yield _caller(client)


def _caller(client: httpx.AsyncClient) -> ApiCaller:

    async def call(token: str, method: str, path: str, body: str | None) -> tuple[int, Any]:
        if not path.startswith("/") or path.startswith("//"):
            return 400, {"statusCode": 400, "message": "the path must start with one /"}
        headers = {"Authorization": f"Bearer {token}"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        response = await client.request(method, path, content=body, headers=headers)
        try:
            answer = response.json() if response.content else None
        except json.JSONDecodeError:
            answer = response.text
        return response.status_code, answer

    return call
