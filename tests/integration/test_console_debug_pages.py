"""The console's pages for debugging webhooks and functions: a webhook's page with its deliveries
(filters kept in the address and shown as applied, paged with the list's cursor, test
deliveries marked) and the recovery form (its answer, its refusals, and going on past its
bound); a delivery's page with its payload and every attempt, and its redeliver button; a
function's page with its runs by status and its versions, the rollback, a version's source; a
run's page with its event, timed logs, error and stack into the source, and the replay. Nothing
of another developer's app, and no id of another app's, is reachable through any of them; what
receivers answer and functions log shows as text."""

from __future__ import annotations

import html
import json
import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import trio

from ledgerport import apps, catalog, queues
from ledgerport.clock import FrozenClock
from ledgerport.http.pages import form_time
from ledgerport.http.pages.console.deliveries import DELIVERIES_SHOWN
from ledgerport.platform import Platform
from ledgerport.storage import Store

from ..receiver import Answer
from .oauth_helpers import login
from .test_function_debugging import run_all, upload, world_of
from .test_openapi_document import Contract, _document
from .webhook_world import Hooked, deliver, engine_for, hooked

TIMEOUT = 60
EVENTS = ["customer.created", "invoice.created"]


def _csrf(page: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert match, page
    return match[1]


async def _page(client: Any, path: str, status: int = 200) -> str:
    response = await client.get(path)
    text = await response.get_data(as_text=True)
    assert response.status_code == status, (path, text)
    assert response.mimetype == "text/html"
    assert response.headers["Cache-Control"] == "no-store"
    assert "frame-ancestors 'none'" in response.headers["Content-Security-Policy"]
    return text


def _row(page: str, row_id: str) -> str:
    match = re.search(rf'<tr id="{re.escape(row_id)}">(.*?)</tr>', page, re.S)
    assert match is not None, (row_id, page)
    return match[1]


def _row_ids(page: str, prefix: str) -> list[str]:
    return re.findall(rf'<tr id="({prefix}_[0-9a-z]+)">', page)


def _cell(row: str, label: str) -> str:
    match = re.search(rf'<td [^>]*data-label="{label}">(.*?)</td>', row, re.S)
    assert match is not None, (label, row)
    return match[1]


def _notice(page: str) -> str:
    match = re.search(r'<p class="notice[^"]*" role="(?:status|alert)">(.*?)</p>', page, re.S)
    assert match is not None, page
    return html.unescape(match[1])


def _link(page: str, words: str) -> str:
    match = re.search(rf'<a href="([^"]+)">{re.escape(words)}</a>', page)
    assert match is not None, (words, page)
    return html.unescape(match[1])


def _webhook_path(hook: Hooked) -> str:
    return f"/console/apps/{hook.api.world.app_id}/webhooks/{hook.webhook['id']}"


async def _mark_failed(store: Store, *delivery_ids: str) -> None:
    async with store.transaction() as tx:
        for delivery_id in delivery_ids:
            await tx.execute(
                "UPDATE webhook_deliveries SET status = 'failed', attempts = 6,"
                " next_attempt_at = NULL WHERE id = $1",
                delivery_id,
            )


async def _tests_queued(store: Store, hook: Hooked, now: float, count: int) -> list[str]:
    """``count`` test deliveries of the hook's webhook, queued in one transaction, newest
    last."""
    async with store.transaction() as tx:
        webhook = await apps.get_webhook(tx, hook.api.world.app_id, hook.webhook["id"])
        return [
            await queues.create_test_delivery(tx, now=now, webhook=webhook, pinned_version=None)
            for _ in range(count)
        ]


# --- A webhook's page ----------------------------------------------------------------------------


async def test_the_webhook_page_shows_its_deliveries_filtered_with_the_filters_applied(
    platform: Platform, client: Any, admin_headers: dict[str, str], clock: FrozenClock
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, EVENTS) as hook,
            engine_for(platform) as engine,
        ):
            hook.receiver.answer_for = lambda request: Answer(
                500 if b'"invoice.created"' in request.body else 200
            )
            customer = await hook.api.customer()
            await deliver(engine)
            clock.advance(1)
            await hook.api.invoice(customer["id"])
            await deliver(engine)
            clock.advance(1)
            test = await hook.console.ok("POST", f"/webhooks/{hook.webhook['id']}/test", status=202)
            listed = {
                d["type"]: d
                for d in await hook.console.deliveries(hook.webhook["id"])
                if not d["test"]
            }
            await login(client, hook.api.world)
            path = _webhook_path(hook)
            everything = await _page(client, path)
            retrying = await _page(client, f"{path}?status=retrying&type=&eventId=")
            by_type = await _page(client, f"{path}?type=customer.created")
            event_id = listed["customer.created"]["eventId"]
            by_event = await _page(client, f"{path}?eventId=+{event_id}+")
            nothing = await _page(client, f"{path}?status=failed&eventId=evt_{'0' * 24}")
            bad_event = await _page(client, f"{path}?eventId=%3Cscript%3Ex", 400)
            bad_status = await _page(client, f"{path}?status=lost", 400)
            bad_type = await _page(client, f"{path}?type=nothing.happened", 400)
    invoice = listed["invoice.created"]
    test_id = test["deliveryId"]
    assert html.escape(hook.webhook["url"]) in everything
    assert _row_ids(everything, "dlv") == [
        test_id,
        invoice["id"],
        listed["customer.created"]["id"],
    ]
    # Each delivery links to its page; its event id, or the test badge, beside its type.
    delivery_link = f'href="{path}/deliveries/{invoice["id"]}"'
    assert delivery_link in _row(everything, invoice["id"])
    assert f'<code class="event-id">{invoice["eventId"]}</code>' in _row(everything, invoice["id"])
    assert 'class="badge badge-test"' in _row(everything, test_id)
    assert "badge-test" not in _row(everything, invoice["id"])
    # The next retry: relative, exact on hover; none once delivered.
    next_attempt = _cell(_row(everything, invoice["id"]), "Next attempt")
    assert re.fullmatch(
        r'<time datetime="[^"]+" title="[^"]+ UTC">in 1 minute</time>', next_attempt
    )
    assert _cell(_row(everything, listed["customer.created"]["id"]), "Next attempt") == ""
    # Filters: kept in the address, shown selected and as applied, each removable.
    assert _row_ids(retrying, "dlv") == [invoice["id"]]
    assert '<option value="retrying" selected>' in retrying
    assert "Status: <strong>retrying</strong>" in retrying
    assert f'href="{path}"' in retrying  # without its only filter: the whole list
    # The test delivery is of the webhook's first event type.
    assert _row_ids(by_type, "dlv") == [test_id, listed["customer.created"]["id"]]
    assert '<option value="customer.created" selected>' in by_type
    assert _row_ids(by_event, "dlv") == [listed["customer.created"]["id"]]
    assert f'name="eventId" type="search" value="{event_id}"' in by_event
    assert _row_ids(nothing, "dlv") == []
    assert "No delivery matches." in nothing
    assert f"Event id: <strong>evt_{'0' * 24}</strong>" in nothing
    # What is not an event's id is refused, and never shown as markup.
    assert "eventId must be the id of an event: evt_ and 24" in bad_event
    assert "<script>" not in bad_event
    assert "status must be one of queued, retrying, delivered, failed" in bad_status
    assert "type must be an event type of the catalog" in bad_type


