"""A token request reads one token family however many its app has (PostgreSQL).

A refresh's rotation and a data API call's token read name the token's app (and business) in
their conditions. Compared plainly, PostgreSQL planned the family's read by the index on
(app_id, business_id) when its statistics showed few families an app, and a prepared statement
kept that plan: every refresh then read every family of the app, more with each token exchange
(29 ms a refresh at 20,000 families). The statements are planned here as a prepared statement's
generic plan is, over statistics taken while each app had one family, after one app has grown
to thousands: each reads its family by id.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from ledgerport import auth
from ledgerport.storage import Store

TIMEOUT = 60
APPS = 300
GROWN = 4000

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.parametrize("backend", ["postgresql"], indirect=True),
]


async def _tenants(store: Store) -> None:
    """``APPS`` apps, each installed in a business of its own with one family and its pair of
    tokens; statistics taken; then app 1's family count grown to ``GROWN`` in business 1."""
    rows = [
        "INSERT INTO users (id, email, password_hash, created_at)"
        " SELECT 'u' || g, 'u' || g || '@plans.example', 'x', 0 FROM generate_series(1, $1) g",
        "INSERT INTO businesses (id, name, sandbox, plan, created_at)"
        " SELECT 'b' || g, 'B', false, 'paid', 0 FROM generate_series(1, $1) g",
        "INSERT INTO memberships (business_id, user_id, role, active, updated_at)"
        " SELECT 'b' || g, 'u' || g, 'owner', true, 0 FROM generate_series(1, $1) g",
        "INSERT INTO apps (id, client_id, name, type, redirect_uris, scopes, reviewed, status,"
        " created_at) SELECT 'a' || g, 'c' || g, 'A', 'CONFIDENTIAL', '[]', '[]', true,"
        " 'ACTIVE', 0 FROM generate_series(1, $1) g",
        "INSERT INTO installations (id, app_id, business_id, user_id, scopes, state, created_at,"
        " updated_at) SELECT 'i' || g, 'a' || g, 'b' || g, 'u' || g, '[]', 'ACTIVE', 0, 0"
        " FROM generate_series(1, $1) g",
    ]
    async with store.transaction() as tx:
        for sql in rows:
            await tx.execute(sql, APPS)
        await _families(tx, "SELECT 'f' || g, 'a' || g, 'i' || g, 'b' || g, 'u' || g", APPS)
    await store.autocommit.fetchval("ANALYZE")
    async with store.transaction() as tx:
        await _families(tx, "SELECT 'g' || g, 'a1', 'i1', 'b1', 'u1'", GROWN)


async def _families(tx: Any, select: str, n: int) -> None:
    """``n`` families (``select`` gives each its id, app, installation, business and user, over
    ``g``), each with a live refresh token ``r<id>`` and access token ``t<id>``."""
    await tx.execute(
        "INSERT INTO token_families (id, app_id, installation_id, business_id, user_id, scopes,"
        f" grant_type, created_at) {select}, '[]', 'authorization_code', 0"
        " FROM generate_series(1, $1) g",
        n,
    )
    await tx.execute(
        "INSERT INTO refresh_tokens (token_hash, family_id, created_at, expires_at)"
        " SELECT 'r' || id, id, 0, 1e12 FROM token_families WHERE NOT EXISTS"
        " (SELECT FROM refresh_tokens WHERE family_id = token_families.id)",
    )
    await tx.execute(
        "INSERT INTO access_tokens (token_hash, family_id, refresh_token_hash, created_at,"
        " expires_at) SELECT 't' || id, id, 'r' || id, 0, 1e12 FROM token_families"
        " WHERE NOT EXISTS (SELECT FROM access_tokens WHERE family_id = token_families.id)",
    )


async def _plan(store: Store, sql: str, *args: Any) -> str:
    """The executed generic plan of ``sql`` (its writes rolled back)."""

    class RolledBack(Exception):
        pass

    plan = ""
    try:
        async with store.transaction() as tx:
            await tx.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            explained = await tx.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", *args)
            plan = explained if isinstance(explained, str) else json.dumps(explained)
            raise RolledBack
    except RolledBack:
        pass
    return plan


def _families_read(plan: str) -> list[tuple[str, int]]:
    """The reads of token_families in ``plan``: (index, rows read)."""
    found: list[tuple[str, int]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("Relation Name") == "token_families":
                found.append(
                    (node.get("Index Name", ""), node["Actual Rows"] * node["Actual Loops"])
                )
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(json.loads(plan))
    return found


async def test_a_refresh_reads_one_family_of_a_grown_app(store: Store) -> None:
    with trio.fail_after(TIMEOUT):
        await _tenants(store)
        rotation = auth.RefreshRotation.of(
            store, auth.Keyring("k" * 43), now=1.0, refresh_token="unused", resource=None
        )
        assert rotation is not None
        lookup = rotation.lookup(type("App", (), {"id": "a1"})())  # type: ignore[arg-type]
        args = list(lookup.args)
        args[1] = "rg2000"  # the spent token: a family in the middle of app a1's
        plan = await _plan(store, lookup.alone(), *args)
        assert '"Actual Rows": 1' in plan, "the token was rotated"
        assert _families_read(plan) == [("token_families_pkey", 1)]


async def test_a_data_api_call_reads_one_family_of_a_grown_app(store: Store) -> None:
    with trio.fail_after(TIMEOUT):
        await _tenants(store)
        lookup = auth.live_access_token_lookup(
            auth.Keyring("k" * 43), token="unused", now=1.0, app_id="a1", business_id="b1"
        )
        plan = await _plan(store, lookup.sql, "tg2000", *lookup.args[1:])
        assert _families_read(plan) == [("token_families_pkey", 1)]
