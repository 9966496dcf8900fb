"""The process's asyncio loop, run inside trio by trio_asyncio, for asyncpg and redis-py.

trio_asyncio 0.16 runs each asyncio callback in its own turn of a trio task: a cancel scope and
a checkpoint per callback, where asyncio's own loop runs every ready callback in one pass. One
query takes several callbacks (the task's steps, the socket's data, the future's wake-ups), so
most of a PostgreSQL call's CPU went to that machinery (60% of a profile of single statements).
:func:`open_asyncio_loop` lets the loop run what is ready the way asyncio does: after each
callback it waited for, it runs up to ``READY_PER_TURN`` more that are ready (queued, or timers
due), then goes back to waiting. Nothing else changes: the same callbacks, in the same order.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio_asyncio
from trio_asyncio import _base

READY_PER_TURN = 64
"""Ready callbacks run after a waited one before trio's other tasks get a turn."""

_one_callback = _base.BaseTrioEventLoop._main_loop_one


async def _ready_callbacks(self: Any, no_wait: bool = False) -> None:
    await _one_callback(self, no_wait)
    if no_wait:
        return
    for _ in range(READY_PER_TURN):
        try:
            await _one_callback(self, True)  # runs one that is ready, or raises WouldBlock
        except trio.WouldBlock:
            return


def _run_ready_callbacks_together() -> None:
    _base.BaseTrioEventLoop._main_loop_one = _ready_callbacks


@asynccontextmanager
async def open_asyncio_loop() -> AsyncIterator[Any]:
    """``trio_asyncio.open_loop()``, its ready callbacks run together (see the module)."""
    _run_ready_callbacks_together()
    async with trio_asyncio.open_loop() as loop:
        yield loop
