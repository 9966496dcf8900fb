"""Ordering by record at the queue level, on both stores (contract.md, third round: an endpoint's
``ordering``): of an ordered endpoint's open deliveries about one record, one at a time is due
(the head), the others wait their turn, in event order, through fan-out, attempt outcomes,
redelivery and recovery; an endpoint that does not order gets everything due at once; the store
itself refuses a second head; a long random walk ends every record's deliveries in event order
and leaves nothing waiting; and on PostgreSQL two fan-outs at once do not both make a record's
head."""

from __future__ import annotations

import itertools
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
import trio

from ledgerport import apps, books, queues
from ledgerport.platform import Platform
from ledgerport.storage import Conflict, Store, Transaction

from .oauth_helpers import World, install, make_world

TIMEOUT = 60
TYPE = "customer.updated"
LEASE = 60.0
"""Seconds a claim holds its delivery."""
RETRY = 5.0
"""Seconds after a failed attempt its retry is due."""
ENDED = ("delivered", "failed")


@dataclass(frozen=True)
class Endpoints:
    """A business and its app, installed with ``customers:read``, with two endpoints subscribed to
    ``customer.updated``: one ordered by record and one that is not."""

    platform: Platform
    world: World
    ordered: apps.Webhook
    unordered: apps.Webhook

    @property
    def store(self) -> Store:
        return self.platform.store

    @property
    def tenant(self) -> tuple[str, str]:
        return self.world.app_id, self.world.business_id


async def _public(host: str, port: int) -> list[str]:
    return ["93.184.216.34"]


@pytest.fixture
async def endpoints(platform: Platform, client: Any, admin_headers: dict[str, str]) -> Endpoints:
    """The endpoints, once the events the world's making recorded are fanned out (they reach
    neither endpoint): each test's fan-outs read its own events only."""
    with trio.fail_after(TIMEOUT):
        world = await make_world(client, admin_headers)
        await install(client, admin_headers, world, ("customers:read",))
        async with platform.store.transaction() as tx:
            made = []
            for ordering in ("record", "none"):
                webhook, _ = await apps.create_webhook(
                    tx,
                    platform.keyring,
                    now=platform.now(),
                    app_id=world.app_id,
                    url=f"https://hooks.example.com/{ordering}",
                    events=[TYPE],
                    ordering=ordering,
                    resolver=_public,
                )
                made.append(webhook)
        ordered, unordered = made
        assert (ordered.ordering, unordered.ordering) == ("record", "none")
        hooked = Endpoints(platform, world, ordered, unordered)
        fanned = await _fan_out(hooked, now=platform.now(), take=False)
        assert fanned.rows == []
        async with platform.store.transaction() as tx:
            assert await queues.dispatch_backlog(tx) == 0
    return hooked


# --- Steps ---------------------------------------------------------------------------------------


def _about(label: str) -> Mapping[str, Any]:
    """The data of an event labelled ``A1``: about record ``A`` (its ``data.id``)."""
    return {"id": label.rstrip("0123456789"), "name": label}


async def _record(
    hooked: Endpoints, labels: Sequence[str], *, data: Callable[[str], Mapping[str, Any]] = _about
) -> dict[str, str]:
    """Record an event per label, in one transaction and in that order; answers their ids."""
    ids = {}
    async with hooked.store.transaction() as tx:
        for label in labels:
            ids[label] = await books.record_event(
                tx,
                now=hooked.platform.now(),
                type=TYPE,
                data=data(label),
                business_id=hooked.world.business_id,
            )
    return ids


async def _fan_out(
    hooked: Endpoints,
    *,
    now: float,
    take: bool | Callable[[], bool],
    limit: int = 1000,
    lease: str = "fan-out",
) -> queues.FanOut:
    """One fan-out of at most ``limit`` events, in a transaction of its own; ``take`` says
    whether it claims each delivery it may claim."""

    def taking(_app: str, _business: str, _webhook: str) -> bool:
        return take() if callable(take) else take

    async with hooked.store.transaction() as tx:
        pending = await queues.pending_events(tx, limit)
        fanned = queues.plan_fan_out(
            pending,
            keyring=hooked.platform.keyring,
            now=now,
            lease=lease,
            lease_until=now + LEASE,
            take=taking,
        )
        await queues.write_fan_out(tx, fanned)
    return fanned


async def _claim(
    hooked: Endpoints, *, now: float, lease: str = "worker", lease_for: float = LEASE
) -> list[queues.ClaimedDelivery]:
    """Claim every due delivery of the app, in the business and of no business (test
    deliveries), in a transaction of its own."""
    async with hooked.store.transaction() as tx:
        return await queues.claim_due(
            tx,
            now=now,
            lease=lease,
            lease_until=now + lease_for,
            quotas=[(hooked.tenant, 1000), ((hooked.world.app_id, ""), 1000)],
            take=lambda _app, _business, _webhook: True,
        )