async def test_the_webhook_page_goes_through_the_deliveries_with_the_lists_cursor(
    client: Any, admin_headers: dict[str, str], store: Store, clock: FrozenClock
) -> None:
    shown = DELIVERIES_SHOWN
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, EVENTS) as hook:
            ids = await _tests_queued(store, hook, clock.now(), shown + 3)
            await _mark_failed(store, ids[0])
            await login(client, hook.api.world)
            path = _webhook_path(hook)
            first = await _page(client, path)
            second = await _page(client, _link(first, "Older deliveries"))
            newest = _link(second, "Newest deliveries")
            queued_first = await _page(client, f"{path}?status=queued")
            queued_second = await _page(client, _link(queued_first, "Older deliveries"))
            stale = await _page(client, f"{path}?after=dlv_000000000000000000000000", 400)
    # Every delivery once, newest first, a page of the endpoint page's 20 at a time.
    first_ids, second_ids = _row_ids(first, "dlv"), _row_ids(second, "dlv")
    assert len(first_ids) == shown
    # Created at one moment: newest first is by id, as the list's order breaks ties.
    assert first_ids + second_ids == sorted(ids, reverse=True)
    assert ">Older deliveries</a>" not in second
    assert newest == path
    assert ">Newest deliveries</a>" not in first
    # A page's filters ride along with its cursor.
    older = _link(queued_first, "Older deliveries")
    assert parse_qs(urlsplit(older).query)["status"] == ["queued"]
    queued = _row_ids(queued_first, "dlv") + _row_ids(queued_second, "dlv")
    assert queued == sorted(ids[1:], reverse=True)
    assert "after must be the next of an earlier page" in stale


async def test_the_side_navigation_marks_where_each_page_is(
    client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, EVENTS) as hook:
            (delivery,) = await _tests_queued(store, hook, 1.0, 1)
            await login(client, hook.api.world)
            path = _webhook_path(hook)
            webhook_page = await _page(client, path)
            delivery_page = await _page(client, f"{path}/deliveries/{delivery}")
            listing = await _page(client, f"/console/apps/{hook.api.world.app_id}/webhooks")
    webhooks = f'href="/console/apps/{hook.api.world.app_id}/webhooks"'
    assert f'{webhooks} aria-current="true">Webhooks' in webhook_page
    assert re.search(rf'href="{re.escape(path)}" aria-current="page"', webhook_page)
    assert re.search(rf'href="{re.escape(path)}" aria-current="true"', delivery_page)
    assert f'href="{path}/deliveries/{delivery}" aria-current="page"' in delivery_page
    # The list page itself is still the current page of its own link, and links to both.
    assert f'{webhooks} aria-current="page">Webhooks' in listing
    assert f'href="{path}"' in listing
    assert f'href="{path}/deliveries/{delivery}"' in listing


# --- Recovering failed deliveries ----------------------------------------------------------------


