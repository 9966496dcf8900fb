"""The delivery engine against a real receiver on loopback: every row of the delivery States
table, the retry schedule with the injected clock, signing and rotation, audiences and gating,
test deliveries, redelivery and its refusals, the cleanup, and exactly-once fan-out."""

from __future__ import annotations

import json
from typing import Any

import pytest
import stripe
import trio
import trio.testing

from ledgerport import apps, catalog, queues
from ledgerport.clock import FrozenClock
from ledgerport.engine import DeliveryEngine, verify_header
from ledgerport.platform import Platform
from ledgerport.storage import StorageUnavailable, Store

from ..conftest import PLATFORM_ENV
from ..platforms import build_platform
from ..receiver import Answer
from ..stores import RecordedSyncs
from .webhook_world import Hooked, deliver, engine_for, hooked

TIMEOUT = 30
WEBHOOK_TIMEOUT = 1.0


@pytest.fixture
async def platform(store: Store, clock: FrozenClock) -> Platform:
    """The suite's platform with a one-second webhook timeout (the timeout row of the table)."""
    return await build_platform(
        store, clock, {**PLATFORM_ENV, "LEDGERPORT_WEBHOOK_TIMEOUT": str(WEBHOOK_TIMEOUT)}
    )


async def _only(hook: Hooked) -> dict[str, Any]:
    (delivery,) = await hook.console.deliveries(hook.webhook["id"])
    return delivery


