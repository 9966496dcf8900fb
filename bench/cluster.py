"""Two ``ledgerport serve`` processes on one PostgreSQL database: do two deliver faster than one,
and how long does a killed node's work wait for the other?

Usage::

    .venv/bin/python bench/cluster.py [--deliveries N] [--webhooks W] [--delay S]
        [--concurrency C] [--kill-at F] [--phase throughput|kill|both] [--timeout S]

Each measurement runs in a scratch PostgreSQL database of its own (tests/e2e/served.py's
``postgres_database``, dropped afterwards) with processes started as tests/e2e/served.py starts
them (development mode, no sandbox workers, rate limits times ten), all with the same
``LEDGERPORT_DATABASE_URL`` and root key. One app in one business has ``--webhooks`` webhooks
(default 2) on invoice.created, all to one loopback receiver that answers 200 after ``--delay``
seconds (default 0.05), answering at most ``--concurrency`` requests at once (default 64).
``--deliveries`` (default 3000) divided by the webhooks is the number of invoices, created with
bulk imports of 200 (one transaction, 200 events each) while the receiver holds every request
unanswered (the attempts' timeout is raised to 300 s for that); then it lets them through and
the clock starts, so what is measured is delivering a backlog, not the imports.

The receiver tells the processes apart by the connection a request comes over (the kernel's
socket table and each process's open files), and a delivery apart by its ``X-Webhook-Id``;
a delivery "arrived" when a request with its id was answered 200, and a duplicate is the same
id answered 200 again.

(a) throughput: one process, then (in a fresh database) two. Each webhook has at most 8
attempts in flight in a process, so with a receiver that takes 50 ms one process delivers at
most 8 x W / 0.05 a second and two processes twice that: the ratio shows whether the second
process takes its share. Reported: deliveries a second from the receiver's opening to the last
arrival, each process's share, duplicates and lost. Target: two processes near 2x.

(b) a node killed: two processes deliver the same backlog; once ``--kill-at`` of the deliveries
(default a third) arrived, the second process gets SIGKILL and is not restarted. The
deliveries it held are read from the database just before and just after the kill (those whose
``lease`` is the killed process's, known from the deliveries it had on the wire). Of those, the
ones it had sent and the receiver had taken may come again (duplicates); for the others,
reported is the time from the kill until the first and the last of them arrived: the takeover.
Then the time until every delivery arrived, duplicates and lost. Target (issue: dead node
takeover): a dead holder's work taken over within 5 s (a takeover that waits for the claims'
30-second lease to run out takes 30 s or more). If the deliveries' table has no ``lease`` column
(the takeover may be built otherwise), only the time until every delivery arrived is reported.

Lost means: an invoice.created event of the Events API whose delivery to a webhook never
arrived within ``--timeout`` seconds (default 180). The exit code is 1 when something was lost.
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import httpx
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._load import (
    Arrival,
    Feed,
    Node,
    Nodes,
    Sink,
    Tenant,
    add_webhook,
    answer,
    client,
    create_customer,
    import_invoices,
    nodes,
    provision_tenant,
    query,
    say,
    sink,
    until_signalled,
)
from tests.e2e.served import store_env

SCOPES = ["customers:write", "invoices:read", "invoices:write", "events:read"]
EVENT = "invoice.created"
BULK = 200
IN_FLIGHT = 8
"""Attempts in flight per webhook in a process (docs/webhooks.md)."""
GATED_TIMEOUT = 300
RECENT = 0.5
"""Seconds: the killed process's requests this recent tell its lease (still held on the wire)."""
HELD_SQL = "SELECT id FROM webhook_deliveries WHERE lease = $1 AND status IN ('queued', 'retrying')"
LEASE_SQL = "SELECT lease FROM webhook_deliveries WHERE id = ANY($1::text[]) AND lease IS NOT NULL"


@dataclass
class Setup:
    tenant: Tenant
    customer: str
    hooks: list[str]
    feed: Feed
    imported: int = 0
    """Invoices whose import was answered 201."""