async def test_recover_queues_the_failed_deliveries_the_rules_allow_and_counts_the_rest(
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
            clock.advance(600)
            since = clock.now()
            await hook.api.customer("After")
            await deliver(engine)
            tests = await _tests_queued(store, hook, clock.now(), 2)
            listed = await hook.console.deliveries(hook.webhook["id"])
            await _mark_failed(store, *(d["id"] for d in listed))
            world = hook.api.world
            response = await client.delete(
                f"/admin/businesses/{world.business_id}/apps/{world.app_id}/access",
                headers=admin_headers,
            )
            assert response.status_code == 204
            clock.advance(60)
            await login(client, world)
            path = _webhook_path(hook)
            page = await _page(client, path)
            form = {"csrf_token": _csrf(page), "since": form_time(since), "confirm": "yes"}
            answered = await client.post(f"{path}/recover", form=form)
            back = await _page(client, answered.headers["Location"])
            again = await client.post(f"{path}/recover", form=form)
            later = {**form, "since": form_time(clock.now())}
            none_since = await client.post(f"{path}/recover", form=later)
            nothing = await _page(client, none_since.headers["Location"])
            statuses = {
                d["id"]: d["status"] for d in await hook.console.deliveries(hook.webhook["id"])
            }
    assert answered.status_code == 303
    assert answered.headers["Location"] == path
    shown = re.sub(r"\s+", " ", _notice(back))
    assert shown.startswith("Failed deliveries since ")
    assert ": 2 queued again, 1 skipped" in shown
    assert {statuses[t] for t in tests} == {"queued"}
    # The business event the app may no longer receive stays failed; the one before since too.
    assert sorted(statuses.values()) == ["failed", "failed", "queued", "queued"]
    assert again.status_code == 303
    assert "No failed delivery since" in _notice(nothing)


RECOVER_REFUSALS = {
    "older than 30 days": ({"since": "{31 days ago}"}, "since must be within the last 30 days"),
    "in the future": ({"since": "{in an hour}"}, "since must not be in the future"),
    "not a time": ({"since": "yesterday"}, "since must be a date and time in UTC"),
    "no offset in a full time": (
        {"since": "2026-09-22 08:00:00 CEST"},
        "since must be a date and time in UTC",
    ),
    "left out": ({}, "since must be a date and time in UTC"),
    "an after of no recovery": (
        {"since": "{a day ago}", "after": "dlv_000000000000000000000000"},
        "after must be the next of an earlier recovery of this webhook",
    ),
    "an expired form": ({"since": "{a day ago}", "csrf_token": "forged"}, "The form expired"),
}


@pytest.mark.parametrize("case", list(RECOVER_REFUSALS), ids=list(RECOVER_REFUSALS))
async def test_recover_refuses_what_it_cannot_do_with_a_notice_on_the_page(
    client: Any, admin_headers: dict[str, str], store: Store, clock: FrozenClock, case: str
) -> None:
    fields, words = RECOVER_REFUSALS[case]
    moments = {
        "{31 days ago}": form_time(clock.now() - 31 * 86400),
        "{in an hour}": form_time(clock.now() + 3600),
        "{a day ago}": form_time(clock.now() - 86400),
    }
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, EVENTS) as hook:
            failed = await _tests_queued(store, hook, clock.now() - 60, 1)
            await _mark_failed(store, *failed)
            await login(client, hook.api.world)
            path = _webhook_path(hook)
            page = await _page(client, path)
            form = {"csrf_token": _csrf(page), "confirm": "yes"} | {
                k: moments.get(v, v) for k, v in fields.items()
            }
            answered = await client.post(f"{path}/recover", form=form)
            back = await _page(client, answered.headers["Location"])
            status = await queues_status(store, failed[0])
    assert answered.status_code == 303
    assert words in _notice(back)
    assert 'role="alert"' in back
    assert status == "failed"  # nothing was done


async def queues_status(store: Store, delivery_id: str) -> str:
    async with store.transaction() as tx:
        status: str = await tx.fetchval(
            "SELECT status FROM webhook_deliveries WHERE id = $1", delivery_id
        )
    return status


async def test_a_recover_form_without_its_token_is_a_problem_page(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, EVENTS) as hook:
            await login(client, hook.api.world)
            answered = await client.post(
                f"{_webhook_path(hook)}/recover", form={"since": "2026-09-22T08:00"}
            )
            text = await answered.get_data(as_text=True)
    assert answered.status_code == 400
    assert "The form was not sent from its page" in text