def _outcome(
    claimed: queues.ClaimedDelivery, status: queues.DeliveryStatus, *, at: float
) -> queues.AttemptOutcome:
    """The outcome of an attempt of ``claimed`` finished at ``at``, as the engine records one of
    an endpoint ordered by record (``ordered``, whatever the delivery's own record)."""
    delivered = status == "delivered"
    return queues.AttemptOutcome(
        delivery_id=claimed.id,
        lease=claimed.lease,
        status=status,
        attempts=claimed.attempts + 1,
        response_code=200 if delivered else 500,
        error=None if delivered else "HTTP 500",
        finished_at=at,
        next_attempt_at=at + RETRY if status == "retrying" else None,
        first_attempt_at=at,
        ordered=True,
    )


async def _end(hooked: Endpoints, outcomes: Sequence[queues.AttemptOutcome]) -> None:
    async with hooked.store.transaction() as tx:
        await queues.record_outcomes(tx, outcomes)


def _state(row: Any) -> str:
    """``due`` (open, with a next attempt: the head), ``waiting`` (open, its turn not come) or
    the status it ended with."""
    if row["status"] in ENDED:
        return str(row["status"])
    return "waiting" if row["next_attempt_at"] is None else "due"


async def _rows(hooked: Endpoints, webhook: apps.Webhook) -> dict[str | None, Any]:
    """The webhook's deliveries by event id (a test delivery's: None)."""
    async with hooked.store.transaction() as tx:
        rows = await tx.fetch(
            "SELECT d.id, d.event_id, d.order_key, d.event_seq, d.status, d.next_attempt_at,"
            " d.lease, d.updated_at, e.seq FROM webhook_deliveries d"
            " LEFT JOIN events e ON e.id = d.event_id WHERE d.webhook_id = $1",
            webhook.id,
        )
    return {row["event_id"]: row for row in rows}


async def _states(
    hooked: Endpoints, webhook: apps.Webhook, events: dict[str, str]
) -> dict[str, str]:
    """The :func:`_state` of the webhook's delivery of each labelled event."""
    rows = await _rows(hooked, webhook)
    return {label: _state(rows[event_id]) for label, event_id in events.items()}


def _of(webhook: apps.Webhook, events: dict[str, str], *labels: str) -> set[str]:
    """The ids of the webhook's deliveries of the labelled events."""
    return {queues.delivery_id_for(events[label], webhook.id) for label in labels}


def _claimed_of(
    claimed: Sequence[queues.ClaimedDelivery], webhook: apps.Webhook
) -> dict[str, queues.ClaimedDelivery]:
    return {c.id: c for c in claimed if c.webhook_id == webhook.id}


async def _settle_all(
    hooked: Endpoints, status: queues.DeliveryStatus, *, now: float
) -> tuple[list[list[str]], float]:
    """Claim what is due and end it with ``status``, over and over until nothing is open;
    answers the ids ended by each round, and the time after the last."""
    rounds: list[list[str]] = []
    for _ in range(100):
        claimed = await _claim(hooked, now=now)
        if not claimed:
            return rounds, now
        now += 1
        await _end(hooked, [_outcome(c, status, at=now) for c in claimed])
        rounds.append(sorted(c.id for c in claimed))
    raise AssertionError("the queue never emptied")


# --- Fan-out -------------------------------------------------------------------------------------

INTERLEAVED = ["A1", "B1", "A2", "B2", "B3", "A3"]


async def test_fan_out_makes_one_delivery_due_per_record_and_the_rest_wait(
    endpoints: Endpoints,
) -> None:
    hooked = endpoints
    now = hooked.platform.now()
    with trio.fail_after(TIMEOUT):
        events = await _record(hooked, INTERLEAVED)
        fanned = await _fan_out(hooked, now=now, take=True)
        ordered = await _rows(hooked, hooked.ordered)
        states = await _states(hooked, hooked.ordered, events)
        unordered = await _rows(hooked, hooked.unordered)
    assert states == {
        "A1": "due",
        "B1": "due",
        "A2": "waiting",
        "B2": "waiting",
        "B3": "waiting",
        "A3": "waiting",
    }
    for label, event_id in events.items():
        row = ordered[event_id]
        assert row["order_key"] == label[0]
        assert row["event_seq"] == row["seq"]
    # Claimed at once: the heads only, with their record; those waiting are not claimed.
    claimed = _claimed_of(fanned.claimed, hooked.ordered)
    assert set(claimed) == _of(hooked.ordered, events, "A1", "B1")
    assert {c.order_key for c in claimed.values()} == {"A", "B"}
    for label in ("A1", "B1"):
        assert ordered[events[label]]["lease"] == "fan-out"
        assert ordered[events[label]]["next_attempt_at"] == now + LEASE
    for label in ("A2", "B2", "B3", "A3"):
        assert ordered[events[label]]["lease"] is None
    # The endpoint that does not order gets every delivery at once, claimed, with no record.
    assert set(_claimed_of(fanned.claimed, hooked.unordered)) == _of(
        hooked.unordered, events, *INTERLEAVED
    )
    assert {_state(row) for row in unordered.values()} == {"due"}
    assert {row["order_key"] for row in unordered.values()} == {None}


