"""The request path of a served process: token requests against ``/healthz``, and the pipeline
from a bulk import to signed deliveries against a bare httpx client, in one run per store.

Usage::

    .venv/bin/python bench/request_path.py [--backend sqlite|postgres|both] [--n N]
        [--rounds R] [--slices S] [--invoices I]

For each store a ``ledgerport serve`` process starts (tests/e2e/served.py: SQLite in a
temporary directory, PostgreSQL in a scratch database dropped afterwards), with loopback as a
trusted proxy (``LEDGERPORT_TRUSTED_PROXIES``) so each request can come from its own client
address (``X-Forwarded-For``, 256 of them), and ``LEDGERPORT_RATE_LIMIT_FACTOR=1000``: every
limit is still counted, as in production, and none refuses. Sixteen tenants (an app installed in
a business each) are provisioned through the operator API, one per worker.

1. **Tokens** (16 requests in flight, ``--n`` requests of each, ``--rounds`` rounds). In each
   round every kind's requests are sent in ``--slices`` parts (10 by default), the kinds taking
   turns part by part, and a kind's rate is its requests over the sum of its parts' times: a
   stall or another program's burst during the round falls on every kind alike instead of on
   the one kind that happened to run then (``--slices 1`` sends each kind's requests at once,
   one kind after another, as the figures before this measured):

   - ``healthz``: ``GET /healthz`` (one statement, no authentication): the baseline;
   - ``introspection``: ``POST /oauth/introspect`` of the worker's access token, with the
     app's client credentials;
   - ``refresh``: ``grant_type=refresh_token``, each worker presenting the refresh token its
     previous call returned (rotation);
   - ``exchange``: RFC 8693 token exchange of a session token, created beforehand (outside the
     timing, as an embedded app gets one from the host page).

   Each figure is requests a second and the ratio to the same round's ``healthz``; the last
   column is the median of a kind's ratios over the rounds. Then the served process's CPU a
   request of each kind over every round (from its CPU clock around each part), and
   ``healthz``'s against it: the share of ``healthz``'s rate a kind can reach where that
   process's CPU bounds it.

2. **Pipeline**: one tenant with one webhook subscribed to ``invoice.created`` (the engine
   sends up to 8 attempts to it at once) and a receiver on loopback answering 200 at once;
   ``--invoices`` invoices go through ``POST /invoices/bulk-import``, 200 a request, one request
   after another. Measured from the first import request to the receipt of the last delivery:
   deliveries a second, against a bare httpx client (8 one-connection clients, the engine's
   shape) posting as many signed bodies of the same size to the same receiver in the same run;
   the ingest rate (invoices a second until the last import is answered); the drain (last
   receipt after the last import answer); and each event's time from its commit (its
   ``created_at``) to its receipt, p50 and p99.

Targets (issue: the request path): introspection >= 0.8x, refresh >= 0.6x; the pipeline
>= 0.7x of the bare client on both stores.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import itertools
import json
import secrets
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._load import (
    Sink,
    Tenant,
    add_webhook,
    answer,
    client,
    cpu_seconds,
    create_customer,
    forwarded_for,
    import_invoices,
    nodes,
    percentile,
    provision_tenant,
    query,
    refresh,
    say,
    session_token,
    sink,
    until_signalled,
)
from tests.e2e.served import store_env

from ledgerport.engine import signature_header

SCOPES = ["invoices:read", "invoices:write", "customers:read", "customers:write"]
TENANTS = 16
IN_FLIGHT = 16
PER_IMPORT = 200
BARE_CLIENTS = 8
"""One-connection clients of the bare baseline: the engine's attempts in flight per webhook."""
TIMEOUT = 600
KINDS = ("healthz", "introspection", "refresh", "exchange")


