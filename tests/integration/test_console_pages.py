"""The developer console's pages: the signed-in developer's apps, an app's overview, its webhooks
with recent deliveries and the redeliver and test buttons, its functions with runs and logs;
nobody else's app; accessible markup."""

from __future__ import annotations

import html
import json
import re
from typing import Any

import trio

from ledgerport.platform import Platform
from ledgerport.storage import Store

from ..receiver import Answer
from .data_api import owner_api
from .oauth_helpers import login
from .test_listings import body as listing_body
from .webhook_world import console_for, deliver, engine_for, hooked

TIMEOUT = 30


def _csrf(page: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert match, page
    return match[1]


async def _page(client: Any, path: str) -> str:
    response = await client.get(path)
    text = await response.get_data(as_text=True)
    assert response.status_code == 200, text
    assert response.headers["Cache-Control"] == "no-store"
    assert "frame-ancestors 'none'" in response.headers["Content-Security-Policy"]
    return text


async def test_the_developer_sees_the_app_its_webhooks_and_redelivers_from_the_page(
    platform: Platform, client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"]) as hook,
            engine_for(platform) as engine,
        ):
            hook.receiver.default = Answer(status=500)
            await hook.api.customer()
            await deliver(engine)
            # The failed delivery: the last of its attempts answered 500.
            async with store.transaction() as tx:
                await tx.execute(
                    "UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL"
                )
            world = hook.api.world
            await login(client, world)
            home = await _page(client, "/console")
            overview = await _page(client, f"/console/apps/{world.app_id}")
            page = await _page(client, f"/console/apps/{world.app_id}/webhooks")
            (delivery,) = await hook.console.deliveries(hook.webhook["id"])
            hook.receiver.default = Answer()
            response = await client.post(
                f"/console/apps/{world.app_id}/webhooks/{hook.webhook['id']}/deliveries"
                f"/{delivery['id']}/resend",
                form={"csrf_token": _csrf(page)},
            )
            back = await _page(client, response.headers["Location"])
            await deliver(engine)
            after = await _page(client, f"/console/apps/{world.app_id}/webhooks")
            refused = await client.post(
                f"/console/apps/{world.app_id}/webhooks/{hook.webhook['id']}/deliveries"
                "/dlv_unknown/resend",
                form={"csrf_token": _csrf(page)},
            )
    assert f'href="/console/apps/{world.app_id}"' in home
    assert "<code>customers:read</code>" in overview
    assert html.escape(hook.webhook["url"]) in page
    # One row for the endpoint: its newest delivery failed, and what went wrong.
    row = re.search(rf'<tr id="{hook.webhook["id"]}">(.*?)</tr>', page, re.S)
    assert row is not None
    assert 'class="badge badge-failed">failed<' in row[1]
    assert f'/deliveries/{delivery["id"]}"' in row[1]
    assert "Answered HTTP 500" in row[1]
    assert response.status_code == 303
    assert f"Delivery {delivery['id']} queued again" in back
    after_row = re.search(rf'<tr id="{hook.webhook["id"]}">(.*?)</tr>', after, re.S)
    assert after_row is not None
    assert 'class="badge badge-delivered">delivered<' in after_row[1]
    # A delivery that is not the endpoint's is not found, as on its page.
    assert refused.status_code == 404


async def test_the_test_button_queues_a_test_delivery(
    platform: Platform, client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["invoice.created"]) as hook,
            engine_for(platform) as engine,
        ):
            world = hook.api.world
            await login(client, world)
            page = await _page(client, f"/console/apps/{world.app_id}/webhooks")
            response = await client.post(
                f"/console/apps/{world.app_id}/webhooks/{hook.webhook['id']}/test",
                form={"csrf_token": _csrf(page)},
            )
            queued = await _page(client, response.headers["Location"])
            await deliver(engine)
            stale = await client.post(
                f"/console/apps/{world.app_id}/webhooks/{hook.webhook['id']}/test",
                form={"csrf_token": "forged"},
            )
            after = await _page(client, stale.headers["Location"])
    assert response.status_code == 303
    endpoint = f"/console/apps/{world.app_id}/webhooks/{hook.webhook['id']}"
    assert response.headers["Location"] == endpoint
    assert re.search(r"Test delivery dlv_\S+ queued", queued)
    (received,) = hook.receiver.received
    assert json.loads(received.body)["data"]["test"] is True
    assert "The form expired: try again" in after