async def test_fan_out_not_claiming_leaves_the_heads_due_now(endpoints: Endpoints) -> None:
    hooked = endpoints
    now = hooked.platform.now()
    with trio.fail_after(TIMEOUT):
        events = await _record(hooked, INTERLEAVED)
        fanned = await _fan_out(hooked, now=now, take=False)
        ordered = await _rows(hooked, hooked.ordered)
        # A claim takes the heads only, however many it may take.
        claimed = await _claim(hooked, now=now)
    assert fanned.claimed == []
    assert {ordered[events[label]]["next_attempt_at"] for label in ("A1", "B1")} == {now}
    assert set(_claimed_of(claimed, hooked.ordered)) == _of(hooked.ordered, events, "A1", "B1")
    assert len(_claimed_of(claimed, hooked.unordered)) == len(INTERLEAVED)


async def test_a_later_fan_out_about_a_record_with_an_open_head_waits(
    endpoints: Endpoints,
) -> None:
    hooked = endpoints
    now = hooked.platform.now()
    with trio.fail_after(TIMEOUT):
        first = await _record(hooked, ["A1", "B1"])
        await _fan_out(hooked, now=now, take=True)
        # A's head is claimed (under way), B's delivered: B has nothing open any more.
        (b1,) = [c for c in await _claim(hooked, now=now + LEASE) if c.order_key == "B"]
        await _end(hooked, [_outcome(b1, "delivered", at=now + LEASE + 1)])
        later = await _record(hooked, ["A2", "B2", "C1"])
        fanned = await _fan_out(hooked, now=now + LEASE + 2, take=True)
        states = await _states(hooked, hooked.ordered, {**first, **later})
    assert states == {
        "A1": "due",
        "B1": "delivered",
        "A2": "waiting",
        "B2": "due",
        "C1": "due",
    }
    assert set(_claimed_of(fanned.claimed, hooked.ordered)) == _of(
        hooked.ordered, later, "B2", "C1"
    )


NO_RECORD: dict[str, Mapping[str, Any]] = {
    "no id": {"name": "n"},
    "an empty id": {"id": "", "name": "n"},
    "a null id": {"id": None, "name": "n"},
    "a number": {"id": 7, "name": "n"},
    "an object": {"id": {"value": "A"}, "name": "n"},
}


@pytest.mark.parametrize("case", sorted(NO_RECORD))
async def test_an_event_without_a_record_is_not_ordered(endpoints: Endpoints, case: str) -> None:
    """An event whose ``data.id`` is no record (not a non-empty string) has no turn to wait:
    its deliveries are all due at once, with no record."""
    hooked = endpoints
    with trio.fail_after(TIMEOUT):
        events = await _record(hooked, ["X1", "X2", "X3"], data=lambda _label: NO_RECORD[case])
        fanned = await _fan_out(hooked, now=hooked.platform.now(), take=True)
        rows = await _rows(hooked, hooked.ordered)
    assert {label: _state(rows[event_id]) for label, event_id in events.items()} == {
        "X1": "due",
        "X2": "due",
        "X3": "due",
    }
    assert {row["order_key"] for row in rows.values()} == {None}
    assert {c.order_key for c in _claimed_of(fanned.claimed, hooked.ordered).values()} == {None}


# --- Outcomes ------------------------------------------------------------------------------------


