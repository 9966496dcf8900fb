"""An app whose console has a working day's data in it, set up through the served process's
own API: what ``bench/console_pages.py`` measures the console's pages with.

:func:`seed` makes, on a ``ledgerport serve`` process started with :data:`SERVER_ENV`:

- through the operator API, a business, its owner (an email and a password to sign in with),
  an app the owner develops, reviewed and installed in the business, the owner's developer
  token and the app's access token (a session token exchanged);
- through the developer console API, :data:`ENDPOINTS` webhook endpoints on the :class:`Policy`
  receiver, each subscribed to ``customer.created`` and ``invoice.created``: most answer 200,
  some answer 500 to a delivery's odd attempts and 200 to its even ones (a retry each), some
  answer 500 always (failed for good after every attempt), one points at a closed loopback port
  (connection errors);
- one customer and ``DELIVERIES - 1`` invoices (one bulk import): ``DELIVERIES`` events, so as
  many deliveries an endpoint;
- one delivery of a flaky endpoint redelivered until its attempt log holds
  :data:`TARGET_ATTEMPTS` attempts (two a round: the 500, then the 200);
- :data:`FUNCTIONS`: one on ``invoice.created`` uploaded three times (three versions), one on
  ``customer.created`` that throws (a failed run with its stack), one on a schedule and no event,
  and a test run of the first; three secrets; a listing draft.

Concurrent calls are bounded by :data:`CONCURRENCY`; :func:`settle` waits, with a deadline,
until every delivery and every run has ended, so that nothing works in the background while
the pages are measured. Public names only (``tests/unit/test_exports.py``).
"""

from __future__ import annotations

import functools
import secrets
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import trio
from bench._load import (
    ADMIN_TOKEN,
    Tenant,
    answer,
    create_customer,
    exchange,
    import_invoices,
    put_function,
)
from tests.e2e.served import free_port

SERVER_ENV = {
    "LEDGERPORT_FUNCTION_WORKERS": "1",
    "LEDGERPORT_RATE_LIMIT_FACTOR": "1000",
    "LEDGERPORT_PASSWORD_HASHING": "fast",
    # Every attempt at once: the failing deliveries end (failed) within the seeding, so that
    # nothing is sent while the pages are measured.
    "LEDGERPORT_WEBHOOK_RETRY_DELAYS": "0,0,0,0,0,0",
    "LEDGERPORT_WEBHOOK_TIMEOUT": "2",
}
"""What the served process is started with (besides its store)."""
ENDPOINTS = 20
DELIVERIES = 100
"""Events made, so deliveries an endpoint."""
KINDS = ("ok",) * 12 + ("flaky",) * 4 + ("down",) * 3 + ("refused",)
"""Each endpoint's receiver, in the order they are made: ``ok`` answers 200, ``flaky`` 500
to a delivery's odd attempts and 200 to its even ones, ``down`` 500 always, ``refused`` is a
closed loopback port."""
TARGET_ATTEMPTS = 30
EVENTS = ["customer.created", "invoice.created"]
SCOPES = ["invoices:read", "invoices:write", "customers:read", "customers:write"]
PASSWORD = "correct horse battery staple"
CONCURRENCY = 8
SETTLE_TIMEOUT = 180.0
POLL = 0.25
ON_INVOICE = (
    "export async function handler(event, context) {{\n"
    "  context.log('invoice', event.data.id, 'version {version}');\n"
    "  const total = Number(event.data.total ?? 0);\n"
    "  return {{ invoice: event.data.id, total, version: {version} }};\n"
    "}}\n"
)
THROWS = (
    "export async function handler(event, context) {\n"
    "  context.log('checking', event.data.name);\n"
    "  const room = event.data.name.length > 3 ? null : 'ok';\n"
    "  if (!room) throw new RangeError('no room for ' + event.data.name);\n"
    "  return { room };\n"
    "}\n"
)
NIGHTLY = "export const handler = (event) => ({ at: event.data.scheduledAt });\n"
FUNCTIONS = ("on-invoice", "no-room", "nightly")
SECRETS = {"API_KEY": "k-" + "x" * 30, "SIGNING_SALT": "salt", "REGION": "eu-west"}
LISTING = {
    "slug": "",
    "name": "Console Bench",
    "tagline": "Keeps the books in step with the warehouse",
    "description": "Syncs **invoices** and customers.\n\n- every night\n- on every invoice\n",
    "category": "invoicing",
}


