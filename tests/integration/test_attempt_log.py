"""The attempt log of webhook deliveries, against a real receiver on loopback: every attempt
numbered on across retries and a redelivery, the answer's first 4 KiB and no more (a huge
answer, one that never ends, one that stalls), the request's headers as the receiver got them,
nothing logged for a claim that lost its lease or an attempt never made, and the log going with
its delivery."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from ledgerport import catalog, queues
from ledgerport.clock import FrozenClock
from ledgerport.engine import Scheduler, verify_header
from ledgerport.platform import Platform
from ledgerport.storage import Store

from ..conftest import PLATFORM_ENV
from ..platforms import build_platform
from ..receiver import Answer
from ..stores import CountingTransaction
from .webhook_world import Hooked, deliver, engine_for, hooked

TIMEOUT = 30
WEBHOOK_TIMEOUT = 1.0
KEPT = queues.RESPONSE_BODY_KEPT


@pytest.fixture
async def platform(store: Store, clock: FrozenClock) -> Platform:
    """The suite's platform with a one-second webhook timeout."""
    return await build_platform(
        store, clock, {**PLATFORM_ENV, "LEDGERPORT_WEBHOOK_TIMEOUT": str(WEBHOOK_TIMEOUT)}
    )


async def _only(hook: Hooked) -> dict[str, Any]:
    (delivery,) = await hook.console.deliveries(hook.webhook["id"])
    return delivery


async def _log(store: Store, delivery_id: str) -> list[queues.LoggedAttempt]:
    async with store.transaction() as tx:
        return await queues.attempt_log(tx, delivery_id)


async def _whole(
    store: Store, webhook_id: str, delivery_id: str, newest: int | None = None
) -> queues.DeliveryDetail:
    """The delivery read whole, as its page and the API read it: in one statement."""
    async with store.transaction(reads=True) as tx:
        counting = CountingTransaction(tx)
        detail = await queues.get_delivery(counting, webhook_id, delivery_id, attempts=newest)
    assert counting.statements == 1
    return detail


async def _attempt_rows(store: Store) -> int:
    async with store.transaction() as tx:
        return int(await tx.fetchval("SELECT COUNT(*) FROM webhook_attempts"))


async def test_every_attempt_is_logged_and_numbered_on_across_a_redelivery(
    platform: Platform,
    client: Any,
    admin_headers: dict[str, str],
    store: Store,
    clock: FrozenClock,
) -> None:
    delays = catalog.WEBHOOK_RETRY_DELAYS
    failures = catalog.WEBHOOK_MAX_ATTEMPTS
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"]) as hook,
            engine_for(platform) as engine,
        ):
            hook.receiver.script = [
                Answer(500, body=f"failure {n}".encode()) for n in range(1, failures + 1)
            ]
            hook.receiver.default = Answer(200, body=b"fine")
            await hook.api.customer()
            starts = [clock.now()]
            await deliver(engine)
            for attempt in range(1, failures):
                clock.advance(delays[attempt])
                starts.append(clock.now())
                await deliver(engine)
            failed = await _only(hook)
            clock.advance(60)
            path = f"/webhooks/{hook.webhook['id']}/deliveries/{failed['id']}/redeliver"
            await hook.console.ok("POST", path, status=202)
            starts.append(clock.now())
            await deliver(engine)
            delivered = await _only(hook)
            log = await _log(store, failed["id"])
            whole = await _whole(store, hook.webhook["id"], failed["id"])
            newest = await _whole(store, hook.webhook["id"], failed["id"], newest=3)
            async with store.transaction(reads=True) as tx:
                with pytest.raises(queues.DeliveryNotFound):
                    await queues.get_delivery(tx, "wh_other", failed["id"])
            test = await hook.console.ok("POST", f"/webhooks/{hook.webhook['id']}/test", status=202)
            untried = await _whole(store, hook.webhook["id"], test["deliveryId"])
    assert (failed["status"], failed["attempts"]) == ("failed", failures)
    # The delivery's count starts afresh; the log's numbers go on.
    assert (delivered["status"], delivered["attempts"]) == ("delivered", 1)
    assert [a.attempt for a in log] == list(range(1, failures + 2))
    # Read whole, in one statement: the log, or its newest; a delivery not tried yet has none.
    assert (untried.delivery.status, untried.attempt_log) == ("queued", [])
    assert (whole.delivery.id, whole.delivery.status) == (failed["id"], "delivered")
    assert whole.attempt_log == log
    assert newest.attempt_log == log[-3:]
    assert [a.started_at for a in log] == starts
    assert [a.response_code for a in log] == [500] * failures + [200]
    assert [a.response_text for a in log] == [f"failure {n}" for n in range(1, 7)] + ["fine"]
    assert [a.error for a in log] == ["HTTP 500"] * failures + [None]
    assert not any(a.response_truncated for a in log)
    assert all(a.duration_ms >= 0 for a in log)
    # Each attempt's headers are the ones its request arrived with, signature included, and the
    # signature is that attempt's own.
    received = hook.receiver.received
    assert len(received) == len(log)
    for attempt, request in zip(log, received, strict=True):
        sent = {name.lower(): value for name, value in attempt.request_headers.items()}
        assert sent == request.headers
        signature = sent["x-webhook-signature"]
        assert verify_header(
            signature, request.body, hook.webhook["secret"], now=attempt.started_at, tolerance=1
        )
    assert len({a.request_headers["X-Webhook-Signature"] for a in log}) == len(log)