async def _elapsed(
    n: int, send: Callable[[int, int], Awaitable[httpx.Response]], first: int = 0
) -> float:
    """Seconds taken by ``n`` calls ``send(worker, i)`` (``i`` from ``first``) with IN_FLIGHT
    in flight; every answer must be a success."""
    counter = itertools.count(first)

    async def worker(index: int) -> None:
        while (i := next(counter)) < first + n:
            answer(await send(index, i))

    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for index in range(IN_FLIGHT):
            nursery.start_soon(worker, index)
    return time.perf_counter() - started


async def _rate(n: int, send: Callable[[int, int], Awaitable[httpx.Response]]) -> float:
    """Requests a second of ``n`` calls ``send(worker, i)`` with IN_FLIGHT in flight."""
    return n / await _elapsed(n, send)


async def tokens(
    base: str, pid: int, tenants: list[Tenant], n: int, rounds: int, kinds: list[str], slices: int
) -> None:
    refresh_tokens = [tenant.refresh_token for tenant in tenants]
    access_tokens = [tenant.access_token for tenant in tenants]
    """Each worker's live pair: a refresh revokes the access token issued with the old one."""
    table: dict[str, list[float]] = {}
    cpu: dict[str, float] = {}
    """The served process's CPU seconds over each kind's requests, every round."""
    async with client(base) as http:

        async def healthz(worker: int, i: int) -> httpx.Response:
            return await http.get("/healthz", headers=forwarded_for(i))

        async def introspect(worker: int, i: int) -> httpx.Response:
            tenant = tenants[worker]
            return await http.post(
                "/oauth/introspect",
                data={"token": access_tokens[worker]},
                headers={"Authorization": tenant.basic, **forwarded_for(i)},
            )

        async def rotate(worker: int, i: int) -> httpx.Response:
            response = await refresh(
                http, tenants[worker], refresh_tokens[worker], headers=forwarded_for(i)
            )
            pair = answer(response)
            refresh_tokens[worker], access_tokens[worker] = (
                pair["refresh_token"],
                pair["access_token"],
            )
            return response

        sessions: list[list[str]] = [[] for _ in tenants]

        async def exchange(worker: int, i: int) -> httpx.Response:
            tenant = tenants[worker]
            return await http.post(
                "/oauth/token",
                data={
                    "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
                    "subject_token": sessions[worker].pop(),
                    "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
                },
                headers={"Authorization": tenant.basic, **forwarded_for(i)},
            )

        async def make_sessions(count: int) -> None:
            async def one(worker: int, i: int) -> httpx.Response:
                response = await session_token(http, tenants[worker])
                sessions[worker].append(answer(response)["sessionToken"])
                return response

            await _rate(count, one)

        for warm in (healthz, introspect):
            await _rate(IN_FLIGHT * 4, warm)
        sends = {
            "healthz": healthz,
            "introspection": introspect,
            "refresh": rotate,
            "exchange": exchange,
        }
        measured = [kind for kind in KINDS if kind in kinds]
        for _ in range(rounds):
            if "exchange" in measured:
                # Workers take requests as they come: give each enough session tokens.
                await make_sessions(n + IN_FLIGHT * IN_FLIGHT)
            # Each kind's n requests in ``slices`` parts, the kinds taking turns: whatever
            # else the machine does during the round falls on every kind alike.
            seconds = dict.fromkeys(measured, 0.0)
            for part in range(slices):
                first, size = n * part // slices, n * (part + 1) // slices - n * part // slices
                for kind in measured:
                    used = cpu_seconds(pid)
                    seconds[kind] += await _elapsed(size, sends[kind], first)
                    cpu[kind] = cpu.get(kind, 0.0) + cpu_seconds(pid) - used
            for kind in measured:
                table.setdefault(kind, []).append(n / seconds[kind])
    say(
        f"   {'request':<14} "
        + " ".join(f"{'round ' + str(r + 1):>18}" for r in range(rounds))
        + f" {'median':>8}"
    )
    for kind, rates in table.items():
        ratios = [rate / table["healthz"][r] for r, rate in enumerate(rates)]
        cells = [f"{rate:7.0f}/s {ratio:6.2f}x" for rate, ratio in zip(rates, ratios, strict=True)]
        say(
            f"   {kind:<14} "
            + " ".join(f"{cell:>18}" for cell in cells)
            + f" {statistics.median(ratios):7.2f}x"
        )
    say("   the served process's CPU a request, over every round:")
    for kind, used in cpu.items():
        each = used / (n * rounds)
        say(
            f"   {kind:<14} {each * 1e6:7.0f} us"
            f"   {cpu['healthz'] / used:5.2f}x of healthz's requests a CPU second"
        )


