"""The Events API: ``GET /events`` and ``GET /events/{id}`` on both stores.

Spec: Events (Webhook registration and audiences, Events API), Endpoints (Data API: the events
rows), Errors (API error codes: UNKNOWN_CURSOR, UNKNOWN_EVENT_TYPE_TYPES,
EVENT_LOG_AVAILABLE_CONNECTED_APPS_ONLY, EVENT_NOT_FOUND), Limits (Events API retention 30 days);
contract.md (the list shape, GET /events parameters, an event's shape). An app reads what its
webhooks could receive in the one business of its token: business and privacy events when the app
and the ACTIVE installation hold the gating scope, its own app events; never another business's,
never anything older than 30 days.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import pytest
import trio

from ledgerport import apps, books, catalog
from ledgerport.engine import Scheduler
from ledgerport.platform import Platform

from .oauth_helpers import World, exchange, install, login, make_world, session_token

TIMEOUT = 60
APP_SCOPES = ("events:read", "invoices:read", "customers:read", "payments:read")
"""What the test app registers."""
GRANTED = ("events:read", "invoices:read")
"""What its installation grants unless a test says otherwise."""

# Checks of the request's own parameters, refused before any event is read, behave the same on
# both backends: they run once, on SQLite.
sqlite_only = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)


@dataclass(frozen=True)
class Connected:
    """An app installed in a business, and an access token of that installation."""

    world: World
    token: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


async def access_token(client: Any, admin_headers: dict[str, str], world: World) -> str:
    """A fresh access token of the world's installation (a session token exchanged)."""
    response = await exchange(client, world, await session_token(client, admin_headers, world))
    assert response.status_code == 200, await response.get_data(as_text=True)
    token: str = (await response.get_json())["access_token"]
    return token


async def connect(
    client: Any,
    admin_headers: dict[str, str],
    *,
    app_scopes: tuple[str, ...] = APP_SCOPES,
    granted: tuple[str, ...] = GRANTED,
) -> Connected:
    world = await make_world(client, admin_headers, scopes=app_scopes)
    await install(client, admin_headers, world, granted)
    return Connected(world, await access_token(client, admin_headers, world))


async def second_app(client: Any, admin_headers: dict[str, str], world: World) -> Connected:
    """Another app of the world's developer, installed in the same business."""
    response = await client.post(
        "/admin/apps",
        json={
            "name": "Other Sync",
            "type": "CONFIDENTIAL",
            "redirectUris": ["https://other.example/callback"],
            "scopes": list(APP_SCOPES),
            "developerUserId": world.user_id,
            "reviewed": True,
        },
        headers=admin_headers,
    )
    assert response.status_code == 201
    app = await response.get_json()
    other = World(
        world.business_id,
        world.user_id,
        world.email,
        world.password,
        app["id"],
        app["clientId"],
        app["clientSecret"],
    )
    await install(client, admin_headers, other, GRANTED)
    return Connected(other, await access_token(client, admin_headers, other))


def sample(name: str) -> dict[str, object]:
    event_type = catalog.event_type(name)
    assert event_type is not None, name
    return event_type.sample_data()


async def record(
    platform: Platform,
    business_id: str,
    types: Iterable[str],
    *,
    app_id: str | None = None,
) -> list[str]:
    """Record one event of each of ``types`` in the business (with its catalog sample as data);
    answers their ids in order."""
    async with platform.store.transaction() as tx:
        return [
            await books.record_event(
                tx,
                now=platform.now(),
                type=name,
                data=sample(name),
                business_id=business_id,
                app_id=app_id,
            )
            for name in types
        ]


async def get_feed(
    client: Any, connected: Connected, params: Sequence[tuple[str, str]] = ()
) -> Any:
    query = f"?{urlencode(params)}" if params else ""
    return await client.get(f"/events{query}", headers=connected.headers)


async def page(
    client: Any, connected: Connected, params: Sequence[tuple[str, str]] = ()
) -> dict[str, Any]:
    response = await get_feed(client, connected, params)
    body: dict[str, Any] = await response.get_json()
    assert response.status_code == 200, body
    return body


