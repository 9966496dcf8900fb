"""DPoP (RFC 9449) against a real ``ledgerport serve``, over real HTTP with httpx.

The operator API provisions a business, its owner, a reviewed confidential app and its install;
the app exchanges a session token at the token endpoint with a DPoP proof, gets a ``DPoP`` token
bound to its key (introspection says so), and calls the data API with a fresh proof for each
call: a replayed proof, the token as Bearer and a proof of another key are refused with a DPoP
challenge. On SQLite with nonces off, and on PostgreSQL with ``LEDGERPORT_DPOP_NONCE=on``, where
the first proof at each endpoint is answered with the nonce to use. Every call is bounded and
the server is stopped in ``finally``.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ledgerport import catalog

from ..dpop_keys import DpopKey
from .dpop_world import answer, provision
from .served import Server, served, store_env

ADMIN_TOKEN = "lp_admin_e2e-dpop-token-0123456789abcdef"
HTTP_TIMEOUT = 10.0


@pytest.fixture(
    params=[
        pytest.param(("sqlite", "off"), id="sqlite"),
        pytest.param(("postgres", "on"), id="postgresql-nonces", marks=pytest.mark.postgres),
    ]
)
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Server, bool]]:
    backend, nonces = request.param
    with (
        store_env(backend, tmp_path) as env,
        served(tmp_path, ADMIN_TOKEN, {**env, "LEDGERPORT_DPOP_NONCE": nonces}) as running,
    ):
        yield running, nonces == "on"


def _with_nonce(
    http: httpx.Client, send: Any, proof_for: Any, nonces: bool, refused: int
) -> httpx.Response:
    """``send(proof)``; with nonces on, the first answer asks for one and the second, with it,
    goes through."""
    response: httpx.Response = send(proof_for(None))
    if not nonces:
        return response
    assert response.status_code == refused, response.text
    nonce = response.headers["DPoP-Nonce"]
    answered: httpx.Response = send(proof_for(nonce))
    assert answered.headers["DPoP-Nonce"] == nonce
    return answered


def test_a_dpop_bound_token_end_to_end(server: tuple[Server, bool]) -> None:
    running, nonces = server
    base = running.base
    with httpx.Client(base_url=base, timeout=HTTP_TIMEOUT, trust_env=False) as http:
        app, session_token = provision(http, ADMIN_TOKEN, "DPoP Ltd")
        meta = answer(http.get("/.well-known/oauth-authorization-server"))
        assert meta["dpop_signing_alg_values_supported"] == list(catalog.DPOP_SIGNING_ALGS)
        token_url = meta["token_endpoint"]
        basic = base64.b64encode(f"{app['clientId']}:{app['clientSecret']}".encode()).decode()
        client_auth = {"Authorization": f"Basic {basic}"}
        key = DpopKey()

        def exchange(proof: str) -> httpx.Response:
            return http.post(
                token_url,
                data={
                    "grant_type": catalog.GRANT_TOKEN_EXCHANGE,
                    "subject_token": session_token,
                    "subject_token_type": catalog.TOKEN_TYPE_JWT,
                },
                headers={**client_auth, "DPoP": proof},
            )

        issued = _with_nonce(
            http,
            exchange,
            lambda nonce: key.proof("POST", token_url, iat=time.time(), nonce=nonce),
            nonces,
            400,
        )
        tokens = answer(issued)
        assert tokens["token_type"] == "DPoP"
        access = tokens["access_token"]
        described = answer(
            http.post(f"{base}/oauth/introspect", data={"token": access}, headers=client_auth)
        )
        assert described["cnf"] == {"jkt": key.thumbprint}

        invoices = f"{base}/invoices"
        nonce = issued.headers.get("DPoP-Nonce")

        def call(proof: str, scheme: str = "DPoP") -> httpx.Response:
            return http.get(
                invoices, headers={"Authorization": f"{scheme} {access}", "DPoP": proof}
            )

        proof = key.proof("GET", invoices, iat=time.time(), token=access, nonce=nonce)
        answered = call(proof)
        assert answered.status_code == 200, answered.text
        replayed = call(proof)
        assert replayed.status_code == 401
        assert replayed.headers["WWW-Authenticate"].startswith('DPoP error="invalid_dpop_proof"')
        as_bearer = http.get(invoices, headers={"Authorization": f"Bearer {access}"})
        assert as_bearer.status_code == 401
        assert as_bearer.headers["WWW-Authenticate"].startswith('DPoP error="invalid_token"')
        other = DpopKey().proof("GET", invoices, iat=time.time(), token=access, nonce=nonce)
        assert call(other).status_code == 401
        fresh = key.proof("GET", invoices, iat=time.time(), token=access, nonce=nonce)
        assert call(fresh).status_code == 200