@dataclass
class Policy:
    """The receiver's answers by path (``/<kind>/<n>``): see :data:`KINDS`; what the receiver
    saw of each delivery is counted."""

    seen: Counter[str] = field(default_factory=Counter)

    def __call__(self, path: str, delivery_id: str) -> int:
        self.seen[delivery_id] += 1
        kind = path.split("/")[1]
        if kind == "down":
            return 500
        if kind == "flaky" and self.seen[delivery_id] % 2 == 1:
            return 500
        return 200


@dataclass(frozen=True)
class Endpoint:
    id: str
    kind: str


@dataclass(frozen=True)
class Seeded:
    """What :func:`seed` made: the tenant, the owner's sign-in, the endpoints, and the delivery
    redelivered to :data:`TARGET_ATTEMPTS` attempts (its endpoint's id, its id)."""

    tenant: Tenant
    email: str
    password: str
    endpoints: list[Endpoint]
    target: tuple[str, str]


async def bounded(calls: list[Callable[[], Awaitable[Any]]], limit: int = CONCURRENCY) -> list[Any]:
    """Every call's answer, in order, at most ``limit`` of them at once."""
    results: list[Any] = [None] * len(calls)
    turns = trio.Semaphore(limit)

    async def one(index: int) -> None:
        async with turns:
            results[index] = await calls[index]()

    async with trio.open_nursery() as nursery:
        for index in range(len(calls)):
            nursery.start_soon(one, index)
    return results


async def _admin(http: httpx.AsyncClient, method: str, path: str, body: Any) -> Any:
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    return answer(await http.request(method, path, json=body, headers=headers))


async def provision(http: httpx.AsyncClient) -> tuple[Tenant, str]:
    """The business, its owner (a known password), the app installed, the tokens; and the
    owner's email."""
    email = f"console.bench.{secrets.token_hex(4)}@example.com"
    business = await _admin(http, "POST", "/admin/businesses", {"name": "Console Bench Ltd"})
    user = await _admin(
        http, "POST", "/admin/users", {"email": email, "password": PASSWORD, "name": "Ada Bench"}
    )
    await _admin(
        http, "PUT", f"/admin/businesses/{business['id']}/members/{user['id']}", {"role": "owner"}
    )
    app = await _admin(
        http,
        "POST",
        "/admin/apps",
        {
            "name": "Console Bench",
            "type": "CONFIDENTIAL",
            "redirectUris": ["https://app.example/callback"],
            "scopes": SCOPES,
            "developerUserId": user["id"],
            "reviewed": True,
        },
    )
    ids = {"appId": app["id"], "businessId": business["id"], "userId": user["id"]}
    await _admin(http, "POST", "/admin/installations", {**ids, "scopes": SCOPES})
    developer = await _admin(http, "POST", "/admin/developer-tokens", {"userId": user["id"]})
    partial = Tenant(
        business["id"],
        user["id"],
        app["id"],
        app["clientId"],
        app["clientSecret"],
        developer["token"],
        "",
        "",
    )
    tokens = answer(await exchange(http, partial))
    tenant = Tenant(
        *(partial.business_id, partial.user_id, partial.app_id),
        *(partial.client_id, partial.client_secret, partial.developer_token),
        tokens["access_token"],
        tokens["refresh_token"],
    )
    return tenant, email