async def test_a_functions_page_shows_its_runs_with_their_error(
    client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, []) as hook:
            world = hook.api.world
            function = await hook.console.ok(
                "PUT",
                "/functions/on-customer",
                {"source": "export const handler = () => 1", "events": ["customer.created"]},
            )
            async with store.transaction() as tx:
                await tx.execute(
                    "INSERT INTO function_runs (id, function_id, app_id, event_id, business_id,"
                    " type, body, status, attempts, version, duration_ms, logs, error, result,"
                    " created_at, updated_at) VALUES ('run_1', $1, $2, 'evt_1', NULL,"
                    " 'customer.created', '{}', 'failed', 1, 1, 2.5, $3, $4, NULL, 1, 1)",
                    function["id"],
                    world.app_id,
                    json.dumps(["first line", "<b>second</b>"]),
                    "TypeError: broken",
                )
            await login(client, world)
            listing = await _page(client, f"/console/apps/{world.app_id}/functions")
            page = await _page(client, f"/console/apps/{world.app_id}/functions/on-customer")
    assert 'href="/console/apps/' + world.app_id + '/functions/on-customer"' in listing
    row = re.search(r'<tr id="run_1">(.*?)</tr>', page, re.S)
    assert row is not None
    assert "TypeError: broken" in row[1]
    assert "2.5 ms" in row[1]
    assert "<h2" in page
    assert "on-customer" in page


async def test_nobody_else_sees_an_apps_pages(client: Any, admin_headers: dict[str, str]) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, []) as mine,
            hooked(client, admin_headers, []) as theirs,
        ):
            await login(client, theirs.api.world)
            answers = [
                await client.get(f"/console/apps/{mine.api.world.app_id}{suffix}")
                for suffix in ("", "/webhooks", "/functions")
            ]
            await client.post("/logout", form={"csrf_token": "x"})
            client.cookie_jar.clear()
            signed_out = await client.get("/console")
    assert [answer.status_code for answer in answers] == [404, 404, 404]
    for answer in answers:
        assert "text/html" in answer.headers["Content-Type"]
    assert signed_out.status_code == 303


async def test_the_listing_page_submits_a_draft_and_shows_every_revision(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        api = await owner_api(client, admin_headers)
        console = await console_for(client, admin_headers, api)
        first = await console.ok("PUT", "/listing", listing_body("books-sync"), 201)
        await console.ok("POST", "/listing/submit")
        for action in ("start", "approve"):
            response = await client.post(
                f"/admin/listing-revisions/{first['draft']['id']}/review",
                json={"action": action, "note": "Clear and complete"},
                headers=admin_headers,
            )
            assert response.status_code == 200
        await console.ok("PUT", "/listing", listing_body("books-sync", tagline="Invoices, synced"))
        await login(client, api.world)
        path = f"/console/apps/{api.world.app_id}/listing"
        page = await _page(client, path)
        submitted = await client.post(f"{path}/submit", form={"csrf_token": _csrf(page)})
        after = await _page(client, submitted.headers["Location"])
        again = await client.post(f"{path}/submit", form={"csrf_token": _csrf(page)})
        refused = await _page(client, again.headers["Location"])
        expired = await client.post(f"{path}/submit", form={"csrf_token": "forged"})
        told = await _page(client, expired.headers["Location"])
    assert "Submit revision 2 for review" in page
    rows = re.findall(
        r'<tr id="([^"]+)"><td data-label="Revision">(\d+)[^<]*</td>'
        r'<td data-label="State"><span class="badge badge-\w+">([^<]+)</span></td>',
        page,
    )
    assert [(number, state) for _, number, state in rows] == [("2", "draft"), ("1", "approved")]
    assert '<td data-label="Revision">1 (live)</td>' in page
    assert "Clear and complete" in page
    assert submitted.status_code == 303
    assert "Revision 2 submitted for review" in after
    assert "Submit revision" not in after  # nothing left to submit
    assert "The revision is submitted now, so it cannot be submitted" in refused
    assert expired.status_code == 303
    assert "The form expired: try again" in told


async def test_a_path_with_control_characters_redirects_with_a_valid_location(
    client: Any, admin_headers: dict[str, str]
) -> None:
    """The way back is quoted: a Location header cannot hold what a URL's path may decode to."""
    async with hooked(client, admin_headers, ["invoice.created"]) as hook:
        await login(client, hook.api.world)
        response = await client.post(
            "/console/apps/~%0C%F1%A8%A5%A8/webhooks/x%0A/test", form={"csrf_token": "forged"}
        )
    location = response.headers.get("Location", "")
    assert response.status_code in (303, 404)
    assert all(" " < char < "\x7f" for char in location), location
