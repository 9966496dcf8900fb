"""A DPoP-bound data API call (RFC 9449) against a bearer one, side by side in one run per store.

Usage::

    .venv/bin/python bench/dpop.py [--backend sqlite|postgres|both] [--n N] [--rounds R]
        [--slices S] [--nonces]

For each store a ``ledgerport serve`` process starts (tests/e2e/served.py: SQLite in a temporary
directory, PostgreSQL in a scratch database dropped afterwards) with loopback as a trusted proxy
(each request from one of 256 client addresses, ``X-Forwarded-For``) and
``LEDGERPORT_RATE_LIMIT_FACTOR=1000``: every limit is counted, none refuses. Sixteen tenants
are provisioned through the operator API, one per worker; each has a bearer access token and a
DPoP-bound one (a token exchange with a proof of an ES256 key of its own).

Each round sends ``--n`` calls ``GET /invoices?limit=1`` of each kind, 16 in flight, in
``--slices`` parts, the kinds taking turns part by part (request_path.py's way: whatever else the
machine does falls on both alike):

- ``bearer``: ``Authorization: Bearer <token>``;
- ``dpop``: ``Authorization: DPoP <token>`` and a fresh proof (its own ``jti``, ``htm``, ``htu``,
  ``iat`` and ``ath``), which the server checks and records as used.

The client signs each part's proofs before the part is timed, so the figures are the server's
(client and server share the machine). Two figures for each kind and round: calls a second, and
the server's CPU time a call (the served process and its children, from ``/proc``: what other
programs do on the machine moves it far less than the rate). The cost of a DPoP call is its
figure against the bearer one of the same round (the bearer rate over the DPoP rate; the DPoP
CPU time over the bearer one); the last column is the median over the rounds. ``--nonces``
serves with ``LEDGERPORT_DPOP_NONCE=on`` (each proof carries the nonce).

Target (issue 49): a DPoP-bound call costs at most 1.3x a bearer one.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import math
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
    GRANT_TOKEN_EXCHANGE,
    TOKEN_TYPE_JWT,
    Tenant,
    answer,
    children,
    client,
    cpu_seconds,
    forwarded_for,
    nodes,
    provision_tenant,
    say,
    session_token,
    until_signalled,
)
from tests.dpop_keys import DpopKey
from tests.e2e.served import store_env

SCOPES = ["invoices:read"]
TENANTS = 16
IN_FLIGHT = 16
TIMEOUT = 900
PATH = "/invoices?limit=1"
KINDS = ("bearer", "dpop")


def _cpu_seconds(pid: int) -> float:
    """CPU time (user and system) used so far by process ``pid`` and its live descendants."""
    family, unseen = [], [pid]
    while unseen:
        member = unseen.pop()
        family.append(member)
        unseen.extend(children(member))
    return sum(used for used in map(cpu_seconds, family) if not math.isnan(used))


async def _elapsed(
    size: int, send: Callable[[int], Awaitable[httpx.Response]], first: int
) -> float:
    """Seconds taken by calls ``send(i)`` for ``i`` in ``first .. first + size``, IN_FLIGHT at
    once, call ``i`` sent by worker ``i % IN_FLIGHT`` (its tenant's token, its key's proof);
    every answer must be a success."""

    async def worker(index: int) -> None:
        start = first + (index - first) % IN_FLIGHT
        for i in range(start, first + size, IN_FLIGHT):
            answer(await send(i))

    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for index in range(IN_FLIGHT):
            nursery.start_soon(worker, index)
    return time.perf_counter() - started


async def _bound_token(
    http: httpx.AsyncClient, base: str, tenant: Tenant, key: DpopKey, nonce: str | None
) -> tuple[str, str | None]:
    """A DPoP-bound access token of ``tenant`` (token exchange with a proof of ``key``) and the
    server's nonce (when it hands them out)."""
    session = answer(await session_token(http, tenant))["sessionToken"]

    async def post(nonce: str | None) -> httpx.Response:
        return await http.post(
            "/oauth/token",
            data={
                "grant_type": GRANT_TOKEN_EXCHANGE,
                "subject_token": session,
                "subject_token_type": TOKEN_TYPE_JWT,
            },
            headers={
                "Authorization": tenant.basic,
                "DPoP": key.proof("POST", f"{base}/oauth/token", iat=time.time(), nonce=nonce),
            },
        )

    response = await post(nonce)
    if response.status_code == 400 and "DPoP-Nonce" in response.headers:
        response = await post(response.headers["DPoP-Nonce"])
    pair = answer(response)
    assert pair["token_type"] == "DPoP", pair
    return pair["access_token"], response.headers.get("DPoP-Nonce")


