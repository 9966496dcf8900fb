"""Stream endpoints (contract.md: ``ledgerport listen``) through the console API on both stores:
the engine never posts their deliveries; a pull leases them signed in the stripe scheme (checked
with Stripe's own verifier), a report records the answer as the attempt, once per lease; a
failed answer is retried on the schedule, a lease not reported comes back, and who may pull or
report, what a report may carry, and the endpoint's end."""

from __future__ import annotations

import json
import math
import time
from typing import Any

import pytest
import stripe
import trio
import trio.lowlevel

from ledgerport import apps, queues
from ledgerport.clock import FrozenClock
from ledgerport.engine import Scheduler, StreamDesk
from ledgerport.http.developer.stream_endpoints import PULLS_PER_DEVELOPER
from ledgerport.platform import Platform

from .webhook_world import Console, deliver, engine_for, hooked

TIMEOUT = 30
PULLING = "ledgerport.state.Pulling"
"""Where the application keeps its count of waiting pulls (its state, by the class's name)."""
EVENTS = ["customer.created"]


async def _stream(console: Console, url: str = "http://localhost:4242/hook") -> dict[str, Any]:
    return await console.webhook(url, EVENTS, kind="stream")


async def _pull(console: Console, webhook_id: str, **args: Any) -> list[dict[str, Any]]:
    query = "&".join(f"{k}={v}" for k, v in {"wait": 0, **args}.items())
    answer = await console.ok("POST", f"/webhooks/{webhook_id}/stream/pull?{query}")
    return answer["data"]  # type: ignore[no-any-return]


async def _report(
    console: Console, webhook_id: str, pulled: dict[str, Any], code: int | None, **extra: Any
) -> dict[str, Any]:
    report = {
        "deliveryId": pulled["id"],
        "lease": pulled["lease"],
        "responseCode": code,
        "durationMs": 3.5,
        "responseBody": "ok",
        **extra,
    }
    answer = await console.ok("POST", f"/webhooks/{webhook_id}/stream/report", {"data": [report]})
    (reported,) = answer["data"]
    return reported  # type: ignore[no-any-return]


async def test_a_stream_endpoints_delivery_is_pulled_signed_and_reported_once(
    platform: Platform, client: Any, admin_headers: dict[str, str], clock: FrozenClock
) -> None:
    clock.set(float(math.floor(time.time())))
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, []) as hook, engine_for(platform) as engine:
            stream = await _stream(hook.console)
            listed = await hook.console.ok("GET", "/webhooks")
            await hook.api.customer()
            await deliver(engine)
            assert await engine.claim_once() == 0
            (pulled,) = await _pull(hook.console, stream["id"])
            assert await _pull(hook.console, stream["id"]) == []  # leased: not pulled twice
            reported = await _report(hook.console, stream["id"], pulled, 200)
            again = await _report(hook.console, stream["id"], pulled, 500)
            detail = await hook.console.ok(
                "GET", f"/webhooks/{stream['id']}/deliveries/{pulled['id']}"
            )
    assert stream["kind"] == "stream"
    assert stream["secret"].startswith("whsec_")
    assert stream["signature"] == "stripe"
    assert {w["id"]: w["kind"] for w in listed["data"]} == {
        hook.webhook["id"]: "push",
        stream["id"]: "stream",
    }
    assert hook.receiver.received == []  # nothing was posted anywhere
    headers = dict(pulled["headers"])
    assert "Host" not in headers
    assert "Content-Length" not in headers
    assert headers["X-Webhook-Id"] == pulled["id"]
    assert json.loads(pulled["body"])["type"] == "customer.created"
    assert pulled["attempt"] == 1
    stripe.WebhookSignature.verify_header(
        pulled["body"], headers["X-Webhook-Signature"], stream["secret"], tolerance=300
    )
    with pytest.raises(stripe.SignatureVerificationError):
        stripe.WebhookSignature.verify_header(
            pulled["body"] + " ", headers["X-Webhook-Signature"], stream["secret"], tolerance=300
        )
    assert reported == {
        "deliveryId": pulled["id"],
        "recorded": True,
        "status": "delivered",
        "attempts": 1,
        "nextAttemptAt": None,
    }
    assert again["recorded"] is False
    assert again["status"] is None
    assert detail["status"] == "delivered"
    (attempt,) = detail["attemptLog"]
    assert attempt["responseCode"] == 200
    assert attempt["durationMs"] == 3.5
    assert attempt["responseBody"] == "ok"
    assert attempt["requestHeaders"]["X-Webhook-Signature"] == headers["X-Webhook-Signature"]


