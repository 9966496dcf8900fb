"""Client ID metadata documents (contract.md: Agents as partner apps): a ``client_id`` that is a
URL names a public client whose document the server fetches from it, here from a real loopback
HTTP server (``http://`` on loopback is allowed with LEDGERPORT_ENV=development)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlencode

import pytest
import trio

from ledgerport import auth, config
from ledgerport.clock import FrozenClock
from ledgerport.engine import Scheduler, fetch_client_document
from ledgerport.storage import Store

from ..conftest import PLATFORM_ENV, build_platform
from ..receiver import Answer, Receiver, receiving
from .oauth_helpers import World, decide_consent, login, make_world, pkce_pair

TIMEOUT = 20.0
AGENT_REDIRECT = "http://127.0.0.1:8765/callback"
PATH = "/agent/client.json"


def document_url(receiver: Receiver, path: str = PATH) -> str:
    return f"http://127.0.0.1:{receiver.port}{path}"


def document(client_id: str, **fields: Any) -> bytes:
    body = {
        "client_id": client_id,
        "client_name": "Ledger Agent",
        "redirect_uris": [AGENT_REDIRECT],
        "token_endpoint_auth_method": "none",
        **fields,
    }
    return json.dumps({k: v for k, v in body.items() if v is not None}).encode()


def serve(receiver: Receiver, body: bytes, cache_control: str | None = "max-age=600") -> None:
    headers = (("Content-Type", "application/json"),)
    if cache_control is not None:
        headers += (("Cache-Control", cache_control),)
    receiver.default = Answer(200, body=body, headers=headers)


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    async with receiving() as receiver:
        yield receiver


async def agent_world(client: Any, admin_headers: dict[str, str], client_id: str) -> World:
    """A business that is not a sandbox, its owner signed in, and the agent's client id."""
    world = await make_world(client, admin_headers)
    await login(client, world)
    world.client_id, world.client_secret, world.app_id = client_id, None, ""
    return world


def authorize_query(client_id: str, challenge: str | None, **extra: str) -> str:
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": AGENT_REDIRECT,
        "scope": "invoices:read",
        "state": "st-1",
        **extra,
    }
    if challenge is not None:
        query = {"code_challenge": challenge, "code_challenge_method": "S256", **query}
    return f"/oauth/authorize?{urlencode(query)}"


async def consent(client: Any, world: World, path: str) -> tuple[str, dict[str, list[str]]]:
    """Approve the consent page at ``path``: the page, and the callback's query."""
    return await decide_consent(client, world, path, AGENT_REDIRECT)


async def redeem(
    client: Any, url: str, callback: dict[str, list[str]], verifier: str, **extra: str
) -> Any:
    """The token request of the client ``url`` for the callback's code (``extra``: more
    fields)."""
    return await client.post(
        "/oauth/token",
        form={
            "grant_type": "authorization_code",
            "client_id": url,
            **extra,
            "code": callback["code"][0],
            "redirect_uri": AGENT_REDIRECT,
            "code_verifier": verifier,
        },
    )


async def test_an_agent_connects_through_consent_to_a_token_and_a_data_api_call(
    client: Any, admin_headers: dict[str, str], receiver: Receiver
) -> None:
    url = document_url(receiver)
    serve(receiver, document(url))
    world = await agent_world(client, admin_headers, url)
    verifier, challenge = pkce_pair()
    with trio.fail_after(TIMEOUT):
        page, callback = await consent(client, world, authorize_query(url, challenge))
    assert "Ledger Agent" in page
    assert "127.0.0.1" in page
    assert "not reviewed" in page
    assert callback["state"] == ["st-1"]
    tokens = await redeem(client, url, callback, verifier)
    body = await tokens.get_json()
    assert tokens.status_code == 200, body
    assert body["scope"] == "invoices:read"
    listed = await client.get(
        "/invoices", headers={"Authorization": f"Bearer {body['access_token']}"}
    )
    assert listed.status_code == 200, await listed.get_data(as_text=True)
    refreshed = await client.post(
        "/oauth/token",
        form={
            "grant_type": "refresh_token",
            "client_id": url,
            "refresh_token": body["refresh_token"],
        },
    )
    assert refreshed.status_code == 200, await refreshed.get_json()
    [fetched] = receiver.received
    assert fetched.path == PATH


