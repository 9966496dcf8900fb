"""The served process's CPU a token request costs, against ``/healthz``, and against another
checkout side by side.

Usage::

    .venv/bin/python bench/request_cpu.py [--backend sqlite|postgres] [--against DIR]
        [--cycles K] [--burst N]

A rate on this machine moves by tens of percent within a minute, with the other programs on it;
the CPU time the served process spends on a request moves less, and it is what bounds the rate
when that process is the busiest (its one thread). For this checkout, and with ``--against DIR``
(another checkout of the project, such as a ``git worktree`` of the commit before a change) for
that one too, a ``ledgerport serve`` process starts on its own store (tests/e2e/served.py: SQLite
in a temporary directory, PostgreSQL in a scratch database dropped afterwards), each run from
its checkout's ``src`` (``PYTHONPATH``), as ``bench/request_path.py`` serves it: loopback a
trusted proxy, ``X-Forwarded-For`` from 256 client addresses, ``LEDGERPORT_RATE_LIMIT_FACTOR=1000``
(every limit counted, none refusing), 16 tenants, 16 requests in flight.

Then ``--cycles`` rounds: in each, ``--burst`` requests of each kind (``healthz``, then
``introspection``, then ``refresh``) go to one process and then the other, their order swapped
every round. The process's CPU (user and system, from its CPU clock) is read before and after
each burst. It prints, for each checkout and kind, the median over the rounds of the CPU a
request, with the lowest and highest, and the median of the rounds' ratios to ``/healthz``'s
CPU: the share of ``/healthz``'s rate a kind can reach when the process's CPU bounds it.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import itertools
import statistics
import sys
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._load import (
    Node,
    Nodes,
    Tenant,
    answer,
    client,
    cpu_seconds,
    forwarded_for,
    nodes,
    provision_tenant,
    refresh,
    say,
    until_signalled,
)
from tests.e2e.served import store_env

SCOPES = ["invoices:read", "customers:read"]
TENANTS = 16
IN_FLIGHT = 16
KINDS = ("healthz", "introspection", "refresh")
TIMEOUT = 1200
HERE = Path(__file__).resolve().parent.parent


@dataclass
class Side:
    """One checkout's served process, its tenants and each kind's CPU a request per round."""

    name: str
    node: Node
    tenants: list[Tenant]
    cpu: dict[str, list[float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.refresh_tokens = [tenant.refresh_token for tenant in self.tenants]
        self.access_tokens = [tenant.access_token for tenant in self.tenants]


async def _start(served: Nodes, name: str, code: Path) -> Side:
    served.env = served.env | {"PYTHONPATH": str(code / "src")}
    node = await served.start(name)
    async with client(node.base) as http:
        tenants = [await provision_tenant(http, SCOPES, f"Tenant {i}") for i in range(TENANTS)]
        # The OpenAPI document is built in a worker thread as the server starts: wait for it.
        answer(await http.get("/openapi.json", timeout=120))
    return Side(name, node, tenants)


def _sender(
    side: Side, http: httpx.AsyncClient, kind: str
) -> Callable[[int, int], Awaitable[httpx.Response]]:
    async def healthz(worker: int, i: int) -> httpx.Response:
        return await http.get("/healthz", headers=forwarded_for(i))

    async def introspect(worker: int, i: int) -> httpx.Response:
        return await http.post(
            "/oauth/introspect",
            data={"token": side.access_tokens[worker]},
            headers={"Authorization": side.tenants[worker].basic, **forwarded_for(i)},
        )

    async def rotate(worker: int, i: int) -> httpx.Response:
        response = await refresh(
            http, side.tenants[worker], side.refresh_tokens[worker], headers=forwarded_for(i)
        )
        pair = answer(response)
        side.refresh_tokens[worker] = pair["refresh_token"]
        side.access_tokens[worker] = pair["access_token"]
        return response

    return {"healthz": healthz, "introspection": introspect, "refresh": rotate}[kind]


async def _burst(side: Side, kind: str, n: int, addresses: itertools.count[int]) -> float:
    """The served process's CPU seconds a request over ``n`` requests of ``kind``."""
    async with client(side.node.base) as http:
        send = _sender(side, http, kind)
        left = iter(range(n))

        async def worker(index: int) -> None:
            for _ in left:
                answer(await send(index, next(addresses)))

        used = cpu_seconds(side.node.pid)
        async with trio.open_nursery() as nursery:
            for index in range(IN_FLIGHT):
                nursery.start_soon(worker, index)
        return (cpu_seconds(side.node.pid) - used) / n


