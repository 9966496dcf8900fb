"""SIGKILL under load and a restart on the same store: how long until everything is delivered,
how many duplicates, anything lost?

Usage::

    .venv/bin/python bench/restart.py [--backend sqlite|postgres|both] [--kills N] [--rate R]
        [--webhooks W] [--load-seconds S] [--timeout S]

Per store, one ``ledgerport serve`` as tests/e2e/served.py starts it (development mode, no
sandbox workers, rate limits times ten) and one app in one business with ``--webhooks`` webhooks
(default 4) on invoice.created, all to a loopback receiver that answers 200 at once. The load:
bulk imports of invoices every 100 ms (at most four in flight), as many as make ``--rate``
deliveries a second (default 450: 112.5 invoices a second for four webhooks). Then, ``--kills``
times (default 3):

1. the load runs ``--load-seconds`` (default 10); the rate the receiver achieved over its last
   seconds is printed (the machine may not manage the asked rate: read the achieved one);
2. the process gets SIGKILL while the load goes on, and the load stops (its imports in flight
   fail: whether they committed, the Events API tells afterwards);
3. a new process starts at once on the same store (same SQLite file and key, or the same
   PostgreSQL database and root key);
4. the bench reads the app's whole Events API feed (every invoice.created that committed) and
   waits until each of those events' deliveries to each webhook arrived with a 200.

A row per kill: ``achieved/s``, the deliveries a second that arrived over the 5 s before the
kill; ``cut imports``, the imports in flight at the kill; seconds from the kill until the new
process answered ``/healthz`` (``healthy s``) and until the first request from it arrived at the
receiver (``1st after s``); ``pending``, the deliveries that arrived after the kill (what was
committed and not delivered at the kill: when the machine cannot deliver as fast as the imports
commit, a backlog grows during the load); seconds from the kill until the last of them arrived
(``all after s``: everything is delivered then, backlog included) and the rate they came at
after the restart (``drain/s``: near ``achieved/s``, the time after the restart is the
backlog's, not the takeover's); ``duplicates``, deliveries the kill made arrive twice (a
delivery id answered 200 again: an attempt on the wire, or answered but not yet recorded, at
the kill is sent again); ``missing``, deliveries that had not arrived when the bench stopped
waiting. Targets (issue: restart): at most 50 duplicates a kill; everything delivered a few
seconds after the kill.

A delivery is lost when it has not arrived ``--timeout`` seconds (default 120) after its kill;
the exit code is 1 when a delivery was lost. PostgreSQL runs in a scratch database
(tests/e2e/served.py's ``postgres_database``), dropped afterwards; SQLite in a temporary
directory.
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._load import (
    Feed,
    Node,
    Nodes,
    Sink,
    Tenant,
    add_webhook,
    client,
    create_customer,
    import_invoices,
    nodes,
    provision_tenant,
    say,
    sink,
    until_signalled,
)
from tests.e2e.served import store_env

SCOPES = ["customers:write", "invoices:read", "invoices:write", "events:read"]
EVENT = "invoice.created"
TICK = 0.1
IMPORTS_IN_FLIGHT = 4
BULK_MAX = 200
RATE_WINDOW = 5.0
"""Seconds before the kill over which the achieved rate is measured."""
TARGET_DUPLICATES = 50


@dataclass
class Load:
    """The invoices' importer and what became of its imports."""

    tenant: Tenant
    customer: str
    answered: int = 0
    refused: int = 0
    failed: int = 0
    """Imports answered 5xx or not at all before the kill."""
    skipped: int = 0
    """Ticks whose import did not start: four were in flight."""
    in_flight: int = 0


@dataclass(frozen=True)
class Kill:
    killed_at: float
    restarted_at: float
    """When the new process was started (time.monotonic())."""
    achieved: float
    """Deliveries a second that arrived over the RATE_WINDOW before the kill."""
    healthy: float
    """Seconds from the kill until the new process answered /healthz."""
    interrupted: int
    """Imports in flight at the kill (whether they committed, the feed tells)."""
    duplicates_before: int


