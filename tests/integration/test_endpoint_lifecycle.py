"""Webhook endpoints' lifecycle through the delivery engine, against real receivers on both
stores (contract.md, third round: the engine rules of webhook endpoints, and operational
events): a 410 switches an endpoint off and tells the app's operational endpoint, switching it
back on and ``recover`` bring its deliveries back; ``Retry-After`` moves a retry later, within 6
hours; retries carry their jitter; the disable rule, by failures and by the clock alone; and an
endpoint's health as its outcomes make it."""

from __future__ import annotations

import json
from collections.abc import Callable
from email.utils import formatdate
from typing import Any

import pytest
import trio

from ledgerport import catalog
from ledgerport.clock import FrozenClock
from ledgerport.engine import DeliveryEngine, Scheduler, jitter, verify_header
from ledgerport.platform import Platform
from ledgerport.storage import Store

from ..receiver import Answer, Received, receiving
from .webhook_world import (
    Hooked,
    configured,
    deliver,
    endpoint,
    engine_for,
    hooked,
    iso,
    operational_events,
)

TIMEOUT = 30
HOUR = 3600
FAILING = "webhook.endpoint.failing"
DISABLED = "webhook.endpoint.disabled"
RECOVERED = "webhook.endpoint.recovered"


async def _deliveries_by_id(hook: Hooked) -> dict[str, dict[str, Any]]:
    return {d["id"]: d for d in await hook.console.deliveries(hook.webhook["id"])}


async def _newest(hook: Hooked) -> dict[str, Any]:
    return (await hook.console.deliveries(hook.webhook["id"]))[0]


async def _answer_each(
    hook: Hooked, engine: DeliveryEngine, clock: FrozenClock, statuses: list[int]
) -> None:
    """One delivery a second, each answered with its status."""
    for status in statuses:
        clock.advance(1)
        hook.receiver.script = [Answer(status)]
        await hook.api.customer()
        await deliver(engine)


def _operational_body(request: Received, secret: str, now: float) -> dict[str, Any]:
    """The body of an operational delivery, once its signature (the stripe scheme) verified."""
    signature = request.headers["x-webhook-signature"]
    assert verify_header(signature, request.body, secret, now=now, tolerance=300), signature
    assert "x-webhook-event-id" not in request.headers
    assert "x-webhook-event-cursor" not in request.headers
    body: dict[str, Any] = json.loads(request.body)
    assert request.headers["x-webhook-event"] == body["type"]
    return body


# --- 410 Gone, the operational endpoint, switching back on, recover ------------------------------


