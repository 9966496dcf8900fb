"""The delivery engine's actors (``engine/_actors.py``) with fakes for the store and the
transport: when an attempt starts (the webhook's and the developer's slots, the send-time check
standing or made again), what a refusal, a drain or an uncommitted fan-out make of a delivery,
and an idle actor's retirement. Time is trio's mock clock; nothing is sent."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
import trio
import trio.testing

from ledgerport import apps, catalog, queues
from ledgerport.clock import FrozenClock
from ledgerport.engine import (
    PLAN_FRESH,
    Actors,
    DeliveryBook,
    DeliveryState,
    Planned,
    Recorder,
    attempt_outcome,
    check_stands,
)
from ledgerport.ops import Metrics
from ledgerport.storage import StorageError

POLL = 5.0
PLAN = queues.SendPlan("https://hooks.example.com/in", ("whsec_k",), {})


class FakeStore:
    """On disk at once; a transaction fails (an actor opens one only to check again)."""

    def __init__(self) -> None:
        self.transactions = 0

    async def durable(self) -> None:
        pass

    @asynccontextmanager
    async def transaction(self, *, background: bool = False) -> AsyncIterator[None]:
        self.transactions += 1
        raise StorageError("the store is away")
        yield  # pragma: no cover


@dataclass
class FakeSend:
    """The transport: each attempt waits until the test ends it, then is delivered."""

    started: list[str] = field(default_factory=list)
    plans: dict[str, queues.SendPlan] = field(default_factory=dict)
    _ends: dict[str, trio.Event] = field(default_factory=dict)

    async def __call__(
        self,
        platform: Any,
        client: Callable[[], Any],
        plan: queues.SendPlan,
        delivery: queues.ClaimedDelivery,
        *,
        sending: trio.Semaphore,
        event_at: float | None,
    ) -> queues.AttemptOutcome:
        self.started.append(delivery.id)
        self.plans[delivery.id] = plan
        await self._ends.setdefault(delivery.id, trio.Event()).wait()
        made = queues.AttemptMade(platform.now(), 1.0, b"", False, {})
        return attempt_outcome(
            delivery, 200, None, made, now=platform.now(), delays=catalog.WEBHOOK_RETRY_DELAYS
        )

    def end(self, delivery_id: str) -> None:
        self._ends.setdefault(delivery_id, trio.Event()).set()


@dataclass
class World:
    state: DeliveryState
    book: DeliveryBook[Any, queues.AttemptOutcome]
    actors: Actors
    send: FakeSend
    store: FakeStore

    def hand_over(
        self,
        delivery: queues.ClaimedDelivery,
        plan: queues.SendPlan = PLAN,
        *,
        changes_since: int = 0,
    ) -> None:
        """As the dispatcher and the claimer do: room taken, then the delivery handed over with
        a check made now (``changes_since``: entitlement changes committed since it was made)."""
        business = delivery.business_id or ""
        assert self.book.take(delivery.app_id, business, delivery.webhook_id) is None
        planned = Planned(plan, trio.current_time(), self.state.generation - changes_since)
        self.actors.hand_over(delivery, planned, None)

    def outcomes(self) -> list[queues.AttemptOutcome]:
        """The outcomes waiting for the recorder (taken)."""
        return [outcome for *_, outcome in self.book.take_outcomes(100)]


@asynccontextmanager
async def actors(
    *, in_flight: int = 2, per_developer: int = 32, idle: float = 30.0
) -> AsyncIterator[World]:
    store = FakeStore()
    clock = FrozenClock()
    platform = SimpleNamespace(store=store, now=clock.now, metrics=Metrics(), keyring=None)
    state = DeliveryState(platform, "node_1", 30.0, POLL)
    book: DeliveryBook[Any, queues.AttemptOutcome] = DeliveryBook(
        total=100, per_developer=100, per_webhook=10
    )
    book.note_developers([("app_a", "dev"), ("app_b", "dev"), ("app_c", "app_c")])
    recorder = Recorder(platform, book, state.claim_wake)
    send = FakeSend()
    world = World(
        state,
        book,
        Actors(
            state,
            book,
            recorder,
            resolver=apps.resolve,
            in_flight=in_flight,
            in_flight_per_developer=per_developer,
            held_per_webhook=10,
            idle=idle,
            send=send,
        ),
        send,
        store,
    )
    async with trio.open_nursery() as nursery:
        world.actors.nursery = nursery
        yield world
        nursery.cancel_scope.cancel()


def _delivery(
    n: int, webhook: str = "wh_a", app: str = "app_a", attempts: int = 0
) -> queues.ClaimedDelivery:
    return queues.ClaimedDelivery(
        id=f"dlv_{n}",
        webhook_id=webhook,
        app_id=app,
        event_id=f"evt_{n}",
        business_id="biz_1",
        type="invoice.created",
        body=b"{}",
        attempts=attempts,
        lease="node_1",
        created_at=0.0,
    )


# --- the send-time check's freshness -----------------------------------------------------------

CHECKS = {
    # name: (made at, its generation, its previous secret stops signing at, stands)
    "just made": (100.0, 3, None, True),
    "PLAN_FRESH old": (100.0 - PLAN_FRESH, 3, None, True),
    "older than PLAN_FRESH": (99.0 - PLAN_FRESH, 3, None, False),
    "an entitlement change since": (100.0, 2, None, False),
    "the previous secret signs on": (100.0, 3, 1001.0, True),
    "the previous secret stopped signing": (100.0, 3, 1000.0, False),
}


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_a_check_stands_until_something_it_read_changed_or_it_is_too_old(name: str) -> None:
    at, generation, change_at, stands = CHECKS[name]
    plan = queues.SendPlan(PLAN.url, PLAN.secrets, {}, change_at)

    assert (
        check_stands(Planned(plan, at, generation), generation=3, at=100.0, now=lambda: 1000.0)
        is stands
    )


def test_no_check_does_not_stand() -> None:
    assert not check_stands(None, generation=0, at=0.0, now=lambda: 0.0)


# --- starting attempts -------------------------------------------------------------------------


async def test_a_webhook_has_at_most_in_flight_attempts_the_next_in_the_order_handed() -> None:
    async with actors(in_flight=2) as world:
        for n in range(4):
            world.hand_over(_delivery(n))
        await trio.testing.wait_all_tasks_blocked()
        assert sorted(world.send.started) == ["dlv_0", "dlv_1"]

        world.send.end("dlv_1")
        await trio.testing.wait_all_tasks_blocked()
        assert world.send.started[2:] == ["dlv_2"]

        for n in (0, 2, 3):
            world.send.end(f"dlv_{n}")
        await trio.testing.wait_all_tasks_blocked()
        assert world.send.started[2:] == ["dlv_2", "dlv_3"]
        assert [o.status for o in world.outcomes()] == ["delivered"] * 4
        assert world.book.held == 0
        assert world.store.transactions == 0  # every check made when handed over stood


async def test_an_attempt_sends_with_the_check_its_delivery_was_handed_over_with() -> None:
    async with actors() as world:
        world.hand_over(_delivery(0))
        await trio.testing.wait_all_tasks_blocked()
        plan = queues.SendPlan("https://other.example.com/in", ("whsec_2",), {})

        world.hand_over(_delivery(1), plan)
        await trio.testing.wait_all_tasks_blocked()

        assert world.send.started == ["dlv_0", "dlv_1"]
        assert world.send.plans["dlv_1"] is plan


async def test_a_developers_webhooks_share_its_attempts_in_flight() -> None:
    async with actors(per_developer=1) as world:
        world.hand_over(_delivery(0, webhook="wh_a", app="app_a"))
        world.hand_over(_delivery(1, webhook="wh_b", app="app_b"))  # the same developer
        world.hand_over(_delivery(2, webhook="wh_c", app="app_c"))  # its own
        await trio.testing.wait_all_tasks_blocked()
        started = world.send.started
        assert len(started) == 2
        assert "dlv_2" in started
        (first,) = set(started) & {"dlv_0", "dlv_1"}

        world.send.end(first)
        await trio.testing.wait_all_tasks_blocked()
        assert sorted(world.send.started) == ["dlv_0", "dlv_1", "dlv_2"]


async def test_a_refused_delivery_fails_unsent_and_lets_its_room_go() -> None:
    async with actors() as world:
        refused = queues.SendPlan(PLAN.url, PLAN.secrets, {"dlv_0": "webhook disabled"})

        world.hand_over(_delivery(0), refused)
        await trio.testing.wait_all_tasks_blocked()

        assert world.send.started == []
        assert world.book.held == 0
        (outcome,) = world.outcomes()
        assert (outcome.status, outcome.error, outcome.attempts) == (
            "failed",
            "not sent: webhook disabled",
            0,
        )
        assert outcome.next_attempt_at is None


@pytest.mark.parametrize(("attempts", "status"), [(0, "queued"), (2, "retrying")])
async def test_a_check_that_no_longer_stands_is_made_again_before_sending(
    attempts: int, status: str
) -> None:
    async with actors() as world:
        world.hand_over(_delivery(0, attempts=attempts))
        world.state.generation += 1  # an entitlement change was committed
        await trio.testing.wait_all_tasks_blocked()

        # Checked again in a transaction, which failed: given back for a poll, unsent.
        assert world.store.transactions == 1
        assert world.send.started == []
        (outcome,) = world.outcomes()
        assert (outcome.status, outcome.error, outcome.attempts) == (
            status,
            "storage unavailable",
            attempts,
        )
        assert outcome.next_attempt_at == FrozenClock().now() + POLL
        assert world.book.held == 0


async def test_a_started_actor_does_not_start_at_once_what_it_must_check_again() -> None:
    async with actors() as world:
        world.hand_over(_delivery(0))
        await trio.testing.wait_all_tasks_blocked()

        world.hand_over(_delivery(1), changes_since=1)
        await trio.testing.wait_all_tasks_blocked()

        assert world.send.started == ["dlv_0"]
        assert world.store.transactions == 1
        assert [(o.delivery_id, o.error) for o in world.outcomes()] == [
            ("dlv_1", "storage unavailable")
        ]


async def test_a_draining_engine_starts_no_attempt_and_gives_its_deliveries_back() -> None:
    async with actors(in_flight=1) as world:
        world.hand_over(_delivery(0))
        world.hand_over(_delivery(1))
        await trio.testing.wait_all_tasks_blocked()
        assert world.send.started == ["dlv_0"]

        world.state.draining = True
        world.actors.give_back_inboxes()
        world.hand_over(_delivery(2))
        world.send.end("dlv_0")
        await trio.testing.wait_all_tasks_blocked()

        assert world.send.started == ["dlv_0"]
        assert [o.delivery_id for o in world.outcomes()] == ["dlv_0"]
        assert world.book.held == 0


# --- a fan-out's first attempts ----------------------------------------------------------------


@pytest.mark.parametrize("committed", [True, False])
async def test_an_attempt_that_ends_before_its_fan_out_waits_for_it(committed: bool) -> None:
    async with actors() as world:
        fan_out = world.book.fan_out_began()
        world.book.awaits_commit("dlv_0", fan_out)
        world.hand_over(_delivery(0))
        await trio.testing.wait_all_tasks_blocked()
        world.send.end("dlv_0")
        await trio.testing.wait_all_tasks_blocked()
        assert (world.book.held, world.book.outcomes_waiting) == (1, 0)

        for ended in world.book.fan_out_ended(fan_out, committed=committed):
            world.actors.settle(ended, record=committed)

        assert world.book.held == 0
        assert [o.status for o in world.outcomes()] == (["delivered"] if committed else [])


async def test_a_delivery_of_a_fan_out_that_did_not_commit_is_never_attempted() -> None:
    async with actors() as world:
        fan_out = world.book.fan_out_began()
        world.book.awaits_commit("dlv_0", fan_out)
        world.hand_over(_delivery(0))  # the actor has not started yet: it waits in the inbox
        world.book.fan_out_ended(fan_out, committed=False)
        await trio.testing.wait_all_tasks_blocked()

        assert world.send.started == []
        assert (world.book.held, world.book.outcomes_waiting) == (0, 0)


# --- retirement --------------------------------------------------------------------------------


async def test_an_actor_retires_once_idle_for_its_idle_time(
    autojump_clock: trio.abc.Clock,
) -> None:
    async with actors(idle=30.0) as world:
        world.hand_over(_delivery(0))
        await trio.sleep(1)
        world.send.end("dlv_0")
        await trio.sleep(28)
        assert len(world.actors) == 1
        await trio.sleep(2)
        assert len(world.actors) == 0

        world.hand_over(_delivery(1))  # a new actor, on demand
        await trio.sleep(100)
        assert len(world.actors) == 1  # its attempt in flight holds it
        world.send.end("dlv_1")
        await trio.sleep(60)
        assert len(world.actors) == 0
        assert world.send.started == ["dlv_0", "dlv_1"]