async def problem(client: Any, path: str) -> str:
    with trio.fail_after(TIMEOUT):
        response = await client.get(path)
    page = await response.get_data(as_text=True)
    assert response.status_code == 400, page
    assert "code=" not in response.headers.get("Location", "")
    return page


REFUSALS: dict[str, tuple[Any, str]] = {
    "not-json": (
        lambda url: b"<html>not json</html>",
        "invalid_client: the metadata document is not JSON",
    ),
    "not-an-object": (lambda url: b"[]", "is not a JSON object"),
    "client-id-mismatch": (
        lambda url: document(url + "?other=1"),
        "the metadata document&#39;s client_id is not its URL",
    ),
    "no-redirect-uris": (
        lambda url: document(url, redirect_uris=None),
        "the metadata document must list redirect_uris",
    ),
    "empty-redirect-uris": (
        lambda url: document(url, redirect_uris=[]),
        "the metadata document must list redirect_uris",
    ),
    "too-large": (
        lambda url: document(url, client_uri="https://agent.example/" + "x" * 6000),
        f"larger than {auth.DOCUMENT_MAX_BYTES} bytes",
    ),
    "client-secret": (
        lambda url: document(url, client_secret="s3cret"),
        "must not hold a client_secret",
    ),
    "confidential": (
        lambda url: document(url, token_endpoint_auth_method="client_secret_basic"),
        "token_endpoint_auth_method must be none",
    ),
}


async def test_a_redirect_is_not_followed(
    client: Any, admin_headers: dict[str, str], receiver: Receiver
) -> None:
    url = document_url(receiver)
    receiver.default = Answer(302, body=b"", headers=(("Location", url + "?next=1"),))
    await agent_world(client, admin_headers, url)
    _, challenge = pkce_pair()
    page = await problem(client, authorize_query(url, challenge))
    assert "answered 302, not 200" in page
    assert len(receiver.received) == 1


@pytest.mark.parametrize("case", sorted(REFUSALS))
async def test_a_document_is_refused(
    client: Any, admin_headers: dict[str, str], receiver: Receiver, case: str
) -> None:
    url = document_url(receiver)
    body, message = REFUSALS[case]
    serve(receiver, body(url))
    world = await agent_world(client, admin_headers, url)
    _, challenge = pkce_pair()
    page = await problem(client, authorize_query(url, challenge))
    assert message in page
    assert world.business_id not in page


REQUEST_REFUSALS: dict[str, tuple[dict[str, Any], str]] = {
    "redirect-uri-not-listed": (
        {"redirect_uri": "http://127.0.0.1:8765/elsewhere"},
        "redirect_uri",
    ),
    "scope-beyond-allowed": (
        {"scope": "invoices:read invoices:write"},
        "invalid_scope: a client ID metadata document client may not ask for invoices:write",
    ),
    "plain-pkce": (
        {"code_challenge_method": "plain"},
        "must use PKCE with S256",
    ),
    "no-pkce": ({"challenge": None}, "must use PKCE with S256"),
}


@pytest.mark.parametrize("case", sorted(REQUEST_REFUSALS))
async def test_a_request_of_a_document_client_is_refused(
    client: Any, admin_headers: dict[str, str], receiver: Receiver, case: str
) -> None:
    url = document_url(receiver)
    serve(receiver, document(url))
    await agent_world(client, admin_headers, url)
    extra, message = REQUEST_REFUSALS[case]
    _, challenge = pkce_pair()
    extra = dict(extra)
    challenge_given = extra.pop("challenge", challenge)
    path = authorize_query(url, challenge_given, **extra)
    if challenge_given is not None and "code_challenge_method" in extra:
        path = path.replace("code_challenge_method=S256&", "")
    page = await problem(client, path)
    assert message in page


