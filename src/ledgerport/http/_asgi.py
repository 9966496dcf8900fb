"""The shape of the ASGI wrappers between hypercorn and the application."""

from __future__ import annotations

from hypercorn.typing import (
    ASGIFramework,
    ASGIReceiveCallable,
    ASGISendCallable,
    HTTPScope,
    Scope,
)


class HttpWrapper:
    """Wraps an ASGI application: HTTP requests go through :meth:`http`, everything else
    (the lifespan) straight to the application."""

    def __init__(self, app: ASGIFramework) -> None:
        self._app = app

    async def __call__(
        self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        await self.http(scope, receive, send)

    async def http(
        self, scope: HTTPScope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> None:
        """Answer one HTTP request through the application."""
        raise NotImplementedError
