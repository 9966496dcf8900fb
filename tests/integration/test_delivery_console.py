"""The console's delivery routes (contract.md: Developer console, second round): the list's
filters, cursor and test mark, one delivery with its payload and attempt log, the recovery of a
webhook's failed deliveries with its bounds and refusals, and that an app's developer sees
nothing of another app's deliveries through any id or filter."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from ledgerport import apps, catalog, queues
from ledgerport.clock import FrozenClock
from ledgerport.engine import verify_header
from ledgerport.http.developer import iso_time as _iso
from ledgerport.platform import Platform
from ledgerport.storage import Store

from ..receiver import Answer
from .webhook_world import Hooked, deliver, engine_for, hooked

TIMEOUT = 30
EVENTS = ["customer.created", "invoice.created"]


def _path(hook: Hooked, rest: str = "") -> str:
    return f"/webhooks/{hook.webhook['id']}{rest}"


async def _mark_failed(store: Store, *delivery_ids: str) -> None:
    async with store.transaction() as tx:
        for delivery_id in delivery_ids:
            await tx.execute(
                "UPDATE webhook_deliveries SET status = 'failed', attempts = 6,"
                " next_attempt_at = NULL WHERE id = $1",
                delivery_id,
            )


async def _status(store: Store, delivery_id: str) -> str:
    async with store.transaction() as tx:
        status: str = await tx.fetchval(
            "SELECT status FROM webhook_deliveries WHERE id = $1", delivery_id
        )
    return status


# --- One delivery --------------------------------------------------------------------------------


async def test_a_delivery_answers_its_payload_and_every_attempt(
    platform: Platform,
    client: Any,
    admin_headers: dict[str, str],
    clock: FrozenClock,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, EVENTS) as hook,
            engine_for(platform) as engine,
        ):
            hook.receiver.script = [Answer(500, body=b'{"error":"down for a moment"}')]
            hook.receiver.default = Answer(200, body=b"thanks")
            await hook.api.customer()
            await deliver(engine)
            clock.advance(catalog.WEBHOOK_RETRY_DELAYS[1])
            await deliver(engine)
            (listed,) = await hook.console.deliveries(hook.webhook["id"])
            detail = await hook.console.ok("GET", _path(hook, f"/deliveries/{listed['id']}"))
    first, second = hook.receiver.received
    assert {key: detail[key] for key in listed} == listed
    assert listed["test"] is False
    assert (listed["status"], listed["attempts"], listed["responseCode"]) == ("delivered", 2, 200)
    # The payload is the body as sent, character for character: what was signed.
    assert detail["payload"].encode() == first.body == second.body
    assert json.loads(detail["payload"])["id"] == listed["id"]
    log = detail["attemptLog"]
    assert [a["attempt"] for a in log] == [1, 2]
    assert [a["responseCode"] for a in log] == [500, 200]
    assert [a["responseBody"] for a in log] == ['{"error":"down for a moment"}', "thanks"]
    assert [a["responseBodyTruncated"] for a in log] == [False, False]
    assert [a["error"] for a in log] == ["HTTP 500", None]
    assert log[1]["startedAt"] > log[0]["startedAt"]
    for attempt, request in zip(log, (first, second), strict=True):
        headers = {name.lower(): value for name, value in attempt["requestHeaders"].items()}
        assert headers == request.headers
        assert verify_header(
            headers["x-webhook-signature"],
            detail["payload"].encode(),
            hook.webhook["secret"],
            now=clock.now(),
            tolerance=catalog.WEBHOOK_RETRY_DELAYS[1] + 1,
        )
    assert set(log[0]) == {
        "attempt",
        "startedAt",
        "durationMs",
        "responseCode",
        "responseBody",
        "responseBodyTruncated",
        "error",
        "requestHeaders",
        "responseBodyDroppedAt",
    }


async def test_a_test_delivery_is_marked_and_has_no_attempt_before_it_is_sent(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, EVENTS) as hook:
            queued = await hook.console.ok("POST", _path(hook, "/test"), status=202)
            detail = await hook.console.ok(
                "GET", _path(hook, f"/deliveries/{queued['deliveryId']}")
            )
    assert (detail["test"], detail["eventId"], detail["status"]) == (True, None, "queued")
    assert detail["nextAttemptAt"] is not None
    assert detail["attemptLog"] == []
    assert json.loads(detail["payload"])["businessId"] == queues.TEST_BUSINESS_ID


# --- The list's filters --------------------------------------------------------------------------


async def _three_kinds(hook: Hooked, engine: Any, clock: FrozenClock) -> dict[str, Any]:
    """A delivered customer.created, a retrying invoice.created and a queued test delivery,
    by name, as the list shows them."""
    hook.receiver.answer_for = lambda request: Answer(
        500 if b'"invoice.created"' in request.body else 200
    )
    customer = await hook.api.customer()
    await deliver(engine)
    clock.advance(1)
    await hook.api.invoice(customer["id"])
    await deliver(engine)
    clock.advance(1)
    await hook.console.ok("POST", _path(hook, "/test"), status=202)
    listed = await hook.console.deliveries(hook.webhook["id"])
    return {
        "test": next(d for d in listed if d["test"]),
        "customer": next(d for d in listed if d["type"] == "customer.created"),
        "invoice": next(d for d in listed if d["type"] == "invoice.created" and not d["test"]),
    }


FILTERS = {
    "status=delivered": ["customer"],
    "status=retrying": ["invoice"],
    "status=queued": ["test"],
    "status=failed": [],
    "status=queued,delivered": ["test", "customer"],
    "status=queued&status=retrying": ["test", "invoice"],
    "type=customer.created": ["customer"],
    "type=invoice.created": ["test", "invoice"],
    "type=invoice.created,customer.created": ["test", "invoice", "customer"],
    "type=invoice.created&status=retrying": ["invoice"],
    "type=customer.created&status=retrying": [],
    "eventId={customer}": ["customer"],
    "eventId={customer}&status=delivered": ["customer"],
    "eventId={customer}&type=invoice.created": [],
    "eventId=evt_000000000000000000000000": [],
    "": ["test", "invoice", "customer"],
}


async def test_the_list_filters_by_status_type_and_event(
    platform: Platform, client: Any, admin_headers: dict[str, str], clock: FrozenClock
) -> None:
    seen = {}
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["invoice.created", "customer.created"]) as hook,
            engine_for(platform) as engine,
        ):
            kinds = await _three_kinds(hook, engine, clock)
            for query in FILTERS:
                filled = query.replace("{customer}", kinds["customer"]["eventId"])
                page = await hook.console.ok("GET", _path(hook, f"/deliveries?{filled}"))
                seen[query] = [d["id"] for d in page["data"]]
    expected = {query: [kinds[name]["id"] for name in names] for query, names in FILTERS.items()}
    assert seen == expected
    assert kinds["test"]["type"] == "invoice.created"  # the webhook's first event
    assert (kinds["test"]["eventId"], kinds["invoice"]["test"]) == (None, False)


async def test_the_list_goes_on_a_page_at_a_time_with_its_cursor(
    client: Any, admin_headers: dict[str, str], store: Store, clock: FrozenClock
) -> None:
    shown = catalog.CONSOLE_DELIVERIES_SHOWN
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, EVENTS) as hook:
            async with store.transaction() as tx:
                webhook = await apps.get_webhook(tx, hook.api.world.app_id, hook.webhook["id"])
                ids = [
                    await queues.create_test_delivery(
                        tx, now=clock.now() + n // 2, webhook=webhook, pinned_version=None
                    )
                    for n in range(shown + 3)
                ]
            await _mark_failed(store, ids[-1])
            first = await hook.console.ok("GET", _path(hook, "/deliveries"))
            second = await hook.console.ok("GET", _path(hook, f"/deliveries?after={first['next']}"))
            queued = await hook.console.ok("GET", _path(hook, "/deliveries?status=queued"))
            queued_next = await hook.console.ok(
                "GET", _path(hook, f"/deliveries?status=queued&after={queued['next']}")
            )
    # Newest first: by creation, then by id where two were created at one moment.
    order = sorted(ids, key=lambda i: (ids.index(i) // 2, i), reverse=True)
    assert [d["id"] for d in first["data"]] == order[:shown]
    assert first["next"] == order[shown - 1]
    assert [d["id"] for d in second["data"]] == order[shown:]
    assert second["next"] is None
    # A filtered list pages through what the filters keep, with the same cursor.
    unfailed = [i for i in order if i != ids[-1]]
    assert [d["id"] for d in queued["data"] + queued_next["data"]] == unfailed
    assert queued_next["next"] is None


LIST_REFUSALS = {
    "after=": "after must not be empty",
    "after=dlv_000000000000000000000000": "after must be the next of an earlier page",
    "status=bogus": "status must be one or more of queued, retrying, delivered, failed",
    "status=": "status must be one or more of",
    "status=delivered,": "status must be one or more of",
    "type=invoice.deleted.forever": "type must be one or more of",
    "type=": "type must be one or more of",
    "eventId=": "eventId must not be empty",
}


@pytest.mark.parametrize("query", sorted(LIST_REFUSALS))
async def test_bad_filters_are_validation_errors(
    client: Any, admin_headers: dict[str, str], query: str
) -> None:
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, EVENTS) as hook:
            response = await hook.console.call("GET", _path(hook, f"/deliveries?{query}"))
            body = await response.get_json()
    assert response.status_code == 400
    assert "code" not in body
    assert LIST_REFUSALS[query] in body["message"][0]


# --- Recovery ------------------------------------------------------------------------------------


async def test_recover_redelivers_the_failed_deliveries_since_and_skips_those_refused(
    platform: Platform,
    client: Any,
    admin_headers: dict[str, str],
    store: Store,
    clock: FrozenClock,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, EVENTS) as hook,
            engine_for(platform) as engine,
        ):
            hook.receiver.default = Answer(500)
            await hook.api.customer("Before")
            await deliver(engine)
            (before,) = await hook.console.deliveries(hook.webhook["id"])
            clock.advance(600)
            since = clock.now()
            await hook.api.customer("After")
            await deliver(engine)
            clock.advance(1)
            tests = [
                (await hook.console.ok("POST", _path(hook, "/test"), status=202))["deliveryId"]
                for _ in range(2)
            ]
            await deliver(engine)
            clock.advance(1)
            await hook.api.customer("Still retrying")
            await deliver(engine)
            listed = await hook.console.deliveries(hook.webhook["id"])
            still = listed[0]["id"]
            after = next(d["id"] for d in listed if d["id"] not in (*tests, still, before["id"]))
            await _mark_failed(store, before["id"], after, *tests)
            # The app leaves the business: its business events may not go again, its tests may.
            world = hook.api.world
            response = await client.delete(
                f"/admin/businesses/{world.business_id}/apps/{world.app_id}/access",
                headers=admin_headers,
            )
            assert response.status_code == 204
            clock.advance(60)
            answer = await hook.console.ok(
                "POST", _path(hook, "/recover"), {"since": _iso(since)}, status=202
            )
            statuses = {
                name: await _status(store, delivery_id)
                for name, delivery_id in [
                    ("before", before["id"]),
                    ("after", after),
                    ("test 1", tests[0]),
                    ("test 2", tests[1]),
                    ("still retrying", still),
                ]
            }
            again = await hook.console.ok(
                "POST", _path(hook, "/recover"), {"since": _iso(since)}, status=202
            )
    assert answer == {"queued": 2, "skipped": 1, "next": None}
    assert statuses == {
        "before": "failed",  # created before since
        "after": "failed",  # refused: the app is no longer installed in the business
        "test 1": "queued",
        "test 2": "queued",
        "still retrying": "retrying",
    }
    # The queued ones are no longer failed; the refused one is looked at again.
    assert again == {"queued": 0, "skipped": 1, "next": None}


async def test_a_recovery_looks_at_a_bounded_number_and_goes_on_after_its_next(
    platform: Platform,
    client: Any,
    admin_headers: dict[str, str],
    store: Store,
    clock: FrozenClock,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, EVENTS) as hook:
            since = clock.now()
            ids = []
            for _ in range(7):
                clock.advance(1)
                queued = await hook.console.ok("POST", _path(hook, "/test"), status=202)
                ids.append(queued["deliveryId"])
            await _mark_failed(store, *ids)
            # Refused one of them as a business event of a business left would be.
            async with store.transaction() as tx:
                await tx.execute(
                    "UPDATE webhook_deliveries SET event_id = 'evt_gone', business_id = 'bus_gone',"
                    " type = 'customer.created' WHERE id = $1",
                    ids[1],
                )
            async with store.transaction() as tx:
                webhook = await apps.get_webhook(tx, hook.api.world.app_id, hook.webhook["id"])
            steps = []
            after = None
            while True:
                async with store.transaction() as tx:
                    step = await queues.recover(
                        tx, now=clock.now(), webhook=webhook, since=since, after=after, limit=3
                    )
                steps.append(step)
                if step.next is None:
                    break
                after = step.next
            statuses = [await _status(store, delivery_id) for delivery_id in ids]
    assert [(s.queued, s.skipped) for s in steps] == [(2, 1), (3, 0), (1, 0)]
    assert [s.next for s in steps] == [ids[2], ids[5], None]
    assert statuses == ["queued", "failed", *["queued"] * 5]


RECOVER_REFUSALS = {
    "older than 30 days": (
        {"since": "{30 days and a second ago}"},
        "since must be within the last 30 days",
    ),
    "in the future": ({"since": "{a minute ahead}"}, "since must not be in the future"),
    "not a time": ({"since": "yesterday"}, "since must be an ISO 8601 time"),
    "without an offset": ({"since": "2026-09-22T08:00:00"}, "since must be an ISO 8601 time"),
    "a date alone": ({"since": "2026-09-22"}, "since must be an ISO 8601 time"),
    "missing": ({}, "since"),
    "not a string": ({"since": 1790000000}, "since"),
    "another field": ({"since": "{now}", "until": "{now}"}, "until"),
    "an unknown after": (
        {"since": "{now}", "after": "dlv_000000000000000000000000"},
        "after must be the next of an earlier recovery",
    ),
}


@pytest.mark.parametrize("case", sorted(RECOVER_REFUSALS))
async def test_bad_recoveries_are_validation_errors(
    client: Any, admin_headers: dict[str, str], clock: FrozenClock, case: str
) -> None:
    body, message = RECOVER_REFUSALS[case]
    moments = {
        "{30 days and a second ago}": _iso(clock.now() - catalog.DELIVERY_RETENTION - 1),
        "{a minute ahead}": _iso(clock.now() + 60),
        "{now}": _iso(clock.now()),
    }
    filled = {
        key: moments.get(value, value) if isinstance(value, str) else value
        for key, value in body.items()
    }
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, EVENTS) as hook:
            response = await hook.console.call("POST", _path(hook, "/recover"), filled)
            answer = await response.get_json()
    assert response.status_code == 400, answer
    assert "code" not in answer
    assert any(message in line for line in answer["message"]), answer


async def test_since_may_be_exactly_30_days_ago(
    client: Any, admin_headers: dict[str, str], clock: FrozenClock
) -> None:
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, EVENTS) as hook:
            oldest = _iso(clock.now() - catalog.DELIVERY_RETENTION)
            answer = await hook.console.ok(
                "POST", _path(hook, "/recover"), {"since": oldest}, status=202
            )
    assert answer == {"queued": 0, "skipped": 0, "next": None}


# --- Another app's deliveries --------------------------------------------------------------------


async def test_nothing_of_another_apps_deliveries_is_reachable(
    platform: Platform, client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, EVENTS) as theirs,
            hooked(client, admin_headers, EVENTS) as mine,
            engine_for(platform) as engine,
        ):
            theirs.receiver.default = Answer(500)
            await theirs.api.customer()
            await deliver(engine)
            (their_delivery,) = await theirs.console.deliveries(theirs.webhook["id"])
            await _mark_failed(store, their_delivery["id"])
            their_app, their_hook = theirs.api.world.app_id, theirs.webhook["id"]
            my_hook = mine.webhook["id"]
            event_id = their_delivery["eventId"]
            since = {"since": _iso(platform.now())}
            asked = {
                # Their app through my developer token.
                "their list": (
                    "GET",
                    f"/developer/apps/{their_app}/webhooks/{their_hook}/deliveries",
                ),
                "their delivery": (
                    "GET",
                    f"/developer/apps/{their_app}/webhooks/{their_hook}"
                    f"/deliveries/{their_delivery['id']}",
                ),
                "their recovery": (
                    "POST",
                    f"/developer/apps/{their_app}/webhooks/{their_hook}/recover",
                ),
                # Their webhook and delivery through my own app.
                "their webhook in my app": (
                    "GET",
                    f"/developer/apps/{mine.console.app_id}/webhooks/{their_hook}/deliveries",
                ),
                "their delivery under my webhook": (
                    "GET",
                    f"/developer/apps/{mine.console.app_id}/webhooks/{my_hook}"
                    f"/deliveries/{their_delivery['id']}",
                ),
                "their webhook recovered through my app": (
                    "POST",
                    f"/developer/apps/{mine.console.app_id}/webhooks/{their_hook}/recover",
                ),
            }
            answers = {}
            for name, (method, path) in asked.items():
                response = await client.open(
                    path,
                    method=method,
                    json=since if method == "POST" else None,
                    headers={"Authorization": f"Bearer {mine.console.token}"},
                )
                answers[name] = (response.status_code, (await response.get_json()).get("code"))
            by_their_event = await mine.console.ok(
                "GET", f"/webhooks/{my_hook}/deliveries?eventId={event_id}"
            )
            status = await _status(store, their_delivery["id"])
    assert answers == {
        "their list": (404, "APP_NOT_FOUND"),
        "their delivery": (404, "APP_NOT_FOUND"),
        "their recovery": (404, "APP_NOT_FOUND"),
        "their webhook in my app": (404, "WEBHOOK_NOT_FOUND"),
        "their delivery under my webhook": (404, "DELIVERY_NOT_FOUND"),
        "their webhook recovered through my app": (404, "WEBHOOK_NOT_FOUND"),
    }
    assert by_their_event["data"] == []
    assert status == "failed"  # no recovery touched it


async def test_a_delivery_of_another_webhook_of_the_same_app_is_not_found(
    platform: Platform, client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, EVENTS) as hook,
            engine_for(platform) as engine,
        ):
            other = await hook.console.webhook(hook.receiver.url, ["invoice.created"])
            await hook.api.customer()
            await deliver(engine)
            (delivery,) = await hook.console.deliveries(hook.webhook["id"])
            response = await hook.console.call(
                "GET", f"/webhooks/{other['id']}/deliveries/{delivery['id']}"
            )
            body = await response.get_json()
    assert (response.status_code, body["code"]) == (404, "DELIVERY_NOT_FOUND")