async def seed(http: httpx.AsyncClient, receiver_base: str, say: Callable[[str], None]) -> Seeded:
    """Everything the module's docstring lists, on the process ``http`` talks to, the endpoints
    posting to ``receiver_base`` (a :class:`Policy` receiver); then :func:`settle`."""
    tenant, email = await provision(http)
    console, developer = tenant.console, tenant.developer
    closed = f"http://127.0.0.1:{free_port()}"

    def make_endpoint(index: int, kind: str) -> Callable[[], Awaitable[Any]]:
        base = closed if kind == "refused" else receiver_base
        body = {"url": f"{base}/{kind}/{index}", "events": EVENTS}
        return lambda: http.post(f"{console}/webhooks", json=body, headers=developer)

    made = await bounded([make_endpoint(i, kind) for i, kind in enumerate(KINDS[:ENDPOINTS])])
    endpoints = [
        Endpoint(answer(response)["id"], kind)
        for response, kind in zip(made, KINDS[:ENDPOINTS], strict=True)
    ]
    for version in (1, 2, 3):  # three versions before the events: runs use the third
        await put_function(
            http, tenant, "on-invoice", ON_INVOICE.format(version=version), ["invoice.created"]
        )
    await put_function(http, tenant, "no-room", THROWS, ["customer.created"])
    answer(
        await http.put(
            f"{console}/functions/nightly",
            json={"source": NIGHTLY, "events": [], "schedule": "0 3 * * *"},
            headers=developer,
        )
    )

    def put_secret(name: str, value: str) -> Callable[[], Awaitable[Any]]:
        return lambda: http.put(
            f"{console}/secrets/{name}", json={"value": value}, headers=developer
        )

    for response in await bounded([put_secret(n, v) for n, v in SECRETS.items()]):
        answer(response)
    listing = LISTING | {"slug": f"console-bench-{secrets.token_hex(3)}"}
    answer(await http.put(f"{console}/listing", json=listing, headers=developer))

    customer = await create_customer(http, tenant, "Globex Corporation")
    answer(await import_invoices(http, tenant, customer, DELIVERIES - 1))
    answer(await http.post(f"{console}/functions/on-invoice/test", headers=developer))
    say(f"   seeded: {len(endpoints)} endpoints, {DELIVERIES} events; settling")
    await settle(http, tenant, endpoints)

    flaky = next(e for e in endpoints if e.kind == "flaky")
    target = await _redelivered(http, tenant, flaky.id)
    say(f"   delivery {target} redelivered to {TARGET_ATTEMPTS} attempts")
    await settle(http, tenant, endpoints)
    return Seeded(tenant, email, PASSWORD, endpoints, (flaky.id, target))


async def _deliveries(http: httpx.AsyncClient, tenant: Tenant, webhook_id: str) -> list[Any]:
    """Every delivery of the endpoint (its pages followed, bounded)."""
    found: list[Any] = []
    after: str | None = None
    for _ in range(100):
        params = {"after": after} if after else {}
        page = answer(
            await http.get(
                f"{tenant.console}/webhooks/{webhook_id}/deliveries",
                params=params,
                headers=tenant.developer,
            )
        )
        found.extend(page["data"])
        after = page["next"]
        if after is None:
            return found
    raise RuntimeError(f"more than 100 pages of deliveries on {webhook_id}")


def _waiting(items: list[Any]) -> int:
    """How many of the deliveries or runs wait for an attempt."""
    return sum(item["status"] in ("queued", "retrying") for item in items)


async def settle(http: httpx.AsyncClient, tenant: Tenant, endpoints: list[Endpoint]) -> None:
    """Wait until each endpoint has its deliveries, none waiting for an attempt, and no run of a
    function is waiting; RuntimeError after SETTLE_TIMEOUT seconds."""
    waiting: list[str] = []
    with trio.move_on_after(SETTLE_TIMEOUT):
        while True:
            lists = await bounded(
                [functools.partial(_deliveries, http, tenant, e.id) for e in endpoints]
            )
            waiting = [
                f"{endpoint.id}: {len(found)} deliveries, {_waiting(found)} waiting"
                for endpoint, found in zip(endpoints, lists, strict=True)
                if len(found) < DELIVERIES or _waiting(found)
            ]
            for name in FUNCTIONS:
                runs = answer(
                    await http.get(
                        f"{tenant.console}/functions/{name}/runs", headers=tenant.developer
                    )
                )["data"]
                if _waiting(runs):
                    waiting.append(f"function {name}: runs waiting")
            if not waiting:
                return
            await trio.sleep(POLL)
    raise RuntimeError(f"not settled in {SETTLE_TIMEOUT} s: {'; '.join(waiting[:5])}")


async def _redelivered(http: httpx.AsyncClient, tenant: Tenant, webhook_id: str) -> str:
    """The endpoint's newest delivery, redelivered until its attempt log holds TARGET_ATTEMPTS
    attempts; answers its id."""
    newest = (await _deliveries(http, tenant, webhook_id))[0]["id"]
    path = f"{tenant.console}/webhooks/{webhook_id}/deliveries/{newest}"
    with trio.fail_after(SETTLE_TIMEOUT):
        while True:
            detail = answer(await http.get(path, headers=tenant.developer))
            logged = len(detail["attemptLog"])
            if detail["status"] in ("queued", "retrying"):
                await trio.sleep(POLL / 5)
                continue
            if logged >= TARGET_ATTEMPTS:
                return str(newest)
            answer(await http.post(f"{path}/redeliver", headers=tenant.developer))