async def test_an_outcome_delivered_or_failed_releases_the_next_by_event_order(
    endpoints: Endpoints,
) -> None:
    hooked = endpoints
    t = hooked.platform.now()
    with trio.fail_after(TIMEOUT):
        events = await _record(hooked, ["A1", "B1", "A2", "A3", "B2", "A4"])
        await _fan_out(hooked, now=t, take=False)
        claimed = await _claim(hooked, now=t)
        heads = _claimed_of(claimed, hooked.ordered)
        assert set(heads) == _of(hooked.ordered, events, "A1", "B1")
        (a1,) = _of(hooked.ordered, events, "A1")
        (b1,) = _of(hooked.ordered, events, "B1")

        # The other endpoint's outcomes release nothing, though about the same records.
        others = list(_claimed_of(claimed, hooked.unordered).values())
        await _end(hooked, [_outcome(c, "delivered", at=t + 1) for c in others])
        async with hooked.store.transaction() as tx:
            assert await queues.release_next(tx, [c.id for c in others], now=t + 1) == 0
        after_others = await _states(hooked, hooked.ordered, events)

        # A retry keeps the head's turn.
        await _end(hooked, [_outcome(heads[a1], "retrying", at=t + 2)])
        after_retrying = await _states(hooked, hooked.ordered, events)
        (again,) = await _claim(hooked, now=t + 2 + RETRY)
        assert again.id == a1

        # Delivered: the next about A by event order is due, when the outcome was recorded.
        await _end(hooked, [_outcome(again, "delivered", at=t + 10)])
        after_delivered = await _states(hooked, hooked.ordered, events)
        released = (await _rows(hooked, hooked.ordered))[events["A2"]]

        # Failed for good: the next is due too.
        (a2,) = await _claim(hooked, now=t + 10)
        assert a2.id in _of(hooked.ordered, events, "A2")
        await _end(hooked, [_outcome(a2, "failed", at=t + 11)])
        after_failed = await _states(hooked, hooked.ordered, events)

        # B's head, delivered in the same batch as A's next: each releases its own.
        (a3,) = await _claim(hooked, now=t + 11)
        await _end(
            hooked,
            [_outcome(heads[b1], "delivered", at=t + 12), _outcome(a3, "delivered", at=t + 12)],
        )
        after_both = await _states(hooked, hooked.ordered, events)
    waiting = {"A2": "waiting", "A3": "waiting", "B2": "waiting", "A4": "waiting"}
    assert after_others == {"A1": "due", "B1": "due", **waiting}
    assert after_retrying == after_others
    assert after_delivered == {**after_others, "A1": "delivered", "A2": "due"}
    assert released["next_attempt_at"] == t + 10
    assert released["lease"] is None
    assert after_failed == {**after_delivered, "A2": "failed", "A3": "due"}
    assert after_both == {
        "A1": "delivered",
        "A2": "failed",
        "A3": "delivered",
        "A4": "due",
        "B1": "delivered",
        "B2": "due",
    }


async def test_an_outcome_whose_claim_was_taken_over_releases_nothing(
    endpoints: Endpoints,
) -> None:
    """A claim that lost its lease records nothing, so its outcome makes no other due: the
    head is still under way, by the process that took it over."""
    hooked = endpoints
    t = hooked.platform.now()
    with trio.fail_after(TIMEOUT):
        events = await _record(hooked, ["A1", "A2"])
        await _fan_out(hooked, now=t, take=False)
        (lost,) = _claimed_of(await _claim(hooked, now=t, lease="dead"), hooked.ordered).values()
        (taken,) = _claimed_of(
            await _claim(hooked, now=t + LEASE, lease="alive"), hooked.ordered
        ).values()
        assert taken.id == lost.id
        await _end(hooked, [_outcome(lost, "delivered", at=t + LEASE + 1)])
        states = await _states(hooked, hooked.ordered, events)
    assert states == {"A1": "due", "A2": "waiting"}


async def test_an_outcome_that_releases_the_next_wakes_the_claimers(endpoints: Endpoints) -> None:
    """The delivery an outcome releases is due at once, so its commit wakes every engine's
    claimer (DELIVERIES_CHANNEL), as a commit that queues deliveries does; an outcome that
    releases nothing (a retry keeps the head's turn) wakes none."""
    hooked = endpoints
    t = hooked.platform.now()
    woken = trio.Event()
    with trio.fail_after(TIMEOUT):
        events = await _record(hooked, ["A1", "A2"])
        await _fan_out(hooked, now=t, take=False)
        (head,) = _claimed_of(await _claim(hooked, now=t), hooked.ordered).values()
        async with hooked.store.listen(queues.DELIVERIES_CHANNEL, woken.set):
            # A commit of this process wakes its own listeners as it returns.
            await _end(hooked, [_outcome(head, "retrying", at=t + 1)])
            woken_by_retry = woken.is_set()
            (again,) = _claimed_of(await _claim(hooked, now=t + 1 + RETRY), hooked.ordered).values()
            await _end(hooked, [_outcome(again, "delivered", at=t + 10)])
            woken_by_delivery = woken.is_set()
        states = await _states(hooked, hooked.ordered, events)
    assert states == {"A1": "delivered", "A2": "due"}
    assert (woken_by_retry, woken_by_delivery) == (False, True)