async def test_a_410_switches_the_endpoint_off_until_the_app_switches_it_on_and_recovers(
    platform: Platform,
    client: Any,
    admin_headers: dict[str, str],
    store: Store,
    clock: FrozenClock,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"]) as hook,
            receiving() as operations,
            engine_for(platform) as engine,
        ):
            webhook_id = hook.webhook["id"]
            operational = await hook.console.ok(
                "PUT", "/operational-webhook", {"url": operations.url}
            )
            began = clock.now()
            hook.receiver.script = [Answer(500), Answer(410)]
            await hook.api.customer("Waiting")
            await deliver(engine)  # answered 500: retrying, due in a minute
            (waiting,) = await hook.console.deliveries(webhook_id)
            clock.advance(1)
            await hook.api.customer("Gone")
            await deliver(engine)  # answered 410
            gone_at = clock.now()
            off = await endpoint(hook)
            gone = await _newest(hook)
            await deliver(engine)  # the operational events go out
            clock.advance(catalog.WEBHOOK_RETRY_DELAYS[1])
            await deliver(engine)  # the waiting delivery's retry is due: it fails unsent
            sent_while_off = len(hook.receiver.received)
            after_off = await _deliveries_by_id(hook)
            recorded = await operational_events(store, hook.api.world.app_id)
            told = list(operations.received)

            clock.advance(60)
            on = await hook.console.ok("PATCH", f"/webhooks/{webhook_id}", {"enabled": True})
            await hook.api.customer("Back")
            await deliver(engine)
            back = await _newest(hook)
            recovery = await hook.console.ok(
                "POST", f"/webhooks/{webhook_id}/recover", {"since": iso(began - 1)}, status=202
            )
            await deliver(engine)
            recovered = await _deliveries_by_id(hook)
            told_at_last = list(operations.received)

    assert (off["enabled"], off["disabledReason"]) == (False, "gone")
    # The 410 ends its delivery at once, whatever attempts were left.
    assert (gone["status"], gone["attempts"], gone["responseCode"]) == ("failed", 1, 410)
    assert gone["nextAttemptAt"] is None
    # The delivery waiting for a retry failed without being sent.
    assert sent_while_off == 2
    assert after_off[waiting["id"]]["status"] == "failed"
    assert after_off[waiting["id"]]["attempts"] == 1
    assert after_off[waiting["id"]]["lastError"] == "not sent: webhook disabled"
    # Both raised by the one outcome: failing, then disabled.
    assert recorded == [
        (FAILING, {"webhookId": webhook_id}),
        (DISABLED, {"webhookId": webhook_id, "reason": "gone"}),
    ]
    # Delivered to the operational endpoint in that order, one at a time, signed with the
    # secret its PUT answered.
    bodies = [_operational_body(r, operational["secret"], gone_at) for r in told]
    assert [(b["type"], b["data"]) for b in bodies] == recorded
    for body in bodies:
        assert set(body) == {"id", "type", "created", "data"}
        assert body["id"].startswith("oev_")
        assert body["created"] == int(gone_at)
    # Switched on by the app: no reason, and new events are delivered again.
    assert (on["enabled"], on["disabledReason"]) == (True, None)
    assert (back["status"], back["attempts"]) == ("delivered", 1)
    # Recovering from before the first failure queues both failed deliveries again.
    assert (recovery["queued"], recovery["skipped"]) == (2, 0)
    assert {d["status"] for d in recovered.values()} == {"delivered"}
    assert len(recovered) == 3
    assert len(hook.receiver.received) == 5
    # The delivery after the switch on ended the failing: recovered.
    assert [json.loads(r.body)["type"] for r in told_at_last[:2]] == [FAILING, DISABLED]
    assert [json.loads(r.body)["type"] for r in told_at_last[2:]] == [RECOVERED]


async def test_a_410_to_a_test_delivery_switches_the_endpoint_off_too(
    platform: Platform, client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, []) as hook, engine_for(platform) as engine:
            hook.receiver.default = Answer(410)
            await hook.console.ok("POST", f"/webhooks/{hook.webhook['id']}/test", status=202)
            await deliver(engine)
            read = await endpoint(hook)
            test = await _newest(hook)
            recorded = await operational_events(store, hook.api.world.app_id)
    assert (read["enabled"], read["disabledReason"]) == (False, "gone")
    assert (test["status"], test["attempts"], test["test"]) == ("failed", 1, True)
    assert sorted(kind for kind, _ in recorded) == [DISABLED, FAILING]


async def _operational_endpoint(store: Store, app_id: str) -> tuple[bool, str | None]:
    async with store.transaction() as tx:
        row = await tx.fetchrow(
            "SELECT enabled, disabled_reason FROM webhooks WHERE app_id = $1"
            " AND kind = 'operational' AND deleted_at IS NULL",
            app_id,
        )
    assert row is not None
    return bool(row["enabled"]), row["disabled_reason"]


