"""What an endpoint's controls do to its deliveries, through the delivery engine against real
receivers on both stores (contract.md, third round: Webhook endpoints beyond the spec): the
Standard Webhooks schemes verified by their own libraries and by the public key, and their
rotation; the endpoint's headers after ours, the event cursor the Events API takes, typed test
deliveries; ``rateLimit`` held per second across engines; and ``ordering: record`` as the
receiver sees it."""

from __future__ import annotations

import itertools
import json
import math
import time
from collections.abc import Callable
from typing import Any

import pytest
import standardwebhooks
import svix.webhooks
import trio
import trio.testing

from ledgerport import catalog
from ledgerport.clock import FrozenClock
from ledgerport.engine import verify_asymmetric, verify_standard
from ledgerport.platform import Platform

from ..receiver import Answer, Received, Receiver
from .webhook_world import Hooked, configured, deliver, engine_for, hooked

TIMEOUT = 30
TOLERANCE = 300
CUSTOMER_EVENTS = ["customer.created", "customer.updated"]


def _near_real_time(clock: FrozenClock) -> None:
    """The Standard Webhooks libraries judge a timestamp by the wall clock: the platform's
    clock is set to the wall clock's second (and stays there)."""
    clock.set(float(math.floor(time.time())))


def _by_standardwebhooks(secret: str, request: Received) -> bool:
    try:
        standardwebhooks.Webhook(secret).verify(request.body, request.headers)
    except standardwebhooks.WebhookVerificationError:
        return False
    return True


def _by_svix(secret: str, request: Received) -> bool:
    try:
        svix.webhooks.Webhook(secret).verify(request.body, request.headers)
    except svix.webhooks.WebhookVerificationError:
        return False
    return True


# --- Signature schemes ---------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["standard", "standard-asymmetric"])
async def test_a_delivery_is_signed_in_its_endpoints_scheme(
    platform: Platform,
    client: Any,
    admin_headers: dict[str, str],
    clock: FrozenClock,
    scheme: str,
) -> None:
    _near_real_time(clock)
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, []) as hook, engine_for(platform) as engine:
            created = await hook.console.webhook(
                hook.receiver.url, ["customer.created"], signature=scheme
            )
            await hook.api.customer()
            await deliver(engine)
            (request,) = hook.receiver.received
            (delivery,) = await hook.console.deliveries(created["id"])
    headers = request.headers
    body = json.loads(request.body)
    assert headers["webhook-id"] == headers["x-webhook-id"] == delivery["id"] == body["id"]
    assert headers["webhook-timestamp"] == str(int(clock.now()))
    assert headers["x-webhook-event-cursor"] == delivery["eventId"]
    assert "x-webhook-signature" not in headers
    own = verify_standard if scheme == "standard" else verify_asymmetric
    if scheme == "standard":
        secret = created["secret"]
        assert _by_standardwebhooks(secret, request)
        assert _by_svix(secret, request)
        assert headers["webhook-signature"].startswith("v1,")
        key = secret
    else:
        assert "secret" not in created
        assert headers["webhook-signature"].startswith("v1a,")
        key = created["publicKey"]
    assert own(headers, request.body, key, now=time.time(), tolerance=TOLERANCE)
    # A body changed on the way verifies under no key.
    assert not own(headers, request.body + b" ", key, now=time.time(), tolerance=TOLERANCE)
    assert delivery["status"] == "delivered"