def _report(sides: list[Side]) -> None:
    say(f"   {'checkout':<22} {'request':<14} {'CPU a request (range)':>28} {'vs healthz':>11}")
    for side in sides:
        for kind, rounds in side.cpu.items():
            ratios = [h / c for h, c in zip(side.cpu["healthz"], rounds, strict=True)]
            median = statistics.median(rounds) * 1e6
            spread = f"({min(rounds) * 1e6:.0f} to {max(rounds) * 1e6:.0f})"
            say(
                f"   {side.name:<22} {kind:<14} {median:>9.0f} us {spread:>15}"
                f" {statistics.median(ratios):>10.3f}x"
            )


async def run(args: argparse.Namespace, stores: list[dict[str, str]], workdir: Path) -> None:
    env = {
        "LEDGERPORT_FUNCTION_WORKERS": "0",
        "LEDGERPORT_RATE_LIMIT_FACTOR": "1000",
        "LEDGERPORT_TRUSTED_PROXIES": "127.0.0.1/32",
        "LEDGERPORT_PASSWORD_HASHING": "fast",
    }
    codes = [("this checkout", HERE)]
    if args.against is not None:
        codes.append((str(args.against), args.against))
    with contextlib.ExitStack() as stack:
        sides = []
        for index, ((name, code), store) in enumerate(zip(codes, stores, strict=True)):
            served = stack.enter_context(nodes(workdir / f"side-{index}", store | env))
            sides.append(await _start(served, name, code))
        addresses = itertools.count()
        for side in sides:  # warm-up, not counted
            for kind in KINDS:
                await _burst(side, kind, IN_FLIGHT * 4, addresses)
        for cycle in range(args.cycles):
            order = sides if cycle % 2 == 0 else sides[::-1]
            for kind in KINDS:
                for side in order:
                    used = await _burst(side, kind, args.burst, addresses)
                    side.cpu.setdefault(kind, []).append(used)
    say(
        f"\n== {args.backend}: {args.cycles} rounds of {args.burst} requests of each kind,"
        f" {IN_FLIGHT} in flight"
    )
    _report(sides)


async def main(args: argparse.Namespace) -> int:
    count = 2 if args.against is not None else 1
    with contextlib.ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="lp-cpu-")))
        stores = []
        for index in range(count):
            directory = workdir / f"store-{index}"
            directory.mkdir()
            # A scratch PostgreSQL database is made and dropped with asyncio.run, which no trio
            # task may call: the store's context is entered in a worker thread.
            stores.append(
                await trio.to_thread.run_sync(
                    stack.enter_context, store_env(args.backend, directory)
                )
            )
        try:
            with trio.fail_after(TIMEOUT):
                await run(args, stores, workdir)
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(stack.close)
    return 0


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=" ".join((__doc__ or "").split("\n\n")[0].split()),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="postgres")
    parser.add_argument(
        "--against", type=Path, help="another checkout's root: served beside this one"
    )
    parser.add_argument("--cycles", type=int, default=10, help="rounds of bursts")
    parser.add_argument("--burst", type=int, default=1000, help="requests of a kind a burst")
    args = parser.parse_args()
    if args.against is not None:
        args.against = args.against.resolve()
        if not (args.against / "src" / "ledgerport").is_dir():
            parser.error(f"--against: no checkout of the project at {args.against}")
    if not 1 <= args.cycles <= 50:
        parser.error("--cycles must be 1..50")
    if not 100 <= args.burst <= 20000:
        parser.error("--burst must be 100..20000")
    return args


if __name__ == "__main__":
    arguments = parse()
    sys.exit(trio.run(until_signalled, functools.partial(main, arguments)))