async def every_event(
    client: Any, connected: Connected, params: Sequence[tuple[str, str]] = ()
) -> list[dict[str, Any]]:
    """Every page from the oldest, following ``next``."""
    events: list[dict[str, Any]] = []
    after: list[tuple[str, str]] = []
    while True:
        body = await page(client, connected, [*params, *after])
        events.extend(body["data"])
        if body["next"] is None:
            return events
        after = [("after", body["next"])]


async def seen_types(client: Any, connected: Connected) -> list[str]:
    return [event["type"] for event in await every_event(client, connected)]


async def assert_coded(response: Any, status: int, code: str) -> dict[str, Any]:
    body: dict[str, Any] = await response.get_json()
    assert response.status_code == status, body
    assert body["statusCode"] == status
    assert body["code"] == code, body
    assert isinstance(body["message"], str)
    return body


# --- Pages ---------------------------------------------------------------------------------------


async def test_a_page_answers_events_oldest_first_in_their_shape(
    client, admin_headers, platform, clock
):
    with trio.fail_after(TIMEOUT):
        connected = await connect(client, admin_headers)
        clock.advance(10)
        ids = await record(
            platform, connected.world.business_id, ["invoice.created", "invoice.paid"]
        )
        body = await page(client, connected)

    assert set(body) == {"data", "next"}
    assert body["next"] is None
    installed, created, paid = body["data"]
    assert installed["type"] == "app.installed"
    assert [created["id"], paid["id"]] == ids
    assert created == {
        "id": ids[0],
        "type": "invoice.created",
        "apiVersion": catalog.CURRENT_API_VERSION,
        "created": int(clock.now()),
        "data": sample("invoice.created"),
    }
    assert isinstance(created["created"], int)


async def test_pages_follow_next_as_after_until_the_last(client, admin_headers, platform):
    with trio.fail_after(TIMEOUT):
        connected = await connect(client, admin_headers)
        ids = await record(platform, connected.world.business_id, ["invoice.updated"] * 7)
        first = await page(client, connected, [("limit", "3")])
        second = await page(client, connected, [("limit", "3"), ("after", first["next"])])
        third = await page(client, connected, [("limit", "3"), ("after", second["next"])])

    # app.installed, then the seven recorded here: pages of 3, 3 and 2.
    assert [len(p["data"]) for p in (first, second, third)] == [3, 3, 2]
    assert first["next"] == first["data"][-1]["id"]
    assert second["next"] == second["data"][-1]["id"]
    assert third["next"] is None
    seen = [event["id"] for p in (first, second, third) for event in p["data"]]
    assert seen[1:] == ids


async def test_the_last_page_says_so_even_when_full(client, admin_headers, platform):
    with trio.fail_after(TIMEOUT):
        connected = await connect(client, admin_headers)
        await record(platform, connected.world.business_id, ["invoice.sent"] * 3)
        first = await page(client, connected, [("limit", "2")])
        second = await page(client, connected, [("limit", "2"), ("after", first["next"])])
        polled = await page(client, connected, [("after", second["data"][-1]["id"])])

    assert first["next"] is not None
    assert second["next"] is None
    assert polled == {"data": [], "next": None}


async def test_the_default_page_holds_fifty_events(client, admin_headers, platform):
    with trio.fail_after(TIMEOUT):
        connected = await connect(client, admin_headers)
        await record(platform, connected.world.business_id, ["invoice.updated"] * 60)
        first = await page(client, connected)
        rest = await page(client, connected, [("after", first["next"])])

    assert len(first["data"]) == catalog.EVENTS_PAGE_DEFAULT
    assert len(rest["data"]) == 61 - catalog.EVENTS_PAGE_DEFAULT
    assert rest["next"] is None


async def test_a_page_holds_at_most_a_hundred(client, admin_headers, platform):
    with trio.fail_after(TIMEOUT):
        connected = await connect(client, admin_headers)
        await record(platform, connected.world.business_id, ["invoice.updated"] * 101)
        largest = await page(client, connected, [("limit", str(catalog.EVENTS_PAGE_MAX))])
        smallest = await page(client, connected, [("limit", "1")])

    assert len(largest["data"]) == catalog.EVENTS_PAGE_MAX
    assert largest["next"] == largest["data"][-1]["id"]
    assert [event["type"] for event in smallest["data"]] == ["app.installed"]