@pytest.mark.parametrize("scheme", ["standard", "standard-asymmetric"])
async def test_after_a_rotation_both_keys_sign_for_24_hours(
    platform: Platform,
    client: Any,
    admin_headers: dict[str, str],
    clock: FrozenClock,
    scheme: str,
) -> None:
    _near_real_time(clock)
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, []) as hook, engine_for(platform) as engine:
            created = await hook.console.webhook(hook.receiver.url, [], signature=scheme)
            path = f"/webhooks/{created['id']}"
            rotated = await hook.console.ok("POST", f"{path}/rotate-secret")
            await hook.console.ok("POST", f"{path}/test", status=202)
            await deliver(engine)
            during_at = clock.now()
            clock.advance(catalog.WEBHOOK_SECRET_OVERLAP)
            await hook.console.ok("POST", f"{path}/test", status=202)
            await deliver(engine)
            during, after = hook.receiver.received
    verify: Callable[..., bool]
    if scheme == "standard":
        old, new = created["secret"], rotated["secret"]
        assert rotated["previousSecretExpiresAt"].endswith("Z")
        # The libraries, at the wall clock's time of the attempt made during the overlap.
        for secret in (old, new):
            assert _by_standardwebhooks(secret, during)
            assert _by_svix(secret, during)
        verify = verify_standard
    else:
        old, new = created["publicKey"], rotated["publicKey"]
        assert rotated["previousPublicKeyExpiresAt"].endswith("Z")
        verify = verify_asymmetric
    assert old != new
    assert len(during.headers["webhook-signature"].split(" ")) == 2
    assert len(after.headers["webhook-signature"].split(" ")) == 1
    for key in (old, new):
        assert verify(during.headers, during.body, key, now=during_at, tolerance=TOLERANCE)
    now = clock.now()
    assert verify(after.headers, after.body, new, now=now, tolerance=TOLERANCE)
    assert not verify(after.headers, after.body, old, now=now, tolerance=TOLERANCE)


# --- Headers, the event cursor, test deliveries --------------------------------------------------

CUSTOM = {"X-Route": "blue", "Authorization": "Bearer 3f9a-route-token"}


async def _events(hook: Hooked, after: str | None = None) -> list[str]:
    """The ids of ``GET /events`` (after ``after``), with the installation's access token."""
    path = "/events" if after is None else f"/events?after={after}"
    page = await hook.api.ok("GET", path)
    assert page["next"] is None
    return [event["id"] for event in page["data"]]


async def test_endpoint_headers_follow_ours_and_the_cursor_lists_what_came_after(
    platform: Platform, client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, CUSTOMER_EVENTS) as hook,
            engine_for(platform) as engine,
        ):
            webhook_id = hook.webhook["id"]
            await hook.console.ok("PATCH", f"/webhooks/{webhook_id}", {"headers": CUSTOM})
            for index in range(3):
                await hook.api.customer(f"Customer {index}")
            await deliver(engine)
            log = await _events(hook)
            after = {
                request.headers["x-webhook-event-cursor"]: await _events(
                    hook, request.headers["x-webhook-event-cursor"]
                )
                for request in hook.receiver.received
            }
            test = await hook.console.ok(
                "POST", f"/webhooks/{webhook_id}/test", {"type": "customer.updated"}, status=202
            )
            await deliver(engine)
            tested = hook.receiver.received[-1]
    events = hook.receiver.received[:3]
    assert len(after) == 3
    for request in events:
        headers = request.headers
        names = list(headers)
        assert {name: headers[name.lower()] for name in CUSTOM} == CUSTOM
        custom = [names.index(name.lower()) for name in CUSTOM]
        ours = [index for index, name in enumerate(names) if name not in map(str.lower, CUSTOM)]
        assert max(ours) < min(custom), names
        cursor = headers["x-webhook-event-cursor"]
        assert cursor == headers["x-webhook-event-id"] == json.loads(request.body)["eventId"]
        # Exactly the events of the business's log after this one.
        assert after[cursor] == log[log.index(cursor) + 1 :]
    assert sorted(after, key=log.index) == log[-3:]
    # A test delivery: the type asked for, its sample, our headers and the endpoint's, no
    # cursor.
    body = json.loads(tested.body)
    kind = catalog.event_type("customer.updated")
    assert kind is not None
    assert body["id"] == test["deliveryId"]
    assert (body["type"], tested.headers["x-webhook-event"]) == ("customer.updated",) * 2
    assert body["data"] == {**kind.sample_data(), "test": True}
    assert "x-webhook-event-cursor" not in tested.headers
    assert "x-webhook-event-id" not in tested.headers
    assert {name: tested.headers[name.lower()] for name in CUSTOM} == CUSTOM


# --- rateLimit -----------------------------------------------------------------------------------

RATE_LIMIT = 2
DUE_AT_ONCE = 10
STEPS = 40
"""Seconds the clock is moved through at most before every delivery must have been made."""