# --- Redelivery and recovery ---------------------------------------------------------------------


async def test_a_redelivery_about_a_record_with_an_open_head_waits_its_turn(
    endpoints: Endpoints,
) -> None:
    hooked = endpoints
    t = hooked.platform.now()
    webhook = hooked.ordered
    with trio.fail_after(TIMEOUT):
        events = await _record(hooked, ["A1", "A2"])
        await _fan_out(hooked, now=t, take=False)
        (a1,) = _claimed_of(await _claim(hooked, now=t), webhook).values()
        await _end(hooked, [_outcome(a1, "delivered", at=t + 1)])
        events |= await _record(hooked, ["A3"])
        await _fan_out(hooked, now=t + 2, take=False)
        before = await _states(hooked, webhook, events)

        async with hooked.store.transaction() as tx:
            await queues.redeliver(tx, now=t + 3, webhook=webhook, delivery_id=a1.id)
        redelivered = await _states(hooked, webhook, events)

        # A2 ends: the redelivery's turn comes before A3's (its event is older).
        (a2,) = _claimed_of(await _claim(hooked, now=t + 3), webhook).values()
        await _end(hooked, [_outcome(a2, "delivered", at=t + 4)])
        after_a2 = await _states(hooked, webhook, events)
        (again,) = _claimed_of(await _claim(hooked, now=t + 4), webhook).values()
        assert again.id == a1.id
        await _end(hooked, [_outcome(again, "delivered", at=t + 5)])
        after_again = await _states(hooked, webhook, events)
        (a3,) = _claimed_of(await _claim(hooked, now=t + 5), webhook).values()
        await _end(hooked, [_outcome(a3, "delivered", at=t + 6)])

        # Nothing about A open: a redelivery is due at once.
        async with hooked.store.transaction() as tx:
            await queues.redeliver(tx, now=t + 7, webhook=webhook, delivery_id=a3.id)
        alone = await _states(hooked, webhook, events)
    assert before == {"A1": "delivered", "A2": "due", "A3": "waiting"}
    assert redelivered == {"A1": "waiting", "A2": "due", "A3": "waiting"}
    assert after_a2 == {"A1": "due", "A2": "delivered", "A3": "waiting"}
    assert after_again == {"A1": "delivered", "A2": "delivered", "A3": "due"}
    assert alone == {"A1": "delivered", "A2": "delivered", "A3": "due"}


FAILING = ["A1", "B1", "A2", "A3", "C1", "B2", "A4"]


async def test_recovery_queues_one_due_per_record_and_the_rest_wait_in_event_order(
    endpoints: Endpoints,
) -> None:
    hooked = endpoints
    t0 = hooked.platform.now()
    webhook = hooked.ordered
    with trio.fail_after(TIMEOUT):
        events = await _record(hooked, FAILING)
        await _fan_out(hooked, now=t0, take=False)
        failing, t = await _settle_all(hooked, "failed", now=t0)
        # A new event about C while its earlier one is failed: the new one is C's head.
        events |= await _record(hooked, ["C2"])
        await _fan_out(hooked, now=t, take=False)
        failed = await _states(hooked, webhook, events)
        async with hooked.store.transaction() as tx:
            recovered = await queues.recover(tx, now=t + 1, webhook=webhook, since=t0)
        states = await _states(hooked, webhook, events)
        # A test delivery has no record: due at once, whatever is open.
        async with hooked.store.transaction() as tx:
            test_id = await queues.create_test_delivery(
                tx, now=t + 1, webhook=webhook, pinned_version=None, type=TYPE
            )
        test = (await _rows(hooked, webhook))[None]
        # Then every round delivers what is due: each record's in event order.
        rounds, _ = await _settle_all(hooked, "delivered", now=t + 2)
    heads = _of(webhook, events, "A1", "B1", "C1")
    assert failing[0] == sorted(heads | _of(hooked.unordered, events, *FAILING))
    assert failed == {label: "failed" for label in events} | {"C2": "due"}
    assert recovered == queues.Recovered(queued=7, skipped=0, next=None)
    assert states == {
        "A1": "due",
        "A2": "waiting",
        "A3": "waiting",
        "A4": "waiting",
        "B1": "due",
        "B2": "waiting",
        "C1": "waiting",
        "C2": "due",
    }
    assert (test["id"], test["order_key"], _state(test)) == (test_id, None, "due")
    by_id = {
        queues.delivery_id_for(event_id, webhook.id): label for label, event_id in events.items()
    }
    in_rounds = [sorted(by_id[d] for d in ids if d in by_id) for ids in rounds]
    assert in_rounds == [["A1", "B1", "C2"], ["A2", "B2", "C1"], ["A3"], ["A4"]]
    assert rounds[0].count(test_id) == 1


