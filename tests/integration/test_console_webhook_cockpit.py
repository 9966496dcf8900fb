"""The webhook cockpit of the console, on both stores: the newest delivery of each endpoint in
one statement (``queues.last_deliveries``) and an endpoint's operational events
(``apps.endpoint_events``); the list of webhooks one row an endpoint; the endpoint's page with
every action and what went wrong in words; and the confirmations that count before they act
(switching off and deleting: the waiting deliveries that will fail; recovering: what it will
queue, a dry count that changes nothing). The words and the redelivery marks are pure
functions, tested without a store. Time is the frozen clock's."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
import trio

from ledgerport import apps, queues
from ledgerport.clock import FrozenClock
from ledgerport.http.pages import form_time
from ledgerport.http.pages.console.webhook_words import (
    attempt_lines,
    endpoint_state,
    what_happened,
)
from ledgerport.platform import Platform
from ledgerport.storage import Store

from ..stores import CountingTransaction
from .oauth_helpers import login
from .webhook_world import Hooked, hooked

TIMEOUT = 60
EVENTS = ["customer.created", "invoice.created"]


# --- Words -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "error", "words"),
    [
        (200, None, ""),
        (None, None, ""),
        (500, "HTTP 500", "Answered HTTP 500"),
        (None, "HTTP 503", "Answered HTTP 503"),
        (None, "timeout: no answer within 2 s", "Timed out: no answer within 2 s"),
        (
            None,
            "connection error: all attempts to connect to 127.0.0.1:9 failed",
            "Connection refused",
        ),
        (None, "connection error: [Errno 111] Connection refused", "Connection refused"),
        (
            None,
            "connection error: cannot resolve x.invalid: no",
            "Name not resolved: cannot resolve x.invalid: no",
        ),
        (None, "connection error: TLS handshake failed", "Connection failed: TLS handshake failed"),
        (None, "not sent: the webhook is switched off", "Not sent: the webhook is switched off"),
        (404, None, "Answered HTTP 404"),
    ],
)
def test_what_went_wrong_is_said_in_words(code: int | None, error: str | None, words: str) -> None:
    assert what_happened(code, error) == words


def test_a_long_error_is_cut_with_a_mark() -> None:
    said = what_happened(None, "connection error: " + "x" * 300)
    assert len(said) == 120
    assert said.endswith("…")


def _attempt(number: int, code: int | None, error: str | None = None) -> queues.LoggedAttempt:
    return queues.LoggedAttempt(
        attempt=number,
        started_at=1_790_000_000.0 + number,
        duration_ms=12.0,
        response_code=code,
        response_body=b"",
        response_truncated=False,
        error=error,
        request_headers={},
    )


def test_redeliveries_are_marked_where_they_began() -> None:
    # Two attempts (500 then 200), redelivered: 200; redelivered again: six 500s (the last
    # run, failed for good), then redelivered: a timeout, still under way.
    codes = [500, 200, 200, 500, 500, 500, 500, 500, 500, None]
    log = [_attempt(n, code) for n, code in enumerate(codes, start=1)]
    lines = attempt_lines(log, current_run=1, attempts_made=10, max_attempts=6)
    assert [line.attempt.attempt for line in lines if line.redelivery] == [3, 4, 10]
    assert lines[0].happened == "Answered HTTP 500"
    assert lines[1].happened == ""


def test_the_newest_redelivery_is_marked_from_the_delivery_s_own_count() -> None:
    # A 410 ends a run at once; the newest run's start comes from the delivery's count even
    # when the attempts before it do not say their run ended (the newest 3 of 12 shown).
    log = [_attempt(10, 500), _attempt(11, 500), _attempt(12, 500)]
    lines = attempt_lines(log, current_run=2, attempts_made=12, max_attempts=6)
    assert [line.redelivery for line in lines] == [False, True, False]
    gone = attempt_lines(
        [_attempt(1, 410), _attempt(2, 200)], current_run=1, attempts_made=2, max_attempts=6
    )
    assert [line.redelivery for line in gone] == [False, True]


def test_the_state_says_who_switched_an_endpoint_off_and_why() -> None:
    base = apps.Webhook(
        id="wh_x",
        app_id="app_x",
        url="https://hooks.example/in",
        events=(),
        enabled=True,
        created_at=0.0,
        updated_at=0.0,
        deleted=False,
        previous_secret_expires_at=None,
    )
    assert endpoint_state(base).label == "Sending"
    failing = apps.Webhook(**{**base.__dict__, "health": apps.EndpointState(state="failing")})
    assert endpoint_state(failing).label == "Sending, failing"
    off = apps.Webhook(**{**base.__dict__, "enabled": False})
    assert (endpoint_state(off).label, endpoint_state(off).reason) == ("Switched off", None)
    gone = apps.Webhook(**{**base.__dict__, "enabled": False, "disabled_reason": "gone"})
    assert endpoint_state(gone).label == "Switched off by the service"
    assert endpoint_state(gone).reason == "the receiver answered 410 Gone"


# --- The domain reads ------------------------------------------------------------------------


async def _created(store: Store, hook: Hooked, *moments: float) -> list[str]:
    """Test deliveries of the hook's webhook created at ``moments``, in that order."""
    async with store.transaction() as tx:
        webhook = await apps.get_webhook(tx, hook.api.world.app_id, hook.webhook["id"])
        return [
            await queues.create_test_delivery(tx, now=at, webhook=webhook, pinned_version=None)
            for at in moments
        ]