async def test_a_recovery_past_its_bound_offers_to_go_on_with_the_next_cursor(
    client: Any, admin_headers: dict[str, str], store: Store, clock: FrozenClock
) -> None:
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, EVENTS) as hook:
            since = clock.now() - 600
            failed = await _tests_queued(store, hook, clock.now() - 60, queues.RECOVER_MAX + 2)
            await _mark_failed(store, *failed)
            await login(client, hook.api.world)
            path = _webhook_path(hook)
            page = await _page(client, path)
            first = await client.post(
                f"{path}/recover",
                form={"csrf_token": _csrf(page), "since": form_time(since), "confirm": "yes"},
            )
            go_on = await _page(client, first.headers["Location"])
            after = re.search(r'name="after" value="([^"]+)"', go_on)
            assert after is not None
            since_field = re.search(r'name="since" type="datetime-local" value="([^"]+)"', go_on)
            assert since_field is not None
            second = await client.post(
                f"{path}/recover",
                form={
                    "csrf_token": _csrf(go_on),
                    "since": since_field[1],
                    "after": html.unescape(after[1]),
                    "confirm": "yes",
                },
            )
            done = await _page(client, second.headers["Location"])
            statuses = [await queues_status(store, delivery_id) for delivery_id in failed]
    location = urlsplit(first.headers["Location"])
    assert location.path == path
    assert parse_qs(location.query) == {
        "recover_since": [form_time(since)],
        "recover_after": [after[1]],
    }
    assert f"{queues.RECOVER_MAX} queued again, 0 skipped" in _notice(go_on)
    assert "More are left" in _notice(go_on)
    assert "Count the next failed deliveries" in go_on
    assert since_field[1] == form_time(since)
    assert second.headers["Location"] == path
    assert "2 queued again, 0 skipped" in _notice(done)
    assert "Count the next" not in done
    assert set(statuses) == {"queued"}


# --- A delivery's page ---------------------------------------------------------------------------


async def test_the_delivery_page_shows_the_payload_and_every_attempt_as_text(
    platform: Platform, client: Any, admin_headers: dict[str, str], clock: FrozenClock
) -> None:
    hostile = b"<script>alert('answer')</script>" + b"x" * 5000
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, EVENTS) as hook,
            engine_for(platform) as engine,
        ):
            hook.receiver.script = [Answer(500, body=hostile)]
            hook.receiver.default = Answer(200, body=b"thanks")
            await hook.api.customer("Caf\u00e9 <Bistro>")
            await deliver(engine)
            clock.advance(catalog.WEBHOOK_RETRY_DELAYS[1])
            await deliver(engine)
            (listed,) = await hook.console.deliveries(hook.webhook["id"])
            detail = await hook.console.ok(
                "GET", f"/webhooks/{hook.webhook['id']}/deliveries/{listed['id']}"
            )
            await login(client, hook.api.world)
            path = f"{_webhook_path(hook)}/deliveries/{listed['id']}"
            page = await _page(client, path)
            resent = await client.post(f"{path}/resend", form={"csrf_token": _csrf(page)})
            after = await _page(client, resent.headers["Location"])
    first, second = detail["attemptLog"]
    text = html.unescape(page)
    assert "<script>" not in page
    assert "<Bistro>" not in page
    assert "&lt;script&gt;alert(&#39;answer&#39;)&lt;/script&gt;" in page
    # The payload pretty-printed, and the exact text as signed.
    pretty = json.dumps(json.loads(detail["payload"]), indent=2, ensure_ascii=False)
    assert f">{pretty}</pre>" in text
    assert '"name": "Café <Bistro>"' in text
    assert f">{detail['payload']}</pre>" in text
    assert "\\u00e9" in detail["payload"]  # as sent: ASCII JSON
    assert "\\u00e9" not in pretty
    # Every attempt, oldest first, a line each with its code and what went wrong, opening
    # onto its headers as sent, its body and the cut marked.
    attempts = re.findall(r'<li class="attempt[^"]*" id="attempt-(\d+)">', page)
    assert attempts == ["1", "2"]
    assert page.index("HTTP 500") < page.index("HTTP 200")
    for attempt in (first, second):
        signature = attempt["requestHeaders"]["X-Webhook-Signature"]
        assert f"<code>{signature}</code>" in page
    assert "Cut at 4 KiB" in page
    assert page.count("Cut at 4 KiB") == 1
    assert ">thanks</pre>" in page
    assert '<span class="wh-error">Answered HTTP 500</span>' in page  # the first's error
    assert 'class="badge badge-delivered">delivered<' in page
    # Delivered, it may go again: the button, then the notice on the same page.
    assert ">Redeliver</button>" in page
    assert resent.status_code == 303
    assert resent.headers["Location"] == path
    assert _notice(after) == f"Delivery {listed['id']} queued again"
    assert ">Redeliver</button>" not in after
    assert "It cannot be redelivered now: it waits for an attempt." in after


async def test_a_redelivery_the_rules_refuse_comes_back_as_a_notice(
    client: Any, admin_headers: dict[str, str], store: Store, clock: FrozenClock
) -> None:
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, EVENTS) as hook:
            (delivery,) = await _tests_queued(store, hook, clock.now(), 1)
            await _mark_failed(store, delivery)
            await login(client, hook.api.world)
            path = f"{_webhook_path(hook)}/deliveries/{delivery}"
            page = await _page(client, path)
            response = await client.post(
                f"/admin/apps/{hook.api.world.app_id}/status",
                json={"status": "SUSPENDED"},
                headers=admin_headers,
            )
            assert response.status_code == 200
            refused = await client.post(f"{path}/resend", form={"csrf_token": _csrf(page)})
            back = await _page(client, refused.headers["Location"])
            expired = await client.post(f"{path}/resend", form={"csrf_token": "forged"})
            stale = await _page(client, expired.headers["Location"])
            status = await queues_status(store, delivery)
    assert ">Redeliver</button>" in page
    assert refused.headers["Location"] == path
    assert _notice(back) == (f"Delivery {delivery} cannot be redelivered: the app is suspended")
    assert 'role="alert"' in back
    assert ">Redeliver</button>" not in back
    assert "It cannot be redelivered now: the app is suspended." in back
    assert _notice(stale) == "The form expired: try again"
    assert status == "failed"


