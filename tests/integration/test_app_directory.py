"""The apps kept for client authentication (``apps.AppDirectory``), on both stores.

Every change of an app's row notifies: this process sees its own change in its next lookup, and
another process sharing the database once PostgreSQL's notification arrives. An app read while a
change committed is not kept; an app is kept at most ``APP_KEPT_SECONDS``, only while the
directory listens, and never an unknown client id.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any

import pytest
import trio

from ledgerport import apps, auth
from ledgerport.clock import FrozenClock
from ledgerport.storage import Row, Store, open_postgres

from ..stores import migrated_database
from .oauth_helpers import basic, full_grant, make_world

TIMEOUT = 10
TODAY = datetime.date(2026, 11, 28)


class CountingReader:
    """A reader over the store's autocommit reader that counts its reads, and can run
    ``during`` in the middle of one (a notification arriving while it is under way)."""

    def __init__(self, store: Store) -> None:
        self._inner = store.autocommit
        self.reads = 0
        self.during: Callable[[], None] | None = None

    async def fetchrow(self, sql: str, *args: Any) -> Row | None:
        self.reads += 1
        row = await self._inner.fetchrow(sql, *args)
        if self.during is not None:
            self.during()
        return row

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


async def new_app(store: Store, keyring: auth.Keyring, clock: FrozenClock) -> apps.App:
    async with store.transaction() as tx:
        app, _ = await apps.create_app(
            tx,
            keyring,
            now=clock.now(),
            name="Kept",
            type="CONFIDENTIAL",
            redirect_uris=["https://kept.example/callback"],
            scopes=["invoices:read"],
            developer_user_id=None,
        )
    return app


async def one_app(
    store: Store, keyring: auth.Keyring, clock: FrozenClock
) -> tuple[apps.AppDirectory, apps.App, CountingReader]:
    """A directory, a new app and a reader counting its reads over ``store``."""
    return apps.AppDirectory(clock), await new_app(store, keyring, clock), CountingReader(store)


async def set_status_unnotified(store: Store, app_id: str, status: str) -> None:
    """A change of the row that notifies nobody (no code of the service does this)."""
    async with store.transaction() as tx:
        await tx.execute("UPDATE apps SET status = $1 WHERE id = $2", status, app_id)


async def test_an_app_is_kept_until_a_change_of_it_is_committed(
    store: Store, keyring: auth.Keyring, clock: FrozenClock
) -> None:
    directory, app, reader = await one_app(store, keyring, clock)
    with trio.fail_after(TIMEOUT):
        async with directory.listening(store):
            found = await directory.find(reader, app.client_id)
            assert found == app
            assert (await directory.find(reader, app.client_id)) == app
            assert reader.reads == 1, "the second lookup used the app kept"
            async with store.transaction() as tx:
                await apps.set_app_status(tx, app.id, "SUSPENDED")
            suspended = await directory.find(reader, app.client_id)
            assert suspended is not None
            assert suspended.status == "SUSPENDED", "this process sees its change at once"
            for change in (
                lambda tx: apps.set_app_reviewed(tx, app.id, True),
                lambda tx: apps.pin_version(tx, app.id, "2026-03-01", today=TODAY),
            ):
                assert (await directory.find(reader, app.client_id)) is not None
                reads = reader.reads
                async with store.transaction() as tx:
                    await change(tx)
                changed = await directory.find(reader, app.client_id)
                assert reader.reads == reads + 1
                assert changed is not None
            assert changed.reviewed
            assert changed.pinned_version == "2026-03-01"
        assert directory.kept == 0, "forgotten when it stops listening"


async def test_an_app_is_kept_for_a_bounded_time_only(
    store: Store, keyring: auth.Keyring, clock: FrozenClock
) -> None:
    """Should a notification go missing, the app is read again after APP_KEPT_SECONDS."""
    directory, app, reader = await one_app(store, keyring, clock)
    with trio.fail_after(TIMEOUT):
        async with directory.listening(store):
            await directory.find(reader, app.client_id)
            await set_status_unnotified(store, app.id, "DEACTIVATED")
            clock.advance(apps.APP_KEPT_SECONDS - 0.001)
            kept = await directory.find(reader, app.client_id)
            assert kept is not None
            assert kept.status == "ACTIVE"
            clock.advance(0.001)
            read = await directory.find(reader, app.client_id)
            assert read is not None
            assert read.status == "DEACTIVATED"
            assert reader.reads == 2


async def test_nothing_is_kept_unless_listening(
    store: Store, keyring: auth.Keyring, clock: FrozenClock
) -> None:
    directory, app, reader = await one_app(store, keyring, clock)
    with trio.fail_after(TIMEOUT):
        await directory.find(reader, app.client_id)
        await set_status_unnotified(store, app.id, "SUSPENDED")
        found = await directory.find(reader, app.client_id)
        assert found is not None
        assert found.status == "SUSPENDED"
        assert reader.reads == 2
        assert directory.kept == 0


async def test_an_app_read_while_a_change_commits_is_not_kept(
    store: Store, keyring: auth.Keyring, clock: FrozenClock
) -> None:
    directory, app, reader = await one_app(store, keyring, clock)
    with trio.fail_after(TIMEOUT):
        async with directory.listening(store):
            reader.during = directory.forget  # the change's notification, mid-read
            assert (await directory.find(reader, app.client_id)) == app
            reader.during = None
            assert directory.kept == 0
            await directory.find(reader, app.client_id)
            assert directory.kept == 1
            assert reader.reads == 2


async def test_unknown_clients_are_never_kept_and_the_kept_are_bounded(
    store: Store, keyring: auth.Keyring, clock: FrozenClock
) -> None:
    directory = apps.AppDirectory(clock, most=2)
    made = [await new_app(store, keyring, clock) for _ in range(3)]
    reader = CountingReader(store)
    with trio.fail_after(TIMEOUT):
        async with directory.listening(store):
            for _ in range(3):
                assert (await directory.find(reader, "cid_unknown")) is None
            assert directory.kept == 0
            assert reader.reads == 3
            for app in made:
                await directory.find(reader, app.client_id)
            assert directory.kept == 2
            reads = reader.reads
            await directory.find(reader, made[2].client_id)
            await directory.find(reader, made[1].client_id)
            assert reader.reads == reads, "the two read last are kept"
            await directory.find(reader, made[0].client_id)
            assert reader.reads == reads + 1, "the one read first went"


@pytest.mark.postgres
async def test_another_process_sees_the_change_once_notified(
    asyncio_loop: object, keyring: auth.Keyring, clock: FrozenClock
) -> None:
    """Two processes over one database: a suspension committed by one is seen by the other's
    directory as soon as PostgreSQL's notification arrives."""
    async with AsyncExitStack() as stack:
        url = await stack.enter_async_context(migrated_database())
        here = await stack.enter_async_context(open_postgres(url, max_size=3))
        there = await stack.enter_async_context(open_postgres(url, max_size=3))
        directory = apps.AppDirectory(clock)
        await stack.enter_async_context(directory.listening(here))
        app = await new_app(there, keyring, clock)
        reader = CountingReader(here)
        heard = trio.Event()  # listening after the directory: called back after it
        await stack.enter_async_context(here.listen(apps.APPS_CHANNEL, heard.set))
        with trio.fail_after(TIMEOUT):
            assert (await directory.find(reader, app.client_id)) == app
            assert directory.kept == 1
            async with there.transaction() as tx:
                await apps.set_app_status(tx, app.id, "SUSPENDED")
            await heard.wait()
            assert directory.kept == 0
            found = await directory.find(reader, app.client_id)
            assert found is not None
            assert found.status == "SUSPENDED"