# --- The store's invariant -----------------------------------------------------------------------


async def test_the_store_refuses_a_second_head_for_a_record(endpoints: Endpoints) -> None:
    hooked = endpoints
    t = hooked.platform.now()
    with trio.fail_after(TIMEOUT):
        events = await _record(hooked, ["A1", "A2", "B1", "B2"])
        await _fan_out(hooked, now=t, take=False)
        (a2,) = _of(hooked.ordered, events, "A2")
        (b2,) = _of(hooked.ordered, events, "B2")
        make_due = "UPDATE webhook_deliveries SET next_attempt_at = $1 WHERE id = $2"
        with pytest.raises(Conflict):
            async with hooked.store.transaction() as tx:
                await tx.execute(make_due, t, a2)
        # A second head made by an insert is refused as well.
        with pytest.raises(Conflict):
            async with hooked.store.transaction() as tx:
                await tx.execute(
                    "INSERT INTO webhook_deliveries (id, webhook_id, app_id, event_id,"
                    " business_id, type, body, status, attempts, created_at, updated_at,"
                    " next_attempt_at, order_key, event_seq)"
                    " SELECT 'dlv_second_head', webhook_id, app_id, NULL, business_id, type, body,"
                    " 'retrying', 1, created_at, updated_at, $1, order_key, event_seq + 100"
                    " FROM webhook_deliveries WHERE id = $2",
                    t,
                    b2,
                )
        unchanged = await _states(hooked, hooked.ordered, events)
        # Once B's head has ended, B's next may be made due (what a release does).
        (b1,) = [c for c in await _claim(hooked, now=t) if c.order_key == "B"]
        await _end(hooked, [_outcome(b1, "failed", at=t + 1)])
        async with hooked.store.transaction() as tx:
            assert await tx.execute(make_due, t + 1, b2) == 1
    assert unchanged == {"A1": "due", "A2": "waiting", "B1": "due", "B2": "waiting"}


# --- A random walk -------------------------------------------------------------------------------

RECORDS = 20
EVENTS_EACH = 5
SEED = 20_240_611


async def test_a_random_walk_ends_every_records_deliveries_in_event_order(
    endpoints: Endpoints,
) -> None:
    """Events about 20 records, 5 each, interleaved at random and recorded in batches; fan-outs
    of a few at a time, each claiming some of what it may, between rounds that claim what is due
    and record random outcomes (delivered, retrying then delivered, failed) in batches. Every
    claim of an ordered delivery comes after every earlier delivery about its record ended, the
    ends come in event order, and nothing is left open."""
    hooked = endpoints
    webhook = hooked.ordered
    rng = random.Random(SEED)
    names = [chr(ord("A") + n) for n in range(RECORDS)]
    about = [name for name in names for _ in range(EVENTS_EACH)]
    rng.shuffle(about)
    counts = dict.fromkeys(names, 0)
    labels = []
    for name in about:
        counts[name] += 1
        labels.append(f"{name}{counts[name]}")
    events: dict[str, str] = {}
    with trio.fail_after(TIMEOUT):
        while len(events) < len(labels):
            batch = labels[len(events) : len(events) + rng.randint(1, 20)]
            events |= await _record(hooked, batch)
        label_of = {queues.delivery_id_for(e, webhook.id): label for label, e in events.items()}
        fates: dict[str, str] = {}
        tick = itertools.count(int(hooked.platform.now()) + 1)
        seen = {"retrying": 0, "delivered": 0, "failed": 0}
        for _ in range(1000):
            now = float(next(tick))
            async with hooked.store.transaction() as tx:
                backlog = await queues.dispatch_backlog(tx)
            claimed: list[queues.ClaimedDelivery] = []
            if backlog and rng.random() < 0.6:
                fanned = await _fan_out(
                    hooked, now=now, take=lambda: rng.random() < 0.5, limit=rng.randint(1, 15)
                )
                claimed += fanned.claimed
            claimed += await _claim(hooked, now=now, lease_for=0.5)
            rows = await _rows(hooked, webhook)
            # Open deliveries of either endpoint: the unordered one's last retry may still be
            # waiting for its time when every ordered delivery has ended.
            async with hooked.store.transaction() as tx:
                open_now = await tx.fetchval(
                    "SELECT COUNT(*) FROM webhook_deliveries WHERE status IN ('queued', 'retrying')"
                )
            if not claimed and not backlog and not open_now:
                break
            for c in _claimed_of(claimed, webhook).values():
                record, seq = rows[c.event_id]["order_key"], rows[c.event_id]["event_seq"]
                label = label_of[c.id]
                assert c.order_key == record == label.rstrip("0123456789")
                earlier = [
                    row
                    for row in rows.values()
                    if row["order_key"] == record and row["event_seq"] < seq
                ]
                assert len(earlier) == int(label[len(record) :]) - 1, label
                assert all(row["status"] in ENDED for row in earlier), label
            outcomes = []
            for c in claimed:
                fate = fates.setdefault(c.id, rng.choice(["delivered", "retrying", "failed"]))
                status = "delivered" if fate == "retrying" and c.attempts > 0 else fate
                seen[status] += 1
                outcomes.append(_outcome(c, status, at=float(next(tick))))  # type: ignore[arg-type]
            rng.shuffle(outcomes)
            while outcomes:
                size = rng.randint(1, 8)
                await _end(hooked, outcomes[:size])
                outcomes = outcomes[size:]
        else:
            raise AssertionError("the walk never ended")
        rows = await _rows(hooked, webhook)
        async with hooked.store.transaction() as tx:
            left = await tx.fetchval(
                "SELECT COUNT(*) FROM webhook_deliveries WHERE status IN ('queued', 'retrying')"
            )
    assert left == 0
    assert len(rows) == RECORDS * EVENTS_EACH
    assert min(seen.values()) > 10, seen
    for name in names:
        mine = sorted(
            (row for row in rows.values() if row["order_key"] == name),
            key=lambda row: row["event_seq"],
        )
        assert [label_of[row["id"]] for row in mine] == [
            f"{name}{n}" for n in range(1, EVENTS_EACH + 1)
        ]
        ends = [row["updated_at"] for row in mine]
        assert all(a < b for a, b in itertools.pairwise(ends)), (name, ends)


