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


MANAGEMENT = "ledgerport.management"
"""The scope key marking a request that came in on the management listener."""
MANAGEMENT_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
"""What the management listener answers (LEDGERPORT_MANAGEMENT_BIND), and the main one then not."""


class ManagementListener(HttpWrapper):
    """The application as the management listener serves it: each request marked as arrived
    there (the application answers only MANAGEMENT_PATHS on it, and those only on it)."""

    async def http(
        self, scope: HTTPScope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> None:
        marked = dict(scope)
        marked[MANAGEMENT] = True
        await self._app(marked, receive, send)  # type: ignore[arg-type]
