"""Counting HTTP requests between the server and the application, for a prompt shutdown drain.

Hypercorn's graceful shutdown stops intake and waits for open connections; a connection whose
response was sent during the drain can stay open until the grace deadline (its close runs inside
the request's cancelled scope). The supervisor therefore waits for the requests instead: once
none is inside the application, every response has been handed to the socket and the process
can end without waiting out the grace period.
"""

from __future__ import annotations

import trio
from hypercorn.typing import ASGIFramework, ASGIReceiveCallable, ASGISendCallable, HTTPScope

from ._asgi import HttpWrapper


class RequestTracker(HttpWrapper):
    """An ASGI wrapper that knows how many HTTP requests the application is answering."""

    def __init__(self, app: ASGIFramework) -> None:
        super().__init__(app)
        self._active = 0
        self._idle = trio.Event()
        self._idle.set()

    @property
    def active(self) -> int:
        return self._active

    async def http(
        self, scope: HTTPScope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> None:
        self._active += 1
        if self._active == 1:
            self._idle = trio.Event()
        try:
            await self._app(scope, receive, send)
        finally:
            self._active -= 1
            if self._active == 0:
                self._idle.set()

    async def wait_idle(self) -> None:
        """Return once no request is being answered (at once when none is)."""
        while self._active:
            await self._idle.wait()
