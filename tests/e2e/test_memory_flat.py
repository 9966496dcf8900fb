"""Memory stays flat under sustained traffic: a served instance, in this process, on each store.

``ledgerport.serve.serve`` runs inside the test's trio run, so what the process keeps alive can
be counted (``serve`` freezes what its start-up built, which the collector then no longer
lists: the counts cover what was made after). A process of its own (``memory_load.py``) sends
five kinds of request over keep-alive connections: ``GET /healthz``, a data API list read, a
data API write whose ``customer.created`` event fans out to a webhook on a real receiver,
refresh token grants, and reads of the Events API feed. After a warm-up of every kind (pools,
statement caches and lazy imports settle), the live objects by type and the interpreter's
allocated memory blocks are taken as a baseline; the measured rounds are sent, every delivery
they caused is awaited at the receiver, and both are taken again.

On PostgreSQL every request used to stay alive after its response: asyncpg starts a timer for
each query, trio_asyncio keeps a cancelled timer until its deadline (the 30-second command
timeout), and each timer kept the context of the request that made the query, and with it the
quart request and its contexts, the ASGI channels and hypercorn's stream: about two of each
quart request object and 12.5 KB a request, for as long as the timer waited. With that code
this test finds every request of the last 30 seconds alive at its end (1,400 to 2,000 of each
request object in runs on a two-core machine), lists growing by 2 to 3.5 and allocated blocks
by 40 to 70 a request. What is checked:

- once every response is out, no request object (quart request or context, hypercorn stream)
  is alive beyond one a client connection;
- no more cancelled asyncio timers wait in the loop than the loop keeps before it drops them
  (queries start no timer: their time limit is kept on the trio side), and the contexts of
  those that wait hold no variable of a request;
- no type of object grows by more than 0.1 a request, and the allocated blocks by fewer than 10
  a request.

trio keeps the deadline of a cancel scope that exited early in its heap for a bounded while
(at most 1,000 such entries beyond twice the live ones): it is compacted before counting, as
trio compacts it itself.
"""

from __future__ import annotations

import asyncio
import base64
import contextvars
import functools
import gc
import json
import secrets
import sys
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import httpx
import pytest
import trio
from hypercorn.protocol.http_stream import HTTPStream
from quart.ctx import AppContext, RequestContext
from quart.wrappers import Request

from ledgerport import catalog
from ledgerport.config import load
from ledgerport.serve import serve
from ledgerport.storage import COMPACT_AFTER

from ..receiver import Receiver, receiving
from .memory_load import KINDS
from .served import POSTGRES_ADMIN_URL, free_port, store_env

ADMIN_TOKEN = "lp_admin_e2e-memory-token-0123456789abcdef"
HTTP_TIMEOUT = 30.0
TEST_TIMEOUT = 300.0
SCOPES = ["customers:read", "customers:write", "events:read"]
LOAD = Path(__file__).with_name("memory_load.py")

WARM_UP = dict.fromkeys(KINDS, 100)
"""Requests of each kind before the baseline."""
WARM_UP_CONNECTIONS = 3
"""Connections each independent kind is sent on in the warm-up: more at once than in the rounds,
so that the PostgreSQL pool has opened the connections the rounds use (each a statement cache
to fill) before the baseline."""
ROUNDS = {"healthz": 2000, "read": 1000, "write": 200, "refresh": 200, "events": 200}
"""Requests of each kind between the baseline and the final count."""
MAX_OBJECTS_PER_REQUEST = 0.1
"""Growth of the live objects of any one type, per request measured. Bounded caches take part
of it: sqlite3 keeps up to 200 dead weak references to a connection's cursors, and asyncpg's
statement caches still take in statements a pool connection had not run in the warm-up."""
MAX_BLOCKS_PER_REQUEST = 10
"""Growth of the allocated memory blocks (``sys.getallocatedblocks``), per request measured.
Blocks rather than bytes: tracemalloc, which counts bytes, slows the served process two to five
times while it traces."""
REQUEST_TYPES = (Request, RequestContext, AppContext, HTTPStream)
"""What a request is made of; none of it may outlive the request."""
REQUEST_VARIABLES = frozenset({"quart.app_ctx", "quart.request_ctx"})
"""The context variables a request sets."""
IN_FLIGHT = len(KINDS)
"""Requests that may still be finishing in the server when their client has its answer: one a
client connection."""
WAITING_TIMERS_MAX = 2 * COMPACT_AFTER
"""Cancelled asyncio timers the loop may hold: it drops them once half of its heap is
cancelled (and at least COMPACT_AFTER wait)."""