def _started_per_second(received: list[Received]) -> dict[int, int]:
    """Attempts by the second (of the platform's clock) they were signed in, after they took
    their unit of the endpoint's budget."""
    seconds: dict[int, int] = {}
    for request in received:
        stamp = int(request.headers["x-webhook-signature"].split(",")[0].removeprefix("t="))
        seconds[stamp] = seconds.get(stamp, 0) + 1
    return seconds


async def _through_the_seconds(clock: FrozenClock, receiver: Receiver, total: int) -> int:
    """Move the platform's clock one second at a time until ``total`` attempts arrived;
    answers how many seconds it took. The clock stands a tenth of a second before each
    second's end, so that an attempt waiting for the next second (``SendRate``, which sleeps
    until then by the platform's clock) looks again within 0.1 s of real time. The clock
    moves only while every task waits, never between an attempt's unit and its signature."""
    for step in range(STEPS):
        if len(receiver.received) >= total:
            return step
        await trio.sleep(0.15)
        await trio.testing.wait_all_tasks_blocked(cushion=0.02)
        clock.advance(1)
    raise AssertionError(f"{len(receiver.received)} of {total} attempts after {STEPS} seconds")


async def _rate_limited(hook: Hooked, clock: FrozenClock) -> None:
    """The hook's webhook limited to RATE_LIMIT a second, DUE_AT_ONCE events for it, and the
    clock a tenth of a second before a second's end."""
    await hook.console.ok("PATCH", f"/webhooks/{hook.webhook['id']}", {"rateLimit": RATE_LIMIT})
    for index in range(DUE_AT_ONCE):
        await hook.api.customer(f"Customer {index}")
    clock.set(math.floor(clock.now()) + 0.9)


async def test_a_rate_limit_bounds_the_attempts_started_each_second(
    platform: Platform, client: Any, admin_headers: dict[str, str], clock: FrozenClock
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"]) as hook,
            engine_for(platform) as engine,
        ):
            await _rate_limited(hook, clock)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(deliver, engine)
                await hook.receiver.wait_for(RATE_LIMIT)
                await trio.sleep(0.3)  # three looks of the waiting attempts at the clock
                await trio.testing.wait_all_tasks_blocked(cushion=0.02)
                in_the_first_second = len(hook.receiver.received)
                seconds = await _through_the_seconds(clock, hook.receiver, DUE_AT_ONCE)
            deliveries = await hook.console.deliveries(hook.webhook["id"])
    assert in_the_first_second == RATE_LIMIT
    per_second = _started_per_second(hook.receiver.received)
    assert max(per_second.values()) <= RATE_LIMIT, per_second
    assert sum(per_second.values()) == DUE_AT_ONCE
    assert seconds >= DUE_AT_ONCE // RATE_LIMIT - 1
    assert [(d["status"], d["attempts"]) for d in deliveries] == [("delivered", 1)] * DUE_AT_ONCE


async def test_two_engines_on_one_store_share_the_rate_limit(
    platform: Platform, client: Any, admin_headers: dict[str, str], clock: FrozenClock
) -> None:
    half = DUE_AT_ONCE // 2
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"]) as hook,
            engine_for(platform, held_per_webhook=half) as one,
            engine_for(platform) as other,
        ):
            await _rate_limited(hook, clock)
            async with trio.open_nursery() as nursery:
                await one.dispatch_once()  # takes its half, leaves the others due
                claimed = await other.claim_once()
                nursery.start_soon(one.settle)
                nursery.start_soon(other.settle)
                await hook.receiver.wait_for(RATE_LIMIT)
                await trio.sleep(0.3)
                await trio.testing.wait_all_tasks_blocked(cushion=0.02)
                in_the_first_second = len(hook.receiver.received)
                await _through_the_seconds(clock, hook.receiver, DUE_AT_ONCE)
            deliveries = await hook.console.deliveries(hook.webhook["id"])
    # Each engine made the attempts of its half, once each.
    assert claimed == half
    assert in_the_first_second == RATE_LIMIT
    per_second = _started_per_second(hook.receiver.received)
    assert max(per_second.values()) <= RATE_LIMIT, per_second
    assert sum(per_second.values()) == DUE_AT_ONCE
    assert [(d["status"], d["attempts"]) for d in deliveries] == [("delivered", 1)] * DUE_AT_ONCE


# --- Ordering by record --------------------------------------------------------------------------