async def test_a_410_switches_the_operational_endpoint_off_without_telling_and_a_put_on(
    platform: Platform,
    client: Any,
    admin_headers: dict[str, str],
    store: Store,
    clock: FrozenClock,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"]) as hook,
            receiving() as operations,
            engine_for(configured(platform, webhook_retry_delays=(0,))) as engine,
        ):
            app_id = hook.api.world.app_id
            body = {"url": operations.url}
            await hook.console.ok("PUT", "/operational-webhook", body)
            operations.default = Answer(410)
            await _answer_each(hook, engine, clock, [500])  # failing: queued for it
            await deliver(engine)  # answered 410
            off = await _operational_endpoint(store, app_id)
            await _answer_each(hook, engine, clock, [200])  # recovered: nowhere to go
            await deliver(engine)
            told_while_off = len(operations.received)
            await hook.console.ok("PUT", "/operational-webhook", body)
            on = await _operational_endpoint(store, app_id)
            operations.default = Answer(200)
            await _answer_each(hook, engine, clock, [500])
            await deliver(engine)
            recorded = await operational_events(store, app_id)
            told = [json.loads(r.body)["type"] for r in operations.received]
            webhook = await endpoint(hook)
    assert off == (False, "gone")
    assert told_while_off == 1
    assert on == (True, None)
    # Only the app's webhook raised events; the operational endpoint's own 410 none.
    assert recorded == [
        (kind, {"webhookId": hook.webhook["id"]}) for kind in (FAILING, RECOVERED, FAILING)
    ]
    assert told == [FAILING, FAILING]
    assert webhook["enabled"] is True


# --- Retry-After ---------------------------------------------------------------------------------


def _seconds(value: int) -> Callable[[float], str]:
    return lambda _now: str(value)


def _http_date(ahead: int) -> Callable[[float], str]:
    return lambda now: formatdate(now + ahead, usegmt=True)


RETRY_AFTER = {
    "429 with seconds": (429, _seconds(HOUR), HOUR),
    "503 with seconds": (503, _seconds(HOUR), HOUR),
    "429 with an HTTP date": (429, _http_date(HOUR), HOUR),
    "503 with an HTTP date": (503, _http_date(HOUR), HOUR),
    "10 days, capped at 6 hours": (503, _seconds(10 * 24 * HOUR), catalog.RETRY_AFTER_MAX),
    "a date 10 days ahead, capped": (429, _http_date(10 * 24 * HOUR), catalog.RETRY_AFTER_MAX),
    "shorter than the schedule": (429, _seconds(10), catalog.WEBHOOK_RETRY_DELAYS[1]),
    "a date in the past": (503, _http_date(-HOUR), catalog.WEBHOOK_RETRY_DELAYS[1]),
    "with another status": (500, _seconds(HOUR), catalog.WEBHOOK_RETRY_DELAYS[1]),
}
"""(status, the Retry-After header given the time, seconds until the next attempt)."""


@pytest.mark.parametrize(
    ("status", "retry_after", "wait"), RETRY_AFTER.values(), ids=RETRY_AFTER.keys()
)
async def test_retry_after_moves_the_next_attempt_later(
    platform: Platform,
    client: Any,
    admin_headers: dict[str, str],
    clock: FrozenClock,
    status: int,
    retry_after: Callable[[float], str],
    wait: int,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"]) as hook,
            engine_for(platform) as engine,
        ):
            failed_at = clock.now()
            header = ("Retry-After", retry_after(failed_at))
            hook.receiver.script = [Answer(status, headers=(header,))]
            await hook.api.customer()
            await deliver(engine)
            waiting = await _newest(hook)
            sent = [len(hook.receiver.received)]
            if wait > catalog.WEBHOOK_RETRY_DELAYS[1]:
                clock.advance(catalog.WEBHOOK_RETRY_DELAYS[1])  # the schedule's time
                await deliver(engine)
                sent.append(len(hook.receiver.received))
            clock.set(failed_at + wait - 1)
            await deliver(engine)
            sent.append(len(hook.receiver.received))
            clock.set(failed_at + wait)
            await deliver(engine)
            sent.append(len(hook.receiver.received))
            delivered = await _newest(hook)
    assert (waiting["status"], waiting["attempts"], waiting["responseCode"]) == (
        "retrying",
        1,
        status,
    )
    assert waiting["nextAttemptAt"] == iso(failed_at + wait)
    assert sent == [1] * (len(sent) - 1) + [2]
    assert (delivered["status"], delivered["attempts"]) == ("delivered", 2)