async def test_the_newest_delivery_of_every_endpoint_in_one_statement(
    client: Any, admin_headers: dict[str, str], store: Store, clock: FrozenClock
) -> None:
    now = clock.now()
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, EVENTS) as hook:
            app_id = hook.api.world.app_id
            quiet = await hook.console.webhook(f"{hook.receiver.url}/quiet", EVENTS)
            gone = await hook.console.webhook(f"{hook.receiver.url}/gone", EVENTS)
            first, tied_a, tied_b = await _created(store, hook, now - 60, now, now)
            async with store.transaction() as tx:
                webhook = await apps.get_webhook(tx, app_id, gone["id"])
                await queues.create_test_delivery(tx, now=now, webhook=webhook, pinned_version=None)
            await hook.console.ok("DELETE", f"/webhooks/{gone['id']}", None, 204)
            async with store.transaction() as tx:
                counting = CountingTransaction(tx)
                newest = await queues.last_deliveries(counting, app_id)  # type: ignore[arg-type]
                plan = (
                    await tx.fetch(
                        "EXPLAIN QUERY PLAN SELECT n.id FROM webhook_deliveries n"
                        " WHERE n.webhook_id = $1 ORDER BY n.created_at DESC, n.id DESC"
                        " LIMIT 1",
                        hook.webhook["id"],
                    )
                    if store.kind == "sqlite"
                    else []
                )
    assert counting.statements == 1
    # Ties on the moment go by id, as the endpoint's page orders them; the quiet endpoint
    # and the deleted one are left out.
    assert set(newest) == {hook.webhook["id"]}
    assert newest[hook.webhook["id"]].id == max(tied_a, tied_b)
    assert newest[hook.webhook["id"]].status == "queued"
    assert first not in {d.id for d in newest.values()}
    assert quiet["id"] not in newest
    if plan:
        assert "webhook_deliveries_webhook" in " ".join(str(row["detail"]) for row in plan)


async def test_an_endpoint_s_operational_events_are_its_own_newest_first(
    platform: Platform, client: Any, admin_headers: dict[str, str], clock: FrozenClock
) -> None:
    now = clock.now()
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, EVENTS) as hook:
            app_id = hook.api.world.app_id
            other = await hook.console.webhook(f"{hook.receiver.url}/other", EVENTS)
            async with platform.store.transaction() as tx:
                for offset, (webhook_id, kind) in enumerate(
                    [
                        (hook.webhook["id"], "webhook.endpoint.failing"),
                        (other["id"], "webhook.endpoint.failing"),
                        (hook.webhook["id"], "webhook.endpoint.disabled"),
                    ]
                ):
                    await apps.add_operational_event(
                        tx,
                        now=now + offset,
                        app_id=app_id,
                        webhook_id=webhook_id,
                        type=kind,  # type: ignore[arg-type]
                        data={"reason": "failing"} if kind.endswith("disabled") else {},
                    )
                events = await apps.endpoint_events(tx, app_id, hook.webhook["id"])
                one = await apps.endpoint_events(tx, app_id, hook.webhook["id"], limit=1)
    assert [e.type for e in events] == ["webhook.endpoint.disabled", "webhook.endpoint.failing"]
    assert {e.webhook_id for e in events} == {hook.webhook["id"]}
    assert [e.type for e in one] == ["webhook.endpoint.disabled"]


# --- The pages -------------------------------------------------------------------------------


def _csrf(page: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert match, page
    return match[1]


async def _page(client: Any, path: str, status: int = 200) -> str:
    response = await client.get(path)
    text = await response.get_data(as_text=True)
    assert response.status_code == status, (path, text)
    return str(text)


def _row(page: str, row_id: str) -> str:
    match = re.search(rf'<tr id="{re.escape(row_id)}">(.*?)</tr>', page, re.S)
    assert match is not None, (row_id, page)
    return match[1]


def _consequences(page: str) -> str:
    match = re.search(r'<ul class="consequences">(.*?)</ul>', page, re.S)
    assert match is not None, page
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html.unescape(match[1])))


