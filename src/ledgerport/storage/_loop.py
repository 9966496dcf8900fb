"""The process's asyncio loop, run inside trio by trio_asyncio, for asyncpg and redis-py.

trio_asyncio 0.16 runs each asyncio callback in its own turn of a trio task: a cancel scope and
a checkpoint per callback, where asyncio's own loop runs every ready callback in one pass. One
query takes several callbacks (the task's steps, the socket's data, the future's wake-ups), so
most of a PostgreSQL call's CPU went to that machinery (60% of a profile of single statements).
:func:`open_asyncio_loop` lets the loop run what is ready the way asyncio does: after each
callback it waited for, it runs up to ``READY_PER_TURN`` more that are ready (queued, or timers
due), then goes back to waiting. Nothing else changes: the same callbacks, in the same order.

trio_asyncio also keeps every cancelled timer in its heap until the timer's deadline: a library
that starts a timer per call and cancels it when the call ends (a 30-second timeout around each
query, say) leaves tens of thousands of dead timers, with the contexts they were started in,
alive at once under load. The loop now drops them the way asyncio's own does: once more than
half of at least ``COMPACT_AFTER`` timers are cancelled, the heap is rebuilt without them.

Both replace private parts of trio_asyncio: tests/unit/test_dependency_contracts.py pins what they
rely on, pyproject.toml bounds the release, and docs/upstream/trio-asyncio.md is the report to its
maintainers that would let us drop them.
"""

from __future__ import annotations

import heapq
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio_asyncio
from trio_asyncio import _base

READY_PER_TURN = 64
"""Ready callbacks run after a waited one before trio's other tasks get a turn."""
COMPACT_AFTER = 100
"""Timers in the heap before cancelled ones are dropped from it (asyncio's own threshold)."""

_one_callback = _base.BaseTrioEventLoop._main_loop_one


def _timer_cancelled(self: Any, handle: Any) -> None:
    """Count a timer's cancellation (asyncio's loop counts only the timers it scheduled)."""
    self._ledgerport_cancelled_timers = getattr(self, "_ledgerport_cancelled_timers", 0) + 1


def _drop_cancelled_timers(self: Any) -> None:
    timers = self._timers
    cancelled = getattr(self, "_ledgerport_cancelled_timers", 0)
    if len(timers) < COMPACT_AFTER or 2 * cancelled < len(timers):
        return
    live = [timer for timer in timers if not timer._cancelled]
    heapq.heapify(live)
    timers[:] = live
    self._ledgerport_cancelled_timers = 0


async def _ready_callbacks(self: Any, no_wait: bool = False) -> None:
    _drop_cancelled_timers(self)
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
    _base.BaseTrioEventLoop._timer_handle_cancelled = _timer_cancelled


@asynccontextmanager
async def open_asyncio_loop() -> AsyncIterator[Any]:
    """``trio_asyncio.open_loop()``, its ready callbacks run together and its cancelled timers
    dropped (see the module)."""
    _run_ready_callbacks_together()
    async with trio_asyncio.open_loop() as loop:
        yield loop