@sqlite_only
@pytest.mark.parametrize("limit", ["0", "101", "1000", "-1", "abc", "1.5", "", " 5", "²"])
async def test_a_limit_out_of_range_is_a_validation_failure(client, admin_headers, limit):
    with trio.fail_after(TIMEOUT):
        connected = await connect(client, admin_headers)
        response = await get_feed(client, connected, [("limit", limit)])
        body = await response.get_json()

    assert response.status_code == 400
    assert "code" not in body
    assert body["message"] == [f"limit must be an integer from 1 to {catalog.EVENTS_PAGE_MAX}"]


# --- The types filter ----------------------------------------------------------------------------


async def test_types_keeps_only_the_named_event_types(client, admin_headers, platform):
    with trio.fail_after(TIMEOUT):
        connected = await connect(client, admin_headers)
        ids = await record(
            platform,
            connected.world.business_id,
            ["invoice.created", "invoice.paid", "invoice.sent", "invoice.paid"],
        )
        paid = await page(client, connected, [("types", "invoice.paid")])
        two = await page(client, connected, [("types", "invoice.sent,app.installed")])
        repeated = await page(
            client, connected, [("types", "invoice.created"), ("types", "invoice.sent")]
        )

    assert [event["id"] for event in paid["data"]] == [ids[1], ids[3]]
    assert [event["type"] for event in two["data"]] == ["app.installed", "invoice.sent"]
    assert [event["id"] for event in repeated["data"]] == [ids[0], ids[2]]


async def test_types_pages_like_the_whole_log(client, admin_headers, platform):
    with trio.fail_after(TIMEOUT):
        connected = await connect(client, admin_headers)
        ids = await record(
            platform, connected.world.business_id, ["invoice.paid", "invoice.sent"] * 5
        )
        paid = await every_event(client, connected, [("types", "invoice.paid"), ("limit", "2")])

    assert [event["id"] for event in paid] == ids[::2]


async def test_types_naming_an_event_the_app_may_not_see_answers_nothing(
    client, admin_headers, platform
):
    with trio.fail_after(TIMEOUT):
        connected = await connect(client, admin_headers)
        await record(platform, connected.world.business_id, ["customer.created"])
        body = await page(client, connected, [("types", "customer.created")])

    assert body == {"data": [], "next": None}


@sqlite_only
@pytest.mark.parametrize(
    "types",
    [
        "invoice.nope",
        "invoice.created,nope",
        "invoice.created,",
        "",
        "invoice.created, invoice.paid",
    ],
)
async def test_types_naming_an_event_not_in_the_catalog_is_refused(client, admin_headers, types):
    with trio.fail_after(TIMEOUT):
        connected = await connect(client, admin_headers)
        response = await get_feed(client, connected, [("types", types)])
        await assert_coded(response, 400, "UNKNOWN_EVENT_TYPE_TYPES")


# --- The cursor ----------------------------------------------------------------------------------


async def test_after_may_be_any_event_of_the_business(client, admin_headers, platform):
    """An event the app does not see is still a position in the business's log (a webhook's
    X-Webhook-Event-Id, say, from before a scope was dropped)."""
    with trio.fail_after(TIMEOUT):
        connected = await connect(client, admin_headers)
        hidden, shown = await record(
            platform, connected.world.business_id, ["customer.created", "invoice.created"]
        )
        body = await page(client, connected, [("after", hidden)])

    assert [event["id"] for event in body["data"]] == [shown]


@pytest.mark.parametrize("after", ["evt_000000000000000000000000", "", "not an id", "\u2028"])
async def test_after_that_is_no_event_is_an_unknown_cursor(client, admin_headers, after):
    with trio.fail_after(TIMEOUT):
        connected = await connect(client, admin_headers)
        response = await get_feed(client, connected, [("after", after)])
        await assert_coded(response, 400, "UNKNOWN_CURSOR")


async def test_after_of_another_business_is_an_unknown_cursor(client, admin_headers, platform):
    with trio.fail_after(TIMEOUT):
        connected = await connect(client, admin_headers)
        elsewhere = await connect(client, admin_headers)
        (foreign,) = await record(platform, elsewhere.world.business_id, ["invoice.created"])
        response = await get_feed(client, connected, [("after", foreign)])
        await assert_coded(response, 400, "UNKNOWN_CURSOR")