async def test_a_retry_after_on_the_last_attempt_fails_the_delivery_for_good(
    platform: Platform, client: Any, admin_headers: dict[str, str]
) -> None:
    """The attempt answered 429 counts as one: with none left, there is no next one to move."""
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"]) as hook,
            engine_for(configured(platform, webhook_retry_delays=(0,))) as engine,
        ):
            hook.receiver.default = Answer(429, headers=(("Retry-After", "60"),))
            await hook.api.customer()
            await deliver(engine)
            failed = await _newest(hook)
    assert (failed["status"], failed["attempts"], failed["nextAttemptAt"]) == ("failed", 1, None)


# --- Jitter --------------------------------------------------------------------------------------


async def test_retries_carry_a_jitter_of_up_to_a_tenth_of_their_delay(
    platform: Platform,
    client: Any,
    admin_headers: dict[str, str],
    store: Store,
    clock: FrozenClock,
) -> None:
    count = 8

    async def due_in() -> list[float]:
        async with store.transaction() as tx:
            rows = await tx.fetch(
                "SELECT next_attempt_at FROM webhook_deliveries WHERE webhook_id = $1",
                hook.webhook["id"],
            )
        return sorted(float(row["next_attempt_at"]) - clock.now() for row in rows)

    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"]) as hook,
            engine_for(platform, spread=jitter) as engine,
        ):
            hook.receiver.default = Answer(500)
            for index in range(count):
                await hook.api.customer(f"Customer {index}")
            await deliver(engine)
            first = await due_in()
            clock.advance(catalog.WEBHOOK_RETRY_DELAYS[1] * (1 + catalog.RETRY_JITTER))
            await deliver(engine)
            second = await due_in()
    assert len(hook.receiver.received) == 2 * count
    for delay, waits in ((catalog.WEBHOOK_RETRY_DELAYS[1], first), (300, second)):
        assert len(waits) == count
        assert all(delay <= wait <= delay * (1 + catalog.RETRY_JITTER) for wait in waits), waits
        # Spread out, not all at the schedule's second.
        assert len(set(waits)) > 1, waits


# --- The disable rule ----------------------------------------------------------------------------

WINDOW = 600.0
"""The shortened LEDGERPORT_WEBHOOK_DISABLE_AFTER of these tests."""


def _one_attempt(platform: Platform) -> Platform:
    """Deliveries fail for good at their first failed attempt; the disable rule's window is
    WINDOW seconds."""
    return configured(platform, webhook_retry_delays=(0,), webhook_disable_after=WINDOW)


DISABLE_RULE = {
    "three failures": ([500, 500, 500], True, "failing"),
    "two failures are not enough": ([500, 500], True, None),
    "a delivered attempt in the window": ([500, 500, 200, 500, 500, 500], True, None),
    "switched on within the window": ([500, 500, 500], False, None),
}
"""(answers, one a second; whether the endpoint was created before the window; the reason it
is switched off for, None: it stays on)."""


@pytest.mark.parametrize(
    ("statuses", "created_before", "reason"), DISABLE_RULE.values(), ids=DISABLE_RULE.keys()
)
async def test_the_disable_rule(
    platform: Platform,
    client: Any,
    admin_headers: dict[str, str],
    store: Store,
    clock: FrozenClock,
    statuses: list[int],
    created_before: bool,
    reason: str | None,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"]) as hook,
            engine_for(_one_attempt(platform)) as engine,
        ):
            if created_before:
                clock.advance(WINDOW + 1)
            await _answer_each(hook, engine, clock, statuses)
            read = await endpoint(hook)
            recorded = await operational_events(store, hook.api.world.app_id)
            deliveries = await hook.console.deliveries(hook.webhook["id"])
    webhook_id = hook.webhook["id"]
    assert [d["status"] for d in deliveries][::-1] == [
        "delivered" if status == 200 else "failed" for status in statuses
    ]
    assert (read["enabled"], read["disabledReason"]) == (reason is None, reason)
    assert recorded[0] == (FAILING, {"webhookId": webhook_id})
    disabled = [data for kind, data in recorded if kind == DISABLED]
    expected = [] if reason is None else [{"webhookId": webhook_id, "reason": reason}]
    assert disabled == expected