async def test_a_test_delivery_not_yet_sent_has_no_attempt_and_says_when_it_is_due(
    client: Any, admin_headers: dict[str, str], store: Store, clock: FrozenClock
) -> None:
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, EVENTS) as hook:
            (delivery,) = await _tests_queued(store, hook, clock.now(), 1)
            await login(client, hook.api.world)
            page = await _page(client, f"{_webhook_path(hook)}/deliveries/{delivery}")
    assert "Test delivery</span>" in page
    assert "none: a test delivery, on the event's sample" in page
    assert "No attempt made yet: the first is due <time" in page
    assert "It cannot be redelivered now: it waits for an attempt." in page


# --- A function's page and its versions ----------------------------------------------------------


async def _run_row(
    store: Store,
    function_id: str,
    app_id: str,
    run_id: str,
    status: str,
    *,
    created_at: float = 1.0,
    version: int | None = 1,
    **columns: Any,
) -> None:
    """A run as the runner records one, written directly."""
    values = {
        "id": run_id,
        "function_id": function_id,
        "app_id": app_id,
        "event_id": "evt_" + "1" * 24,
        "business_id": None,
        "type": "customer.created",
        "body": json.dumps({"id": run_id, "type": "customer.created", "data": {"n": 1}}),
        "status": status,
        "attempts": 1,
        "version": version,
        "duration_ms": 2.5,
        "logs": json.dumps([]),
        "error": None,
        "result": None,
        "created_at": created_at,
        "updated_at": created_at,
        **columns,
    }
    names = ", ".join(values)
    marks = ", ".join(f"${n}" for n in range(1, len(values) + 1))
    async with store.transaction() as tx:
        await tx.execute(f"INSERT INTO function_runs ({names}) VALUES ({marks})", *values.values())


SECOND = (
    "export async function handler(event, context) {\n"
    "\tcontext.log('<b>second</b>');\n"
    "\tconst value = event.data.missing.deeper;\n"
    "  return value;\n"
    "}\n"
)


async def test_the_function_page_filters_runs_and_rolls_back_to_a_version(
    client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, []) as hook:
            world = hook.api.world
            body = {"source": "export const handler = () => 1", "events": ["customer.created"]}
            function = await hook.console.ok("PUT", "/functions/on-customer", body)
            await hook.console.ok("PUT", "/functions/on-customer", {**body, "source": SECOND})
            await _run_row(store, function["id"], world.app_id, "run_ok", "succeeded")
            await _run_row(
                store,
                function["id"],
                world.app_id,
                "run_bad",
                "failed",
                created_at=2.0,
                version=2,
                error="TypeError: <oops>",
            )
            await login(client, world)
            path = f"/console/apps/{world.app_id}/functions/on-customer"
            page = await _page(client, path)
            failed = await _page(client, f"{path}?status=failed")
            none_queued = await _page(client, f"{path}?status=queued")
            bad = await _page(client, f"{path}?status=lost", 400)
            source = await _page(client, f"{path}/versions/2")
            unconfirmed = await client.post(
                f"{path}/versions/1/activate", form={"csrf_token": _csrf(page)}
            )
            confirming = await _page(client, unconfirmed.headers["Location"])
            activated = await client.post(
                f"{path}/versions/1/activate",
                form={"csrf_token": _csrf(confirming), "confirm": "yes"},
            )
            back = await _page(client, activated.headers["Location"])
            after = await hook.console.ok("GET", "/functions/on-customer")
            missing = await client.post(
                f"{path}/versions/7/activate", form={"csrf_token": _csrf(page), "confirm": "yes"}
            )
            expired = await client.post(f"{path}/versions/2/activate", form={"csrf_token": "x"})
            stale = await _page(client, expired.headers["Location"])
            listing = await _page(client, f"/console/apps/{world.app_id}/functions")
    assert _row_ids(page, "run") == ["run_bad", "run_ok"]
    assert f'href="{path}/runs/run_bad"' in _row(page, "run_bad")
    assert "TypeError: &lt;oops&gt;" in _row(page, "run_bad")
    assert _row_ids(failed, "run") == ["run_bad"]
    assert f'href="{path}?status=failed" aria-current="page">failed<' in failed
    assert f'href="{path}" aria-current="page">All<' in page
    assert "No run in this status." in none_queued
    assert "status must be one of queued, retrying, succeeded, failed" in bad
    # Versions, newest first, the active one marked; the others have their Activate button.
    assert re.findall(r'<tr id="version-(\d+)">', page) == ["2", "1"]
    assert "Active</span>" in _row(page, "version-2")
    assert "Roll back" not in _row(page, "version-2")
    assert f'href="{path}/versions/1/activate"' in _row(page, "version-1")
    assert ">Roll back</a>" in _row(page, "version-1")
    assert f'href="{path}/versions/1"' in _row(page, "version-1")
    # A version's source: each line numbered and addressable, as text.
    assert '<span class="source-line" id="L2">' in source
    assert "context.log(&#39;&lt;b&gt;second&lt;/b&gt;&#39;);" in source
    assert "<b>second</b>" not in source
    # The rollback: not confirmed, it is the confirmation with the diff; confirmed, the
    # function runs version 1 now, its newest still 2.
    assert unconfirmed.status_code == 303
    assert unconfirmed.headers["Location"] == f"{path}/versions/1/activate"
    assert "Roll back on-customer to version 1?" in confirming
    assert "1 line added and 6 lines removed" in re.sub(r"<[^>]+>", "", confirming)
    assert activated.status_code == 303
    assert activated.headers["Location"] == path
    assert _notice(back) == "Version 1 is active: runs that start from now on run it"
    assert (after["version"], after["latestVersion"]) == (1, 2)
    assert "Newest is version 2: rolled back" in back
    assert f'href="{path}/versions/2/activate"' in _row(back, "version-2")
    assert missing.status_code == 404
    assert _notice(stale) == "The form expired: try again"
    assert f'href="{path}"' in listing