async def test_an_event_becomes_one_signed_delivery(
    platform: Platform, client: Any, admin_headers: dict[str, str], clock: FrozenClock
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"]) as hook,
            engine_for(platform) as engine,
        ):
            customer = await hook.api.customer("Acme Trading")
            await deliver(engine)

            (request,) = hook.receiver.received
            body = json.loads(request.body)
            delivery = await _only(hook)
    assert body == {
        "id": delivery["id"],
        "eventId": delivery["eventId"],
        "type": "customer.created",
        "apiVersion": catalog.CURRENT_API_VERSION,
        "businessId": hook.api.world.business_id,
        "created": int(clock.now()),
        "data": body["data"],
    }
    assert body["data"]["id"] == customer["id"]
    assert request.headers["content-type"] == "application/json"
    assert request.headers["x-webhook-id"] == delivery["id"]
    assert request.headers["x-webhook-event"] == "customer.created"
    assert request.headers["x-webhook-event-id"] == delivery["eventId"]
    signature = request.headers["x-webhook-signature"]
    assert " " not in signature
    secret = hook.webhook["secret"]
    assert secret.startswith("whsec_")
    # An independent verifier of the scheme (the HMAC key is the whole secret string); the
    # timestamp is the injected clock's, which it would compare with its own.
    stripe.WebhookSignature.verify_header(request.body.decode(), signature, secret, tolerance=None)
    assert signature.startswith(f"t={int(clock.now())},v1=")
    assert verify_header(signature, request.body, secret, now=clock.now(), tolerance=300)
    assert delivery["status"] == "delivered"
    assert delivery["attempts"] == 1
    assert delivery["responseCode"] == 200
    assert delivery["lastError"] is None
    assert delivery["nextAttemptAt"] is None


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_a_first_attempt_waits_until_its_event_is_on_disk(
    platform: Platform,
    client: Any,
    admin_headers: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A fan-out may read an event whose commit is not synced yet (SQLite's engine transactions
    do not wait for the disk in their turn): its first attempt is sent only once the event's
    commit is on disk, so no receiver hears of an event a power cut could take back."""
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"]) as hook,
            engine_for(platform) as engine,
        ):
            syncs = RecordedSyncs(monkeypatch, seconds=0.5)
            synced_at_arrival: list[int] = []

            def answer(_request: Any) -> Answer:
                synced_at_arrival.append(syncs.ended)
                return Answer()

            hook.receiver.answer_for = answer
            async with trio.open_nursery() as nursery:
                nursery.start_soon(hook.api.customer, "Acme Trading")
                await syncs.began.wait()  # the event committed, its sync under way
                assert await engine.dispatch_once()  # it reads the event during the sync
            await engine.settle()
            await hook.receiver.wait_for(1)
    (synced,) = synced_at_arrival
    assert synced >= 1


@pytest.mark.parametrize("status", [200, 201, 202, 204, 299])
async def test_any_2xx_is_delivered(
    platform: Platform, client: Any, admin_headers: dict[str, str], status: int
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"]) as hook,
            engine_for(platform) as engine,
        ):
            hook.receiver.default = Answer(status)
            await hook.api.customer()
            await deliver(engine)
            delivery = await _only(hook)
    assert (delivery["status"], delivery["responseCode"]) == ("delivered", status)


async def test_failures_follow_the_retry_schedule_and_the_sixth_is_final(
    platform: Platform, client: Any, admin_headers: dict[str, str], clock: FrozenClock
) -> None:
    delays = catalog.WEBHOOK_RETRY_DELAYS
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"]) as hook,
            engine_for(platform) as engine,
        ):
            hook.receiver.default = Answer(500)
            await hook.api.customer()
            await deliver(engine)
            seen = []
            for attempt in range(1, catalog.WEBHOOK_MAX_ATTEMPTS + 1):
                delivery = await _only(hook)
                seen.append((delivery["status"], delivery["attempts"]))
                assert delivery["responseCode"] == 500
                assert delivery["lastError"] == "HTTP 500"
                if attempt < catalog.WEBHOOK_MAX_ATTEMPTS:
                    # Not due a moment before the delay has passed, due when it has.
                    clock.advance(delays[attempt] - 1)
                    await deliver(engine)
                    assert len(hook.receiver.received) == attempt
                    clock.advance(1)
                    await deliver(engine)
                    assert len(hook.receiver.received) == attempt + 1
            # Failed for good: never attempted again.
            clock.advance(30 * 86400)
            await deliver(engine)
            assert len(hook.receiver.received) == catalog.WEBHOOK_MAX_ATTEMPTS
    assert seen == [("retrying", n) for n in range(1, 6)] + [("failed", 6)]
    # Each attempt was signed afresh with its own timestamp.
    stamps = [r.headers["x-webhook-signature"].split(",")[0] for r in hook.receiver.received]
    assert len(set(stamps)) == catalog.WEBHOOK_MAX_ATTEMPTS
    assert len({r.headers["x-webhook-id"] for r in hook.receiver.received}) == 1


async def test_a_timeout_and_a_refused_connection_are_failed_attempts(
    platform: Platform, client: Any, admin_headers: dict[str, str], clock: FrozenClock
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"]) as hook,
            engine_for(platform) as engine,
        ):
            hook.receiver.default = Answer(200, delay=WEBHOOK_TIMEOUT + 2)
            await hook.api.customer()
            await deliver(engine)
            timed_out = await _only(hook)
            # Nothing listens on port 9 of loopback (discard is not run here).
            await hook.console.ok(
                "PATCH", f"/webhooks/{hook.webhook['id']}", {"url": "http://127.0.0.1:9/hook"}
            )
            clock.advance(1)
            await hook.api.customer("Second")
            await deliver(engine)
            refused = (await hook.console.deliveries(hook.webhook["id"]))[0]
    assert timed_out["status"] == "retrying"
    assert timed_out["responseCode"] is None
    assert timed_out["lastError"].startswith("timeout")
    assert refused["status"] == "retrying"
    assert refused["responseCode"] is None
    assert refused["lastError"].startswith("connection error"), refused


async def _suspend(hook: Hooked, client: Any, admin_headers: dict[str, str]) -> None:
    response = await client.post(
        f"/admin/apps/{hook.api.world.app_id}/status",
        json={"status": "SUSPENDED"},
        headers=admin_headers,
    )
    assert response.status_code == 200


async def _deactivate(hook: Hooked, client: Any, admin_headers: dict[str, str]) -> None:
    response = await client.post(
        f"/admin/apps/{hook.api.world.app_id}/status",
        json={"status": "DEACTIVATED"},
        headers=admin_headers,
    )
    assert response.status_code == 200


async def _disable(hook: Hooked, client: Any, admin_headers: dict[str, str]) -> None:
    await hook.console.ok("PATCH", f"/webhooks/{hook.webhook['id']}", {"enabled": False})


async def _delete(hook: Hooked, client: Any, admin_headers: dict[str, str]) -> None:
    await hook.console.ok("DELETE", f"/webhooks/{hook.webhook['id']}", status=204)


async def _uninstall(hook: Hooked, client: Any, admin_headers: dict[str, str]) -> None:
    world = hook.api.world
    response = await client.delete(
        f"/admin/businesses/{world.business_id}/apps/{world.app_id}/access", headers=admin_headers
    )
    assert response.status_code == 204


SEND_TIME_CHECKS = {
    "webhook disabled": _disable,
    "webhook deleted": _delete,
    "app suspended": _suspend,
    "app deactivated": _deactivate,
    "app not installed in the business": _uninstall,
}


@pytest.mark.parametrize("reason", sorted(SEND_TIME_CHECKS))
async def test_the_send_time_check_fails_a_delivery_without_sending(
    platform: Platform, client: Any, admin_headers: dict[str, str], store: Store, reason: str
) -> None:
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, ["customer.created"]) as hook:
            await hook.api.customer()
            # Fanned out by an engine with no room: the delivery waits in the queue.
            async with engine_for(platform, held_per_webhook=0) as full:
                await full.dispatch_once()
            await SEND_TIME_CHECKS[reason](hook, client, admin_headers)
            async with engine_for(platform) as engine:
                await deliver(engine)
            async with store.transaction() as tx:
                row = await tx.fetchrow(
                    "SELECT status, attempts, last_error FROM webhook_deliveries"
                    " WHERE webhook_id = $1",
                    hook.webhook["id"],
                )
    assert hook.receiver.received == []
    assert row == {"status": "failed", "attempts": 0, "last_error": f"not sent: {reason}"}


async def test_a_scope_no_longer_held_fails_the_delivery_without_sending(
    platform: Platform, client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, ["customer.created"]) as hook:
            await hook.api.customer()
            async with engine_for(platform, held_per_webhook=0) as full:
                await full.dispatch_once()
            async with store.transaction() as tx:
                await tx.execute(
                    "UPDATE installations SET scopes = $1 WHERE app_id = $2",
                    json.dumps(["invoices:read"]),
                    hook.api.world.app_id,
                )
            async with engine_for(platform) as engine:
                await deliver(engine)
            delivery = await _only(hook)
    assert hook.receiver.received == []
    assert delivery["status"] == "failed"
    assert delivery["lastError"] == "not sent: scope customers:read no longer held"


# --- Audiences and gating ------------------------------------------------------------------------


async def test_business_events_need_the_scope_and_an_active_installation(
    platform: Platform, client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created", "app.uninstalled"]) as hook,
            engine_for(platform) as engine,
        ):
            world = hook.api.world
            await hook.api.customer("Seen")
            await deliver(engine)
            response = await client.delete(
                f"/admin/businesses/{world.business_id}/apps/{world.app_id}/access",
                headers=admin_headers,
            )
            assert response.status_code == 204
            await deliver(engine)
            types = [r.headers["x-webhook-event"] for r in hook.receiver.received]
    # The lifecycle notice arrives although no installation is left.
    assert types == ["customer.created", "app.uninstalled"]


async def test_an_app_without_the_gating_scope_gets_no_delivery(
    platform: Platform, client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["invoice.created"]) as hook,
            engine_for(platform) as engine,
        ):
            async with store.transaction() as tx:
                await tx.execute(
                    "UPDATE apps SET scopes = $1 WHERE id = $2",
                    json.dumps(["customers:read", "customers:write", "invoices:write"]),
                    hook.api.world.app_id,
                )
            customer = await hook.api.customer()
            await hook.api.invoice(customer["id"])
            await deliver(engine)
            assert await hook.console.deliveries(hook.webhook["id"]) == []
    assert hook.receiver.received == []


async def test_only_subscribed_types_reach_a_webhook(
    platform: Platform, client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["invoice.created"]) as hook,
            engine_for(platform) as engine,
        ):
            customer = await hook.api.customer()
            await hook.api.invoice(customer["id"])
            await deliver(engine)
            types = [r.headers["x-webhook-event"] for r in hook.receiver.received]
    assert types == ["invoice.created"]


# --- Exactly-once fan-out ------------------------------------------------------------------------


async def test_fan_out_happens_once_and_not_at_all_when_its_transaction_fails(
    platform: Platform, client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    class Crash(Exception):
        pass

    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, ["customer.created"]) as hook:
            await hook.api.customer()

            async def fan_out_then_crash() -> None:
                async with store.transaction() as tx:
                    pending = await queues.pending_events(tx, 100)
                    fanned = queues.plan_fan_out(
                        pending,
                        keyring=platform.keyring,
                        now=platform.now(),
                        lease="x",
                        lease_until=platform.now(),
                        take=lambda _app, _business, _webhook: False,
                    )
                    await queues.write_fan_out(tx, fanned)
                    raise Crash

            with pytest.raises(Crash):
                await fan_out_then_crash()
            async with engine_for(platform) as engine:
                await deliver(engine)
                assert await engine.dispatch_once() == 0
                await deliver(engine)
            async with store.transaction() as tx:
                count = await tx.fetchval("SELECT COUNT(*) FROM webhook_deliveries")
                marks = await tx.fetchval("SELECT COUNT(*) FROM event_dispatch")
    assert (count, marks) == (1, 0)
    assert len(hook.receiver.received) == 1


async def _dispatch_state(store: Store) -> tuple[int, int]:
    """Deliveries, and events waiting for fan-out."""
    async with store.transaction() as tx:
        deliveries = await tx.fetchval("SELECT COUNT(*) FROM webhook_deliveries")
        marks = await tx.fetchval("SELECT COUNT(*) FROM event_dispatch")
    return int(deliveries), int(marks)


async def test_an_attempt_made_before_its_fan_out_failed_to_commit_goes_again_under_its_id(
    platform: Platform,
    client: Any,
    admin_headers: dict[str, str],
    store: Store,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write = queues.write_fan_out

    async def write_then_fail_after_the_attempt(tx: Any, fan_out: queues.FanOut) -> None:
        await write(tx, fan_out)
        await hook.receiver.wait_for(1, within=TIMEOUT)
        raise StorageUnavailable("the commit did not happen")

    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"]) as hook,
            engine_for(platform) as engine,
        ):
            await hook.api.customer()
            waiting = await _dispatch_state(store)
            monkeypatch.setattr(queues, "write_fan_out", write_then_fail_after_the_attempt)
            with pytest.raises(StorageUnavailable):
                await engine.dispatch_once()
            monkeypatch.setattr(queues, "write_fan_out", write)
            await engine.settle()
            # Nothing of the fan-out was written: the same events wait, no delivery exists.
            assert await _dispatch_state(store) == waiting
            assert waiting[0] == 0
            await deliver(engine)
            delivery = await _only(hook)
    first, again = hook.receiver.received
    assert first.headers["x-webhook-id"] == again.headers["x-webhook-id"] == delivery["id"]
    assert first.body == again.body
    assert (delivery["status"], delivery["attempts"]) == ("delivered", 1)


async def test_outcomes_waiting_are_written_by_the_next_fan_out(
    platform: Platform, client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    async def statuses() -> list[str]:
        async with store.transaction() as tx:
            rows = await tx.fetch("SELECT status FROM webhook_deliveries ORDER BY created_at, id")
        return [row["status"] for row in rows]

    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"]) as hook,
            # The recorder would wait an hour: only a fan-out writes the outcome meanwhile.
            engine_for(platform, record_linger=3600) as engine,
        ):
            await hook.api.customer()
            await engine.dispatch_once()
            await hook.receiver.wait_for(1, within=TIMEOUT)
            await trio.testing.wait_all_tasks_blocked(cushion=0.01)  # the attempt has ended
            assert engine.held == 0
            assert await statuses() == ["queued"]
            await hook.api.customer()
            await engine.dispatch_once()
            assert (await statuses()).count("delivered") == 1
            await engine.settle()  # and settling writes at once
            assert await statuses() == ["delivered", "delivered"]


def test_a_delivery_id_is_derived_from_its_event_and_webhook() -> None:
    one = queues.delivery_id_for("evt_1", "wh_1")
    assert one == queues.delivery_id_for("evt_1", "wh_1")
    assert one.startswith("dlv_")
    assert len(one) == len("dlv_") + 24
    others = {queues.delivery_id_for("evt_2", "wh_1"), queues.delivery_id_for("evt_1", "wh_2")}
    assert len({one, *others}) == 3


# --- Test deliveries, rotation -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("events", "expected"),
    [(["payment.received", "invoice.paid"], "payment.received"), ([], "invoice.created")],
)
async def test_a_test_delivery_carries_the_first_event_sample(
    platform: Platform,
    client: Any,
    admin_headers: dict[str, str],
    events: list[str],
    expected: str,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, events) as hook, engine_for(platform) as engine:
            queued = await hook.console.ok(
                "POST", f"/webhooks/{hook.webhook['id']}/test", status=202
            )
            await deliver(engine)
            (request,) = hook.receiver.received
            delivery = await _only(hook)
    body = json.loads(request.body)
    kind = catalog.event_type(expected)
    assert kind is not None
    assert body["id"] == queued["deliveryId"] == delivery["id"]
    assert body["type"] == expected
    assert body["eventId"] is None
    assert body["businessId"] == "test"
    assert body["data"] == {**kind.sample_data(), "test": True}
    assert "x-webhook-event-id" not in request.headers
    assert delivery["status"] == "delivered"
    assert delivery["eventId"] is None


async def test_after_a_rotation_both_secrets_sign_for_24_hours(
    platform: Platform, client: Any, admin_headers: dict[str, str], clock: FrozenClock
) -> None:
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, []) as hook, engine_for(platform) as engine:
            webhook_id = hook.webhook["id"]
            rotation = await hook.console.ok("POST", f"/webhooks/{webhook_id}/rotate-secret")
            await hook.console.ok("POST", f"/webhooks/{webhook_id}/test", status=202)
            await deliver(engine)
            clock.advance(catalog.WEBHOOK_SECRET_OVERLAP)
            await hook.console.ok("POST", f"/webhooks/{webhook_id}/test", status=202)
            await deliver(engine)
            during, after = hook.receiver.received
    old, new = hook.webhook["secret"], rotation["secret"]
    assert new.startswith("whsec_")
    assert new != old
    assert rotation["previousSecretExpiresAt"].endswith("Z")
    assert during.headers["x-webhook-signature"].count("v1=") == 2
    assert after.headers["x-webhook-signature"].count("v1=") == 1
    for secret in (old, new):
        assert verify_header(
            during.headers["x-webhook-signature"],
            during.body,
            secret,
            now=clock.now() - catalog.WEBHOOK_SECRET_OVERLAP,
            tolerance=300,
        )
    now = clock.now()
    header = after.headers["x-webhook-signature"]
    assert verify_header(header, after.body, new, now=now, tolerance=1)
    assert not verify_header(
        after.headers["x-webhook-signature"], after.body, old, now=now, tolerance=1
    )


# --- Redelivery ----------------------------------------------------------------------------------


async def test_redelivery_of_a_failed_delivery_keeps_its_ids_and_starts_afresh(
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
            hook.receiver.default = Answer(500)
            await hook.api.customer()
            await deliver(engine)
            async with store.transaction() as tx:
                await tx.execute(
                    "UPDATE webhook_deliveries SET status = 'failed', attempts = 6,"
                    " next_attempt_at = NULL"
                )
            failed = await _only(hook)
            clock.advance(60)
            hook.receiver.default = Answer(200)
            path = f"/webhooks/{hook.webhook['id']}/deliveries/{failed['id']}/redeliver"
            answers = []

            async def redeliver() -> None:
                response = await hook.console.call("POST", path)
                answers.append(response.status_code)

            async with trio.open_nursery() as nursery:
                for _ in range(10):
                    nursery.start_soon(redeliver)
            queued = await _only(hook)
            await deliver(engine)
            delivered = await _only(hook)
    assert sorted(answers) == [202] + [400] * 9
    assert (queued["status"], queued["attempts"]) == ("queued", 0)
    assert (delivered["status"], delivered["attempts"]) == ("delivered", 1)
    first, again = hook.receiver.received
    assert again.headers["x-webhook-id"] == first.headers["x-webhook-id"] == failed["id"]
    assert again.headers["x-webhook-event-id"] == first.headers["x-webhook-event-id"]
    assert again.body == first.body
    # Signed afresh, at the time of the new attempt.
    assert again.headers["x-webhook-signature"] != first.headers["x-webhook-signature"]


async def _redeliver(hook: Hooked, delivery_id: str) -> Any:
    return await hook.console.call(
        "POST", f"/webhooks/{hook.webhook['id']}/deliveries/{delivery_id}/redeliver"
    )


async def _page_check(platform: Platform, hook: Hooked, delivery_id: str) -> str | None:
    """What the delivery's page says of redelivering it now (None: it offers the button)."""
    async with platform.store.transaction(reads=True) as tx:
        detail = await queues.get_delivery(tx, hook.webhook["id"], delivery_id)
    return queues.redelivery_check(detail, now=platform.now())


async def _mark_failed(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.execute(
            "UPDATE webhook_deliveries SET status = 'failed', attempts = 6, next_attempt_at = NULL"
        )


REFUSALS = {
    "it waits for an attempt": None,
    "the app is suspended": _suspend,
    "the app is deactivated": _deactivate,
    "the app is no longer installed in the business": _uninstall,
}


@pytest.mark.parametrize("reason", sorted(REFUSALS))
async def test_redelivery_is_refused(
    platform: Platform, client: Any, admin_headers: dict[str, str], store: Store, reason: str
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"]) as hook,
            engine_for(platform) as engine,
        ):
            hook.receiver.default = Answer(500)
            await hook.api.customer()
            await deliver(engine)  # retrying: waits for its next attempt
            change = REFUSALS[reason]
            if change is not None:
                await _mark_failed(store)
                await change(hook, client, admin_headers)
            delivery = await _only(hook)
            checked = await _page_check(platform, hook, delivery["id"])
            response = await _redeliver(hook, delivery["id"])
            body = await response.get_json()
    assert response.status_code == 400
    assert body["code"] == "REDELIVERY_REFUSED"
    assert reason in body["message"]
    # The delivery's page asks the same rule of the delivery it read whole, and says the same.
    assert checked is not None
    assert reason in checked


async def test_redelivery_is_refused_after_30_days_and_after_the_cleanup(
    platform: Platform,
    client: Any,
    admin_headers: dict[str, str],
    store: Store,
    clock: FrozenClock,
) -> None:
    from ledgerport.engine import Scheduler

    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"]) as hook,
            engine_for(platform) as engine,
        ):
            await hook.api.customer()
            await deliver(engine)
            delivery = await _only(hook)
            clock.advance(catalog.DELIVERY_RETENTION + 1)
            old = await _redeliver(hook, delivery["id"])
            removed = await Scheduler(platform).cleanup_once()
            gone = await _redeliver(hook, delivery["id"])
            listed = await hook.console.deliveries(hook.webhook["id"])
    assert old.status_code == gone.status_code == 400
    assert removed["delivery"] == 1
    assert listed == []


async def test_the_console_lists_the_100_most_recent_deliveries_newest_first(
    platform: Platform, client: Any, admin_headers: dict[str, str], clock: FrozenClock
) -> None:
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, []) as hook:
            ids = []
            for _ in range(catalog.CONSOLE_DELIVERIES_SHOWN + 5):
                clock.advance(1)
                queued = await hook.console.ok(
                    "POST", f"/webhooks/{hook.webhook['id']}/test", status=202
                )
                ids.append(queued["deliveryId"])
            listed = await hook.console.deliveries(hook.webhook["id"])
    assert [d["id"] for d in listed] == ids[::-1][: catalog.CONSOLE_DELIVERIES_SHOWN]
    assert {d["status"] for d in listed} == {"queued"}