async def test_after_older_than_retention_is_an_unknown_cursor(
    client, admin_headers, platform, clock
):
    with trio.fail_after(TIMEOUT):
        connected = await connect(client, admin_headers)
        (old,) = await record(platform, connected.world.business_id, ["invoice.created"])
        clock.advance(catalog.EVENT_RETENTION)
        fresh = Connected(
            connected.world, await access_token(client, admin_headers, connected.world)
        )
        kept = await get_feed(client, fresh, [("after", old)])
        clock.advance(1)
        fresh = Connected(
            connected.world, await access_token(client, admin_headers, connected.world)
        )
        aged = await get_feed(client, fresh, [("after", old)])

        assert kept.status_code == 200
        await assert_coded(aged, 400, "UNKNOWN_CURSOR")


# --- Visibility ----------------------------------------------------------------------------------

# The spec's rows of events whose gating scope it fixes (Webhook registration and audiences).
SPEC_GATED = [
    ("invoice.created", "invoices:read"),
    ("invoice.paid", "invoices:read"),
    ("payment.received", "payments:read"),
    ("customer.created", "customers:read"),
]


@pytest.mark.parametrize(("event", "scope"), SPEC_GATED)
async def test_a_spec_gated_event_is_seen_only_with_its_scope_granted(
    client, admin_headers, platform, event, scope
):
    with trio.fail_after(TIMEOUT):
        granted = await connect(client, admin_headers, granted=("events:read", scope))
        others = tuple(s for _, s in SPEC_GATED if s != scope)
        refused = await connect(client, admin_headers, granted=("events:read", *others))
        for connected in (granted, refused):
            await record(platform, connected.world.business_id, [event])
        seen = await seen_types(client, granted)
        unseen = await seen_types(client, refused)

    assert event in seen
    assert event not in unseen


# The spec's audiences (Webhook registration and audiences), each with every catalog event of it.
AUDIENCES = ["business", "privacy", "app"]


@pytest.mark.parametrize("audience", AUDIENCES)
async def test_each_audience_is_seen_as_its_webhooks_would_be(
    client, admin_headers, platform, audience
):
    """Gated audiences: exactly the events whose scope the installation grants; app events: all
    of this app's own (after the installation's own app.installed)."""
    names = [event.name for event in catalog.EVENTS if event.audience == audience]
    only = [("types", ",".join(names))]
    with trio.fail_after(TIMEOUT):
        connected = await connect(client, admin_headers)
        before = [event["id"] for event in await every_event(client, connected, only)]
        own_app = connected.world.app_id if audience == "app" else None
        ids = await record(platform, connected.world.business_id, names, app_id=own_app)
        seen = await every_event(client, connected, only)

    shown = {
        event.name for event in catalog.EVENTS if event.audience == "app" or event.scope in GRANTED
    }
    expected = [event_id for event_id, name in zip(ids, names, strict=True) if name in shown]
    assert [event["id"] for event in seen] == before + expected
    assert len(expected) == len(names) if audience == "app" else len(expected) < len(names)


async def test_a_scope_the_app_registered_but_the_installation_lacks_hides_its_events(
    client, admin_headers, platform
):
    with trio.fail_after(TIMEOUT):
        connected = await connect(client, admin_headers)
        await record(platform, connected.world.business_id, ["customer.created"])
        before = await seen_types(client, connected)
        # Widening the installation counts at once, for the token issued before it.
        await install(client, admin_headers, connected.world, ("customers:read",))
        after = await seen_types(client, connected)

    assert "customer.created" not in before
    assert after == ["app.installed", "customer.created", "app.scopes_updated"]


async def test_app_events_are_those_of_this_app_only(client, admin_headers, platform):
    with trio.fail_after(TIMEOUT):
        connected = await connect(client, admin_headers)
        other = await second_app(client, admin_headers, connected.world)
        (shared,) = await record(platform, connected.world.business_id, ["invoice.created"])
        (mine,) = await record(
            platform,
            connected.world.business_id,
            ["app_data.updated"],
            app_id=connected.world.app_id,
        )
        (theirs,) = await record(
            platform, connected.world.business_id, ["app_data.updated"], app_id=other.world.app_id
        )
        ours = await every_event(client, connected)
        their_view = await every_event(client, other)
        hidden = await client.get(f"/events/{theirs}", headers=connected.headers)

    assert [(e["type"], e["id"]) for e in ours[1:]] == [
        ("invoice.created", shared),
        ("app_data.updated", mine),
    ]
    assert ours[0]["data"]["installationId"] != their_view[0]["data"]["installationId"]
    assert [e["id"] for e in their_view[1:]] == [shared, theirs]
    await assert_coded(hidden, 404, "EVENT_NOT_FOUND")


