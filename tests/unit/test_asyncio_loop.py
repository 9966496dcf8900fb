"""The process's asyncio loop (``storage.open_asyncio_loop``) runs ready callbacks together, in
asyncio's order, a bounded number per turn of trio's scheduler."""

from __future__ import annotations

import asyncio

import trio
import trio.lowlevel
import trio_asyncio

from ledgerport.storage import COMPACT_AFTER, READY_PER_TURN, open_asyncio_loop

CALLBACKS = 200


async def _runs_of_callbacks(loop: trio_asyncio.TrioEventLoop) -> list[int]:
    """Schedule CALLBACKS ready callbacks at once, next to a trio task that marks each of its
    turns; answers the lengths of the runs of callbacks between two marks."""
    events: list[int | None] = []

    async def mark_turns() -> None:
        while True:
            events.append(None)
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(mark_turns)
        await trio.lowlevel.checkpoint()
        done = trio.Event()
        for i in range(CALLBACKS):
            loop.call_soon(events.append, i)
        loop.call_soon(done.set)
        await done.wait()
        nursery.cancel_scope.cancel()
    assert [i for i in events if i is not None] == list(range(CALLBACKS)), "asyncio's order"
    runs, run = [], 0
    for event in events:
        if event is None:
            runs.append(run)
            run = 0
        else:
            run += 1
    return [n for n in [*runs, run] if n]


async def test_ready_callbacks_run_together_a_bounded_number_per_turn() -> None:
    async with open_asyncio_loop() as loop:
        runs = await _runs_of_callbacks(loop)
    # trio_asyncio's own pace is one callback a turn of the loop's task. Together, a turn runs
    # up to READY_PER_TURN + 1; trio may order two turns of the loop's task back to back
    # (its batches run in no fixed order), never three.
    assert max(runs) > READY_PER_TURN
    assert max(runs) <= 2 * (READY_PER_TURN + 1)


async def test_timers_and_tasks_keep_their_meaning() -> None:
    """Timers fire in their order, not before they are due; tasks and futures run to the end."""
    async with open_asyncio_loop() as loop:
        order: list[str] = []
        all_fired = trio.Event()

        def fire(name: str) -> None:
            order.append(name)
            if len(order) == 3:
                all_fired.set()

        started = loop.time()
        for name, delay in (("late", 0.03), ("early", 0.01), ("middle", 0.02)):
            loop.call_later(delay, fire, name)

        async def chain() -> int:
            total = 0
            for step in range(50):
                await asyncio.sleep(0)
                total += step
            return total

        total = await trio_asyncio.aio_as_trio(chain)()
        with trio.fail_after(5):
            await all_fired.wait()
        assert order == ["early", "middle", "late"]
        assert loop.time() - started >= 0.03
        assert total == sum(range(50))


async def test_cancelled_timers_leave_the_heap_before_their_deadline() -> None:
    """A timer per call, cancelled when the call ends (a query's timeout), must not stay alive
    with its context until its deadline: the heap is rebuilt once half of it is cancelled."""
    async with open_asyncio_loop() as loop:
        calls = 20 * COMPACT_AFTER
        kept = [loop.call_later(3600, lambda: None) for _ in range(COMPACT_AFTER // 2)]
        for _ in range(calls):
            loop.call_later(30, lambda: None).cancel()
            await trio.lowlevel.checkpoint()  # the loop's task takes the timer into its heap
        fired = trio.Event()
        loop.call_soon(fired.set)
        with trio.fail_after(5):
            await fired.wait()
        waiting = loop._timers  # type: ignore[attr-defined]
        assert len(waiting) < len(kept) + 2 * COMPACT_AFTER, len(waiting)
        assert all(timer in waiting for timer in kept), "a live timer was dropped"
        for timer in kept:
            timer.cancel()
