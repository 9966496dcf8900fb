"""RequestTracker: the supervisor's view of requests inside the application."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from ledgerport.server import RequestTracker


class _GatedApp:
    """An ASGI app whose HTTP requests wait until ``release`` is set."""

    def __init__(self) -> None:
        self.release = trio.Event()
        self.entered = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.entered += 1
        if scope["type"] == "http":
            await self.release.wait()


async def _noop(*args: Any) -> Any:
    return None


async def test_idle_at_once_without_requests() -> None:
    tracker = RequestTracker(_GatedApp())

    with trio.fail_after(1):
        await tracker.wait_idle()

    assert tracker.active == 0


async def test_waits_for_requests_inside_the_app() -> None:
    app = _GatedApp()
    tracker = RequestTracker(app)
    idle_seen = trio.Event()

    async def watch() -> None:
        await tracker.wait_idle()
        idle_seen.set()

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            for _ in range(2):
                nursery.start_soon(tracker, {"type": "http"}, _noop, _noop)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(watch)
            await trio.testing.wait_all_tasks_blocked()
            assert tracker.active == 2
            assert not idle_seen.is_set()
            app.release.set()
        await idle_seen.wait()

    assert tracker.active == 0


async def test_lifespan_is_not_a_request() -> None:
    app = _GatedApp()
    tracker = RequestTracker(app)

    with trio.fail_after(1):
        await tracker({"type": "lifespan"}, _noop, _noop)
        await tracker.wait_idle()

    assert app.entered == 1


async def test_a_failing_request_still_leaves() -> None:
    async def failing(scope: Any, receive: Any, send: Any) -> None:
        raise RuntimeError("boom")

    tracker = RequestTracker(failing)

    with trio.fail_after(1):
        try:
            await tracker({"type": "http"}, _noop, _noop)
        except RuntimeError:
            pass
        await tracker.wait_idle()

    assert tracker.active == 0