# --- PostgreSQL: transactions at once -----------------------------------------------------------


async def _waits_for_a_lock(store: Store, pid: int) -> bool:
    """Whether the backend ``pid`` waits for a lock (PostgreSQL)."""
    waiting = await store.autocommit.fetchval(
        "SELECT COUNT(*) FROM pg_locks WHERE pid = $1 AND NOT granted", pid
    )
    return bool(waiting)


async def _at_once(
    store: Store,
    first: Callable[[Transaction], Awaitable[object]],
    second: Callable[[Transaction], Awaitable[object]],
) -> bool:
    """Run ``first`` in a transaction left open, then ``second`` in another (another connection);
    ``first`` commits once ``second`` waits for a lock or has committed. Answers whether
    ``second`` waited."""
    first_done = trio.Event()
    may_commit = trio.Event()
    second_began = trio.Event()
    second_done = trio.Event()
    pids: list[int] = []

    async def run_first() -> None:
        async with store.transaction() as tx:
            await first(tx)
            first_done.set()
            await may_commit.wait()

    async def run_second() -> None:
        async with store.transaction() as tx:
            pids.append(int(await tx.fetchval("SELECT pg_backend_pid()")))
            second_began.set()
            await second(tx)
        second_done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_first)
        await first_done.wait()
        nursery.start_soon(run_second)
        await second_began.wait()
        while not second_done.is_set() and not await _waits_for_a_lock(store, pids[0]):
            pass
        waited = not second_done.is_set()
        may_commit.set()
    return waited


def _fanning_out(
    hooked: Endpoints, now: float, done: dict[str, queues.FanOut], name: str
) -> Callable[[Transaction], Awaitable[None]]:
    """A fan-out of one event, claiming what it may, in the caller's transaction; its plan goes
    to ``done[name]``."""

    async def fan_out(tx: Transaction) -> None:
        pending = await queues.pending_events(tx, 1)
        done[name] = queues.plan_fan_out(
            pending,
            keyring=hooked.platform.keyring,
            now=now,
            lease=name,
            lease_until=now + LEASE,
            take=lambda _app, _business, _webhook: True,
        )
        await queues.write_fan_out(tx, done[name])

    return fan_out


@pytest.mark.postgres
@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
async def test_two_fan_outs_at_once_do_not_both_make_a_records_head(
    endpoints: Endpoints,
) -> None:
    """Two fan-outs in two transactions at once, each of one event about A: the second waits
    for the first's lock, then sees its delivery and parks its own behind it."""
    hooked = endpoints
    t = hooked.platform.now()
    fan_outs: dict[str, queues.FanOut] = {}
    with trio.fail_after(TIMEOUT):
        events = await _record(hooked, ["A1", "A2"])
        waited = await _at_once(
            hooked.store,
            _fanning_out(hooked, t, fan_outs, "first"),
            _fanning_out(hooked, t, fan_outs, "second"),
        )
        states = await _states(hooked, hooked.ordered, events)
    assert waited
    assert states == {"A1": "due", "A2": "waiting"}
    assert set(_claimed_of(fan_outs["first"].claimed, hooked.ordered)) == _of(
        hooked.ordered, events, "A1"
    )
    assert _claimed_of(fan_outs["second"].claimed, hooked.ordered) == {}