@pytest.mark.parametrize(
    ("moved_to", "switched_off"),
    [(700.0, True), (WINDOW + 303 + 1, False)],
    ids=["the window closed", "the failures left the window"],
)
async def test_the_scheduler_completes_the_disable_rule_by_the_clock(
    platform: Platform,
    client: Any,
    admin_headers: dict[str, str],
    store: Store,
    clock: FrozenClock,
    moved_to: float,
    switched_off: bool,
) -> None:
    """Three failures soon after the endpoint was created switch nothing off; the clock alone,
    once the window since its creation has passed, does (while they are still in it)."""
    short = _one_attempt(platform)
    scheduler = Scheduler(short)
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"]) as hook,
            engine_for(short) as engine,
        ):
            created = clock.now()
            healthy = await hook.console.webhook(hook.receiver.url, [])
            clock.advance(300)
            await _answer_each(hook, engine, clock, [500, 500, 500])  # at 301, 302 and 303
            early = await scheduler.check_endpoints_once()
            still_on = await endpoint(hook)
            clock.set(created + moved_to)
            checked = await scheduler.check_endpoints_once()
            again = await scheduler.check_endpoints_once()
            read = await endpoint(hook)
            other = await hook.console.ok("GET", f"/webhooks/{healthy['id']}")
            recorded = await operational_events(store, hook.api.world.app_id)
            sent = len(hook.receiver.received)
    assert (early, still_on["enabled"]) == (0, True)
    assert (checked, again) == ((1, 0) if switched_off else (0, 0))
    assert (read["enabled"], read["disabledReason"]) == (
        (False, "failing") if switched_off else (True, None)
    )
    assert (other["enabled"], other["disabledReason"]) == (True, None)
    webhook_id = hook.webhook["id"]
    assert recorded == [(FAILING, {"webhookId": webhook_id})] + (
        [(DISABLED, {"webhookId": webhook_id, "reason": "failing"})] if switched_off else []
    )
    assert sent == 3


# --- Health --------------------------------------------------------------------------------------


async def test_health_follows_the_outcomes_and_recovered_is_sent(
    platform: Platform,
    client: Any,
    admin_headers: dict[str, str],
    store: Store,
    clock: FrozenClock,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"]) as hook,
            receiving() as operations,
            engine_for(configured(platform, webhook_retry_delays=(0,))) as engine,
        ):
            operational = await hook.console.ok(
                "PUT", "/operational-webhook", {"url": operations.url}
            )
            fresh = await endpoint(hook)
            await _answer_each(hook, engine, clock, [200, 500, 200, 502])
            last_delivered = clock.now() - 1
            await _answer_each(hook, engine, clock, [500])
            mixed = await endpoint(hook)
            await _answer_each(hook, engine, clock, [204])
            await deliver(engine)  # the last operational event goes out
            again = await endpoint(hook)
            clock.advance(25 * HOUR)
            later = await endpoint(hook)
            recorded = await operational_events(store, hook.api.world.app_id)
    assert fresh["health"] == {
        "deliveredLast24h": 0,
        "failedLast24h": 0,
        "consecutiveFailures": 0,
        "lastDeliveryAt": None,
        "lastError": None,
    }
    assert mixed["health"] == {
        "deliveredLast24h": 2,
        "failedLast24h": 3,
        "consecutiveFailures": 2,
        "lastDeliveryAt": iso(last_delivered),
        "lastError": "HTTP 500",
    }
    recovered_at = clock.now() - 25 * HOUR
    assert again["health"] == {
        "deliveredLast24h": 3,
        "failedLast24h": 3,
        "consecutiveFailures": 0,
        "lastDeliveryAt": iso(recovered_at),
        "lastError": "HTTP 500",  # kept after a later delivery
    }
    # 25 hours on, the counts have left the window; the rest stays.
    assert later["health"] == {**again["health"], "deliveredLast24h": 0, "failedLast24h": 0}
    assert later["enabled"] is True
    assert [kind for kind, _ in recorded] == [FAILING, RECOVERED, FAILING, RECOVERED]
    bodies = [
        _operational_body(r, operational["secret"], recovered_at) for r in operations.received
    ]
    assert [(b["type"], b["data"]) for b in bodies] == recorded