@pytest.mark.parametrize(
    ("client_id", "message"),
    [
        pytest.param("ftp://127.0.0.1/agent.json", None, id="not-http"),
        pytest.param("http://agent.example/client.json", "must use https", id="http-not-loopback"),
        pytest.param("https://agent.example", "must have a path", id="no-path"),
        pytest.param("https://agent.example/a/../b.json", ". or .. segments", id="dot-segments"),
        pytest.param(
            "https://user:pw@agent.example/c.json", "user name or password", id="userinfo"
        ),
        pytest.param("https://agent.example/c.json#frag", "fragment", id="fragment"),
        pytest.param("https://agent.example/" + "a" * 600, "at most 512 characters", id="too-long"),
    ],
)
async def test_a_client_id_url_is_refused_before_any_fetch(
    client: Any,
    admin_headers: dict[str, str],
    receiver: Receiver,
    client_id: str,
    message: str | None,
) -> None:
    await agent_world(client, admin_headers, client_id)
    _, challenge = pkce_pair()
    response = await client.get(authorize_query(client_id, challenge))
    page = await response.get_data(as_text=True)
    assert response.status_code == 400, page
    if message is not None:
        assert message in page
    assert receiver.received == []


async def test_a_slow_host_is_given_up_on() -> None:
    """No answer within the bound: the fetch fails, as its time bound says."""
    env = config.load({"LEDGERPORT_DATABASE_URL": "sqlite:///unused.db", **PLATFORM_ENV})
    held = trio.Event()
    async with receiving() as receiver:
        receiver.default = Answer(200, body=b"{}", until=held)
        with trio.fail_after(TIMEOUT), pytest.raises(auth.DocumentUnavailable, match="within"):
            await fetch_client_document(document_url(receiver), config=env, seconds=0.2)
        held.set()


async def test_a_loopback_or_private_address_is_refused_in_production() -> None:
    """In production the webhook engine's address check refuses the address the host name
    resolves to, as the connection is made."""
    env = config.load(
        {
            "LEDGERPORT_DATABASE_URL": "sqlite:///unused.db",
            **{k: v for k, v in PLATFORM_ENV.items() if k != "LEDGERPORT_PASSWORD_HASHING"},
            "LEDGERPORT_ENV": "production",
            "LEDGERPORT_BASE_URL": "https://api.ledgerport.example",
            "LEDGERPORT_AUTH_URL": "https://app.ledgerport.example",
        }
    )
    assert not env.development
    for address in ("127.0.0.1", "10.0.0.7", "169.254.169.254"):

        async def resolver(host: str, port: int, /, address: str = address) -> list[str]:
            return [address]

        with trio.fail_after(TIMEOUT), pytest.raises(auth.DocumentUnavailable, match="may not"):
            await fetch_client_document(
                "https://agent.example/client.json", config=env, resolver=resolver
            )
    assert auth.client_id_url_problem("http://127.0.0.1:8000/client.json", development=False) == (
        "the client_id URL must use https"
    )


async def test_a_kept_document_is_used_until_its_max_age_ends(
    client: Any, admin_headers: dict[str, str], receiver: Receiver, clock: FrozenClock
) -> None:
    url = document_url(receiver)
    serve(receiver, document(url), "public, max-age=300")
    world = await agent_world(client, admin_headers, url)
    _, challenge = pkce_pair()
    with trio.fail_after(TIMEOUT):
        await consent(client, world, authorize_query(url, challenge))
        assert len(receiver.received) == 1
        # The document changes at its host: the kept one is used until max-age ends.
        serve(receiver, document(url, client_name="Renamed Agent"), "max-age=300")
        clock.advance(299)
        page, _ = await consent(client, world, authorize_query(url, challenge))
        assert len(receiver.received) == 1
        assert "Ledger Agent" in page
        clock.advance(2)
        page, _ = await consent(client, world, authorize_query(url, challenge))
        assert len(receiver.received) == 2
        assert "Renamed Agent" in page


async def test_a_kept_document_near_the_bound_is_read_again_from_the_store(
    client: Any, admin_headers: dict[str, str], receiver: Receiver
) -> None:
    """A document of non-ASCII text just under 5 KiB is kept as it came, not grown by escapes."""
    url = document_url(receiver)
    body = document(url, client_name="Agent é", description="é" * 2000)
    body = body.replace(b"\\u00e9", "é".encode())
    assert auth.DOCUMENT_MAX_BYTES - 1000 < len(body) <= auth.DOCUMENT_MAX_BYTES
    serve(receiver, body)
    world = await agent_world(client, admin_headers, url)
    _, challenge = pkce_pair()
    with trio.fail_after(TIMEOUT):
        await consent(client, world, authorize_query(url, challenge))
        page, _ = await consent(client, world, authorize_query(url, challenge))
    assert "Agent é" in page
    assert len(receiver.received) == 1