BODIES = {
    "short": (b'{"ok":true}', b'{"ok":true}', False),
    "exactly 4 KiB": (b"b" * KEPT, b"b" * KEPT, False),
    "one byte more": (b"c" * (KEPT + 1), b"c" * KEPT, True),
    "1 MiB": (b"d" * (1 << 20), b"d" * KEPT, True),
    "empty": (b"", b"", False),
}


@pytest.mark.parametrize("name", sorted(BODIES))
async def test_the_first_4_kib_of_an_answer_are_kept(
    platform: Platform, client: Any, admin_headers: dict[str, str], store: Store, name: str
) -> None:
    sent, kept, truncated = BODIES[name]
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"]) as hook,
            engine_for(platform) as engine,
        ):
            hook.receiver.default = Answer(201, body=sent)
            await hook.api.customer()
            await deliver(engine)
            delivery = await _only(hook)
            (attempt,) = await _log(store, delivery["id"])
    assert delivery["status"] == "delivered"
    assert (attempt.response_code, attempt.response_body) == (201, kept)
    assert attempt.response_truncated is truncated


async def test_a_character_cut_at_4_kib_is_left_out_of_the_text(
    platform: Platform, client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    body = b"a" * (KEPT - 1) + "é and more".encode()
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"]) as hook,
            engine_for(platform) as engine,
        ):
            hook.receiver.default = Answer(200, body=body)
            await hook.api.customer()
            await deliver(engine)
            (attempt,) = await _log(store, (await _only(hook))["id"])
    assert attempt.response_body == body[:KEPT]
    assert attempt.response_text == "a" * (KEPT - 1)


async def test_an_answer_without_end_is_read_to_4_kib_and_no_further(
    platform: Platform, client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    """A receiver streaming its answer for ever: the attempt stops reading at 4 KiB, closes
    the connection and ends well within its timeout, delivered (the status was 2xx)."""
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"]) as hook,
            engine_for(platform) as engine,
        ):
            hook.receiver.default = Answer(200, body=b"head:", endless=True)
            await hook.api.customer()
            await deliver(engine)
            delivery = await _only(hook)
            (attempt,) = await _log(store, delivery["id"])
            await hook.receiver.wait_cut_off()
    assert delivery["status"] == "delivered"
    assert attempt.response_body == b"head:" + b"x" * (KEPT - 5)
    assert attempt.response_truncated
    assert attempt.duration_ms < WEBHOOK_TIMEOUT * 1000


async def test_an_answer_that_stalls_times_out_with_what_arrived(
    platform: Platform, client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"]) as hook,
            engine_for(platform) as engine,
        ):
            hook.receiver.default = Answer(200, body=b"partial", stall=True)
            await hook.api.customer()
            await deliver(engine)
            delivery = await _only(hook)
            (attempt,) = await _log(store, delivery["id"])
    timeout = f"timeout: the answer's body did not end within {WEBHOOK_TIMEOUT:g} s"
    assert (delivery["status"], delivery["lastError"]) == ("retrying", timeout)
    assert (attempt.response_code, attempt.response_body) == (200, b"partial")
    assert attempt.response_truncated
    assert attempt.error == timeout
    assert attempt.duration_ms >= WEBHOOK_TIMEOUT * 1000