async def granted(
    client: Any, admin_headers: dict[str, str]
) -> tuple[Any, dict[str, Any], dict[str, str]]:
    """A confidential app installed in a business, its tokens, and its Basic credentials."""
    world = await make_world(client, admin_headers)
    assert world.client_secret is not None
    tokens = await full_grant(client, world)
    return world, tokens, basic(world.client_id, world.client_secret)


async def introspected_and_kept(
    client: Any, form: dict[str, str], right: dict[str, str], platform: Any
) -> None:
    """The token introspected as active, its app kept by the platform's directory since."""
    response = await client.post("/oauth/introspect", form=form, headers=right)
    assert (await response.get_json())["active"] is True
    assert platform.app_directory.kept >= 1


async def test_a_suspended_client_is_refused_at_once_by_a_listening_platform(
    client: Any, admin_headers: dict[str, str], platform: Any
) -> None:
    """The token endpoint with the directory keeping the app: the suspension is seen by the
    very next request (spec: a suspended app stops working immediately)."""
    world, tokens, right = await granted(client, admin_headers)
    form = {"token": tokens["access_token"]}
    await introspected_and_kept(client, form, right, platform)
    response = await client.post(
        f"/admin/apps/{world.app_id}/status", json={"status": "SUSPENDED"}, headers=admin_headers
    )
    assert response.status_code == 200, await response.get_json()
    response = await client.post("/oauth/introspect", form=form, headers=right)
    assert (await response.get_json()) == {"active": False}
    response = await client.post(
        "/oauth/token",
        form={"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]},
        headers=right,
    )
    assert response.status_code == 401
    assert (await response.get_json())["error"] == "invalid_client"


async def test_a_revoked_token_is_refused_on_the_next_call_whatever_is_kept(
    client: Any, admin_headers: dict[str, str], platform: Any
) -> None:
    """Tokens are never kept: with the app kept, a revoked access token answers 401 on the
    next data API call and inactive on the next introspection."""
    _, tokens, right = await granted(client, admin_headers)
    bearer = {"Authorization": f"Bearer {tokens['access_token']}"}
    assert (await client.get("/invoices", headers=bearer)).status_code == 200
    form = {"token": tokens["access_token"]}
    await introspected_and_kept(client, form, right, platform)
    response = await client.post("/oauth/revoke", form=form, headers=right)
    assert response.status_code == 200
    assert (await client.get("/invoices", headers=bearer)).status_code == 401
    response = await client.post("/oauth/introspect", form=form, headers=right)
    assert (await response.get_json()) == {"active": False}
    assert platform.app_directory.kept >= 1
