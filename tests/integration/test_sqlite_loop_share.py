"""How the SQLite store's statements share the event loop (``SqliteStore._checkpoint``).

Statements run on the event loop. Each one is a cancellation point, but the loop's other tasks
run between two of them only once the store has run statements for ``LOOP_SHARE`` since their
last turn: a turn of the loop for each statement cost more than the statement. These tests hold
the three sides of that: a cancelled task stops at its next statement, a long loop of statements
still lets every other task run, and statements in a row do not each give the loop a turn.
"""

from __future__ import annotations

import time
from pathlib import Path

import trio
import trio.lowlevel

from ledgerport.storage import open_sqlite

TIMEOUT = 30
LOOP_SHARE = 0.001  # storage._sqlite.LOOP_SHARE


class _Steps(trio.abc.Instrument):
    """How many times ``task`` gave the loop a turn."""

    def __init__(self, task: trio.lowlevel.Task) -> None:
        self.task = task
        self.steps = 0

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        if task is self.task:
            self.steps += 1


async def test_a_cancelled_task_stops_at_its_next_statement(tmp_path: Path) -> None:
    async with open_sqlite(str(tmp_path / "share.db")) as store:
        async with store.transaction() as tx:
            await tx.execute("CREATE TABLE t (n INTEGER)")
        went_on = False
        with trio.CancelScope() as scope:
            async with store.transaction() as tx:
                await tx.execute("INSERT INTO t (n) VALUES (1)")
                scope.cancel()
                await tx.execute("INSERT INTO t (n) VALUES (2)")
                went_on = True
        assert scope.cancelled_caught
        assert not went_on
        async with store.transaction() as tx:
            assert await tx.fetchval("SELECT count(*) FROM t") == 0


async def test_a_long_loop_of_statements_lets_the_other_tasks_run(tmp_path: Path) -> None:
    """A transaction running statements for 100 ms without a wait of its own: a task beside it
    runs about every LOOP_SHARE (at least a tenth as often, on a loaded machine)."""
    ticks = 0

    async def ticker(stop: trio.Event) -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await trio.lowlevel.checkpoint()

    async with open_sqlite(str(tmp_path / "share.db")) as store:
        async with store.transaction() as tx:
            await tx.execute("CREATE TABLE t (n INTEGER)")
        stop = trio.Event()
        with trio.fail_after(TIMEOUT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(ticker, stop)
                await trio.lowlevel.checkpoint()  # the ticker is running
                started = ticks
                began = time.perf_counter()
                async with store.transaction() as tx:
                    for n in range(200_000):
                        await tx.execute("INSERT INTO t (n) VALUES ($1)", n)
                        if time.perf_counter() - began > 0.1:
                            break
                took = time.perf_counter() - began
                stop.set()
        assert ticks - started >= took / LOOP_SHARE / 10, (ticks - started, took)


async def test_statements_in_a_row_do_not_each_give_the_loop_a_turn(tmp_path: Path) -> None:
    async with open_sqlite(str(tmp_path / "share.db")) as store:
        async with store.transaction() as tx:
            await tx.execute("CREATE TABLE t (n INTEGER)")
        await trio.lowlevel.checkpoint()
        steps = _Steps(trio.lowlevel.current_task())
        trio.lowlevel.add_instrument(steps)
        try:
            async with store.transaction() as tx:
                for n in range(20):
                    await tx.execute("INSERT INTO t (n) VALUES ($1)", n)
                    await tx.fetchval("SELECT count(*) FROM t")
        finally:
            trio.lowlevel.remove_instrument(steps)
        # 40 statements and the commit take a millisecond or two; a loaded machine that stops
        # this process now and then adds a turn a millisecond. Half of one a statement at most
        # (a turn for each was 47 here).
        assert steps.steps <= 20, steps.steps