async def bare(receiver: Sink, n: int, size: int) -> float:
    """Deliveries a second of BARE_CLIENTS one-connection clients posting ``n`` signed bodies
    of ``size`` bytes to ``receiver``."""
    secret = "whsec_" + secrets.token_urlsafe(32)
    body = json.dumps({"id": "evt_bench", "type": "invoice.created", "pad": ""}).encode()
    body = body[:-2] + b"x" * max(0, size - len(body)) + b'"}'
    remaining = list(range(n))

    async def post_some(http: httpx.AsyncClient) -> None:
        async with http:
            while remaining:
                index = remaining.pop()
                headers = {
                    "Content-Type": "application/json",
                    "X-Webhook-Id": f"bare_{index}",
                    "X-Webhook-Signature": signature_header([secret], int(time.time()), body),
                }
                response = await http.post(f"{receiver.base}/bare", content=body, headers=headers)
                assert response.status_code == 200

    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(BARE_CLIENTS):
            http = httpx.AsyncClient(
                limits=httpx.Limits(max_connections=1), trust_env=False, timeout=10
            )
            nursery.start_soon(post_some, http)
    return n / (time.perf_counter() - started)


def _commit_times(database_url: str) -> dict[str, float]:
    """Event id to its ``created_at`` (the server's clock, Unix seconds)."""
    sql = "SELECT id, created_at FROM events WHERE type = 'invoice.created'"
    if database_url.startswith("sqlite:"):
        with sqlite3.connect(database_url.removeprefix("sqlite:///")) as conn:
            return {row[0]: float(row[1]) for row in conn.execute(sql)}
    return {row["id"]: float(row["created_at"]) for row in query(database_url, sql)}


async def pipeline(base: str, tenant: Tenant, database_url: str, invoices: int) -> None:
    async with sink() as receiver, client(base) as http:
        await add_webhook(http, tenant, f"{receiver.base}/hook", ["invoice.created"])
        customer = await create_customer(http, tenant, "Pipeline customer")
        wall_offset = time.time() - time.monotonic()
        started = time.monotonic()
        left = invoices
        while left:
            answer(await import_invoices(http, tenant, customer, min(PER_IMPORT, left)))
            left -= min(PER_IMPORT, left)
        imported = time.monotonic()
        done = await receiver.wait(lambda: len(receiver.first_ok) >= invoices, within=TIMEOUT)
        if not done:
            raise RuntimeError(f"{len(receiver.first_ok)} of {invoices} deliveries arrived")
        last = max(receiver.first_ok.values())
        commits = await trio.to_thread.run_sync(_commit_times, database_url)
        latencies = [
            arrival.at + wall_offset - commits[arrival.event_id]
            for arrival in receiver.arrivals
            if arrival.event_id in commits
        ]
        size = len(json.dumps({"id": "evt_", "type": "invoice.created", "data": {}})) + 420
        baseline = await bare(receiver, invoices, size)
    rate = invoices / (last - started)
    say(
        f"   {invoices} invoices: ingest {invoices / (imported - started):.0f} invoices/s,"
        f" pipeline {rate:.0f} deliveries/s, bare {baseline:.0f}/s: {rate / baseline:.2f}x;"
        f" drain {last - imported:.2f} s after the last import answer;"
        f" commit to receipt p50 {statistics.median(latencies) * 1000:.0f} ms,"
        f" p99 {percentile(latencies, 0.99) * 1000:.0f} ms"
    )


