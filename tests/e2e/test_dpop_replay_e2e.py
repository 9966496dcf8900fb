"""One use of each DPoP proof across two served processes (RFC 9449 section 11.1; contract.md:
Agents as partner apps): two ``ledgerport serve`` processes on one PostgreSQL database, both
answering for one public URL (``LEDGERPORT_BASE_URL``, as two processes behind one proxy), so a
proof's ``htu`` names the same URL whichever of them it reaches.

The operator API of the first provisions a reviewed confidential app installed in a business;
the app exchanges a session token with a DPoP proof at the first process and gets a bound token,
and the same request replayed at the second is refused ``invalid_dpop_proof`` before its session
token is looked at. A data API call's proof accepted by one process is refused by the other with
a DPoP challenge saying it was used already, in either order, and a proof sent to both at once
is accepted by exactly one. The proofs are recorded in the database (``dpop_proofs``) or, with
``LEDGERPORT_REDIS_URL``, in Redis, where the database records none. Each run has a root key of
its own, which the proofs' records in the shared Redis are hashed with. Every call is bounded
and both servers are stopped in ``finally``.
"""

from __future__ import annotations

import asyncio
import base64
import re
import secrets
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import httpx
import pytest

from ledgerport import catalog

from ..dpop_keys import DpopKey
from ..stores import REDIS_URL
from .dpop_world import answer, provision
from .served import Server, postgres_database, served

ADMIN_TOKEN = "lp_admin_e2e-dpop-replay-0123456789abcdef"
PUBLIC_URL = "http://api.ledgerport.test"
"""The URL both processes answer for; neither listens there: each is called on its own loopback
address with this URL in its proofs, as a proxy in front of both would forward them."""
HTTP_TIMEOUT = 10.0
AT_ONCE = 5
"""Proofs sent to both processes at once."""
USED_ALREADY = "The DPoP proof was used already (its jti)"


@pytest.fixture(
    params=[
        pytest.param("database", marks=pytest.mark.postgres),
        pytest.param("redis", marks=[pytest.mark.postgres, pytest.mark.redis]),
    ]
)
def ledger(request: pytest.FixtureRequest) -> str:
    """Where the processes record used proofs: the database, or Redis."""
    where: str = request.param
    return where


@contextmanager
def two_processes(tmp_path: Path, ledger: str) -> Iterator[tuple[Server, Server, str]]:
    """Two healthy servers on one fresh PostgreSQL database with one root key and one public
    URL (and one Redis for ``ledger == "redis"``); answers them and the database's URL."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with postgres_database() as url:
        env = {
            "LEDGERPORT_DATABASE_URL": url,
            "LEDGERPORT_SECRET_KEY": secrets.token_urlsafe(32),
            "LEDGERPORT_BASE_URL": PUBLIC_URL,
            "LEDGERPORT_PASSWORD_HASHING": "fast",
        }
        if ledger == "redis":
            env["LEDGERPORT_REDIS_URL"] = REDIS_URL
        with (
            served(tmp_path / "a", ADMIN_TOKEN, env) as first,
            served(tmp_path / "b", ADMIN_TOKEN, env) as second,
        ):
            yield first, second, url


def _challenge(response: httpx.Response) -> dict[str, str]:
    """The parameters of a 401's ``WWW-Authenticate: DPoP`` challenge."""
    assert response.status_code == 401, response.text
    header = response.headers["WWW-Authenticate"]
    assert header.startswith("DPoP "), header
    return dict(re.findall(r'(\w+)="([^"]*)"', header))


def _at(server: Server, public: str) -> str:
    """Where ``server`` answers for the public URL ``public``."""
    return f"{server.base}{urlsplit(public).path}"


def _recorded_proofs(url: str) -> int:
    """The proofs recorded in the database at ``url``."""

    async def count() -> int:
        conn = await asyncpg.connect(url, timeout=5)
        try:
            counted: int = await conn.fetchval("SELECT COUNT(*) FROM dpop_proofs", timeout=5)
        finally:
            await conn.close()
        return counted

    return asyncio.run(count())