async def test_a_refused_connection_is_logged_without_an_answer(
    platform: Platform, client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"]) as hook,
            engine_for(platform) as engine,
        ):
            # Nothing listens on port 9 of loopback (discard is not run here).
            await hook.console.ok(
                "PATCH", f"/webhooks/{hook.webhook['id']}", {"url": "http://127.0.0.1:9/hook"}
            )
            await hook.api.customer()
            await deliver(engine)
            (attempt,) = await _log(store, (await _only(hook))["id"])
    assert (attempt.attempt, attempt.response_code, attempt.response_body) == (1, None, None)
    assert attempt.response_text is None
    assert str(attempt.error).startswith("connection error")
    assert attempt.request_headers["Host"] == "127.0.0.1:9"


async def test_a_delivery_refused_at_send_time_logs_no_attempt(
    platform: Platform, client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, ["customer.created"]) as hook:
            await hook.api.customer()
            async with engine_for(platform, held_per_webhook=0) as full:
                await full.dispatch_once()
            await hook.console.ok("PATCH", f"/webhooks/{hook.webhook['id']}", {"enabled": False})
            async with engine_for(platform) as engine:
                await deliver(engine)
            delivery = await _only(hook)
    assert delivery["status"] == "failed"
    assert await _log(store, delivery["id"]) == []


async def test_an_outcome_whose_claim_lost_its_lease_logs_nothing(
    platform: Platform, client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, ["customer.created"]) as hook:
            await hook.api.customer()
            async with store.transaction() as tx:
                pending = await queues.pending_events(tx, 100)
                now = platform.now()
                fanned = queues.plan_fan_out(
                    pending,
                    keyring=platform.keyring,
                    now=now,
                    lease="lease_a",
                    lease_until=now + 30,
                    take=lambda _app, _business, _webhook: True,
                )
                await queues.write_fan_out(tx, fanned)
            (claimed,) = fanned.claimed

            def outcome(lease: str, code: int) -> queues.AttemptOutcome:
                made = queues.AttemptMade(now, 12.5, f"by {lease}".encode(), False, {"A": lease})
                return queues.AttemptOutcome(
                    delivery_id=claimed.id,
                    lease=lease,
                    status="retrying",
                    attempts=1,
                    response_code=code,
                    error=f"HTTP {code}",
                    finished_at=now,
                    next_attempt_at=now + 60,
                    first_attempt_at=now,
                    made=made,
                )

            async with store.transaction() as tx:
                await queues.record_outcomes(tx, [outcome("lease_b", 502)])
            assert await _log(store, claimed.id) == []
            async with store.transaction() as tx:
                await queues.record_outcomes(tx, [outcome("lease_a", 503), outcome("lease_b", 504)])
                # Written once: the lease is let go with the outcome.
                await queues.record_outcomes(tx, [outcome("lease_a", 505)])
            log = await _log(store, claimed.id)
            async with store.transaction() as tx:
                row = await tx.fetchrow(
                    "SELECT response_code, attempts_made, lease FROM webhook_deliveries"
                    " WHERE id = $1",
                    claimed.id,
                )
    assert [(a.attempt, a.response_code, a.response_body) for a in log] == [(1, 503, b"by lease_a")]
    assert log[0].request_headers == {"A": "lease_a"}
    assert row == {"response_code": 503, "attempts_made": 1, "lease": None}


async def test_the_attempt_log_goes_with_its_delivery(
    platform: Platform,
    client: Any,
    admin_headers: dict[str, str],
    store: Store,
    clock: FrozenClock,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"]) as hook,
            engine_for(platform) as engine,
        ):
            hook.receiver.script = [Answer(500)]
            await hook.api.customer()
            await deliver(engine)
            clock.advance(catalog.WEBHOOK_RETRY_DELAYS[1])
            await deliver(engine)
            delivery = await _only(hook)
            kept = await _attempt_rows(store)
            # Created at the first attempt: kept for 30 days from then.
            clock.advance(catalog.DELIVERY_RETENTION - catalog.WEBHOOK_RETRY_DELAYS[1])
            await Scheduler(platform).cleanup_once()
            still = await _attempt_rows(store)
            clock.advance(1)
            removed = await Scheduler(platform).cleanup_once()
            gone = await _attempt_rows(store)
    assert delivery["status"] == "delivered"
    assert (kept, still) == (2, 2)
    assert (removed["delivery"], gone) == (1, 0)
