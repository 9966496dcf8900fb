"""The data API's limits as a client sees them: the RateLimit-* headers of the app's budget in the
business on every authenticated answer, 429 APP_RATE_LIMITED with Retry-After, and the per-IP
budget counted before the token is read.

Spec: Limits > Rate limits; Errors > API error codes. The counts are in memory here (SQLite, the
module's ``store``); ``test_shared_limits.py`` runs them through PostgreSQL and Redis.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio

from ledgerport import catalog
from ledgerport.storage import Store, open_sqlite

from .oauth_helpers import full_grant, make_world

TIMEOUT = 60
OTHER_IP = {"client": ("203.0.113.9", 40000)}


@pytest.fixture
async def store(tmp_path: Any) -> AsyncIterator[Store]:
    async with open_sqlite(str(tmp_path) + "/limits.db") as store:
        await store.migrate()
        yield store


def budget_headers(response: Any) -> tuple[int, int, int]:
    headers = response.headers
    return (
        int(headers["RateLimit-Limit"]),
        int(headers["RateLimit-Remaining"]),
        int(headers["RateLimit-Reset"]),
    )


async def test_headers_tell_what_is_left_after_each_call(client, admin_headers, clock) -> None:
    world = await make_world(client, admin_headers)
    tokens = await full_grant(client, world)
    bearer = {"Authorization": f"Bearer {tokens['access_token']}"}
    limit = catalog.RATE_LIMIT_APP_PER_BUSINESS.limit
    with trio.fail_after(TIMEOUT):
        for i in range(limit):
            response = await client.get("/invoices", headers=bearer)
            assert response.status_code == 200, i
            # Remaining counts this call; the budget is whole a minute after the newest call.
            assert budget_headers(response) == (limit, limit - i - 1, 60)
            if i == limit // 2:
                clock.advance(10)
        clock.advance(20)
        response = await client.get("/invoices", headers=bearer)
        body = await response.get_json()
        assert response.status_code == 429, body
        assert body["code"] == "APP_RATE_LIMITED"
        # The oldest calls, made 30 s ago, leave the window first; the newest in 40 s.
        assert response.headers["Retry-After"] == "30"
        assert budget_headers(response) == (limit, 0, 40)
        clock.advance(30)
        # The first 151 calls have left; the 149 made at t=10 and this one count.
        response = await client.get("/invoices", headers=bearer)
        assert response.status_code == 200
        assert budget_headers(response) == (limit, limit - 150, 60)


async def test_refused_calls_use_up_no_budget(client, admin_headers, clock) -> None:
    """A call refused by the app's budget in the business takes nothing from its budget across
    businesses, and Remaining stays what it was."""
    world = await make_world(client, admin_headers)
    tokens = await full_grant(client, world)
    bearer = {"Authorization": f"Bearer {tokens['access_token']}"}
    limit = catalog.RATE_LIMIT_APP_PER_BUSINESS.limit
    with trio.fail_after(TIMEOUT):
        for _ in range(limit):
            assert (await client.get("/invoices", headers=bearer)).status_code == 200
        for _ in range(5):
            response = await client.get("/invoices", headers=bearer)
            assert response.status_code == 429
            assert response.headers["Retry-After"] == "60"
            assert budget_headers(response)[1] == 0
        clock.advance(60)
        response = await client.get("/invoices", headers=bearer)
        assert budget_headers(response) == (limit, limit - 1, 60)


async def test_the_ip_budget_counts_every_request_first(client, admin_headers) -> None:
    """600 requests a minute per IP, tokens or not; its refusals say nothing of an app's budget
    (no app is known yet) and leave other IPs alone."""
    limit = catalog.RATE_LIMIT_API_PER_IP.limit
    with trio.fail_after(TIMEOUT):
        for i in range(limit):
            response = await client.get("/invoices", headers={"Authorization": "Bearer nothing"})
            assert response.status_code == 401, i
            assert "RateLimit-Remaining" not in response.headers
        response = await client.get("/invoices")
        body = await response.get_json()
        assert response.status_code == 429, body
        assert body["code"] == "APP_RATE_LIMITED"
        assert response.headers["Retry-After"] == "60"
        assert "RateLimit-Limit" not in response.headers
        response = await client.get("/invoices", scope_base=OTHER_IP)
        assert response.status_code == 401