@dataclass(frozen=True)
class Delivered:
    """What one load's deliveries did."""

    expected: int
    arrived: int
    duplicates: int
    first: float
    """When the receiver let the deliveries through."""
    last: float
    """When the last delivery arrived."""
    by_node: Counter[str]

    @property
    def lost(self) -> int:
        return self.expected - self.arrived

    @property
    def rate(self) -> float:
        return self.arrived / (self.last - self.first) if self.last > self.first else math.nan


def environment(store: dict[str, str]) -> dict[str, str]:
    return store | {
        "LEDGERPORT_FUNCTION_WORKERS": "0",
        "LEDGERPORT_RATE_LIMIT_FACTOR": "10",
        "LEDGERPORT_PASSWORD_HASHING": "fast",
        # Attempts wait at the closed receiver while the invoices are imported.
        "LEDGERPORT_WEBHOOK_TIMEOUT": str(GATED_TIMEOUT),
    }


async def start(served: Nodes, receiver: Sink, count: int) -> list[Node]:
    started = []
    for index in range(1, count + 1):
        node = await served.start(f"node{index}")
        receiver.owners.pids[node.name] = node.pid
        started.append(node)
    return started


async def prepare(http: httpx.AsyncClient, receiver: Sink, webhooks: int) -> Setup:
    tenant = await provision_tenant(http, SCOPES, "Cluster")
    hooks = []
    for index in range(webhooks):
        path = f"/hook{index}"
        await add_webhook(http, tenant, receiver.base + path, [EVENT])
        hooks.append(path)
    customer = await create_customer(http, tenant, "Cluster customer")
    return Setup(tenant, customer, hooks, Feed(EVENT))


async def load(clients: list[httpx.AsyncClient], setup: Setup, invoices: int) -> None:
    """``invoices`` invoices in bulk imports of 200, going round ``clients``."""
    for index, start_at in enumerate(range(0, invoices, BULK)):
        http = clients[index % len(clients)]
        count = min(BULK, invoices - start_at)
        answer(await import_invoices(http, setup.tenant, setup.customer, count))
        setup.imported += count


def expected_pairs(setup: Setup) -> set[tuple[str, str]]:
    return {(hook, event) for hook in setup.hooks for event, _ in setup.feed.events}


async def settle(
    http: httpx.AsyncClient, receiver: Sink, setup: Setup, since: float, within: float
) -> Delivered:
    """Read the feed whole, wait until every delivery arrived (or ``within`` seconds passed),
    and tell."""
    await setup.feed.catch_up(http, setup.tenant)
    if len(setup.feed.events) != setup.imported:
        say(f"   the feed has {len(setup.feed.events)} events, {setup.imported} invoices imported")
    expected = expected_pairs(setup)
    await receiver.wait(lambda: expected <= receiver.ok_pairs, within)
    oks = [a for a in receiver.arrivals if 200 <= a.status < 300]
    firsts: dict[str, Arrival] = {}
    for arrival in oks:
        firsts.setdefault(arrival.delivery_id, arrival)
    times = [a.at for a in firsts.values()]
    return Delivered(
        expected=len(expected),
        arrived=len(expected & receiver.ok_pairs),
        duplicates=receiver.duplicates(),
        first=since,
        last=max(times, default=math.nan),
        by_node=Counter(a.node for a in firsts.values()),
    )


def shares(delivered: Delivered) -> str:
    total = sum(delivered.by_node.values()) or 1
    return ", ".join(
        f"{node} {count} ({count / total:.0%})" for node, count in sorted(delivered.by_node.items())
    )