async def measure(base: str, pid: int, tenants: list[Tenant], args: argparse.Namespace) -> None:
    """Each kind's calls a second and server CPU time a call, round by round, printed."""
    keys = [DpopKey("ES256") for _ in tenants]
    url = f"{base}/invoices"
    table: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    async with client(base) as http:
        bound: list[str] = []
        nonce = None
        for tenant, key in zip(tenants, keys, strict=True):
            token, nonce = await _bound_token(http, base, tenant, key, nonce)
            bound.append(token)
        proofs: dict[int, str] = {}

        def sign(first: int, size: int) -> None:
            """The proofs of calls ``first .. first + size``, made before they are timed."""
            proofs.clear()
            now = time.time()
            for i in range(first, first + size):
                worker = i % IN_FLIGHT
                proofs[i] = keys[worker].proof(
                    "GET", url, iat=now, token=bound[worker], nonce=nonce
                )

        async def bearer(i: int) -> httpx.Response:
            return await http.get(
                PATH, headers={**tenants[i % IN_FLIGHT].bearer, **forwarded_for(i)}
            )

        async def dpop(i: int) -> httpx.Response:
            authorization = f"DPoP {bound[i % IN_FLIGHT]}"
            headers = {"Authorization": authorization, "DPoP": proofs[i], **forwarded_for(i)}
            return await http.get(PATH, headers=headers)

        sends = {"bearer": bearer, "dpop": dpop}
        warm = IN_FLIGHT * 8
        await _elapsed(warm, bearer, 0)
        sign(0, warm)
        await _elapsed(warm, dpop, 0)
        n, slices = args.n, args.slices
        for round_index in range(args.rounds):
            seconds = dict.fromkeys(KINDS, 0.0)
            used = dict.fromkeys(KINDS, 0.0)
            offset = (round_index + 1) * n
            for part in range(slices):
                first = offset + n * part // slices
                size = offset + n * (part + 1) // slices - first
                for kind in KINDS:
                    if kind == "dpop":
                        sign(first, size)
                    before = _cpu_seconds(pid)
                    seconds[kind] += await _elapsed(size, sends[kind], first)
                    used[kind] += _cpu_seconds(pid) - before
            for kind in KINDS:
                table.setdefault(kind, []).append(n / seconds[kind])
                cpu.setdefault(kind, []).append(used[kind] / n)
    say(
        f"   {'call':<12} "
        + " ".join(f"{'round ' + str(r + 1):>18}" for r in range(args.rounds))
        + f" {'median':>8}"
    )
    for kind in KINDS:
        rates, times = table[kind], cpu[kind]
        costs = [table["bearer"][r] / rate for r, rate in enumerate(rates)]
        cells = [f"{rate:7.0f}/s {cost:6.2f}x" for rate, cost in zip(rates, costs, strict=True)]
        say(
            f"   {kind + ' rate':<12} "
            + " ".join(f"{cell:>18}" for cell in cells)
            + f" {statistics.median(costs):7.2f}x"
        )
        costs = [spent / cpu["bearer"][r] for r, spent in enumerate(times)]
        cells = [
            f"{spent * 1e6:6.0f} us {cost:6.2f}x" for spent, cost in zip(times, costs, strict=True)
        ]
        say(
            f"   {kind + ' CPU':<12} "
            + " ".join(f"{cell:>18}" for cell in cells)
            + f" {statistics.median(costs):7.2f}x"
        )


async def run_backend(backend: str, args: argparse.Namespace) -> None:
    nonces = ", nonces on" if args.nonces else ""
    say(f"\n== {backend}: {args.n} calls of each kind a round, {IN_FLIGHT} in flight{nonces}")
    # A scratch PostgreSQL database is made and dropped with asyncio.run, which no trio task
    # may call: the store's context is entered and left in a worker thread.
    stack = contextlib.ExitStack()
    try:
        directory = stack.enter_context(tempfile.TemporaryDirectory(prefix="ledgerport-dpop-"))
        store = await trio.to_thread.run_sync(
            stack.enter_context, store_env(backend, Path(directory))
        )
        env = store | {
            "LEDGERPORT_FUNCTION_WORKERS": "0",
            "LEDGERPORT_RATE_LIMIT_FACTOR": "1000",
            "LEDGERPORT_TRUSTED_PROXIES": "127.0.0.1/32",
            "LEDGERPORT_PASSWORD_HASHING": "fast",
            "LEDGERPORT_DPOP_NONCE": "on" if args.nonces else "off",
        }
        with nodes(Path(directory), env) as served:
            node = await served.start("bench")
            async with client(node.base) as http:
                tenants = [
                    await provision_tenant(http, SCOPES, f"Tenant {index}")
                    for index in range(TENANTS)
                ]
                # The OpenAPI document is built in a worker thread as the server starts:
                # waiting for it keeps that CPU out of the first round.
                answer(await http.get("/openapi.json", timeout=120))
            await measure(node.base, node.pid, tenants, args)
            problems = served.problems()
        if problems:
            say(f"   server.log: {len(problems)} error lines, the first: {problems[0][:300]}")
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(stack.close)


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
    parser.add_argument("--n", type=int, default=2000, help="calls of each kind a round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of both kinds")
    parser.add_argument(
        "--slices", type=int, default=10, help="parts each kind's calls of a round are sent in"
    )
    parser.add_argument("--nonces", action="store_true", help="serve with LEDGERPORT_DPOP_NONCE=on")
    args = parser.parse_args()
    if not 100 <= args.n <= 20000:
        parser.error("--n must be 100..20000")
    if not 1 <= args.rounds <= 10:
        parser.error("--rounds must be 1..10")
    if not 1 <= args.slices <= 100 or args.slices > args.n:
        parser.error("--slices must be 1..100 and at most --n")
    return args


if __name__ == "__main__":
    arguments = parse()
    sys.exit(trio.run(until_signalled, functools.partial(main, arguments)))