# --- The running engine --------------------------------------------------------------------------


async def test_a_commit_wakes_the_running_engine_at_once(
    platform: Platform, client: Any, admin_headers: dict[str, str]
) -> None:
    """In process on SQLite, LISTEN/NOTIFY on PostgreSQL: well within the safety-net poll."""
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, ["customer.created"]) as hook:
            engine = DeliveryEngine(platform, poll=600)
            async with trio.open_nursery() as nursery:
                await nursery.start(engine.run)
                for count in (1, 2):
                    with trio.fail_after(5):
                        await hook.api.customer()
                        await hook.receiver.wait_for(count)
                test = await hook.console.ok(
                    "POST", f"/webhooks/{hook.webhook['id']}/test", status=202
                )
                with trio.fail_after(5):
                    await hook.receiver.wait_for(3)
                nursery.cancel_scope.cancel()
    assert json.loads(hook.receiver.received[2].body)["id"] == test["deliveryId"]


async def test_a_stopping_engine_gives_its_claims_back(
    platform: Platform, client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, ["customer.created"]) as hook:
            hook.receiver.default = Answer(200, delay=60)
            await hook.api.customer()
            async with engine_for(platform) as engine:
                await engine.dispatch_once()
                await hook.receiver.wait_for(1)
                assert engine.held == 1
            async with store.transaction() as tx:
                row = await tx.fetchrow(
                    "SELECT status, lease, next_attempt_at FROM webhook_deliveries"
                )
    assert row is not None
    assert (row["status"], row["lease"]) == ("queued", None)
    assert row["next_attempt_at"] <= platform.now()