async def test_a_no_store_document_is_fetched_each_time(
    client: Any, admin_headers: dict[str, str], receiver: Receiver
) -> None:
    url = document_url(receiver)
    serve(receiver, document(url), "no-store")
    world = await agent_world(client, admin_headers, url)
    _, challenge = pkce_pair()
    with trio.fail_after(TIMEOUT):
        await consent(client, world, authorize_query(url, challenge))
        await consent(client, world, authorize_query(url, challenge))
    assert len(receiver.received) == 2


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        (None, auth.DOCUMENT_KEPT_MIN),
        ("max-age=5", auth.DOCUMENT_KEPT_MIN),
        ("public, max-age=600", 600.0),
        ("max-age=99999999", auth.DOCUMENT_KEPT_MAX),
        ("no-store", 0.0),
        ("no-cache, max-age=600", 0.0),
        ("max-age=soon", auth.DOCUMENT_KEPT_MIN),
    ],
)
def test_caching_headers_bound_how_long_a_document_is_kept(
    header: str | None, seconds: float
) -> None:
    assert auth.kept_for(header) == seconds


async def test_switched_off_they_are_refused_at_both_endpoints(
    store: Store, clock: FrozenClock, receiver: Receiver, admin_headers: dict[str, str]
) -> None:
    from ledgerport.http import create_app

    url = document_url(receiver)
    serve(receiver, document(url))
    off = await build_platform(store, clock, {**PLATFORM_ENV, "LEDGERPORT_CIMD": "off"})
    client = create_app(off).test_client()
    world = await agent_world(client, admin_headers, url)
    _, challenge = pkce_pair()
    page = await problem(client, authorize_query(url, challenge))
    assert "client ID metadata documents are not accepted here" in page
    assert receiver.received == []
    metadata = await (await client.get("/.well-known/oauth-authorization-server")).get_json()
    assert "client_id_metadata_document_supported" not in metadata
    token = await client.post(
        "/oauth/token",
        form={"grant_type": "refresh_token", "client_id": world.client_id, "refresh_token": "x"},
    )
    assert token.status_code in (400, 401)


async def test_discovery_says_documents_are_supported(client: Any) -> None:
    metadata = await (await client.get("/.well-known/oauth-authorization-server")).get_json()
    assert metadata["client_id_metadata_document_supported"] is True


async def test_the_operator_chooses_the_scopes(
    store: Store, clock: FrozenClock, receiver: Receiver, admin_headers: dict[str, str]
) -> None:
    from ledgerport.http import create_app

    url = document_url(receiver)
    serve(receiver, document(url))
    env = {**PLATFORM_ENV, "LEDGERPORT_CIMD_SCOPES": "invoices:read invoices:write"}
    wider = await build_platform(store, clock, env)
    client = create_app(wider).test_client()
    world = await agent_world(client, admin_headers, url)
    _, challenge = pkce_pair()
    with trio.fail_after(TIMEOUT):
        _, callback = await consent(
            client, world, authorize_query(url, challenge, scope="invoices:read invoices:write")
        )
    assert "code" in callback
    refused = await problem(
        client, authorize_query(url, challenge, scope="invoices:read customers:read")
    )
    assert "may not ask for customers:read" in refused


def test_the_scopes_setting_is_checked() -> None:
    base = {"LEDGERPORT_DATABASE_URL": "sqlite:///unused.db", **PLATFORM_ENV}
    assert config.load(base).cimd_scopes == config.CIMD_DEFAULT_SCOPES
    assert all(s.endswith(":read") for s in config.CIMD_DEFAULT_SCOPES)
    with pytest.raises(config.ConfigError, match="LEDGERPORT_CIMD_SCOPES"):
        config.load({**base, "LEDGERPORT_CIMD_SCOPES": "invoices:read books:burn"})
    with pytest.raises(config.ConfigError, match="LEDGERPORT_CIMD"):
        config.load({**base, "LEDGERPORT_CIMD": "maybe"})