@pytest.mark.postgres
@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
@pytest.mark.parametrize("first", ["outcome", "fan-out"])
async def test_a_head_ending_while_a_fan_out_about_its_record_runs_leaves_one_due(
    endpoints: Endpoints, first: str
) -> None:
    """A's head is delivered in one transaction while another fans out a new event about A,
    either begun first: once both committed, the new delivery is A's head (it did not park
    behind a head that was ending, unseen by the release)."""
    hooked = endpoints
    t = hooked.platform.now()
    fan_outs: dict[str, queues.FanOut] = {}
    with trio.fail_after(TIMEOUT):
        events = await _record(hooked, ["A1"])
        await _fan_out(hooked, now=t, take=False)
        (a1,) = _claimed_of(await _claim(hooked, now=t), hooked.ordered).values()
        events |= await _record(hooked, ["A2"])

        async def outcome(tx: Transaction) -> None:
            await queues.record_outcomes(tx, [_outcome(a1, "delivered", at=t + 1)])

        fan_out = _fanning_out(hooked, t + 1, fan_outs, "fan-out")
        await _at_once(
            hooked.store, *((outcome, fan_out) if first == "outcome" else (fan_out, outcome))
        )
        states = await _states(hooked, hooked.ordered, events)
    assert states == {"A1": "delivered", "A2": "due"}


@pytest.mark.postgres
@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
@pytest.mark.parametrize("first", ["outcome", "redelivery"])
async def test_a_head_ending_while_a_redelivery_about_its_record_runs_leaves_one_due(
    endpoints: Endpoints, first: str
) -> None:
    """A's head is delivered in one transaction while another redelivers an earlier delivery
    about A, either begun first: once both committed, the redelivered one is A's head."""
    hooked = endpoints
    t = hooked.platform.now()
    with trio.fail_after(TIMEOUT):
        events = await _record(hooked, ["A1", "A2"])
        await _fan_out(hooked, now=t, take=False)
        (a1,) = _claimed_of(await _claim(hooked, now=t), hooked.ordered).values()
        await _end(hooked, [_outcome(a1, "delivered", at=t + 1)])
        (a2,) = _claimed_of(await _claim(hooked, now=t + 1), hooked.ordered).values()

        async def outcome(tx: Transaction) -> None:
            await queues.record_outcomes(tx, [_outcome(a2, "delivered", at=t + 2)])

        async def redelivery(tx: Transaction) -> None:
            await queues.redeliver(tx, now=t + 2, webhook=hooked.ordered, delivery_id=a1.id)

        pair = (outcome, redelivery) if first == "outcome" else (redelivery, outcome)
        await _at_once(hooked.store, *pair)
        states = await _states(hooked, hooked.ordered, events)
    assert states == {"A1": "due", "A2": "delivered"}


@pytest.mark.postgres
@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
@pytest.mark.parametrize("first", ["fan-out", "redelivery"])
async def test_a_redelivery_and_a_fan_out_about_one_record_at_once_make_one_head(
    endpoints: Endpoints, first: str
) -> None:
    """Nothing about A is open; one transaction redelivers a delivery about A while another
    fans out a new event about A: the one begun first makes A's head, the other's waits behind
    it (neither fails on the store's head index)."""
    hooked = endpoints
    t = hooked.platform.now()
    fan_outs: dict[str, queues.FanOut] = {}
    with trio.fail_after(TIMEOUT):
        events = await _record(hooked, ["A1"])
        await _fan_out(hooked, now=t, take=False)
        (a1,) = _claimed_of(await _claim(hooked, now=t), hooked.ordered).values()
        await _end(hooked, [_outcome(a1, "delivered", at=t + 1)])
        events |= await _record(hooked, ["A2"])

        async def redelivery(tx: Transaction) -> None:
            await queues.redeliver(tx, now=t + 2, webhook=hooked.ordered, delivery_id=a1.id)

        fan_out = _fanning_out(hooked, t + 2, fan_outs, "fan-out")
        pair = (fan_out, redelivery) if first == "fan-out" else (redelivery, fan_out)
        await _at_once(hooked.store, *pair)
        states = await _states(hooked, hooked.ordered, events)
    head = "A2" if first == "fan-out" else "A1"
    assert states == {"A1": "waiting", "A2": "waiting", head: "due"}