async def test_redelivery_is_refused_when_the_scope_is_no_longer_held(
    platform: Platform, client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"]) as hook,
            engine_for(platform) as engine,
        ):
            await hook.api.customer()
            await deliver(engine)
            async with store.transaction() as tx:
                await tx.execute(
                    "UPDATE installations SET scopes = $1 WHERE app_id = $2",
                    json.dumps(["invoices:read"]),
                    hook.api.world.app_id,
                )
            delivery = await _only(hook)
            checked = await _page_check(platform, hook, delivery["id"])
            response = await _redeliver(hook, delivery["id"])
            body = await response.get_json()
    assert response.status_code == 400
    assert body["code"] == "REDELIVERY_REFUSED"
    assert "no longer holds customers:read" in body["message"]
    assert checked == "the app no longer holds customers:read"


async def test_in_production_the_address_connected_to_is_checked_at_send_time(
    platform: Platform, client: Any, admin_headers: dict[str, str]
) -> None:
    """A name that resolved to a public address when the webhook was saved and resolves to a
    loopback one now (DNS rebinding) is not connected to."""
    from dataclasses import replace

    async def public(host: str, port: int) -> list[str]:
        return ["93.184.216.34"]

    production = replace(platform, config=replace(platform.config, env="production"))
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, []) as hook:

            async def rebound(host: str, port: int) -> list[str]:
                return ["127.0.0.1"]

            async with production.store.transaction() as tx:
                webhook, _ = await apps.create_webhook(
                    tx,
                    production.keyring,
                    now=production.now(),
                    app_id=hook.api.world.app_id,
                    url=f"https://hooks.example.com:{hook.receiver.port}/in",
                    events=["customer.created"],
                    resolver=public,
                )
            await hook.api.customer()
            async with engine_for(production, resolver=rebound) as engine:
                await deliver(engine)
            async with production.store.transaction() as tx:
                row = await tx.fetchrow(
                    "SELECT status, last_error FROM webhook_deliveries WHERE webhook_id = $1",
                    webhook.id,
                )
    assert hook.receiver.received == []
    assert row is not None
    assert row["status"] == "retrying"
    assert "resolves only to addresses webhooks may not reach" in row["last_error"]


