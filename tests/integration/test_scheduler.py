"""The scheduler's cleanup removes what expired and keeps what is live; the scheduler goes on
through the store's trouble."""

from __future__ import annotations

import dataclasses

import trio

from ledgerport import auth, catalog
from ledgerport.engine import Scheduler
from ledgerport.storage import StorageUnavailable

from .oauth_helpers import device_authorize, full_grant, make_world


async def test_cleanup_purges_expired_sessions_and_tokens(platform, client, admin_headers, clock):
    world = await make_world(client, admin_headers)
    tokens = await full_grant(client, world)
    scheduler = Scheduler(platform)
    kept = await scheduler.cleanup_once()
    assert kept["access_token"] == 0
    assert kept["login_session"] == 0
    async with platform.store.transaction() as tx:
        assert await auth.resolve_access_token(
            tx, platform.keyring, now=clock.now(), token=tokens["access_token"]
        )
    clock.advance(31 * 24 * 3600 + catalog.EXPIRED_ROW_GRACE)
    removed = await scheduler.cleanup_once()
    assert removed["login_session"] == 1
    assert removed["access_token"] == 1
    assert removed["refresh_token"] == 1
    assert removed["authorization_code"] == 1
    text = await (await client.get("/metrics")).get_data(as_text=True)
    assert 'ledgerport_cleanup_rows_total{kind="refresh_token"} 1.0' in text


async def test_cleanup_purges_device_codes_a_day_after_expiry(
    platform, client, admin_headers, clock
):
    world = await make_world(client, admin_headers)
    response = await device_authorize(client, world)
    assert response.status_code == 200
    scheduler = Scheduler(platform)
    clock.advance(catalog.DEVICE_CODE_TTL + catalog.EXPIRED_ROW_GRACE - 1)
    kept = await scheduler.cleanup_once()
    assert kept["device_code"] == 0
    clock.advance(1)
    removed = await scheduler.cleanup_once()
    assert removed["device_code"] == 1


async def test_cleanup_purges_cli_logins_a_day_after_expiry(platform, client, clock):
    response = await client.post("/cli/device/authorize")
    assert response.status_code == 200
    scheduler = Scheduler(platform)
    clock.advance(catalog.DEVICE_CODE_TTL + catalog.EXPIRED_ROW_GRACE - 1)
    kept = await scheduler.cleanup_once()
    assert kept["cli_login"] == 0
    clock.advance(1)
    removed = await scheduler.cleanup_once()
    assert removed["cli_login"] == 1


async def test_cleanup_publishes_the_next_signing_key_ahead_of_rotation(
    platform, client, admin_headers, clock
):
    scheduler = Scheduler(platform)
    await scheduler.cleanup_once()
    async with platform.store.transaction() as tx:
        first = await auth.published_keys(tx, now=clock.now())
    assert len(first) == 1
    clock.advance(catalog.SIGNING_KEY_PERIOD - catalog.SIGNING_KEY_PREPUBLISH)
    await scheduler.cleanup_once()
    async with platform.store.transaction() as tx:
        keys = await auth.published_keys(tx, now=clock.now())
    assert len(keys) == 2
    assert keys[1].activates_at == first[0].retires_at


class _Troubled:
    """``store`` whose transactions fail as they begin while ``away`` (PostgreSQL gone); it
    counts those that began."""

    def __init__(self, store):
        self._store = store
        self.away = True
        self.began = 0

    def transaction(self, **options):
        if self.away:
            raise StorageUnavailable("the database went away")
        self.began += 1
        return self._store.transaction(**options)

    def __getattr__(self, name):
        return getattr(self._store, name)


async def _until(holds):
    """Look every 50 ms until ``holds()`` (what it reads signals nothing)."""
    while True:
        if holds():
            return
        await trio.sleep(0.05)


async def test_the_scheduler_goes_on_through_the_stores_trouble(platform, caplog):
    """The cleanup, the trimming and the endpoints' check each tell the store's trouble and
    try again at their next turn: the scheduler does not end (to be started again by its
    supervisor, with a traceback in the log)."""
    troubled = _Troubled(platform.store)
    scheduler = Scheduler(
        dataclasses.replace(platform, store=troubled), interval=0.05, trim_interval=0.05
    )

    def told(part):
        return any(part in record.getMessage() for record in caplog.records)

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            await nursery.start(scheduler.run)
            await _until(lambda: told("scheduler: cleaning up") and told("scheduler: trimming"))
            troubled.away = False
            await _until(lambda: troubled.began >= 10)  # the cleanup and the trimming went on
            nursery.cancel_scope.cancel()
    assert told("scheduler: checking failing endpoints")
