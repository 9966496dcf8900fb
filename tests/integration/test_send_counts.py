"""An endpoint's rate limit counted in the store (``queues.take_sends``, contract.md, third
round: ``rateLimit``), on both stores: the units of a second are granted up to the limit and
no further, however they are asked for; a later second starts anew and the rows of the seconds
passed go; and a take never fails when another process passes the second in the middle of it
(PostgreSQL, where two processes write at once)."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, cast

import pytest
import trio

from ledgerport import queues
from ledgerport.storage import StorageError, Store, Transaction

TIMEOUT = 30
WEBHOOK = "wh_counted"
SECOND = 1_790_000_000
LIMIT = 5


async def _take(store: Store, want: int, second: int = SECOND) -> int:
    async with store.transaction() as tx:
        return await queues.take_sends(
            tx, webhook_id=WEBHOOK, second=second, want=want, limit=LIMIT
        )


async def _rows(store: Store) -> list[tuple[int, int]]:
    async with store.transaction() as tx:
        rows = await tx.fetch(
            "SELECT second, started FROM webhook_send_counts WHERE webhook_id = $1 ORDER BY second",
            WEBHOOK,
        )
    return [(row["second"], row["started"]) for row in rows]


@pytest.mark.parametrize(
    ("wants", "granted"),
    [
        ([1], [1]),
        ([LIMIT], [LIMIT]),
        ([LIMIT + 3], [LIMIT]),
        ([2, 2, 2], [2, 2, 1]),
        ([LIMIT, 1], [LIMIT, 0]),
        ([0, 3], [0, 3]),
        ([-1, 1], [0, 1]),
    ],
)
async def test_a_seconds_units_are_granted_up_to_the_limit(
    store: Store, wants: list[int], granted: list[int]
) -> None:
    with trio.fail_after(TIMEOUT):
        answers = [await _take(store, want) for want in wants]
        rows = await _rows(store)
    assert answers == granted
    assert rows == [(SECOND, sum(granted))]


async def test_a_later_second_starts_anew_and_the_passed_ones_go(store: Store) -> None:
    with trio.fail_after(TIMEOUT):
        first = await _take(store, LIMIT)
        refused = await _take(store, 1)
        later = await _take(store, 2, SECOND + 1)
        rows = await _rows(store)
    assert (first, refused, later) == (LIMIT, 0, 2)
    assert rows == [(SECOND + 1, 2)]


class _Between:
    """A transaction that runs ``between`` after its statement number ``after`` (from 1)."""

    def __init__(
        self, inner: Transaction, after: int, between: Callable[[], Awaitable[None]]
    ) -> None:
        self._inner = inner
        self._after = after
        self._between = between
        self._statements = 0

    async def _then(self, answer: Any) -> Any:
        self._statements += 1
        if self._statements == self._after:
            await self._between()
        return answer

    async def execute(self, sql: str, *args: Any) -> Any:
        return await self._then(await self._inner.execute(sql, *args))

    async def fetchval(self, sql: str, *args: Any) -> Any:
        return await self._then(await self._inner.fetchval(sql, *args))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@pytest.mark.postgres
@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
@pytest.mark.parametrize("after", [1, 2, 3])
async def test_a_take_never_fails_when_another_process_passes_the_second_meanwhile(
    store: Store, after: int
) -> None:
    """Another process, a second later, deletes the rows of the seconds before its own after
    the take's statement number ``after`` (or finds the row locked, and gives up after
    0.2 s): the take answers, and grants no more than the limit. Made, then read and locked
    apart, the second's row could be gone when it was read (a TypeError that ended the
    delivery engine)."""

    async def another_process_passes_the_second() -> None:
        with contextlib.suppress(StorageError):  # the row is locked by the take
            async with store.transaction() as other:
                await other.execute("SET LOCAL lock_timeout = '200ms'")
                await other.execute(
                    "DELETE FROM webhook_send_counts WHERE webhook_id = $1 AND second < $2",
                    WEBHOOK,
                    SECOND + 1,
                )

    with trio.fail_after(TIMEOUT):
        assert await _take(store, 2) == 2  # the second's row is there
        async with store.transaction() as tx:
            granted = await queues.take_sends(
                cast(Transaction, _Between(tx, after, another_process_passes_the_second)),
                webhook_id=WEBHOOK,
                second=SECOND,
                want=LIMIT,
                limit=LIMIT,
            )
    assert 0 <= granted <= LIMIT