async def test_deliveries_are_counted_in_the_metrics(
    platform: Platform, client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"]) as hook,
            engine_for(platform) as engine,
        ):
            await hook.api.customer()
            await deliver(engine)
    registry = platform.metrics.registry
    delivered = registry.get_sample_value(
        "ledgerport_webhook_deliveries_total",
        {"outcome": "delivered", "type": "customer.created"},
    )
    attempts = registry.get_sample_value("ledgerport_webhook_attempt_duration_seconds_count")
    lag = registry.get_sample_value("ledgerport_webhook_event_to_first_attempt_seconds_count")
    assert (delivered, attempts, lag) == (1.0, 1.0, 1.0)


# --- Privacy events ------------------------------------------------------------------------------


PRIVACY = ["customer.redact", "supplier.redact", "business.redact"]


async def test_privacy_events_follow_their_operator_calls_to_the_webhooks(
    platform: Platform, client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, PRIVACY) as hook,
            engine_for(platform) as engine,
        ):
            world = hook.api.world
            customer = await hook.api.customer()
            supplier = await hook.api.ok("POST", "/suppliers", {"name": "Northwind"}, 201)
            for path in (
                f"/admin/businesses/{world.business_id}/customers/{customer['id']}/redact",
                f"/admin/businesses/{world.business_id}/suppliers/{supplier['id']}/redact",
                f"/admin/businesses/{world.business_id}/redact",
            ):
                response = await client.post(path, headers=admin_headers)
                assert response.status_code in (200, 202), await response.get_data(as_text=True)
            await deliver(engine)
            received = [
                (r.headers["x-webhook-event"], json.loads(r.body)) for r in hook.receiver.received
            ]
    assert sorted(event for event, _ in received) == sorted(PRIVACY)
    bodies = dict(received)
    assert bodies["customer.redact"]["data"]["customerId"] == customer["id"]
    assert bodies["supplier.redact"]["data"]["supplierId"] == supplier["id"]
    assert bodies["business.redact"]["businessId"] == world.business_id