async def throughput(count: int, args: argparse.Namespace) -> Delivered:
    """Deliver ``args.deliveries`` with ``count`` processes in a fresh database."""
    invoices = args.deliveries // args.webhooks
    with (
        tempfile.TemporaryDirectory(prefix="ledgerport-cluster-") as directory,
        store_env("postgres", Path(directory)) as store,
        nodes(Path(directory), environment(store)) as served,
    ):
        async with sink(delay=args.delay, concurrency=args.concurrency, gated=True) as receiver:
            started = await start(served, receiver, count)
            async with client(started[0].base) as http:
                clients = [http] + [client(node.base) for node in started[1:]]
                try:
                    setup = await prepare(http, receiver, args.webhooks)
                    began = time.monotonic()
                    await load(clients, setup, invoices)
                    imported = time.monotonic() - began
                    released = time.monotonic()
                    receiver.gate.set()
                    delivered = await settle(http, receiver, setup, released, args.timeout)
                finally:
                    for other in clients[1:]:
                        await other.aclose()
        _problems(served)
    say(
        f"   {count} process{'es' if count > 1 else ''}: {delivered.rate:6.0f} deliveries/s"
        f" ({delivered.arrived} in {delivered.last - delivered.first:.1f} s;"
        f" the imports took {imported:.1f} s before); {shares(delivered)};"
        f" duplicates {delivered.duplicates}, lost {delivered.lost}"
    )
    return delivered


async def _held(url: str, receiver: Sink, victim: str, since: float) -> tuple[str, set[str]] | None:
    """The lease of ``victim`` (from its requests on the wire since ``since``) and the
    deliveries it holds; None when the table has no leases to tell."""
    recent = list({a.delivery_id for a in receiver.arrivals if a.node == victim and a.at >= since})
    try:
        rows = await trio.to_thread.run_sync(functools.partial(query, url, LEASE_SQL, recent))
        leases = Counter(str(row["lease"]) for row in rows)
        if not leases:
            return None
        lease = leases.most_common(1)[0][0]
        held = await trio.to_thread.run_sync(functools.partial(query, url, HELD_SQL, lease))
    except asyncpg.PostgresError as error:
        say(f"   (the deliveries' holders cannot be read: {error})")
        return None
    return lease, {str(row["id"]) for row in held}


async def killed(args: argparse.Namespace) -> Delivered:
    """Two processes deliver; the second is killed once ``args.kill_at`` of it arrived."""
    invoices = args.deliveries // args.webhooks
    total = invoices * args.webhooks
    with (
        tempfile.TemporaryDirectory(prefix="ledgerport-cluster-") as directory,
        store_env("postgres", Path(directory)) as store,
        nodes(Path(directory), environment(store)) as served,
    ):
        url = store["LEDGERPORT_DATABASE_URL"]
        async with sink(delay=args.delay, concurrency=args.concurrency, gated=True) as receiver:
            survivor, victim = await start(served, receiver, 2)
            async with client(survivor.base) as http:
                setup = await prepare(http, receiver, args.webhooks)
                await load([http], setup, invoices)
                released = time.monotonic()
                receiver.gate.set()
                goal = int(args.kill_at * total)
                if not await receiver.wait(lambda: len(receiver.first_ok) >= goal, args.timeout):
                    raise RuntimeError(f"{goal} deliveries did not arrive in {args.timeout} s")
                before = await _held(url, receiver, victim.name, time.monotonic() - RECENT)
                victim.kill()
                killed_at = time.monotonic()
                arrived_at_kill = len(receiver.first_ok)
                after = None
                if before is not None:
                    rows = await trio.to_thread.run_sync(
                        functools.partial(query, url, HELD_SQL, before[0])
                    )
                    after = {str(row["id"]) for row in rows}
                sent_by_victim = {a.delivery_id for a in receiver.arrivals if a.node == victim.name}
                delivered = await settle(http, receiver, setup, released, args.timeout)
        _problems(served)
    said = (
        f"   killed {victim.name} when {arrived_at_kill} of {total} had arrived;"
        f" every delivery arrived {delivered.last - killed_at:.1f} s after the kill"
        f"; duplicates {delivered.duplicates}, lost {delivered.lost}"
    )
    say(said)
    if before is None or after is None:
        say("   the killed process's deliveries could not be told apart")
        return delivered
    held = before[1] | after
    first_ok = receiver.first_ok
    sent = {d for d in held if d in sent_by_victim and first_ok.get(d, math.inf) < killed_at}
    waiting = held - sent
    arrivals = sorted(first_ok[d] - killed_at for d in waiting if d in first_ok)
    again = sum(receiver.ok_count[d] - 1 for d in sent)
    say(
        f"   it held {len(held)} deliveries: {len(sent)} it had sent and the receiver had taken"
        f" (their outcome perhaps not recorded), {again} of them sent again;"
        f" {len(waiting)} not yet sent"
    )
    if arrivals:
        say(
            f"   of those not yet sent, the first arrived {arrivals[0]:.1f} s after the kill,"
            f" the last {arrivals[-1]:.1f} s after (the takeover; target 5 s);"
            f" {len(waiting) - len(arrivals)} never arrived"
        )
    elif waiting:
        say("   none of those not yet sent arrived")
    return delivered