@pytest.fixture
def database(backend: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    """The store's variables: a SQLite file in tmp_path, or a fresh PostgreSQL database whose
    commits do not wait for the disk (nothing here needs durability against power loss)."""
    with store_env(backend, tmp_path) as env:
        if backend != "sqlite":
            name = urlsplit(env["LEDGERPORT_DATABASE_URL"]).path.strip("/")
            asyncio.run(_admin_execute(f'ALTER DATABASE "{name}" SET synchronous_commit = off'))
        yield env


async def _admin_execute(sql: str) -> None:
    conn = await asyncpg.connect(POSTGRES_ADMIN_URL, timeout=HTTP_TIMEOUT)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@asynccontextmanager
async def serving(env: dict[str, str]) -> AsyncIterator[str]:
    """``serve`` in this process for the block's length; answers its base URL."""
    config = load(
        {
            **env,
            "LEDGERPORT_ENV": "development",
            "LEDGERPORT_BIND": f"127.0.0.1:{free_port()}",
            "LEDGERPORT_ADMIN_TOKEN": ADMIN_TOKEN,
            "LEDGERPORT_PASSWORD_HASHING": "fast",
            "LEDGERPORT_FUNCTION_WORKERS": "0",
            "LEDGERPORT_RATE_LIMIT_FACTOR": "1000",
            "LEDGERPORT_SHUTDOWN_GRACE": "2",
        }
    )
    ready = trio.Event()
    stop = trio.Event()
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                functools.partial(serve, config, on_ready=lambda _binds: ready.set(), stop=stop)
            )
            await ready.wait()
            try:
                yield config.base_url
            finally:
                stop.set()
    finally:
        # serve() froze what its start-up built, for the collector to skip; this process goes
        # on to other tests.
        gc.unfreeze()


