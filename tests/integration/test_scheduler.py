"""The scheduler's cleanup removes what expired and keeps what is live."""

from __future__ import annotations

from ledgerport import auth
from ledgerport.engine import Scheduler

from .oauth_helpers import full_grant, make_world


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
    clock.advance(31 * 24 * 3600 + auth.PURGE_GRACE)
    removed = await scheduler.cleanup_once()
    assert removed["login_session"] == 1
    assert removed["access_token"] == 1
    assert removed["refresh_token"] == 1
    assert removed["authorization_code"] == 1
    text = await (await client.get("/metrics")).get_data(as_text=True)
    assert 'ledgerport_cleanup_rows_total{kind="refresh_token"} 1.0' in text