async def test_a_failed_answer_is_retried_on_the_schedule_and_an_unreported_lease_returns(
    platform: Platform, client: Any, admin_headers: dict[str, str], clock: FrozenClock
) -> None:
    platform.stream_desk = StreamDesk(platform, spread=None)  # the schedule exactly
    retry_after = platform.config.webhook_retry_delays[1]
    assert retry_after <= queues.STREAM_LEASE
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, []) as hook, engine_for(platform) as engine:
            stream = await _stream(hook.console)
            await hook.console.ok("POST", f"/webhooks/{stream['id']}/test", status=202)
            await hook.api.customer()
            await deliver(engine)
            first = await _pull(hook.console, stream["id"])
            (event,) = [d for d in first if d["eventId"] is not None]
            (test,) = [d for d in first if d["eventId"] is None]
            failed = await _report(hook.console, stream["id"], event, 503)
            not_yet = await _pull(hook.console, stream["id"])
            clock.advance(queues.STREAM_LEASE + 1)
            # The event's retry is due, and the test delivery, never reported, is due again.
            again = await _pull(hook.console, stream["id"])
            late = await _report(hook.console, stream["id"], test, 200)
            (delivery,) = [d for d in await hook.console.deliveries(stream["id"]) if d["eventId"]]
    assert failed["status"] == "retrying"
    assert failed["attempts"] == 1
    assert failed["nextAttemptAt"] is not None
    assert not_yet == []
    assert sorted((d["id"], d["attempt"]) for d in again) == sorted(
        [(event["id"], 2), (test["id"], 1)]
    )
    assert late["recorded"] is False  # that lease ran out and was replaced
    assert delivery["status"] == "retrying"
    assert delivery["responseCode"] == 503


async def test_only_the_apps_developer_pulls_and_reports_and_reports_are_bounded(
    platform: Platform, client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, EVENTS) as hook:
            stream = await _stream(hook.console)
            async with hooked(client, admin_headers, []) as other:
                stranger = Console(client, other.console.token, hook.console.app_id)
                foreign = await stranger.call("POST", f"/webhooks/{stream['id']}/stream/pull")
            push = await hook.console.call("POST", f"/webhooks/{hook.webhook['id']}/stream/pull")
            bad_wait = await hook.console.call(
                "POST", f"/webhooks/{stream['id']}/stream/pull?wait=99"
            )
            path = f"/webhooks/{stream['id']}/stream/report"
            item = {
                "deliveryId": "dlv_0123456789abcdef01234567",
                "lease": "lst_x",
                "responseCode": 200,
                "durationMs": 1,
            }
            too_long = await hook.console.call(
                "POST", path, {"data": [{**item, "responseBody": "x" * 5000}]}
            )
            too_many = await hook.console.call("POST", path, {"data": [item] * 33})
            unknown = await hook.console.ok("POST", path, {"data": [item]})
            with_controls = await hook.console.call(
                "POST", "/webhooks", {"url": "http://localhost:1/", "events": [], "kind": "stream",
                                      "rateLimit": 5},
            )  # fmt: skip
            changed = await hook.console.call(
                "PATCH", f"/webhooks/{stream['id']}", {"url": "https://a.example/"}
            )
    assert foreign.status_code == 404
    assert push.status_code == 400
    assert "not a stream endpoint" in await push.get_data(as_text=True)
    assert bad_wait.status_code == 400
    assert too_long.status_code == 400
    assert too_many.status_code == 400
    assert unknown["data"][0]["recorded"] is False
    assert with_controls.status_code == 400
    assert changed.status_code == 400


async def test_a_deleted_or_abandoned_stream_endpoint_fails_what_waits(
    platform: Platform, client: Any, admin_headers: dict[str, str], clock: FrozenClock
) -> None:
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, []) as hook, engine_for(platform) as engine:
            deleted = await _stream(hook.console)
            abandoned = await _stream(hook.console)
            await hook.api.customer()
            await deliver(engine)
            await hook.console.ok("DELETE", f"/webhooks/{deleted['id']}", status=204)
            (waiting,) = await hook.console.deliveries(abandoned["id"])
            clock.advance(apps.STREAM_ABANDONED - 1)
            kept = await Scheduler(platform).end_abandoned_streams_once()
            clock.advance(2)
            ended = await Scheduler(platform).end_abandoned_streams_once()
            listed = await hook.console.ok("GET", "/webhooks")
            async with platform.store.transaction() as tx:
                rows = await tx.fetch(
                    "SELECT webhook_id, status, last_error FROM webhook_deliveries"
                    " WHERE webhook_id IN ($1, $2)",
                    deleted["id"],
                    abandoned["id"],
                )
    assert waiting["status"] == "queued"
    assert waiting["attempts"] == 0
    assert (kept, ended) == (0, 1)
    assert [w["id"] for w in listed["data"]] == [hook.webhook["id"]]
    errors = {row["webhook_id"]: (row["status"], row["last_error"]) for row in rows}
    assert errors[deleted["id"]] == ("failed", "not sent: the stream endpoint was deleted")
    assert errors[abandoned["id"]][0] == "failed"


async def test_a_developer_has_at_most_ten_pulls_waiting(
    platform: Platform, app: Any, client: Any, admin_headers: dict[str, str]
) -> None:
    def waiting() -> int:
        return sum(app.extensions.get(PULLING, {}).values())  # type: ignore[no-any-return]

    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, EVENTS) as hook:
            stream = await _stream(hook.console)
            path = f"/webhooks/{stream['id']}/stream/pull?wait=2"
            answers: list[int] = []

            async def pull() -> None:
                answers.append((await hook.console.call("POST", path)).status_code)

            async with trio.open_nursery() as nursery:
                for _ in range(PULLS_PER_DEVELOPER):
                    nursery.start_soon(pull)
                while waiting() < PULLS_PER_DEVELOPER:  # the ten are waiting on the server
                    await trio.lowlevel.checkpoint()
                refused = await hook.console.call("POST", path)
            after = await hook.console.call("POST", path.replace("wait=2", "wait=0"))
    assert refused.status_code == 429
    assert refused.headers["Retry-After"] == "5"
    assert answers == [200] * PULLS_PER_DEVELOPER
    assert after.status_code == 200