# --- A run's page --------------------------------------------------------------------------------


async def test_the_run_page_shows_event_timed_logs_error_and_the_stack_in_the_source(
    client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    stack = (
        "TypeError: Cannot read properties of undefined (reading 'deeper')\n"
        "    at handler (function.js:3:36)\n"
        "    at run (function.js:99:1)\n"
        "    at Array.map (<anonymous>)"
    )
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, []) as hook:
            world = hook.api.world
            body = {"source": "export const handler = () => 1", "events": ["customer.created"]}
            function = await hook.console.ok("PUT", "/functions/f", body)
            await hook.console.ok("PUT", "/functions/f", {**body, "source": SECOND})
            await _run_row(
                store,
                function["id"],
                world.app_id,
                "run_threw",
                "failed",
                version=2,
                started_at=1000.0,
                logs=json.dumps(["<script>alert('log')</script>", "plain"]),
                log_times=json.dumps([3, 12]),
                error="TypeError: Cannot read properties of undefined (reading 'deeper')",
                error_stack=stack,
                body=json.dumps({"id": "run_threw", "data": {"name": "<i>Globex</i>"}}),
            )
            await _run_row(
                store,
                function["id"],
                world.app_id,
                "run_old",
                "failed",
                version=9,
                error="Error: x",
                error_stack="Error: x\n    at handler (function.js:1:1)",
            )
            await _run_row(
                store,
                function["id"],
                world.app_id,
                "run_result",
                "succeeded",
                version=2,
                result=json.dumps({"answer": "<42>"}),
            )
            await login(client, world)
            path = f"/console/apps/{world.app_id}/functions/f"
            page = await _page(client, f"{path}/runs/run_threw")
            unkept = await _page(client, f"{path}/runs/run_old")
            answered = await _page(client, f"{path}/runs/run_result")
    # The log lines as text, with their times after the handler was called.
    assert "<script>" not in page
    assert "&lt;script&gt;alert(&#39;log&#39;)&lt;/script&gt;" in page
    assert re.search(r'<time datetime="1970-01-01T00:16:40\.003Z"[^>]*>\+3 ms</time>', page)
    assert re.search(r'<time datetime="1970-01-01T00:16:40\.012Z"[^>]*>\+12 ms</time>', page)
    # The event, pretty-printed, as text.
    assert "&lt;i&gt;Globex&lt;/i&gt;" in page
    assert '"name": "<i>Globex</i>"' in html.unescape(page)
    # The stack: each frame into the source links to its line, shown with the lines around.
    assert f'<a class="frame-link" href="{path}/versions/2#L3">Line 3, column 36' in page
    marked = re.search(r"<mark>(.*?)</mark>", page)
    assert marked is not None
    assert html.unescape(marked[1]) == "    const value = event.data.missing.deeper;"
    caret = re.search(r'<span class="source-line caret" [^>]*><span [^>]*></span>( *)\^', page)
    assert caret is not None
    assert len(caret[1]) == 3 + 35  # the tab shown as four columns, then the 36th column
    assert "at run (function.js:99:1)" in page  # past the source's end: no excerpt
    assert page.count("<figure") == 1
    assert "<code>at Array.map (&lt;anonymous&gt;)</code>" in page
    assert 'href="' + path + '/versions/2">Version 2</a> (active)' in page
    assert ">Replay</button>" in page
    # A version no longer kept: named, not linked.
    assert "Version 9 (no longer kept)" in unkept
    assert "<code>at handler (function.js:1:1)</code>" in unkept
    assert "frame-link" not in unkept
    assert "<figure" not in unkept
    assert '"answer": "<42>"' in html.unescape(answered)
    assert "&lt;42&gt;" in answered
    assert "Error</h2>" not in answered