async def test_a_fan_out_stops_at_whole_events_once_its_rows_reach_the_budget(
    platform: Platform, client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    """An event reaching many webhooks: a fan-out takes events in order until its deliveries
    reach the budget, and leaves the rest marked for the next one."""
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, ["customer.created"]) as hook:
            for _ in range(9):
                await hook.console.webhook(hook.receiver.url, ["customer.created"])
            for index in range(5):
                await hook.api.customer(f"Customer {index}")
            async with store.transaction() as tx:
                pending = await queues.pending_events(tx, 100)
            fanned = queues.plan_fan_out(
                pending,
                keyring=platform.keyring,
                now=platform.now(),
                lease="x",
                lease_until=platform.now(),
                take=lambda _app, _business, _webhook: False,
                max_rows=25,
            )
    # app.installed (no webhook of it), then five customers: 0, 10, 20, 30 rows: the fourth
    # event reaches the budget and the fan-out stops after it.
    assert [event.type for event in pending.events][:2] == ["app.installed", "customer.created"]
    assert len(pending.positions) == 6
    assert fanned.positions == pending.positions[:4]
    assert len(fanned.rows) == 30


async def test_claims_are_renewed_in_bounded_batches(
    platform: Platform, client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, ["customer.created"]) as hook:
            for index in range(7):
                await hook.api.customer(f"Customer {index}")
            async with store.transaction() as tx:
                pending = await queues.pending_events(tx, 100)
                fanned = queues.plan_fan_out(
                    pending,
                    keyring=platform.keyring,
                    now=platform.now(),
                    lease="lease_a",
                    lease_until=platform.now() + 30,
                    take=lambda _app, _business, _webhook: True,
                )
                await queues.write_fan_out(tx, fanned)
            until = platform.now() + 60
            renewed = []
            for _ in range(4):
                async with store.transaction() as tx:
                    renewed.append(
                        await queues.renew_claims(tx, lease="lease_a", until=until, limit=3)
                    )
            async with store.transaction() as tx:
                ends = await tx.fetch("SELECT DISTINCT next_attempt_at FROM webhook_deliveries")
    assert renewed == [3, 3, 1, 0]
    assert [row["next_attempt_at"] for row in ends] == [until]
