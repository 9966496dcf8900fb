"""DPoP (RFC 9449; contract.md: Agents as partner apps): tokens bound to a proof's key at the
token endpoint, accepted on the data API only with a fresh proof of that key, each proof used
once, server nonces when configured; on both stores. Time moves only through the clock."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.lowlevel

from ledgerport import auth, catalog
from ledgerport.clock import FrozenClock
from ledgerport.engine import Scheduler
from ledgerport.platform import Platform
from ledgerport.storage import Store, open_postgres, open_sqlite

from ..conftest import PLATFORM_ENV, build_platform
from ..dpop_keys import DROP, DpopKey
from ..stores import migrated_database
from .oauth_helpers import (
    DEVICE_CODE,
    JWT_TYPE,
    REDIRECT_URI,
    TOKEN_EXCHANGE,
    World,
    authorize,
    basic,
    device_authorize,
    device_decide,
    install,
    login,
    make_world,
    pkce_pair,
    session_token,
)
from .test_registration import registered_world

API = "http://api.ledgerport.test"
TOKEN_URL = f"{API}/oauth/token"
INVOICES = f"{API}/invoices"
ALGS = 'algs="ES256 RS256 EdDSA"'


def challenge(response: Any) -> dict[str, str]:
    """The auth-params of a DPoP challenge."""
    header = response.headers["WWW-Authenticate"]
    assert header.startswith("DPoP "), header
    return dict(re.findall(r'(\w+)="([^"]*)"', header))


async def code_for(client: Any, world: World) -> tuple[str, str]:
    """An authorization code (PKCE S256) and its verifier."""
    verifier, code_challenge = pkce_pair()
    await login(client, world)
    callback = await authorize(client, world, challenge=code_challenge)
    return callback["code"][0], verifier


async def redeem(client: Any, world: World, code: str, verifier: str, **headers: str) -> Any:
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": REDIRECT_URI,
        "code_verifier": verifier,
    }
    if world.client_secret is None:
        form["client_id"] = world.client_id
    else:
        headers |= basic(world.client_id, world.client_secret)
    return await client.post("/oauth/token", form=form, headers=headers)


async def bound_grant(
    client: Any, world: World, key: DpopKey, clock: FrozenClock
) -> dict[str, Any]:
    code, verifier = await code_for(client, world)
    proof = key.proof("POST", TOKEN_URL, iat=clock.now())
    response = await redeem(client, world, code, verifier, DPoP=proof)
    body: dict[str, Any] = await response.get_json()
    assert response.status_code == 200, body
    return body


def dpop_call(key: DpopKey, token: str, clock: FrozenClock, **changes: Any) -> dict[str, str]:
    return {
        "Authorization": f"DPoP {token}",
        "DPoP": key.proof("GET", INVOICES, iat=clock.now(), token=token, **changes),
    }


async def refresh(client: Any, world: World, refresh_token: str, **headers: str) -> Any:
    form = {"grant_type": "refresh_token", "refresh_token": refresh_token}
    if world.client_secret is None:
        form["client_id"] = world.client_id
    else:
        headers |= basic(world.client_id, world.client_secret)
    return await client.post("/oauth/token", form=form, headers=headers)


async def introspect(client: Any, world: World, token: str) -> dict[str, Any]:
    assert world.client_secret is not None
    response = await client.post(
        "/oauth/introspect",
        form={"token": token},
        headers=basic(world.client_id, world.client_secret),
    )
    body: dict[str, Any] = await response.get_json()
    return body


# --- binding at the token endpoint, use on the data API ------------------------------------------


async def test_a_proof_at_the_token_endpoint_binds_the_access_token_to_its_key(
    client: Any, admin_headers: dict[str, str], clock: FrozenClock
) -> None:
    world = await make_world(client, admin_headers)
    key = DpopKey()
    tokens = await bound_grant(client, world, key, clock)
    assert tokens["token_type"] == "DPoP"
    access = tokens["access_token"]

    described = await introspect(client, world, access)
    assert described["active"] is True
    assert described["token_type"] == "DPoP"
    assert described["cnf"] == {"jkt": key.thumbprint}
    # A confidential client's refresh token is bound by its authentication, not by a key.
    assert "cnf" not in await introspect(client, world, tokens["refresh_token"])

    answered = await client.get("/invoices", headers=dpop_call(key, access, clock))
    assert answered.status_code == 200, await answered.get_data(as_text=True)

    as_bearer = await client.get("/invoices", headers={"Authorization": f"Bearer {access}"})
    assert as_bearer.status_code == 401
    assert challenge(as_bearer)["error"] == "invalid_token"
    assert (await as_bearer.get_json())["code"] == "INVALID_TOKEN"


async def test_a_token_request_without_a_proof_gets_a_bearer_token_refused_as_dpop(
    client: Any, admin_headers: dict[str, str], clock: FrozenClock
) -> None:
    world = await make_world(client, admin_headers)
    code, verifier = await code_for(client, world)
    tokens = await (await redeem(client, world, code, verifier)).get_json()
    assert tokens["token_type"] == "Bearer"
    assert "cnf" not in await introspect(client, world, tokens["access_token"])
    headers = dpop_call(DpopKey(), tokens["access_token"], clock)
    refused = await client.get("/invoices", headers=headers)
    assert refused.status_code == 401
    assert challenge(refused)["error"] == "invalid_token"
    bearer = {"Authorization": f"Bearer {tokens['access_token']}"}
    assert (await client.get("/invoices", headers=bearer)).status_code == 200


RESOURCE_FAULTS: list[tuple[str, Callable[[DpopKey, str, FrozenClock], dict[str, str]]]] = [
    ("bad signature", lambda k, t, c: dpop_call(k, t, c, signer=DpopKey().private)),
    ("wrong typ", lambda k, t, c: dpop_call(k, t, c, header={"typ": "JWT"})),
    ("alg none", lambda k, t, c: dpop_call(k, t, c, header={"alg": "none"}, signer=None)),
    ("alg HS256", lambda k, t, c: dpop_call(k, t, c, header={"alg": "HS256"}, signer=b"s" * 32)),
    ("missing htm", lambda k, t, c: dpop_call(k, t, c, claims={"htm": DROP})),
    ("mismatched htm", lambda k, t, c: dpop_call(k, t, c, claims={"htm": "POST"})),
    ("missing htu", lambda k, t, c: dpop_call(k, t, c, claims={"htu": DROP})),
    ("mismatched htu", lambda k, t, c: dpop_call(k, t, c, claims={"htu": f"{API}/customers"})),
    (
        "htu with a port out of range",
        lambda k, t, c: dpop_call(k, t, c, claims={"htu": "https://api.example:99999/invoices"}),
    ),
    (
        "htu with a port not a number",
        lambda k, t, c: dpop_call(k, t, c, claims={"htu": "https://api.example:ab/invoices"}),
    ),
    (
        "htu with an unclosed IPv6 host",
        lambda k, t, c: dpop_call(k, t, c, claims={"htu": "https://[::1/invoices"}),
    ),
    ("missing ath", lambda k, t, c: dpop_call(k, t, c, claims={"ath": DROP})),
    ("mismatched ath", lambda k, t, c: dpop_call(k, t, c, claims={"ath": "A" * 43})),
    ("stale iat", lambda k, t, c: dpop_call(k, t, c, claims={"iat": int(c.now() - 61)})),
    ("future iat", lambda k, t, c: dpop_call(k, t, c, claims={"iat": int(c.now() + 6)})),
    ("wrong key", lambda k, t, c: dpop_call(DpopKey(), t, c)),
    ("private key in jwk", lambda k, t, c: dpop_call(k, t, c, header={"jwk": k.private_jwk})),
    ("malformed", lambda k, t, c: {"Authorization": f"DPoP {t}", "DPoP": "not.a.jwt"}),
    ("missing proof", lambda k, t, c: {"Authorization": f"DPoP {t}"}),
]


@pytest.mark.parametrize(
    "fault", [f for _, f in RESOURCE_FAULTS], ids=[n for n, _ in RESOURCE_FAULTS]
)
async def test_a_faulty_proof_on_the_data_api_is_refused_401_with_a_dpop_challenge(
    client: Any,
    admin_headers: dict[str, str],
    clock: FrozenClock,
    fault: Callable[[DpopKey, str, FrozenClock], dict[str, str]],
) -> None:
    world = await make_world(client, admin_headers)
    key = DpopKey()
    access = (await bound_grant(client, world, key, clock))["access_token"]
    refused = await client.get("/invoices", headers=fault(key, access, clock))
    assert refused.status_code == 401
    params = challenge(refused)
    assert params["error"] == "invalid_dpop_proof"
    assert params["error_description"]
    assert ALGS in refused.headers["WWW-Authenticate"]
    assert params["resource_metadata"] == f"{API}/.well-known/oauth-protected-resource"
    assert (await refused.get_json())["code"] == "INVALID_TOKEN"
    # The token itself is good: a proper proof still gets through.
    assert (await client.get("/invoices", headers=dpop_call(key, access, clock))).status_code == 200


async def test_a_proof_is_used_once_on_the_data_api(
    client: Any, admin_headers: dict[str, str], clock: FrozenClock
) -> None:
    world = await make_world(client, admin_headers)
    key = DpopKey()
    access = (await bound_grant(client, world, key, clock))["access_token"]
    headers = dpop_call(key, access, clock)
    assert (await client.get("/invoices", headers=headers)).status_code == 200
    clock.advance(10)
    replayed = await client.get("/invoices", headers=headers)
    assert replayed.status_code == 401
    assert challenge(replayed)["error"] == "invalid_dpop_proof"
    assert "used already" in challenge(replayed)["error_description"]


async def test_the_query_is_not_part_of_htu(
    client: Any, admin_headers: dict[str, str], clock: FrozenClock
) -> None:
    world = await make_world(client, admin_headers)
    key = DpopKey()
    access = (await bound_grant(client, world, key, clock))["access_token"]
    answered = await client.get("/invoices?limit=5", headers=dpop_call(key, access, clock))
    assert answered.status_code == 200


# --- the token endpoint's refusals ---------------------------------------------------------------


TOKEN_FAULTS: list[tuple[str, Callable[[DpopKey, FrozenClock], str | None]]] = [
    (
        "bad signature",
        lambda k, c: k.proof("POST", TOKEN_URL, iat=c.now(), signer=DpopKey().private),
    ),
    ("wrong typ", lambda k, c: k.proof("POST", TOKEN_URL, iat=c.now(), header={"typ": "JWT"})),
    (
        "wrong alg",
        lambda k, c: k.proof(
            "POST", TOKEN_URL, iat=c.now(), header={"alg": "HS256"}, signer=b"s" * 32
        ),
    ),
    ("mismatched htm", lambda k, c: k.proof("GET", TOKEN_URL, iat=c.now())),
    ("mismatched htu", lambda k, c: k.proof("POST", f"{API}/oauth/revoke", iat=c.now())),
    ("stale iat", lambda k, c: k.proof("POST", TOKEN_URL, iat=c.now() - 120)),
    ("future iat", lambda k, c: k.proof("POST", TOKEN_URL, iat=c.now() + 60)),
    (
        "private key in jwk",
        lambda k, c: k.proof("POST", TOKEN_URL, iat=c.now(), header={"jwk": k.private_jwk}),
    ),
    ("malformed", lambda k, c: "eyJ.eyJ.sig"),
]


@pytest.mark.parametrize("fault", [f for _, f in TOKEN_FAULTS], ids=[n for n, _ in TOKEN_FAULTS])
async def test_a_faulty_proof_at_the_token_endpoint_is_invalid_dpop_proof(
    client: Any,
    admin_headers: dict[str, str],
    clock: FrozenClock,
    fault: Callable[[DpopKey, FrozenClock], str],
) -> None:
    world = await make_world(client, admin_headers)
    code, verifier = await code_for(client, world)
    refused = await redeem(client, world, code, verifier, DPoP=fault(DpopKey(), clock))
    body = await refused.get_json()
    assert refused.status_code == 400, body
    assert body["error"] == "invalid_dpop_proof"
    assert body["error_description"]
    # The code was not spent by the refused request.
    key = DpopKey()
    good = await redeem(
        client, world, code, verifier, DPoP=key.proof("POST", TOKEN_URL, iat=clock.now())
    )
    assert good.status_code == 200


async def test_a_proof_is_used_once_at_the_token_endpoint(
    client: Any, admin_headers: dict[str, str], clock: FrozenClock
) -> None:
    world = await make_world(client, admin_headers)
    key = DpopKey()
    proof = key.proof("POST", TOKEN_URL, iat=clock.now())
    code, verifier = await code_for(client, world)
    assert (await redeem(client, world, code, verifier, DPoP=proof)).status_code == 200
    code, verifier = await code_for(client, world)
    replayed = await redeem(client, world, code, verifier, DPoP=proof)
    assert replayed.status_code == 400
    assert (await replayed.get_json())["error"] == "invalid_dpop_proof"


# --- refresh ------------------------------------------------------------------------------------


async def test_a_public_clients_refresh_token_is_bound_to_its_key(
    client: Any, admin_headers: dict[str, str], clock: FrozenClock
) -> None:
    world = await make_world(client, admin_headers, app_type="PUBLIC")
    key = DpopKey("EdDSA")
    tokens = await bound_grant(client, world, key, clock)
    spent = tokens["refresh_token"]

    without = await refresh(client, world, spent)
    assert without.status_code == 400
    assert (await without.get_json())["error"] == "invalid_dpop_proof"
    other = await refresh(
        client, world, spent, DPoP=DpopKey().proof("POST", TOKEN_URL, iat=clock.now())
    )
    assert other.status_code == 400
    assert (await other.get_json())["error"] == "invalid_dpop_proof"

    same = await refresh(client, world, spent, DPoP=key.proof("POST", TOKEN_URL, iat=clock.now()))
    renewed = await same.get_json()
    assert same.status_code == 200, renewed
    assert renewed["token_type"] == "DPoP"
    # The new refresh token is bound to the same key.
    again = await refresh(client, world, renewed["refresh_token"])
    assert (await again.get_json())["error"] == "invalid_dpop_proof"
    headers = dpop_call(key, renewed["access_token"], clock)
    assert (await client.get("/invoices", headers=headers)).status_code == 200


async def test_a_confidential_client_refreshes_with_or_without_a_proof(
    client: Any, admin_headers: dict[str, str], clock: FrozenClock
) -> None:
    world = await make_world(client, admin_headers)
    key = DpopKey("RS256")
    tokens = await bound_grant(client, world, key, clock)
    bound = await refresh(
        client, world, tokens["refresh_token"], DPoP=key.proof("POST", TOKEN_URL, iat=clock.now())
    )
    renewed = await bound.get_json()
    assert renewed["token_type"] == "DPoP"
    assert (await introspect(client, world, renewed["access_token"]))["cnf"]["jkt"] == (
        key.thumbprint
    )
    plain = await (await refresh(client, world, renewed["refresh_token"])).get_json()
    assert plain["token_type"] == "Bearer"
    bearer = {"Authorization": f"Bearer {plain['access_token']}"}
    assert (await client.get("/invoices", headers=bearer)).status_code == 200


# --- the device flow and token exchange ---------------------------------------------------------


async def test_the_device_flow_binds_its_tokens(
    client: Any, admin_headers: dict[str, str], clock: FrozenClock
) -> None:
    world = await make_world(client, admin_headers)
    started = await (await device_authorize(client, world)).get_json()
    await login(client, world)
    assert (await device_decide(client, world, started["user_code"])).status_code in (200, 303)
    key = DpopKey()
    assert world.client_secret is not None
    polled = await client.post(
        "/oauth/token",
        form={"grant_type": DEVICE_CODE, "device_code": started["device_code"]},
        headers={
            **basic(world.client_id, world.client_secret),
            "DPoP": key.proof("POST", TOKEN_URL, iat=clock.now()),
        },
    )
    body = await polled.get_json()
    assert polled.status_code == 200, body
    assert body["token_type"] == "DPoP"
    assert (await introspect(client, world, body["access_token"]))["cnf"]["jkt"] == key.thumbprint


async def test_token_exchange_binds_its_token(
    client: Any, admin_headers: dict[str, str], clock: FrozenClock
) -> None:
    world = await make_world(client, admin_headers)
    await install(client, admin_headers, world)
    key = DpopKey()
    subject = await session_token(client, admin_headers, world)
    assert world.client_secret is not None
    exchanged = await client.post(
        "/oauth/token",
        form={
            "grant_type": TOKEN_EXCHANGE,
            "subject_token": subject,
            "subject_token_type": JWT_TYPE,
        },
        headers={
            **basic(world.client_id, world.client_secret),
            "DPoP": key.proof("POST", TOKEN_URL, iat=clock.now()),
        },
    )
    body = await exchanged.get_json()
    assert exchanged.status_code == 200, body
    assert body["token_type"] == "DPoP"
    headers = dpop_call(key, body["access_token"], clock)
    assert (await client.get("/invoices", headers=headers)).status_code == 200


# --- a client registered to require DPoP --------------------------------------------------------


async def test_a_client_registered_with_dpop_bound_access_tokens_must_present_a_proof(
    client: Any, admin_headers: dict[str, str], platform: Platform, clock: FrozenClock
) -> None:
    world = await registered_world(client, admin_headers, platform, dpop_bound_access_tokens=True)
    code, verifier = await code_for(client, world)
    refused = await redeem(client, world, code, verifier)
    assert refused.status_code == 400
    body = await refused.get_json()
    assert body["error"] == "invalid_dpop_proof"
    assert "must present a DPoP proof" in body["error_description"]
    proof = DpopKey().proof("POST", TOKEN_URL, iat=clock.now())
    bound = await redeem(client, world, code, verifier, DPoP=proof)
    assert (await bound.get_json())["token_type"] == "DPoP"


async def test_dpop_bound_access_tokens_must_be_a_boolean(client: Any) -> None:
    response = await client.post(
        "/oauth/register",
        json={"redirect_uris": [REDIRECT_URI], "dpop_bound_access_tokens": "yes"},
    )
    assert response.status_code == 400
    body = await response.get_json()
    assert body["error"] == "invalid_client_metadata"
    assert "dpop_bound_access_tokens" in body["error_description"]


async def test_discovery_names_the_proof_algorithms(client: Any) -> None:
    metadata = await (await client.get("/.well-known/oauth-authorization-server")).get_json()
    assert metadata["dpop_signing_alg_values_supported"] == ["ES256", "RS256", "EdDSA"]


# --- server nonces ------------------------------------------------------------------------------


async def test_with_nonces_on_a_proof_must_carry_the_servers_nonce(
    nonce_client: Any, admin_headers: dict[str, str], clock: FrozenClock
) -> None:
    client = nonce_client
    world = await make_world(client, admin_headers)
    key = DpopKey()
    code, verifier = await code_for(client, world)
    asked = await redeem(
        client, world, code, verifier, DPoP=key.proof("POST", TOKEN_URL, iat=clock.now())
    )
    assert asked.status_code == 400
    assert (await asked.get_json())["error"] == "use_dpop_nonce"
    nonce = asked.headers["DPoP-Nonce"]
    stale = await redeem(
        client, world, code, verifier, DPoP=key.proof("POST", TOKEN_URL, iat=clock.now(), nonce="x")
    )
    assert (await stale.get_json())["error"] == "use_dpop_nonce"
    issued = await redeem(
        client,
        world,
        code,
        verifier,
        DPoP=key.proof("POST", TOKEN_URL, iat=clock.now(), nonce=nonce),
    )
    tokens = await issued.get_json()
    assert issued.status_code == 200, tokens
    assert issued.headers["DPoP-Nonce"] == nonce

    access = tokens["access_token"]
    refused = await client.get("/invoices", headers=dpop_call(key, access, clock))
    assert refused.status_code == 401
    assert challenge(refused)["error"] == "use_dpop_nonce"
    assert refused.headers["DPoP-Nonce"] == nonce
    answered = await client.get("/invoices", headers=dpop_call(key, access, clock, nonce=nonce))
    assert answered.status_code == 200
    assert answered.headers["DPoP-Nonce"] == nonce

    clock.advance(2 * catalog.DPOP_NONCE_WINDOW)
    expired = await client.get("/invoices", headers=dpop_call(key, access, clock, nonce=nonce))
    assert challenge(expired)["error"] == "use_dpop_nonce"
    assert expired.headers["DPoP-Nonce"] != nonce


async def test_with_nonces_off_no_nonce_is_handed_out(
    client: Any, admin_headers: dict[str, str], clock: FrozenClock
) -> None:
    world = await make_world(client, admin_headers)
    key = DpopKey()
    access = (await bound_grant(client, world, key, clock))["access_token"]
    answered = await client.get("/invoices", headers=dpop_call(key, access, clock))
    assert "DPoP-Nonce" not in answered.headers


# --- one use across processes, and the cleanup --------------------------------------------------


@pytest.mark.postgres
async def test_a_proof_recorded_by_one_process_is_a_replay_for_another_on_postgresql(
    keyring: auth.Keyring, clock: FrozenClock, asyncio_loop: object
) -> None:
    """Two store handles of one database, as two serving processes hold them."""
    proof = auth.Proof("thumb", "jti-1", clock.now() + catalog.DPOP_PROOF_MAX_AGE)
    async with (
        migrated_database() as url,
        open_postgres(url, max_size=2) as one,
        open_postgres(url, max_size=2) as two,
    ):
        first, second = auth.StoreProofLedger(one, keyring), auth.StoreProofLedger(two, keyring)
        assert await first.first_use(proof) is True
        assert await second.first_use(proof) is False
        assert await first.first_use(proof) is False
        # Another key's proof with the same jti is its own.
        assert await second.first_use(auth.Proof("other", "jti-1", proof.fresh_until)) is True


async def test_a_proof_recorded_before_a_restart_is_a_replay_after_it_on_sqlite(
    keyring: auth.Keyring, clock: FrozenClock, tmp_path: Path
) -> None:
    """SQLite is served by one process at a time (the file is locked): the next one, after a
    restart, finds the proofs the last one accepted."""
    proof = auth.Proof("thumb", "jti-1", clock.now() + catalog.DPOP_PROOF_MAX_AGE)
    path = str(tmp_path / "proofs.db")
    async with open_sqlite(path) as one:
        await one.migrate()
        assert await auth.StoreProofLedger(one, keyring).first_use(proof) is True
    async with open_sqlite(path) as two:
        assert await auth.StoreProofLedger(two, keyring).first_use(proof) is False


@pytest.mark.redis
async def test_a_proof_recorded_in_redis_by_one_connection_is_a_replay_for_another(
    redis_url: str, keyring: auth.Keyring, clock: FrozenClock, asyncio_loop: object
) -> None:
    first = auth.RedisProofLedger(await auth.connect_redis(redis_url), keyring, clock)
    second = auth.RedisProofLedger(await auth.connect_redis(redis_url), keyring, clock)
    proof = auth.Proof(f"thumb-{id(first)}", f"jti-{clock.now()}", clock.now() + 60)
    assert await first.first_use(proof) is True
    assert await second.first_use(proof) is False


async def test_the_cleanup_purges_proofs_no_longer_fresh(
    platform: Platform, clock: FrozenClock
) -> None:
    assert platform.proofs is not None
    proof = auth.Proof("thumb", "jti-clean", clock.now() + catalog.DPOP_PROOF_MAX_AGE)
    assert await platform.proofs.first_use(proof)
    scheduler = Scheduler(platform)
    assert (await scheduler.cleanup_once())["dpop_proof"] == 0
    clock.advance(catalog.DPOP_PROOF_MAX_AGE)
    assert (await scheduler.cleanup_once())["dpop_proof"] == 1


async def test_concurrent_proofs_are_recorded_together_each_once(
    store: Store, keyring: auth.Keyring, clock: FrozenClock
) -> None:
    ledger = auth.StoreProofLedger(store, keyring)
    fresh_until = clock.now() + catalog.DPOP_PROOF_MAX_AGE
    proofs = [auth.Proof("thumb", f"jti-{i % 10}", fresh_until) for i in range(40)]
    answers: list[bool] = []

    async def use(proof: auth.Proof) -> None:
        answers.append(await ledger.first_use(proof))

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            for proof in proofs:
                nursery.start_soon(use, proof)
    assert answers.count(True) == 10
    assert answers.count(False) == 30


async def test_a_cancelled_wait_leaves_the_ledger_working(
    store: Store, keyring: auth.Keyring, clock: FrozenClock
) -> None:
    ledger = auth.StoreProofLedger(store, keyring)
    fresh_until = clock.now() + catalog.DPOP_PROOF_MAX_AGE
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            for i in range(5):
                nursery.start_soon(ledger.first_use, auth.Proof("k", f"cancelled-{i}", fresh_until))
            await trio.lowlevel.checkpoint()
            nursery.cancel_scope.cancel()
        assert await ledger.first_use(auth.Proof("k", "after", fresh_until)) is True
        assert await ledger.first_use(auth.Proof("k", "after", fresh_until)) is False


@pytest.mark.redis
async def test_proofs_are_recorded_in_redis_when_the_service_counts_there(
    store: Store, clock: FrozenClock, redis_url: str
) -> None:
    env = {**PLATFORM_ENV, "LEDGERPORT_REDIS_URL": redis_url}
    with trio.fail_after(30):
        platform = await build_platform(store, clock, env)
    assert isinstance(platform.proofs, auth.RedisProofLedger)
    without = await build_platform(store, clock, PLATFORM_ENV)
    assert isinstance(without.proofs, auth.StoreProofLedger)