async def test_a_function_that_throws_shows_its_stack_at_the_source_line(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform
) -> None:
    source = (
        "export async function handler(event, context) {\n"
        "  context.log('checking', event.data.name);\n"
        "  throw new RangeError('no room for ' + event.data.name);\n"
        "}\n"
    )
    with trio.fail_after(TIMEOUT):
        async with world_of(client, admin_headers, app, platform) as world:
            await upload(world, source)
            await world.api.customer("Globex")
            await run_all(platform, world)
            (listed,) = (await world.console.ok("GET", "/functions/f/runs"))["data"]
            await login(client, world.api.world)
            path = f"/console/apps/{world.api.world.app_id}/functions/f/runs/{listed['id']}"
            page = await _page(client, path)
    assert "RangeError: no room for Globex" in page
    marked = re.search(r"<mark>(.*?)</mark>", page)
    assert marked is not None
    assert html.unescape(marked[1]) == "  throw new RangeError('no room for ' + event.data.name);"
    assert '/versions/1#L3">Line 3, column' in page
    assert '<p class="fn-text">checking Globex</p>' in page


async def test_replay_runs_the_event_again_and_opens_the_new_runs_page(
    client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, []) as hook:
            world = hook.api.world
            body = {"source": "export const handler = () => 1", "events": ["customer.created"]}
            function = await hook.console.ok("PUT", "/functions/f", body)
            await _run_row(store, function["id"], world.app_id, "run_first", "failed")
            await login(client, world)
            path = f"/console/apps/{world.app_id}/functions/f/runs/run_first"
            page = await _page(client, path)
            replayed = await client.post(f"{path}/replay", form={"csrf_token": _csrf(page)})
            new_page = await _page(client, replayed.headers["Location"])
            runs = (await hook.console.ok("GET", "/functions/f/runs"))["data"]
            expired = await client.post(f"{path}/replay", form={"csrf_token": "forged"})
            stale = await _page(client, expired.headers["Location"])
    replay = next(run for run in runs if run["id"] != "run_first")
    assert replayed.status_code == 303
    assert replayed.headers["Location"] == (
        f"/console/apps/{world.app_id}/functions/f/runs/{replay['id']}"
    )
    assert _notice(new_page) == (
        "Replay of run run_first queued: it runs on the version active when it starts"
    )
    assert replay["replayOf"] == "run_first"
    assert replay["status"] == "queued"
    assert f'href="/console/apps/{world.app_id}/functions/f/runs/run_first"' in new_page
    assert "it has not ended yet" in new_page
    assert _notice(stale) == "The form expired: try again"
    assert len(runs) == 2


async def test_replays_past_the_apps_budget_come_back_as_a_notice(
    client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, []) as hook:
            world = hook.api.world
            body = {"source": "export const handler = () => 1", "events": ["customer.created"]}
            function = await hook.console.ok("PUT", "/functions/f", body)
            await _run_row(store, function["id"], world.app_id, "run_first", "failed")
            await login(client, world)
            path = f"/console/apps/{world.app_id}/functions/f/runs/run_first"
            page = await _page(client, path)
            for _ in range(catalog.RATE_LIMIT_FUNCTION_UPLOADS.limit - 1):
                answered = await client.post(f"{path}/replay", form={"csrf_token": _csrf(page)})
                assert answered.status_code == 303
            refused = await client.post(f"{path}/replay", form={"csrf_token": _csrf(page)})
            back = await _page(client, refused.headers["Location"])
    assert refused.headers["Location"] == path
    assert "Too many requests: retry after" in _notice(back)


# --- Nobody else's ------------------------------------------------------------------------------


async def test_nothing_of_another_app_is_reachable_through_any_page(
    client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, EVENTS) as mine,
            hooked(client, admin_headers, EVENTS) as theirs,
        ):
            body = {"source": "export const handler = () => 1", "events": ["customer.created"]}
            my_function = await mine.console.ok("PUT", "/functions/f", body)
            their_function = await theirs.console.ok("PUT", "/functions/f", body)
            await theirs.console.ok("PUT", "/functions/f", body)
            my_app, their_app = mine.api.world.app_id, theirs.api.world.app_id
            await _run_row(store, my_function["id"], my_app, "run_mine", "failed")
            await _run_row(store, their_function["id"], their_app, "run_theirs", "failed")
            (my_delivery,) = await _tests_queued(store, mine, 1.0, 1)
            (their_delivery,) = await _tests_queued(store, theirs, 1.0, 1)
            await _mark_failed(store, my_delivery, their_delivery)
            await login(client, mine.api.world)
            csrf = _csrf(await _page(client, "/console"))
            my_hook = _webhook_path(mine)
            their_hook = _webhook_path(theirs)
            mixed_hook = f"/console/apps/{my_app}/webhooks/{theirs.webhook['id']}"
            my_fn = f"/console/apps/{my_app}/functions/f"
            their_fn = f"/console/apps/{their_app}/functions/f"
            gets = [
                their_hook,
                mixed_hook,
                f"{their_hook}/deliveries/{their_delivery}",
                f"{my_hook}/deliveries/{their_delivery}",
                f"{mixed_hook}/deliveries/{their_delivery}",
                their_fn,
                f"/console/apps/{my_app}/functions/g",
                f"{their_fn}/versions/1",
                f"{my_fn}/versions/2",
                f"{my_fn}/versions/one",
                f"{their_fn}/runs/run_theirs",
                f"{my_fn}/runs/run_theirs",
            ]
            posts = [
                f"{their_hook}/recover",
                f"{mixed_hook}/recover",
                f"{their_hook}/deliveries/{their_delivery}/resend",
                f"{my_hook}/deliveries/{their_delivery}/resend",
                f"{their_fn}/versions/1/activate",
                f"{my_fn}/versions/2/activate",
                f"{their_fn}/runs/run_theirs/replay",
                f"{my_fn}/runs/run_theirs/replay",
            ]
            got = {path: (await client.get(path)).status_code for path in gets}
            posted = {
                path: (
                    await client.post(path, form={"csrf_token": csrf, "since": "2026-09-22T08:00"})
                ).status_code
                for path in posts
            }
            their_status = await queues_status(store, their_delivery)
            their_runs = (await theirs.console.ok("GET", "/functions/f/runs"))["data"]
            their_now = await theirs.console.ok("GET", "/functions/f")
            client.cookie_jar.clear()
            signed_out = await client.get(my_hook)
    assert got == dict.fromkeys(gets, 404)
    assert posted == dict.fromkeys(posts, 404)
    assert their_status == "failed"
    assert [run["id"] for run in their_runs] == ["run_theirs"]
    assert their_now["version"] == 2
    assert signed_out.status_code == 303
    assert signed_out.headers["Location"].startswith("/login?next=")