async def _fail(store: Store, *delivery_ids: str, error: str | None = None) -> None:
    async with store.transaction() as tx:
        for delivery_id in delivery_ids:
            await tx.execute(
                "UPDATE webhook_deliveries SET status = 'failed', attempts = 6,"
                " next_attempt_at = NULL, last_error = $2 WHERE id = $1",
                delivery_id,
                error,
            )


async def test_the_list_is_one_row_an_endpoint_with_its_health_and_newest_delivery(
    client: Any, admin_headers: dict[str, str], store: Store, clock: FrozenClock
) -> None:
    now = clock.now()
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, EVENTS) as hook:
            quiet = await hook.console.webhook(f"{hook.receiver.url}/quiet", EVENTS)
            await hook.console.ok("PATCH", f"/webhooks/{quiet['id']}", {"enabled": False})
            (*_, newest) = await _created(store, hook, now - 30, now - 20, now - 10)
            await _fail(store, newest, error="timeout: no answer within 2 s")
            async with store.transaction() as tx:
                await tx.execute(
                    "UPDATE webhooks SET last_error = $1 WHERE id = $2",
                    "connection error: all attempts to connect to 127.0.0.1:9 failed",
                    hook.webhook["id"],
                )
            await login(client, hook.api.world)
            base = f"/console/apps/{hook.api.world.app_id}/webhooks"
            page = await _page(client, base)
    assert len(re.findall(r'<tr id="wh_', page)) == 2
    row = _row(page, hook.webhook["id"])
    assert f'<a href="{base}/{hook.webhook["id"]}">' in row
    assert 'class="badge badge-active">Sending<' in row
    assert f'href="{base}/{hook.webhook["id"]}/deliveries/{newest}"' in row
    assert 'class="badge badge-failed">failed<' in row
    assert "Connection refused" in row
    off = _row(page, quiet["id"])
    assert 'class="badge badge-off">Switched off<' in off
    assert "none yet" in off
    # No delivery is listed under an endpoint: those are on its own page.
    assert "Redeliver" not in page
    assert '<th scope="col">Last error</th>' in page


async def test_the_endpoint_s_page_has_every_action_and_says_what_went_wrong(
    client: Any, admin_headers: dict[str, str], store: Store, clock: FrozenClock
) -> None:
    now = clock.now()
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, EVENTS) as hook:
            timed_out, refused = await _created(store, hook, now - 20, now - 10)
            await _fail(store, timed_out, error="timeout: no answer within 2 s")
            await _fail(store, refused, error="connection error: [Errno 111] Connection refused")
            await login(client, hook.api.world)
            path = f"/console/apps/{hook.api.world.app_id}/webhooks/{hook.webhook['id']}"
            page = await _page(client, path)
    assert f'<form method="post" action="{path}/test">' in page
    for link in ("edit", "switch-off", "rotate", "delete"):
        assert f'href="{path}/{link}"' in page
    assert ">Send a test delivery</button>" in page
    assert "Timed out: no answer within 2 s" in _row(page, timed_out)
    assert "Connection refused" in _row(page, refused)
    assert '<h2 id="events-h">Operational events</h2>' in page
    assert '<form class="field-inline" method="get" action="' + path + '/recover">' in page


async def test_switching_off_and_deleting_first_count_the_deliveries_that_will_fail(
    client: Any, admin_headers: dict[str, str], store: Store, clock: FrozenClock
) -> None:
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, EVENTS) as hook:
            await _created(store, hook, *[clock.now()] * 3)
            await login(client, hook.api.world)
            path = f"/console/apps/{hook.api.world.app_id}/webhooks/{hook.webhook['id']}"
            page = await _page(client, path)
            token = _csrf(page)
            asked = await client.post(
                f"{path}/enabled", form={"csrf_token": token, "enabled": "false"}
            )
            on = (await hook.console.ok("GET", f"/webhooks/{hook.webhook['id']}"))["enabled"]
            confirm = await _page(client, asked.headers["Location"])
            unconfirmed = await client.post(f"{path}/switch-off", form={"csrf_token": token})
            deleting = await _page(client, f"{path}/delete")
            done = await client.post(
                f"{path}/switch-off", form={"csrf_token": token, "confirm": "yes"}
            )
            off = (await hook.console.ok("GET", f"/webhooks/{hook.webhook['id']}"))["enabled"]
            back = await _page(client, done.headers["Location"])
    assert (asked.status_code, asked.headers["Location"], on) == (303, f"{path}/switch-off", True)
    assert "3 deliveries wait for it now: they will fail without being sent" in _consequences(
        confirm
    )
    assert f'action="{path}/switch-off"' in confirm
    assert (unconfirmed.status_code, unconfirmed.headers["Location"]) == (303, f"{path}/switch-off")
    assert "3 deliveries wait for it now" in _consequences(deleting)
    assert (done.status_code, done.headers["Location"], off) == (303, path, False)
    assert 'class="badge badge-off">Switched off<' in back
    assert ">Switch on</button>" in back