def _problems(served: Nodes) -> None:
    problems = served.problems()
    if problems:
        say(f"   server.log: {len(problems)} error lines, the first:")
        for line in problems[:5]:
            say(f"      {line[:300]}")


async def main(args: argparse.Namespace) -> int:
    lost = 0
    with trio.fail_after(args.timeout * 4 + 600):
        if args.phase in ("throughput", "both"):
            say(
                f"\n== throughput: {args.deliveries} deliveries, {args.webhooks} webhooks, the"
                f" receiver answers after {args.delay * 1000:.0f} ms; with 8 attempts in flight"
                f" per webhook a process delivers at most"
                f" {IN_FLIGHT * args.webhooks / args.delay if args.delay else math.inf:.0f}/s"
            )
            one = await throughput(1, args)
            two = await throughput(2, args)
            say(f"   two / one: {two.rate / one.rate:.2f}x (target near 2x)")
            lost += one.lost + two.lost
        if args.phase in ("kill", "both"):
            say(
                f"\n== a node killed: {args.deliveries} deliveries, two processes, the second"
                f" killed with SIGKILL at {args.kill_at:.0%} and not restarted"
            )
            lost += (await killed(args)).lost
    say(f"\nlost in all: {lost}")
    return 1 if lost else 0


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=" ".join((__doc__ or "").split("\n\n")[0].split()),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        epilog="Read the figures as described at the top of bench/cluster.py.",
    )
    parser.add_argument("--deliveries", type=int, default=3000, help="deliveries a load makes")
    parser.add_argument("--webhooks", type=int, default=2, help="webhooks of the app")
    parser.add_argument("--delay", type=float, default=0.05, help="the receiver's answer delay")
    parser.add_argument(
        "--concurrency", type=int, default=64, help="requests the receiver answers at once"
    )
    parser.add_argument(
        "--kill-at", type=float, default=0.33, help="fraction arrived when a node is killed"
    )
    parser.add_argument(
        "--phase", choices=["throughput", "kill", "both"], default="both", help="what to measure"
    )
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds for a load to arrive")
    args = parser.parse_args()
    if not 100 <= args.deliveries <= 100_000:
        parser.error("--deliveries must be 100..100000")
    if not 1 <= args.webhooks <= 20:
        parser.error("--webhooks must be 1..20 (an app's most)")
    if not 0 <= args.delay <= 5:
        parser.error("--delay must be 0..5")
    if not 1 <= args.concurrency <= 1024:
        parser.error("--concurrency must be 1..1024")
    if not 0.05 <= args.kill_at <= 0.95:
        parser.error("--kill-at must be 0.05..0.95")
    if not 10 <= args.timeout <= 3600:
        parser.error("--timeout must be 10..3600")
    return args


if __name__ == "__main__":
    arguments = parse()
    say(
        "cluster: "
        + " ".join(f"--{name.replace('_', '-')}={value}" for name, value in vars(arguments).items())
    )
    sys.exit(trio.run(until_signalled, functools.partial(main, arguments)))