async def drive(http: httpx.AsyncClient, load: Load, per_second: float) -> None:
    """Import ``per_second`` invoices a second, a bulk import every TICK, until cancelled."""
    owed = 0.0

    async def one(count: int) -> None:
        try:
            response = await import_invoices(http, load.tenant, load.customer, count)
            if response.status_code == 201:
                load.answered += 1
            elif response.status_code >= 500:
                load.failed += 1
            else:
                load.refused += 1
        except httpx.HTTPError:
            load.failed += 1
        finally:
            load.in_flight -= 1

    async with trio.open_nursery() as nursery:
        began = trio.current_time()
        for tick in range(1, 10_000_000):
            owed += per_second * TICK
            count = min(int(owed), BULK_MAX)
            if count and load.in_flight < IMPORTS_IN_FLIGHT:
                owed -= count
                load.in_flight += 1
                nursery.start_soon(one, count)
            elif count:
                load.skipped += 1
            await trio.sleep_until(began + tick * TICK)


async def wait_all(
    http: httpx.AsyncClient,
    receiver: Sink,
    feed: Feed,
    tenant: Tenant,
    hooks: list[str],
    within: float,
) -> set[tuple[str, str]]:
    """Read the feed to its end and wait (``within`` seconds at most) until every event's
    delivery to every webhook arrived; answers the (webhook, event) pairs still missing."""
    await feed.catch_up(http, tenant)
    expected = {(hook, event) for hook in hooks for event, _ in feed.events}
    await receiver.wait(lambda: expected <= receiver.ok_pairs, within)
    return expected - receiver.ok_pairs


async def kill_once(
    served: Nodes, node: Node, receiver: Sink, load: Load, args: argparse.Namespace, name: str
) -> tuple[Node, Kill]:
    """Load ``node``, kill it under the load, start the next one (``name``); answers the new
    node and the kill's figures."""
    async with client(node.base) as http, trio.open_nursery() as nursery:
        nursery.start_soon(drive, http, load, args.rate / args.webhooks)
        await trio.sleep(args.load_seconds)
        node.kill()
        killed_at = time.monotonic()
        interrupted = load.in_flight
        nursery.cancel_scope.cancel()
    recent = [at for at in receiver.first_ok.values() if killed_at - RATE_WINDOW <= at < killed_at]
    duplicates_before = receiver.duplicates()
    restarted_at = time.monotonic()
    fresh = await served.start(name)
    receiver.owners.pids = {fresh.name: fresh.pid}
    return fresh, Kill(
        killed_at=killed_at,
        restarted_at=restarted_at,
        achieved=len(recent) / RATE_WINDOW,
        healthy=time.monotonic() - killed_at,
        interrupted=interrupted,
        duplicates_before=duplicates_before,
    )