async def test_a_recovery_first_says_how_many_it_will_queue_and_changes_nothing(
    client: Any, admin_headers: dict[str, str], store: Store, clock: FrozenClock
) -> None:
    now = clock.now()
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, EVENTS) as hook:
            failed = await _created(store, hook, now - 300, now - 200, now - 100)
            await _fail(store, *failed, error="HTTP 500")
            await login(client, hook.api.world)
            path = f"/console/apps/{hook.api.world.app_id}/webhooks/{hook.webhook['id']}"
            page = await _page(client, path)
            since = form_time(now - 3600)
            confirm = await _page(client, f"{path}/recover?since={since}")
            untouched = await hook.console.deliveries(hook.webhook["id"])
            unconfirmed = await client.post(
                f"{path}/recover", form={"csrf_token": _csrf(page), "since": since}
            )
            recovered = await client.post(
                f"{path}/recover",
                form={"csrf_token": _csrf(confirm), "since": since, "confirm": "yes"},
            )
            after = await hook.console.deliveries(hook.webhook["id"])
            refused = await _page(client, f"{path}/recover?since=yesterday", 400)
    said = _consequences(confirm)
    assert "3 failed deliveries will be queued again" in said
    assert ">Queue 3 deliveries again</button>" in confirm
    assert f'name="since" value="{since}"' in confirm
    assert {d["status"] for d in untouched} == {"failed"}
    assert unconfirmed.status_code == 303
    assert unconfirmed.headers["Location"].startswith(f"{path}/recover?since=")
    assert recovered.headers["Location"] == path
    assert {d["status"] for d in after} == {"queued"}
    assert "since must be a date and time in UTC" in refused


# --- Query strings ---------------------------------------------------------------------------

BAD_QUERIES = {
    "a status of no delivery": (
        "?status=lost",
        "status must be one of queued, retrying, delivered, failed, or empty for all",
    ),
    "a type out of the catalog": (
        "?type=nothing.happened",
        "type must be an event type of the catalog, or empty for all",
    ),
    "an event id of no form": ("?eventId=evt_1", "eventId must be the id of an event"),
    "a cursor of no form": ("?after=dlv_1", "after must be the id of a webhook delivery"),
    "a cursor of another kind": (
        f"?after=evt_{'0' * 24}",
        "after must be the id of a webhook delivery",
    ),
    "a recovery cursor of no form": (
        "?recover_after=%3Cb%3E",
        "recover_after must be the id of a webhook delivery",
    ),
    "a recovery since of no time": (
        "?recover_since=yesterday",
        "recover_since must be a date and time in UTC",
    ),
    "a recovery since of no day": (
        "?recover_since=2026-13-45T10:00",
        "recover_since must be a date and time in UTC",
    ),
    "a recovery page without since": ("/recover", "since must be a date and time in UTC"),
    "a recovery page since of no hour": (
        "/recover?since=2026-09-22T25:00",
        "since must be a date and time in UTC",
    ),
    "a recovery page cursor of no form": (
        "/recover?since=2026-09-22T08:00&after=dlv_x",
        "after must be the id of a webhook delivery",
    ),
}


@pytest.mark.parametrize("case", list(BAD_QUERIES), ids=list(BAD_QUERIES))
async def test_a_bad_query_string_is_a_page_that_says_which_parameter_and_why(
    client: Any, admin_headers: dict[str, str], case: str
) -> None:
    tail, words = BAD_QUERIES[case]
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, EVENTS) as hook:
            await login(client, hook.api.world)
            path = f"/console/apps/{hook.api.world.app_id}/webhooks/{hook.webhook['id']}"
            refused = await _page(client, path + tail, 400)
    assert words in html.unescape(refused)
    assert "<b>" not in refused


async def test_empty_and_padded_query_values_read_as_none_and_as_the_value(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, EVENTS) as hook:
            await login(client, hook.api.world)
            path = f"/console/apps/{hook.api.world.app_id}/webhooks/{hook.webhook['id']}"
            empty = await _page(
                client, f"{path}?status=&type=&eventId=&after=&recover_since=&recover_after="
            )
            padded = await _page(client, f"{path}?status=+failed+&recover_since=2026-09-22T08:00")
    assert "No deliveries yet" in empty or "No delivery" in empty
    assert "Status: <strong>failed</strong>" in padded
    assert 'value="2026-09-22T08:00"' in padded