def _answer(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code in (200, 201), response.text
    answer: dict[str, Any] = response.json()
    return answer


async def provision(base: str, webhook_url: str) -> dict[str, Any]:
    """A business whose owner installed an app holding ``SCOPES``, a webhook of the app on
    ``customer.created`` at ``webhook_url``, and two token pairs of the app in the business, one
    for the data API and one whose refresh token rotates: the load's plan, without its counts."""
    admin_headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    async with httpx.AsyncClient(
        base_url=base, timeout=HTTP_TIMEOUT, trust_env=False, headers=admin_headers
    ) as admin:
        business = _answer(await admin.post("/admin/businesses", json={"name": "Flat Ltd"}))
        user = _answer(
            await admin.post(
                "/admin/users",
                json={"email": f"{secrets.token_hex(4)}@example.com", "password": "pw-12345678"},
            )
        )
        _answer(
            await admin.put(
                f"/admin/businesses/{business['id']}/members/{user['id']}", json={"role": "owner"}
            )
        )
        app = _answer(
            await admin.post(
                "/admin/apps",
                json={
                    "name": "Flat",
                    "type": "CONFIDENTIAL",
                    "redirectUris": ["https://flat.example/callback"],
                    "scopes": SCOPES,
                    "developerUserId": user["id"],
                    "reviewed": True,
                },
            )
        )
        ids = {"appId": app["id"], "businessId": business["id"], "userId": user["id"]}
        _answer(await admin.post("/admin/installations", json={**ids, "scopes": SCOPES}))
        sessions = [
            _answer(await admin.post("/admin/session-tokens", json=ids))["sessionToken"]
            for _ in range(2)
        ]
        developer = _answer(
            await admin.post("/admin/developer-tokens", json={"userId": user["id"]})
        )
    basic = base64.b64encode(f"{app['clientId']}:{app['clientSecret']}".encode()).decode()
    async with httpx.AsyncClient(base_url=base, timeout=HTTP_TIMEOUT, trust_env=False) as http:
        _answer(
            await http.post(
                f"/developer/apps/{app['id']}/webhooks",
                json={"url": webhook_url, "events": ["customer.created"]},
                headers={"Authorization": f"Bearer {developer['token']}"},
            )
        )
        data_api, rotating = [
            _answer(
                await http.post(
                    "/oauth/token",
                    data={
                        "grant_type": catalog.GRANT_TOKEN_EXCHANGE,
                        "subject_token": session,
                        "subject_token_type": catalog.TOKEN_TYPE_JWT,
                    },
                    headers={"Authorization": f"Basic {basic}"},
                )
            )
            for session in sessions
        ]
    return {
        "base": base,
        "access_token": data_api["access_token"],
        "basic_auth": f"Basic {basic}",
        "progress": {"refresh_token": rotating["refresh_token"]},
    }


async def send(
    plan: dict[str, Any], counts: dict[str, int], connections: int = 1
) -> dict[str, Any]:
    """Run the load process for ``counts``; answers the plan that continues where it ended."""
    done = await trio.run_process(
        [sys.executable, str(LOAD)],
        stdin=json.dumps({**plan, "counts": counts, "connections": connections}).encode(),
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return {**plan, "progress": json.loads(done.stdout)}


def _type_name(kind: type) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"


@dataclass(frozen=True)
class Count:
    """What the process holds at one moment, after a full collection."""

    objects: Counter[str]
    """Live objects by type."""
    blocks: int
    """Allocated memory blocks."""
    requests: Counter[str]
    """Live objects of :data:`REQUEST_TYPES`, by type."""
    waiting_timers: int
    """Cancelled asyncio timers still in the loop's heap."""
    timer_variables: frozenset[str]
    """The variables of the waiting timers' contexts, by name."""


def _compact_trio_deadlines() -> None:
    """Drop the stale entries of trio's deadline heap, as trio does once 1,000 accumulate."""
    trio._core._run.GLOBAL_RUN_CONTEXT.runner.deadlines._prune()


def count(receiver: Receiver) -> Count:
    """What the process holds now; what the receiver recorded (the test's bookkeeping) is
    dropped first."""
    receiver.received.clear()
    receiver.arrivals.clear()
    _compact_trio_deadlines()
    gc.collect()
    live = gc.get_objects()
    waiting = [o for o in live if isinstance(o, asyncio.TimerHandle) and o.cancelled()]
    contexts = [r for t in waiting for r in gc.get_referents(t) if type(r) is contextvars.Context]
    objects = Counter(_type_name(type(o)) for o in live)
    requests = Counter(_type_name(type(o)) for o in live if isinstance(o, REQUEST_TYPES))
    variables = frozenset(var.name for context in contexts for var in context)
    timers = len(waiting)
    del live, waiting, contexts
    return Count(objects, sys.getallocatedblocks(), requests, timers, variables)


async def test_memory_stays_flat_under_sustained_traffic(database: dict[str, str]) -> None:
    with trio.fail_after(TEST_TIMEOUT):
        async with receiving() as receiver, serving(database) as base:
            plan = await provision(base, receiver.url)
            plan = await send(plan, WARM_UP, connections=WARM_UP_CONNECTIONS)
            await receiver.wait_for(plan["progress"]["writes"], within=HTTP_TIMEOUT)
            before = count(receiver)
            plan = await send(plan, ROUNDS)
            await receiver.wait_for(ROUNDS["write"], within=HTTP_TIMEOUT)
            after = count(receiver)

    measured = sum(ROUNDS.values())
    grown = {
        name: growth
        for name, growth in (after.objects - before.objects).most_common()
        if growth > MAX_OBJECTS_PER_REQUEST * measured
    }
    blocks_per_request = (after.blocks - before.blocks) / measured
    assert all(n <= IN_FLIGHT for n in after.requests.values()), (
        f"request objects alive once every response is out: {dict(after.requests)}"
    )
    assert after.waiting_timers <= WAITING_TIMERS_MAX, (
        f"{after.waiting_timers} cancelled asyncio timers wait in the loop"
    )
    assert not after.timer_variables & REQUEST_VARIABLES, (
        f"waiting asyncio timers keep a request's context: {sorted(after.timer_variables)}"
    )
    assert not grown, f"grew by more than {MAX_OBJECTS_PER_REQUEST} a request: {grown}"
    assert blocks_per_request < MAX_BLOCKS_PER_REQUEST, (
        f"{blocks_per_request:.1f} allocated blocks a request"
    )