async def test_another_business_is_never_seen(client, admin_headers, platform):
    with trio.fail_after(TIMEOUT):
        connected = await connect(client, admin_headers)
        elsewhere = await connect(client, admin_headers)
        foreign = await record(
            platform,
            elsewhere.world.business_id,
            ["invoice.created", "app_data.updated"],
            app_id=connected.world.app_id,
        )
        seen = await every_event(client, connected)
        by_id = [
            await client.get(f"/events/{event_id}", headers=connected.headers)
            for event_id in foreign
        ]

    assert [event["type"] for event in seen] == ["app.installed"]
    for response in by_id:
        await assert_coded(response, 404, "EVENT_NOT_FOUND")


async def test_an_ended_installation_sees_only_its_app_events(client, admin_headers, platform):
    """Its tokens die with it; the view of the domain shows what any read would: its own app
    events, no gated one (the installation is no longer ACTIVE)."""
    with trio.fail_after(TIMEOUT):
        connected = await connect(client, admin_headers)
        business_id, app_id = connected.world.business_id, connected.world.app_id
        await record(platform, business_id, ["invoice.created"])
        async with platform.store.transaction() as tx:
            installation = await apps.active_installation(tx, app_id, business_id)
        assert installation is not None
        ended = await client.delete(
            f"/admin/installations/{installation.id}", headers=admin_headers
        )
        assert ended.status_code == 204
        refused = await get_feed(client, connected)
        async with platform.store.transaction() as tx:
            app = await apps.get_app(tx, app_id)
            assert await apps.active_installation(tx, app_id, business_id) is None
            feed = await books.feed_page(
                tx,
                now=platform.now(),
                business_id=business_id,
                app_id=app_id,
                app_scopes=app.scopes,
                installation_scopes=(),
            )

    assert refused.status_code == 401
    assert [event.type for event in feed.events] == ["app.installed", "app.uninstalled"]


async def test_a_reinstallation_reads_the_scopes_it_grants_now(client, admin_headers, platform):
    with trio.fail_after(TIMEOUT):
        connected = await connect(
            client, admin_headers, granted=("events:read", "invoices:read", "customers:read")
        )
        world = connected.world
        await record(platform, world.business_id, ["customer.created", "invoice.created"])
        async with platform.store.transaction() as tx:
            installation = await apps.active_installation(tx, world.app_id, world.business_id)
        assert installation is not None
        response = await client.delete(
            f"/admin/installations/{installation.id}", headers=admin_headers
        )
        assert response.status_code == 204
        await install(client, admin_headers, world, ("events:read", "invoices:read"))
        renewed = Connected(world, await access_token(client, admin_headers, world))
        seen = await seen_types(client, renewed)

    assert seen == ["app.installed", "invoice.created", "app.uninstalled", "app.installed"]


async def test_without_events_read_the_feed_is_refused(client, admin_headers, platform):
    with trio.fail_after(TIMEOUT):
        connected = await connect(client, admin_headers, granted=("invoices:read",))
        (event_id,) = await record(platform, connected.world.business_id, ["invoice.created"])
        responses = [
            await get_feed(client, connected),
            await client.get(f"/events/{event_id}", headers=connected.headers),
        ]

    for response in responses:
        body = await assert_coded(response, 403, "INSUFFICIENT_SCOPE")
        assert body["message"].startswith("Insufficient scope")


# --- GET /events/{id} ----------------------------------------------------------------------------


async def test_one_event_is_answered_as_in_a_page(client, admin_headers, platform):
    with trio.fail_after(TIMEOUT):
        connected = await connect(client, admin_headers)
        (event_id,) = await record(platform, connected.world.business_id, ["invoice.paid"])
        listed = await page(client, connected, [("types", "invoice.paid")])
        response = await client.get(f"/events/{event_id}", headers=connected.headers)
        body = await response.get_json()

    assert response.status_code == 200
    assert body == listed["data"][0]
    assert response.headers["RateLimit-Limit"] == str(catalog.RATE_LIMIT_APP_PER_BUSINESS.limit)


