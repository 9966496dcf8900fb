"""A ``ledgerport serve`` process for end-to-end tests: started, probed healthy, stopped.

The server runs as ``sys.executable -m ledgerport serve`` in development mode with ``workdir`` as
its working directory, on a free loopback port, with every inherited ``LEDGERPORT_*`` variable
removed; its output goes to ``workdir/server.log``.
"""

from __future__ import annotations

import asyncio
import base64
import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import httpx

from ledgerport import catalog

STARTUP_TIMEOUT = 90.0
"""Seconds a served process may take to answer /healthz: about 2 on a quiet machine; the
room is for a two-core machine busy with the rest of the suite, where a start was seen to
print nothing for 30 s."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    base: str
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def start_server(workdir: Path, admin_token: str, env: dict[str, str] | None = None) -> Server:
    port = free_port()
    defaults = {"LEDGERPORT_ENV": "development", "LEDGERPORT_ADMIN_TOKEN": admin_token}
    return launch(
        [sys.executable, "-m", "ledgerport", "serve"], workdir, defaults | (env or {}), port
    )


def launch(
    command: Sequence[str],
    workdir: Path,
    env: Mapping[str, str],
    port: int,
    log_name: str = "server.log",
) -> Server:
    """``command`` (a ``serve``) in ``workdir`` on ``port``, with ``env`` and nothing of this
    process's LEDGERPORT_* variables; its output goes to ``workdir / log_name``."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("LEDGERPORT_")}
    environment |= {"LEDGERPORT_BIND": f"127.0.0.1:{port}", "PYTHONUNBUFFERED": "1", **env}
    log = workdir / log_name
    with log.open("wb") as out:
        process = subprocess.Popen(
            list(command),
            cwd=workdir,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return Server(process, f"http://127.0.0.1:{port}", log)


def wait_healthy(server: Server) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    with httpx.Client(base_url=server.base, timeout=2.0, trust_env=False) as probe:
        while time.monotonic() < deadline:
            if server.process.poll() is not None:
                raise AssertionError(f"server exited early:\n{server.output()}")
            try:
                if probe.get("/healthz").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
    raise AssertionError(f"server not healthy in {STARTUP_TIMEOUT}s:\n{server.output()}")


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


POSTGRES_ADMIN_URL = os.environ.get(
    "LEDGERPORT_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres"
)
"""A PostgreSQL server that allows creating databases (the tests' and the benchmarks')."""


@contextmanager
def postgres_database(admin_url: str = POSTGRES_ADMIN_URL) -> Iterator[str]:
    """A fresh PostgreSQL database on ``admin_url``'s server for the block's length (dropped
    afterwards); answers its URL."""
    name = f"ledgerport_served_{secrets.token_hex(6)}"

    async def execute(sql: str) -> None:
        conn = await asyncpg.connect(admin_url, timeout=5)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(execute(f'CREATE DATABASE "{name}"'))
    try:
        yield urlunsplit(urlsplit(admin_url)._replace(path=f"/{name}"))
    finally:
        asyncio.run(execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@contextmanager
def store_env(backend: str, workdir: Path) -> Iterator[dict[str, str]]:
    """The variables of a served instance on ``backend`` (``sqlite``: a file in ``workdir``;
    ``postgres``: a fresh database), with a root key of its own."""
    if backend == "sqlite":
        yield {"LEDGERPORT_DATABASE_URL": f"sqlite:///{workdir}/served.db"}
        return
    with postgres_database() as url:
        yield {"LEDGERPORT_DATABASE_URL": url, "LEDGERPORT_SECRET_KEY": secrets.token_urlsafe(32)}


@contextmanager
def served(workdir: Path, admin_token: str, env: dict[str, str] | None = None) -> Iterator[Server]:
    """A healthy server for the block's length, stopped afterwards whatever happens."""
    server = start_server(workdir, admin_token, env)
    try:
        wait_healthy(server)
        yield server
    finally:
        stop(server.process)


@dataclass(frozen=True)
class Provisioned:
    """What the operator API set up: a business, its owner, an app the owner develops,
    installed there, an access token of the app for that business and the owner's developer
    token."""

    business_id: str
    user_id: str
    app_id: str
    access_token: str
    developer_token: str


def _answer(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code in (200, 201), response.text
    answer: dict[str, Any] = response.json()
    return answer


def provision(
    base: str,
    admin_token: str,
    scopes: list[str],
    name: str = "App",
    *,
    developer_id: str | None = None,
) -> Provisioned:
    """Set up through the operator API (see :class:`Provisioned`); the access token comes from
    the token exchange of a session token, as an embedded app gets it. ``developer_id``: the
    business's owner and the app's developer is that user, not a new one."""
    admin = {"Authorization": f"Bearer {admin_token}"}
    with httpx.Client(base_url=base, timeout=10.0, trust_env=False, headers=admin) as http:
        business = _answer(http.post("/admin/businesses", json={"name": f"{name} Ltd"}))
        user = (
            {"id": developer_id}
            if developer_id is not None
            else _answer(
                http.post(
                    "/admin/users",
                    json={
                        "email": f"{secrets.token_hex(4)}@example.com",
                        "password": "pw-12345678",
                    },
                )
            )
        )
        member = http.put(
            f"/admin/businesses/{business['id']}/members/{user['id']}", json={"role": "owner"}
        )
        assert member.status_code == 200
        app = _answer(
            http.post(
                "/admin/apps",
                json={
                    "name": name,
                    "type": "CONFIDENTIAL",
                    "redirectUris": ["https://app.example/callback"],
                    "scopes": scopes,
                    "developerUserId": user["id"],
                    "reviewed": True,
                },
            )
        )
        ids = {"appId": app["id"], "businessId": business["id"], "userId": user["id"]}
        _answer(http.post("/admin/installations", json={**ids, "scopes": scopes}))
        session = _answer(http.post("/admin/session-tokens", json=ids))
        developer = _answer(http.post("/admin/developer-tokens", json={"userId": user["id"]}))
    basic = base64.b64encode(f"{app['clientId']}:{app['clientSecret']}".encode()).decode()
    with httpx.Client(base_url=base, timeout=10.0, trust_env=False) as oauth:
        tokens = _answer(
            oauth.post(
                "/oauth/token",
                data={
                    "grant_type": catalog.GRANT_TOKEN_EXCHANGE,
                    "subject_token": session["sessionToken"],
                    "subject_token_type": catalog.TOKEN_TYPE_JWT,
                },
                headers={"Authorization": f"Basic {basic}"},
            )
        )
    return Provisioned(
        business["id"], user["id"], app["id"], tokens["access_token"], developer["token"]
    )
