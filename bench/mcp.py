"""What an MCP tool call costs against the same data API call, side by side in one run.

Usage::

    .venv/bin/python bench/mcp.py [--backend sqlite|postgres|both] [--cycles K]
        [--concurrency C]

For each backend the script starts ``ledgerport serve`` (as ``bench/data_api.py`` does: a
scratch SQLite file or PostgreSQL database, loopback trusted as a proxy so the load comes from
many client addresses, several (app, business) tokens taken in turn), then sends ``--cycles``
rounds of short bursts (200 requests, C in flight, keep-alive) of each pair, the data API call
and its tool call one after the other, their order swapped every round:

- ``GET /customers/{id}`` and ``tools/call get_customer``;
- ``GET /invoices`` (a page of 50) and ``tools/call list_invoices``;
- ``POST /customers`` and ``tools/call create_customer``;

and ``GET /healthz`` as the machine's pace. A tool call is one JSON-RPC ``tools/call`` posted
to ``/mcp`` as the SDK's client posts it (stateless, JSON answers; no session to open). Every
answer is checked: a refusal, or a tool result with ``isError``, fails the run.

It prints each request's median rate and the served process's CPU time a request (read from
its CPU clock around each burst), and for each pair what a tool call costs in data API calls
(the target: at most 1.5), two ways: the median over the rounds of the tool call's CPU time
over the data API call's, and of the data API call's rate over the tool call's. The CPU time is
the steadier of the two on a machine shared with other work; the rates move with it.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

import data_api
from _load import cpu_seconds, forwarded_for

BURST = 200
APPS = 8
"""Apps, each in data_api.BUSINESSES businesses: their budgets (300 calls a minute each) allow
the run."""
HTTP_TIMEOUT = 30.0
MCP_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": "2025-11-25",
}
Make = Callable[[int], tuple[str, str, bytes | None, dict[str, str]]]


def _say(line: str = "") -> None:
    print(line, flush=True)  # noqa: T201 - a bench reports on standard output


def _served_pid(base: str) -> int:
    """The process of the ``ledgerport serve`` listening at ``base``."""
    bind = f"LEDGERPORT_BIND={base.removeprefix('http://')}".encode()
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and bind in (entry / "environ").read_bytes().split(b"\0"):
                return int(entry.name)
        except OSError:
            continue
    raise SystemExit(f"no served process found for {base}")


def _measured(pid: int, base: str, concurrency: int, make: Make) -> tuple[float, float]:
    """A burst's rate and the server's CPU seconds a request."""
    cpu = cpu_seconds(pid)
    rate = asyncio.run(_burst(base, BURST, concurrency, make))
    return rate, (cpu_seconds(pid) - cpu) / BURST


async def _burst(base: str, n: int, concurrency: int, make: Make) -> float:
    """Send ``n`` requests made by ``make(i)``, ``concurrency`` in flight; answers the rate."""
    counter = itertools.count()
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(
        base_url=base, timeout=HTTP_TIMEOUT, trust_env=False, limits=limits
    ) as client:

        async def worker() -> None:
            while (i := next(counter)) < n:
                method, path, body, headers = make(i)
                response = await client.request(method, path, content=body, headers=headers)
                if response.status_code >= 300 or b'"isError":true' in response.content:
                    raise SystemExit(f"{method} {path}: {response.status_code} {response.text}")

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return n / (time.perf_counter() - started)


def _requests(tenants: list[data_api.Tenant]) -> dict[str, Make]:
    """Each measured request by its name: ``make(i)`` answers the ``i``-th one."""

    def auth(i: int) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {tenants[i % len(tenants)].token}",
            **forwarded_for(i),
        }

    def tool(name: str, arguments: Callable[[int], dict[str, Any]]) -> Make:
        def make(i: int) -> tuple[str, str, bytes | None, dict[str, str]]:
            call = {"name": name, "arguments": arguments(i)}
            body = {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": call}
            return "POST", "/mcp", orjson.dumps(body), {**MCP_HEADERS, **auth(i)}

        return make

    def customer(i: int) -> str:
        return tenants[i % len(tenants)].customer_id

    def json_headers(i: int) -> dict[str, str]:
        return {"Content-Type": "application/json", **auth(i)}

    return {
        "healthz": lambda i: ("GET", "/healthz", None, forwarded_for(i)),
        "GET /customers/{id}": lambda i: ("GET", f"/customers/{customer(i)}", None, auth(i)),
        "get_customer": tool("get_customer", lambda i: {"id": customer(i)}),
        "GET /invoices": lambda i: ("GET", "/invoices", None, auth(i)),
        "list_invoices": tool("list_invoices", lambda i: {}),
        "POST /customers": lambda i: ("POST", "/customers", b'{"name": "Acme"}', json_headers(i)),
        "create_customer": tool("create_customer", lambda i: {"name": "Acme"}),
    }


PAIRS = (
    ("GET /customers/{id}", "get_customer"),
    ("GET /invoices", "list_invoices"),
    ("POST /customers", "create_customer"),
)


def _fill_invoices(base: str, tenants: list[data_api.Tenant]) -> None:
    """50 invoices in each tenant's business, so each page holds 50."""
    with httpx.Client(base_url=base, timeout=HTTP_TIMEOUT, trust_env=False) as client:
        for n, tenant in enumerate(tenants):
            headers = {"Authorization": f"Bearer {tenant.token}", **forwarded_for(n)}
            for _ in range(50):
                body = {"customerId": tenant.customer_id, "lines": data_api.LINES}
                data_api._ok(client.post("/invoices", json=body, headers=headers))


