"""The delivery engine's recorder (``engine/_recorder.py``) with a store that fails: outcomes wait
in the book until a transaction writes them, a failed write puts them back first, attempts past
UNRECORDED_MAX unwritten outcomes wait for a write, the claimer is woken by what a write frees,
and settling waits for nothing held and nothing unwritten. Time is trio's mock clock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import trio
import trio.testing

from ledgerport import queues
from ledgerport.clock import FrozenClock
from ledgerport.engine import UNRECORDED_MAX, DeliveryBook, DeliveryState, Recorder
from ledgerport.ops import Metrics
from ledgerport.storage import StorageError

NOW = FrozenClock().now()


class FailingStore:
    @asynccontextmanager
    async def transaction(self, *, background: bool = False) -> AsyncIterator[None]:
        raise StorageError("the store is away")
        yield  # pragma: no cover


@dataclass
class World:
    book: DeliveryBook[Any, queues.AttemptOutcome]
    recorder: Recorder
    state: DeliveryState
    metrics: Metrics


def _world() -> World:
    metrics = Metrics()
    platform = SimpleNamespace(store=FailingStore(), now=FrozenClock().now, metrics=metrics)
    state = DeliveryState(platform, "node_1", 30.0, 5.0)
    book: DeliveryBook[Any, queues.AttemptOutcome] = DeliveryBook(
        total=100, per_developer=100, per_webhook=100
    )
    book.note_developers([("app_1", "dev")])
    return World(book, Recorder(platform, book, state.claim_wake), state, metrics)


def _delivery(n: int) -> queues.ClaimedDelivery:
    return queues.ClaimedDelivery(
        f"dlv_{n}", "wh_1", "app_1", f"evt_{n}", None, "invoice.created", b"{}", 0, "node_1", 0.0
    )


def _outcome(
    n: int, next_attempt_at: float | None = None, *, ordered: bool = False
) -> queues.AttemptOutcome:
    return queues.AttemptOutcome(
        delivery_id=f"dlv_{n}",
        lease="node_1",
        status="retrying" if next_attempt_at else "delivered",
        attempts=1,
        response_code=200,
        error=None,
        finished_at=NOW,
        next_attempt_at=next_attempt_at,
        first_attempt_at=NOW,
        ordered=ordered,
    )


def test_an_outcome_added_is_counted_and_waits_in_the_book() -> None:
    world = _world()

    world.recorder.add(_delivery(0), _outcome(0))

    assert world.book.outcomes_waiting == 1
    counted = world.metrics.registry.get_sample_value(
        "ledgerport_webhook_deliveries_total",
        {"outcome": "delivered", "type": "invoice.created"},
    )
    assert counted == 1


async def test_a_failed_write_puts_its_batch_back_first_in_its_order() -> None:
    world = _world()
    for n in range(3):
        world.recorder.add(_delivery(n), _outcome(n))

    assert not await world.recorder.write_some()  # the store failed
    batch = world.book.take_outcomes(2)  # a fan-out's transaction takes two along
    world.recorder.add(_delivery(3), _outcome(3))  # an attempt ends meanwhile
    world.recorder.not_written(batch)  # and the transaction fails

    assert world.book.unwritten == 4
    waiting = [o.delivery_id for *_, o in world.book.take_outcomes(10)]
    assert waiting == ["dlv_0", "dlv_1", "dlv_2", "dlv_3"]


async def test_attempts_wait_while_too_many_outcomes_are_unwritten() -> None:
    world = _world()
    for n in range(UNRECORDED_MAX):
        world.recorder.add(_delivery(n), _outcome(n))
    caught_up = trio.Event()

    async def attempt() -> None:
        await world.recorder.caught_up()
        caught_up.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(attempt)
        await trio.testing.wait_all_tasks_blocked()
        assert not caught_up.is_set()

        batch = world.book.take_outcomes(1)  # a transaction takes one along...
        world.recorder.not_written(batch)  # ... and fails
        await trio.testing.wait_all_tasks_blocked()
        assert not caught_up.is_set()

        world.recorder.written(world.book.take_outcomes(1))
        await trio.testing.wait_all_tasks_blocked()
        assert caught_up.is_set()


async def _woken(wakeup: Any) -> bool:
    """Whether ``wakeup`` was set (it returns before its time)."""
    start = trio.current_time()
    await wakeup.wait(10)
    return trio.current_time() - start < 10


async def test_a_write_wakes_the_claimer_for_a_delivery_it_made_due_only(
    autojump_clock: trio.abc.Clock,
) -> None:
    world = _world()
    world.recorder.add(_delivery(0), _outcome(0))
    world.recorder.written(world.book.take_outcomes(10))
    assert not await _woken(world.state.claim_wake)

    world.recorder.add(_delivery(1), _outcome(1, next_attempt_at=NOW + 60))
    world.recorder.written(world.book.take_outcomes(10))
    assert await _woken(world.state.claim_wake)

    # A delivery ordered by record that ended made the next one about its record due at once.
    world.recorder.add(_delivery(2), _outcome(2, ordered=True))
    world.recorder.written(world.book.take_outcomes(10))
    assert await _woken(world.state.claim_wake)


async def test_settling_waits_for_nothing_held_and_nothing_unwritten() -> None:
    world = _world()
    assert world.book.take("app_1", "", "wh_1") is None
    settled = trio.Event()

    async def settle() -> None:
        await world.recorder.settle()
        settled.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(settle)
        world.book.let_go("app_1", "", "wh_1")
        world.recorder.add(_delivery(0), _outcome(0))
        world.recorder.check_settled()
        await trio.testing.wait_all_tasks_blocked()
        assert not settled.is_set()  # its outcome is not written yet

        world.recorder.written(world.book.take_outcomes(10))
        await trio.testing.wait_all_tasks_blocked()
        assert settled.is_set()