async def run_backend(backend: str, args: argparse.Namespace) -> int:
    """The kills on ``backend``; answers the deliveries lost."""
    say(
        f"\n== {backend}: {args.kills} kills, {args.rate:g} deliveries/s asked"
        f" ({args.webhooks} webhooks), {args.load_seconds:g} s of load before each"
    )
    say(
        f"   {'kill':>4} {'achieved/s':>10} {'cut imports':>11} {'healthy s':>9}"
        f" {'1st after s':>11} {'pending':>7} {'all after s':>11} {'drain/s':>7}"
        f" {'duplicates':>10}"
        f" {'missing':>7}"
    )
    missing: set[tuple[str, str]] = set()
    with (
        tempfile.TemporaryDirectory(prefix="ledgerport-restart-") as directory,
        store_env(backend, Path(directory)) as store,
        nodes(
            Path(directory),
            store
            | {
                "LEDGERPORT_FUNCTION_WORKERS": "0",
                "LEDGERPORT_RATE_LIMIT_FACTOR": "10",
                "LEDGERPORT_PASSWORD_HASHING": "fast",
            },
        ) as served,
    ):
        async with sink() as receiver:
            node = await served.start("run0")
            receiver.owners.pids = {node.name: node.pid}
            async with client(node.base) as http:
                tenant = await provision_tenant(http, SCOPES, "Restart")
                hooks = [f"/hook{index}" for index in range(args.webhooks)]
                for hook in hooks:
                    await add_webhook(http, tenant, receiver.base + hook, [EVENT])
                customer = await create_customer(http, tenant, "Restart customer")
            load = Load(tenant, customer)
            feed = Feed(EVENT)
            for kill in range(1, args.kills + 1):
                node, figures = await kill_once(served, node, receiver, load, args, f"run{kill}")
                async with client(node.base) as http:
                    missing = await wait_all(http, receiver, feed, tenant, hooks, args.timeout)
                since = figures.killed_at
                fresh = [a.at for a in receiver.arrivals if a.at > figures.restarted_at]
                arrived = [at for at in receiver.first_ok.values() if at > since]
                duplicates = receiver.duplicates() - figures.duplicates_before
                first = min(fresh, default=math.nan) - since
                last = max(arrived, default=math.nan) - since
                drain = len(arrived) / (last - first) if last > first else math.nan
                say(
                    f"   {kill:4d} {figures.achieved:10.0f} {figures.interrupted:11d}"
                    f" {figures.healthy:9.1f} {first:11.1f} {len(arrived):7d} {last:11.1f}"
                    f" {drain:7.0f} {duplicates:10d} {len(missing):7d}"
                )
            say(
                f"   in all: {len(feed.events)} invoices, {len(receiver.ok_pairs)} deliveries"
                f" arrived of {len(feed.events) * len(hooks)}, {receiver.duplicates()}"
                f" duplicates (target <= {TARGET_DUPLICATES} a kill), {len(missing)} lost;"
                f" imports: {load.answered} answered, {load.failed} failed before a kill,"
                f" {load.refused} refused, {load.skipped} ticks skipped (four in flight)"
            )
        problems = served.problems()
    if problems:
        say(f"   server.log: {len(problems)} error lines, the first:")
        for line in problems[:5]:
            say(f"      {line[:300]}")
    return len(missing)


async def main(args: argparse.Namespace) -> int:
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    lost = 0
    for backend in backends:
        with trio.fail_after(args.kills * (args.load_seconds + args.timeout + 60) + 120):
            lost += await run_backend(backend, args)
    say(f"\nlost in all: {lost}")
    return 1 if lost else 0


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=" ".join((__doc__ or "").split("\n\n")[0].split()),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        epilog="Read the figures as described at the top of bench/restart.py.",
    )
    parser.add_argument(
        "--backend", choices=["sqlite", "postgres", "both"], default="both", help="the store"
    )
    parser.add_argument("--kills", type=int, default=3, help="kills and restarts")
    parser.add_argument("--rate", type=float, default=450.0, help="deliveries a second asked")
    parser.add_argument("--webhooks", type=int, default=4, help="webhooks of the app")
    parser.add_argument("--load-seconds", type=float, default=10.0, help="load before each kill")
    parser.add_argument(
        "--timeout", type=float, default=120.0, help="seconds after a kill for every delivery"
    )
    args = parser.parse_args()
    if not 1 <= args.kills <= 20:
        parser.error("--kills must be 1..20")
    if not 10 <= args.rate <= 5000:
        parser.error("--rate must be 10..5000")
    if not 1 <= args.webhooks <= 20:
        parser.error("--webhooks must be 1..20 (an app's most)")
    if not RATE_WINDOW + 1 <= args.load_seconds <= 600:
        parser.error(f"--load-seconds must be {RATE_WINDOW + 1:g}..600")
    if not 10 <= args.timeout <= 3600:
        parser.error("--timeout must be 10..3600")
    return args


if __name__ == "__main__":
    arguments = parse()
    say(
        "restart: "
        + " ".join(f"--{name.replace('_', '-')}={value}" for name, value in vars(arguments).items())
    )
    sys.exit(trio.run(until_signalled, functools.partial(main, arguments)))