async def test_a_suspended_client_and_a_presented_secret_are_refused(
    client: Any, admin_headers: dict[str, str], receiver: Receiver, platform: Any
) -> None:
    url = document_url(receiver)
    serve(receiver, document(url))
    world = await agent_world(client, admin_headers, url)
    verifier, challenge = pkce_pair()
    with trio.fail_after(TIMEOUT):
        _, callback = await consent(client, world, authorize_query(url, challenge))
    with_secret = await redeem(client, url, callback, verifier, client_secret="guessed")
    assert with_secret.status_code == 401
    assert (await with_secret.get_json())["error"] == "invalid_client"
    async with platform.store.transaction() as tx:
        app_id = await tx.fetchval("SELECT id FROM apps WHERE client_id = $1", url)
    suspended = await client.post(
        f"/admin/apps/{app_id}/status", json={"status": "SUSPENDED"}, headers=admin_headers
    )
    assert suspended.status_code == 200
    page = await problem(client, authorize_query(url, challenge))
    assert "Invalid client_id" in page


async def test_the_cleanup_removes_expired_documents(
    client: Any,
    admin_headers: dict[str, str],
    receiver: Receiver,
    platform: Any,
    clock: FrozenClock,
) -> None:
    url = document_url(receiver)
    serve(receiver, document(url), "max-age=120")
    world = await agent_world(client, admin_headers, url)
    _, challenge = pkce_pair()
    with trio.fail_after(TIMEOUT):
        await consent(client, world, authorize_query(url, challenge))
    scheduler = Scheduler(platform)
    assert (await scheduler.cleanup_once())["client_metadata_document"] == 0
    clock.advance(121)
    assert (await scheduler.cleanup_once())["client_metadata_document"] == 1


async def test_a_document_client_may_push_its_request(
    client: Any, admin_headers: dict[str, str], receiver: Receiver
) -> None:
    """PAR (RFC 9126): the client is read from its document before it authenticates by its
    client_id alone; a scope beyond those allowed is invalid_scope there."""
    url = document_url(receiver)
    serve(receiver, document(url))
    world = await agent_world(client, admin_headers, url)
    verifier, challenge = pkce_pair()
    form = {
        "client_id": url,
        "response_type": "code",
        "redirect_uri": AGENT_REDIRECT,
        "scope": "invoices:read",
        "state": "st-par",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    with trio.fail_after(TIMEOUT):
        beyond = await client.post("/oauth/par", form={**form, "scope": "invoices:write"})
        assert beyond.status_code == 400
        assert (await beyond.get_json())["error"] == "invalid_scope"
        pushed = await client.post("/oauth/par", form=form)
        body = await pushed.get_json()
        assert pushed.status_code == 201, body
        path = (
            f"/oauth/authorize?{urlencode({'client_id': url, 'request_uri': body['request_uri']})}"
        )
        _, callback = await consent(client, world, path)
    assert callback["state"] == ["st-par"]
    tokens = await redeem(client, url, callback, verifier)
    assert tokens.status_code == 200, await tokens.get_json()


async def test_an_unreadable_document_is_invalid_client_at_par(
    client: Any, receiver: Receiver
) -> None:
    url = document_url(receiver)
    serve(receiver, b"not json")
    with trio.fail_after(TIMEOUT):
        refused = await client.post(
            "/oauth/par",
            form={"client_id": url, "response_type": "code", "redirect_uri": AGENT_REDIRECT},
        )
    body = await refused.get_json()
    assert refused.status_code == 401, body
    assert body["error"] == "invalid_client"
    assert body["error_description"] == "the metadata document is not JSON"


async def test_fetches_are_limited_per_ip(client: Any, receiver: Receiver) -> None:
    """Each fetch is made for a request that names the URL: 30 a minute from one IP; a kept
    document costs none."""
    url = document_url(receiver)
    serve(receiver, document(url), "no-store")
    _, challenge = pkce_pair()
    with trio.fail_after(TIMEOUT):
        for _ in range(30):
            anonymous = await client.get(authorize_query(url, challenge))
            assert anonymous.status_code in (302, 303)
        limited = await client.get(authorize_query(url, challenge))
    assert limited.status_code == 429
    assert "Retry-After" in limited.headers
    assert len(receiver.received) == 30