async def test_one_event_is_not_found_when_missing_or_hidden(client, admin_headers, platform):
    with trio.fail_after(TIMEOUT):
        connected = await connect(client, admin_headers)
        (gated,) = await record(platform, connected.world.business_id, ["customer.created"])
        answers = [
            await client.get(f"/events/{event_id}", headers=connected.headers)
            for event_id in (f"evt_{secrets.token_hex(12)}", gated, "x")
        ]

    for response in answers:
        await assert_coded(response, 404, "EVENT_NOT_FOUND")


# --- Retention -----------------------------------------------------------------------------------


async def test_events_older_than_retention_are_never_answered(
    client, admin_headers, platform, clock
):
    """Before the cleanup removes them: the feed, the cursor and GET by id alike."""
    with trio.fail_after(TIMEOUT):
        connected = await connect(client, admin_headers)
        (old,) = await record(platform, connected.world.business_id, ["invoice.created"])
        clock.advance(catalog.EVENT_RETENTION)
        (recent,) = await record(platform, connected.world.business_id, ["invoice.paid"])
        world = connected.world
        on_the_day = Connected(world, await access_token(client, admin_headers, world))
        kept = await seen_types(client, on_the_day)
        clock.advance(1)
        later = Connected(world, await access_token(client, admin_headers, world))
        remaining = await every_event(client, later)
        by_id = await client.get(f"/events/{old}", headers=later.headers)
        async with platform.store.transaction() as tx:
            stored = await tx.fetchval("SELECT count(*) FROM events WHERE id = $1", old)

    assert kept == ["app.installed", "invoice.created", "invoice.paid"]
    assert [event["id"] for event in remaining] == [recent]
    await assert_coded(by_id, 404, "EVENT_NOT_FOUND")
    assert stored == 1


async def test_the_cleanup_purges_events_past_retention(client, admin_headers, platform, clock):
    with trio.fail_after(TIMEOUT):
        connected = await connect(client, admin_headers)
        business_id = connected.world.business_id
        await record(platform, business_id, ["invoice.created", "invoice.paid"])
        scheduler = Scheduler(platform)
        clock.advance(catalog.EVENT_RETENTION)
        (recent,) = await record(platform, business_id, ["invoice.sent"])
        kept = await scheduler.cleanup_once()
        clock.advance(1)
        removed = await scheduler.cleanup_once()
        async with platform.store.transaction() as tx:
            left = await tx.fetch(
                "SELECT id FROM events WHERE business_id = $1 ORDER BY seq", business_id
            )
        metrics = await (await client.get("/metrics")).get_data(as_text=True)

    assert kept["event"] == 0
    # app.installed and the two recorded with it.
    assert removed["event"] == 3
    assert [row["id"] for row in left] == [recent]
    assert 'ledgerport_cleanup_rows_total{kind="event"} 3.0' in metrics


# --- The session cookie --------------------------------------------------------------------------


async def test_a_session_cookie_without_a_token_is_refused(client, admin_headers, platform):
    with trio.fail_after(TIMEOUT):
        connected = await connect(client, admin_headers)
        (event_id,) = await record(platform, connected.world.business_id, ["invoice.created"])
        await login(client, connected.world)  # the browser now holds lp_session
        signed_in = [await client.get("/events"), await client.get(f"/events/{event_id}")]
        basic_too = await client.get("/events", headers={"Authorization": "Basic eDp5"})
        with_token = await get_feed(client, connected)

    for response in (*signed_in, basic_too):
        body = await assert_coded(response, 403, "EVENT_LOG_AVAILABLE_CONNECTED_APPS_ONLY")
        assert "not a session cookie" in body["message"]
    assert with_token.status_code == 200


async def test_any_session_cookie_is_refused_before_the_token_check(client):
    with trio.fail_after(TIMEOUT):
        response = await client.get("/events", headers={"Cookie": "lp_session=anything"})
        unauthenticated = await client.get("/events")

    await assert_coded(response, 403, "EVENT_LOG_AVAILABLE_CONNECTED_APPS_ONLY")
    await assert_coded(unauthenticated, 401, "INVALID_TOKEN")