# --- What the OpenAPI document says of them -------------------------------------------------------


async def test_the_pages_answers_match_the_document(
    client: Any, admin_headers: dict[str, str], store: Store, clock: FrozenClock
) -> None:
    contract = Contract(await _document(client))
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, EVENTS) as hook:
            world = hook.api.world
            (delivery,) = await _tests_queued(store, hook, clock.now() - 60, 1)
            await _mark_failed(store, delivery)
            body = {"source": "export const handler = () => 1", "events": ["customer.created"]}
            function = await hook.console.ok("PUT", "/functions/f", body)
            await hook.console.ok("PUT", "/functions/f", body)
            await _run_row(store, function["id"], world.app_id, "run_first", "failed")
            await login(client, world)
            csrf = _csrf(await _page(client, "/console"))
            ids = {
                "app_id": world.app_id,
                "webhook_id": hook.webhook["id"],
                "delivery_id": delivery,
                "name": "f",
                "run_id": "run_first",
                "version": "1",
            }
            webhook = "/console/apps/{app_id}/webhooks/{webhook_id}"
            one = f"{webhook}/deliveries/{{delivery_id}}"
            fn = "/console/apps/{app_id}/functions/{name}"
            calls: list[tuple[str, str, dict[str, str], str]] = [
                ("GET", webhook, ids, ""),
                ("GET", webhook, ids, "?status=failed&type=&eventId=&after="),
                ("GET", webhook, ids, "?status=lost"),
                ("GET", webhook, {**ids, "webhook_id": "whk_none"}, ""),
                ("POST", f"{webhook}/recover", ids, ""),
                ("GET", one, ids, ""),
                ("GET", one, {**ids, "delivery_id": "dlv_none"}, ""),
                ("POST", f"{one}/resend", ids, ""),
                ("POST", f"{one}/resend", ids, ""),  # refused: it waits for an attempt
                ("GET", fn, ids, "?status=failed"),
                ("GET", fn, ids, "?status=lost"),
                ("GET", f"{fn}/versions/{{version}}", ids, ""),
                ("GET", f"{fn}/versions/{{version}}", {**ids, "version": "9"}, ""),
                ("POST", f"{fn}/versions/{{version}}/activate", ids, ""),
                ("GET", f"{fn}/runs/{{run_id}}", ids, ""),
                ("POST", f"{fn}/runs/{{run_id}}/replay", ids, ""),
                ("POST", f"{fn}/runs/{{run_id}}/replay", {**ids, "run_id": "run_none"}, ""),
            ]
            statuses = []
            for method, template, values, query in calls:
                form = {"csrf_token": csrf, "since": form_time(clock.now() - 600)}
                response = await client.open(
                    template.format(**values) + query,
                    method=method,
                    form=form if method == "POST" else None,
                )
                await contract.check(method, template, response)
                statuses.append(response.status_code)
            # A form sent without its token did not come from its page.
            tokenless = []
            for template in (
                f"{webhook}/recover",
                f"{one}/resend",
                f"{fn}/versions/{{version}}/activate",
                f"{fn}/runs/{{run_id}}/replay",
            ):
                response = await client.post(
                    template.format(**ids), form={"since": "2026-09-22T08:00"}
                )
                await contract.check("POST", template, response)
                tokenless.append(response.status_code)
            client.cookie_jar.clear()
            signed_out = await client.get(webhook.format(**ids))
            await contract.check("GET", webhook, signed_out)
    assert statuses[:9] == [200, 200, 400, 404, 303, 200, 404, 303, 303]
    assert statuses[9:] == [200, 400, 200, 404, 303, 200, 303, 404]
    assert tokenless == [400, 400, 400, 400]
    assert signed_out.status_code == 303