RECORDS = 5
UPDATES = 3
ANSWER_TIME = 0.02
"""Seconds the receiver takes to answer: an attempt about a record made while the one before
it is unanswered would arrive less than this after it."""
ROUNDS = 80
"""Rounds of fan-out, claim and settle at most before every delivery must have ended."""


async def test_deliveries_about_a_record_arrive_one_at_a_time_in_event_order(
    platform: Platform, client: Any, admin_headers: dict[str, str]
) -> None:
    """Every third delivery's first attempt fails (its retry is due at once), one delivery
    fails all its attempts (failed for good, it lets the next one about its record go)."""
    # Six attempts with no wait between them: retries come in the next round.
    ordered = configured(platform, webhook_retry_delays=(0,) * catalog.WEBHOOK_MAX_ATTEMPTS)
    arrivals: list[tuple[str, str, float]] = []
    """(record, event id, time.perf_counter()) of each attempt, in the order they arrived."""
    failing_for_good: list[str] = []
    position: dict[str, int] = {}

    def answer(request: Received) -> Answer:
        body = json.loads(request.body)
        event_id = body["eventId"]
        arrivals.append((body["data"]["id"], event_id, time.perf_counter()))
        attempt = sum(1 for _, seen, _ in arrivals if seen == event_id)
        fails = event_id in failing_for_good or (position[event_id] % 3 == 0 and attempt == 1)
        return Answer(500 if fails else 200, delay=ANSWER_TIME)

    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, CUSTOMER_EVENTS) as hook:
            webhook_id = hook.webhook["id"]
            await hook.console.ok("PATCH", f"/webhooks/{webhook_id}", {"ordering": "record"})
            customers = [await hook.api.customer(f"Customer {n}") for n in range(RECORDS)]
            for round_ in range(UPDATES):
                for customer in customers:
                    await hook.api.ok(
                        "PATCH", f"/customers/{customer['id']}", {"name": f"Round {round_}"}
                    )
            page = await hook.api.ok("GET", f"/events?types={','.join(CUSTOMER_EVENTS)}&limit=100")
            events = [(event["id"], event["data"]["id"]) for event in page["data"]]
            position.update({event_id: index for index, (event_id, _) in enumerate(events)})
            # The second event about the second record: every attempt of it fails.
            failing_for_good.append([e for e, record in events if record == customers[1]["id"]][1])
            hook.receiver.answer_for = answer
            async with engine_for(ordered) as engine:
                for _ in range(ROUNDS):
                    await deliver(engine)
                    deliveries = await hook.console.deliveries(webhook_id)
                    if all(d["status"] in ("delivered", "failed") for d in deliveries):
                        break
    assert len(events) == RECORDS * (1 + UPDATES)
    statuses = {d["eventId"]: (d["status"], d["attempts"]) for d in deliveries}
    assert len(statuses) == len(events)
    assert statuses.pop(failing_for_good[0]) == ("failed", catalog.WEBHOOK_MAX_ATTEMPTS)
    assert set(statuses.values()) <= {("delivered", 1), ("delivered", 2)}
    assert sum(1 for status in statuses.values() if status == ("delivered", 2)) > 1
    # Records in parallel: the first attempt of each record's first event came first.
    assert {record for record, _, _ in arrivals[:RECORDS]} == {c["id"] for c in customers}
    for customer in customers:
        mine = [(event_id, at) for record, event_id, at in arrivals if record == customer["id"]]
        # In event order, each event's attempts together, the next once it ended.
        seen = [event_id for event_id, _ in mine]
        in_order = [event_id for event_id, record in events if record == customer["id"]]
        assert sorted(set(seen), key=seen.index) == in_order
        assert seen == sorted(seen, key=in_order.index)
        # One at a time: each attempt after the one before it about the record was answered.
        for (_, earlier), (_, later) in itertools.pairwise(mine):
            assert later - earlier >= ANSWER_TIME, customer["id"]
    # The failed one's six attempts, then the record's next events.
    failed_record = customers[1]["id"]
    seen = [event_id for record, event_id, _ in arrivals if record == failed_record]
    assert seen.count(failing_for_good[0]) == catalog.WEBHOOK_MAX_ATTEMPTS
    assert seen[-2:] == [e for e, record in events if record == failed_record][2:]
