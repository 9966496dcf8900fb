"""The shape of the ASGI wrappers between hypercorn and the application, what a wrapper's
``receive`` offers beyond ASGI's (:func:`arrived`), and a ``receive`` that gives back messages
already taken (:func:`replaying`)."""

from __future__ import annotations

from collections.abc import Sequence

import trio
from hypercorn.typing import (
    ASGIFramework,
    ASGIReceiveCallable,
    ASGIReceiveEvent,
    ASGISendCallable,
    HTTPScope,
    Scope,
)


def arrived(receive: ASGIReceiveCallable) -> ASGIReceiveEvent | None:
    """The request's next message when it has already arrived, taken from ``receive`` without
    waiting, else None (none has, or ``receive`` cannot tell). ``receive`` is hypercorn's (a
    trio memory channel's ``receive``; tests/unit/test_dependency_contracts.py pins it) or a
    wrapper's that offers the same as its ``arrived`` attribute; any other tells nothing. A
    message taken so is the caller's, to handle as if ``receive`` had answered it."""
    own = getattr(receive, "arrived", None)
    if own is not None:
        return own()  # type: ignore[no-any-return]
    channel = getattr(receive, "__self__", None)
    if not isinstance(channel, trio.MemoryReceiveChannel):
        return None
    try:
        return channel.receive_nowait()  # type: ignore[no-any-return]
    except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
        # Nothing yet, or the end: ``receive`` answers those itself when awaited.
        return None


def replaying(
    taken: Sequence[ASGIReceiveEvent], receive: ASGIReceiveCallable
) -> ASGIReceiveCallable:
    """A ``receive`` answering the messages ``taken`` from ``receive`` first, in order, then
    ``receive``'s own: for whoever reads the request after a look at its first messages."""
    pending = list(reversed(taken))

    async def replay() -> ASGIReceiveEvent:
        if pending:
            return pending.pop()
        return await receive()

    return replay


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