def test_a_proof_used_at_one_process_is_refused_at_the_other(ledger: str, tmp_path: Path) -> None:
    with (
        two_processes(tmp_path, ledger) as (first, second, url),
        httpx.Client(base_url=first.base, timeout=HTTP_TIMEOUT, trust_env=False) as one,
        httpx.Client(base_url=second.base, timeout=HTTP_TIMEOUT, trust_env=False) as other,
    ):
        app, session_token = provision(one, ADMIN_TOKEN, "Replay Ltd")
        endpoints = [
            answer(http.get("/.well-known/oauth-authorization-server"))["token_endpoint"]
            for http in (one, other)
        ]
        assert endpoints == [f"{PUBLIC_URL}/oauth/token"] * 2
        token_url = endpoints[0]
        basic = base64.b64encode(f"{app['clientId']}:{app['clientSecret']}".encode()).decode()
        key = DpopKey()

        def exchange(http: httpx.Client, server: Server, proof: str) -> httpx.Response:
            return http.post(
                _at(server, token_url),
                data={
                    "grant_type": catalog.GRANT_TOKEN_EXCHANGE,
                    "subject_token": session_token,
                    "subject_token_type": catalog.TOKEN_TYPE_JWT,
                },
                headers={"Authorization": f"Basic {basic}", "DPoP": proof},
            )

        # The token endpoint: the whole request replayed at the other process.
        token_proof = key.proof("POST", token_url, iat=time.time())
        tokens = answer(exchange(one, first, token_proof))
        assert tokens["token_type"] == "DPoP"
        access = tokens["access_token"]
        replayed = exchange(other, second, token_proof)
        assert replayed.status_code == 400, replayed.text
        assert replayed.json()["error"] == "invalid_dpop_proof"
        assert replayed.json()["error_description"] == "the proof was used already (its jti)"

        # The data API: one proof, the same method, URL and token, at each process in turn.
        invoices = f"{PUBLIC_URL}/invoices"

        def call(http: httpx.Client, server: Server, proof: str) -> httpx.Response:
            return http.get(
                _at(server, invoices), headers={"Authorization": f"DPoP {access}", "DPoP": proof}
            )

        def new_proof() -> str:
            return key.proof("GET", invoices, iat=time.time(), token=access)

        accepted = 1
        for (http, server), (again, elsewhere) in (
            ((one, first), (other, second)),
            ((other, second), (one, first)),
        ):
            proof = new_proof()
            answered = call(http, server, proof)
            assert answered.status_code == 200, answered.text
            accepted += 1
            refused = call(again, elsewhere, proof)
            assert _challenge(refused) == {
                "error": "invalid_dpop_proof",
                "error_description": USED_ALREADY,
                "algs": " ".join(catalog.DPOP_SIGNING_ALGS),
                "resource_metadata": f"{PUBLIC_URL}/.well-known/oauth-protected-resource",
            }

        # One proof sent to both at once: exactly one of them accepts it.
        start = threading.Barrier(2, timeout=HTTP_TIMEOUT)

        def at_once(http: httpx.Client, server: Server, proof: str) -> httpx.Response:
            start.wait()
            return call(http, server, proof)

        with ThreadPoolExecutor(max_workers=2) as pool:
            for _ in range(AT_ONCE):
                proof = new_proof()
                sent = [
                    pool.submit(at_once, http, server, proof)
                    for http, server in ((one, first), (other, second))
                ]
                answers = [each.result() for each in sent]
                statuses = sorted(reply.status_code for reply in answers)
                assert statuses == [200, 401], [reply.text for reply in answers]
                refusal = next(reply for reply in answers if reply.status_code == 401)
                assert _challenge(refusal)["error_description"] == USED_ALREADY
                accepted += 1

        recorded = _recorded_proofs(url)
        logs = first.output() + second.output()
    assert recorded == (accepted if ledger == "database" else 0)
    assert "Traceback" not in logs, logs