async def run_backend(backend: str, args: argparse.Namespace) -> None:
    say(f"\n== {backend}: {args.n} requests of each kind, {IN_FLIGHT} in flight")
    # A scratch PostgreSQL database is made and dropped with asyncio.run, which no trio task
    # may call: the store's context is entered and left in a worker thread.
    stack = contextlib.ExitStack()
    try:
        directory = stack.enter_context(
            tempfile.TemporaryDirectory(prefix="ledgerport-request-path-")
        )
        store = await trio.to_thread.run_sync(
            stack.enter_context, store_env(backend, Path(directory))
        )
        await _run_served(backend, args, Path(directory), store)
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(stack.close)


async def _run_served(
    backend: str, args: argparse.Namespace, directory: Path, store: dict[str, str]
) -> None:
    with (
        nodes(
            directory,
            store
            | {
                "LEDGERPORT_FUNCTION_WORKERS": "0",
                "LEDGERPORT_RATE_LIMIT_FACTOR": "1000",
                "LEDGERPORT_TRUSTED_PROXIES": "127.0.0.1/32",
                "LEDGERPORT_PASSWORD_HASHING": "fast",
            },
        ) as served,
    ):
        node = await served.start("bench")
        async with client(node.base) as http:
            tenants = [
                await provision_tenant(http, SCOPES, f"Tenant {index}") for index in range(TENANTS)
            ]
            importer = await provision_tenant(http, SCOPES, "Importer")
            # The server builds its OpenAPI document in a worker thread as it starts (seconds of
            # CPU): asking for it waits until that is done, so it does not slow the first round.
            answer(await http.get("/openapi.json", timeout=120))
        await tokens(node.base, node.pid, tenants, args.n, args.rounds, args.kinds, args.slices)
        if args.no_pipeline:
            return
        await pipeline(node.base, importer, store["LEDGERPORT_DATABASE_URL"], args.invoices)
        problems = served.problems()
    if problems:
        say(f"   server.log: {len(problems)} error lines, the first: {problems[0][:300]}")


async def main(args: argparse.Namespace) -> int:
    for backend in ["sqlite", "postgres"] if args.backend == "both" else [args.backend]:
        with trio.fail_after(TIMEOUT):
            await run_backend(backend, args)
    return 0


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=" ".join((__doc__ or "").split("\n\n")[0].split()),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--n", type=int, default=2000, help="requests of each kind a round")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the four kinds")
    parser.add_argument(
        "--slices",
        type=int,
        default=10,
        help="parts each kind's requests of a round are sent in, the kinds taking turns"
        " (1: each kind's requests all at once, one kind after another)",
    )
    parser.add_argument("--invoices", type=int, default=3000, help="invoices of the pipeline")
    parser.add_argument(
        "--kinds",
        nargs="+",
        choices=KINDS,
        default=list(KINDS),
        help="the token requests to measure (healthz, the baseline, always)",
    )
    parser.add_argument("--no-pipeline", action="store_true", help="leave the pipeline out")
    args = parser.parse_args()
    args.kinds = sorted({"healthz", *args.kinds}, key=KINDS.index)
    if not 100 <= args.n <= 20000:
        parser.error("--n must be 100..20000")
    if not 1 <= args.rounds <= 10:
        parser.error("--rounds must be 1..10")
    if not 1 <= args.slices <= 100 or args.slices > args.n:
        parser.error("--slices must be 1..100 and at most --n")
    if not 200 <= args.invoices <= 30000:
        parser.error("--invoices must be 200..30000")
    return args


if __name__ == "__main__":
    arguments = parse()
    sys.exit(trio.run(until_signalled, functools.partial(main, arguments)))