def run(backend: str, cycles: int, concurrency: int) -> None:
    with data_api._server(backend) as base:
        tenants = data_api._provision(base, APPS)
        _fill_invoices(base, tenants)
        requests = _requests(tenants)
        for make in requests.values():
            asyncio.run(_burst(base, concurrency * 4, concurrency, make))  # warm-up
        pid = _served_pid(base)
        rates: dict[str, list[float]] = {name: [] for name in requests}
        cpus: dict[str, list[float]] = {name: [] for name in requests}
        for cycle in range(cycles):
            order = ["healthz"]
            for pair in PAIRS:
                order.extend(pair if cycle % 2 == 0 else reversed(pair))
            for name in order:
                rate, cpu = _measured(pid, base, concurrency, requests[name])
                rates[name].append(rate)
                cpus[name].append(cpu)
    _say(
        f"\n{backend}: {cycles} rounds of {BURST} requests each, {concurrency} in flight"
        " (medians; the tool call's cost in data API calls: the median of the rounds' ratios"
        " of the served process's CPU time a request, and of the rates)\n"
    )
    _say("| request | req/s | CPU ms a request | cost by CPU | cost by rate |")
    _say("|---|---:|---:|---:|---:|")

    def row(name: str, *costs: str) -> None:
        rate, cpu = statistics.median(rates[name]), statistics.median(cpus[name])
        _say(f"| {name} | {rate:.0f} | {cpu * 1000:.2f} | {' | '.join(costs or ('', ''))} |")

    row("healthz")
    for api, tool in PAIRS:
        by_cpu = statistics.median(t / a for a, t in zip(cpus[api], cpus[tool], strict=True))
        by_rate = statistics.median(a / t for a, t in zip(rates[api], rates[tool], strict=True))
        row(api)
        row(tool, f"{by_cpu:.2f}x", f"{by_rate:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--cycles", type=int, choices=range(2, 41), default=6)
    parser.add_argument("--concurrency", type=int, choices=range(1, 33), default=16)
    args = parser.parse_args()
    for backend in ["sqlite", "postgres"] if args.backend == "both" else [args.backend]:
        run(backend, args.cycles, args.concurrency)


if __name__ == "__main__":
    main()
