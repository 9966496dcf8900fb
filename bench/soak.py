"""A soak: a steady mixed load against one served process, and what the process does over time.

Usage::

    .venv/bin/python bench/soak.py [--backend sqlite|postgres|both] [--minutes N] [--rate R]
        [--apps A] [--sample-seconds S] [--settle S]

Per store, one ``ledgerport serve`` (development mode so webhooks may point at loopback, two
sandbox workers, rate limits times ten since every request comes from one address) and ``--apps``
apps (default 2), each installed in a business of its own with customers:read, customers:write
and events:read, two webhooks on customer.created and customer.updated to a real loopback
receiver that answers 500 to one attempt in ten (never twice to the same delivery: the retry,
a minute later by the default schedule, gets a 200), and a hosted function on customer.created
that reads its customer back through ``context.api``.

The load: ``--rate`` requests a second (default 36) for ``--minutes`` (default 30), open loop
(each request starts on its schedule whether the previous ones have answered or not, at most
64 at once), going round the apps, in a fixed cycle of: customer reads, customer lists,
customer creations and updates (each an event: two deliveries, and for a creation a function
run), pages of the Events API (each app follows its own feed), refresh-token rotations (each
app rotates one token family, one refresh at a time, always presenting the newest token), and
token exchanges (an operator session token, then its RFC 8693 exchange: two requests).

Every ``--sample-seconds`` (default 10) a row: the server's CPU use over the window (percent of
one core) and the machine's load average (others' work slows the server too), the server's
resident memory (VmRSS), its open files, its TCP connections (the requests', the receiver's and
the database's), its children (the sandbox workers) and their memory, the requests answered in
the window with their p50 and p99, the window's 5xx and transport errors, and the longest
silence of the server: a prober in a process of its own asks ``GET /healthz`` every 15 ms over
one keep-alive connection; ``gap`` is the longest time between two of its consecutive answers
(15 ms when nothing stalls), ``slowest`` the slowest single answer. A gap with the server's
CPU low and the load average high is the machine's doing, not the server's. ``retry`` counts
the deliveries whose attempt the receiver failed and whose retry is still to come (a minute
later), ``behind`` the other deliveries of the writes answered so far that have not arrived
yet.

When the load ends, the bench reads each app's whole feed, waits (``--settle``, default 150 s:
the retries of failed attempts come a minute later) until every (webhook, event) pair arrived
with a 2xx answer and every function run ended, and reports:

- memory: RSS at warm-up (the first sample after 20% of the run) and at the end, and the growth
  after warm-up in MB an hour (the least-squares slope of the samples; target <= 10 MB/h). Short
  runs give noisy slopes: read them from runs of half an hour or more;
- the sandbox workers' memory, its growth after warm-up the same way, open files and TCP
  connections at warm-up and at the end (each should stay level);
- the longest pause: the longest gap between /healthz answers, over the whole load and after
  warm-up (target < 100 ms);
- p99 of the first third of the run against the last third (steady: near 1x);
- nothing lost: deliveries expected (webhooks times events of the feed), arrived, lost and
  duplicated (same delivery id answered 2xx twice), function runs succeeded against customers
  created, and no 5xx.

The exit code is 1 when a delivery or a run was lost, a run failed or a request got a 5xx.
PostgreSQL runs in a scratch database (tests/e2e/served.py's ``postgres_database``), created for
the run and dropped afterwards; SQLite in a temporary directory.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import math
import random
import sys
import tempfile
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._load import (
    Feed,
    Node,
    Probe,
    Sink,
    Tenant,
    add_webhook,
    answer,
    children,
    client,
    cpu_seconds,
    exchange,
    load_average,
    metric,
    ms,
    nodes,
    open_files,
    percentile,
    provision_tenant,
    put_function,
    refresh,
    rss_mb,
    say,
    session_token,
    sink,
    start_prober,
    tcp_connections,
    until_signalled,
)
from tests.e2e.served import store_env

SCOPES = ["customers:read", "customers:write", "events:read"]
EVENTS = ["customer.created", "customer.updated"]
WEBHOOKS_PER_APP = 2
FAIL_EVERY = 10
"""One attempt in this many is answered 500 (a delivery at most once)."""
MAX_IN_FLIGHT = 64
RECENT_CUSTOMERS = 500
PROBE_INTERVAL = 0.015
WARM_UP = 0.2
"""Fraction of the run after which memory counts as warmed up."""
FUNCTION = """
export async function handler(event, context) {
  const customer = await context.api.get(`/customers/${event.data.id}`);
  return { id: customer.id };
}
"""
MIX: tuple[tuple[str, int], ...] = (
    ("customer read", 9),
    ("customer list", 6),
    ("customer create", 6),
    ("customer update", 3),
    ("events page", 6),
    ("refresh", 4),
    ("exchange", 1),
)
"""Operations of one cycle and how often each comes; an exchange is two requests, the others
one, so a cycle is 36 requests."""
REQUESTS = {"exchange": 2}
TARGET_GROWTH = 10.0
TARGET_PAUSE = 0.100


def cycle() -> list[str]:
    """The operations of :data:`MIX`, each spread evenly over the cycle."""
    placed = [((index + 0.5) / weight, name) for name, weight in MIX for index in range(weight)]
    return [name for _, name in sorted(placed)]


@dataclass(frozen=True)
class Answered:
    at: float
    """time.monotonic() when the answer came."""
    what: str
    latency: float
    status: int
    """0: no answer (a transport error)."""


@dataclass
class App:
    tenant: Tenant
    rotation: str
    """The newest refresh token of the family this app rotates."""
    feed: Feed = field(default_factory=lambda: Feed(",".join(EVENTS)))
    customers: deque[str] = field(default_factory=lambda: deque(maxlen=RECENT_CUSTOMERS))
    created: int = 0
    updated: int = 0
    rotation_turn: trio.Lock = field(default_factory=trio.Lock)
    feed_turn: trio.Lock = field(default_factory=trio.Lock)
    hooks: list[str] = field(default_factory=list)
    """The receiver paths of the app's webhooks."""


@dataclass(frozen=True)
class Sample:
    t: float
    cpu: float
    """The server's CPU use over the window, percent of one core."""
    load: float
    """The machine's load average (one minute)."""
    rss: float
    files: int
    tcp: int
    workers: int
    workers_rss: float
    requests: int
    p50: float
    p99: float
    errors: int
    gap: float
    slowest: float
    retrying: int
    behind: int


@dataclass
class Run:
    answered: list[Answered] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    skipped: int = 0
    """Operations not started because 64 were already in flight."""
    began: float = 0.0
    load_ended: float = 0.0


class Failing:
    """The receiver's policy: every FAIL_EVERY-th attempt gets a 500, unless its delivery has
    had one already."""

    def __init__(self) -> None:
        self.count = 0
        self.failed: set[str] = set()

    def __call__(self, path: str, delivery_id: str) -> int:
        self.count += 1
        if self.count % FAIL_EVERY == 0 and delivery_id not in self.failed:
            self.failed.add(delivery_id)
            return 500
        return 200


class Load:
    """The operations, each timing its requests into ``run.answered``."""

    def __init__(self, http: httpx.AsyncClient, run: Run) -> None:
        self.http = http
        self.run = run
        self.names = itertools.count()
        self.random = random.Random(7)

    async def timed(self, what: str, call: Awaitable[httpx.Response]) -> httpx.Response | None:
        asked = time.monotonic()
        try:
            response: httpx.Response | None = await call
        except httpx.HTTPError:
            response = None
        answered = time.monotonic()
        status = 0 if response is None else response.status_code
        self.run.answered.append(Answered(answered, what, answered - asked, status))
        return response

    async def op(self, name: str, app: App) -> None:
        operations: dict[str, Callable[[App], Awaitable[None]]] = {
            "customer read": self.read,
            "customer list": self.list,
            "customer create": self.create,
            "customer update": self.update,
            "events page": self.events,
            "refresh": self.refresh,
            "exchange": self.exchange,
        }
        await operations[name](app)

    async def read(self, app: App) -> None:
        if not app.customers:
            await self.list(app)
            return
        customer = self.random.choice(app.customers)
        await self.timed(
            "GET /customers/{id}",
            self.http.get(f"/customers/{customer}", headers=app.tenant.bearer),
        )

    async def list(self, app: App) -> None:
        await self.timed(
            "GET /customers",
            self.http.get("/customers", params={"limit": "20"}, headers=app.tenant.bearer),
        )

    async def create(self, app: App) -> None:
        number = next(self.names)
        response = await self.timed(
            "POST /customers",
            self.http.post(
                "/customers",
                json={"name": f"Soak {number}", "email": f"soak{number}@example.com"},
                headers=app.tenant.bearer,
            ),
        )
        if response is not None and response.status_code == 201:
            app.customers.append(response.json()["id"])
            app.created += 1

    async def update(self, app: App) -> None:
        if not app.customers:
            await self.create(app)
            return
        customer = self.random.choice(app.customers)
        response = await self.timed(
            "PATCH /customers/{id}",
            self.http.patch(
                f"/customers/{customer}",
                json={"name": f"Soak {next(self.names)}"},
                headers=app.tenant.bearer,
            ),
        )
        if response is not None and response.status_code == 200:
            app.updated += 1

    async def events(self, app: App) -> None:
        async with app.feed_turn:
            await self.timed("GET /events", app.feed.read_page(self.http, app.tenant))

    async def refresh(self, app: App) -> None:
        async with app.rotation_turn:
            response = await self.timed(
                "refresh_token grant", refresh(self.http, app.tenant, app.rotation)
            )
            if response is not None and response.status_code == 200:
                app.rotation = response.json()["refresh_token"]
                return
            # The rotation may or may not have happened: start a new family, untimed (the next
            # refresh tries again if this fails too).
            try:
                app.rotation = answer(await exchange(self.http, app.tenant))["refresh_token"]
            except (httpx.HTTPError, RuntimeError):
                return

    async def exchange(self, app: App) -> None:
        made = await self.timed("POST /admin/session-tokens", session_token(self.http, app.tenant))
        if made is None or made.status_code != 201:
            return
        await self.timed(
            "token exchange", exchange(self.http, app.tenant, made.json()["sessionToken"])
        )


async def drive(load: Load, apps: list[App], rate: float, seconds: float) -> None:
    """Start the cycle's operations on their schedule for ``seconds``, open loop."""
    schedule = cycle()
    in_flight = 0

    async def one(name: str, app: App) -> None:
        nonlocal in_flight
        try:
            await load.op(name, app)
        finally:
            in_flight -= 1

    began = trio.current_time()
    due = began
    async with trio.open_nursery() as nursery:
        for index in range(int(seconds * rate) + 1):
            if due - began >= seconds:
                break
            await trio.sleep_until(due)
            name = schedule[index % len(schedule)]
            if in_flight >= MAX_IN_FLIGHT:
                load.run.skipped += 1
            else:
                in_flight += 1
                nursery.start_soon(one, name, apps[index % len(apps)])
            due += REQUESTS.get(name, 1) / rate


@dataclass
class Soak:
    """One soak's parts: the served process, the load's record, the prober, the apps and the
    receiver with its policy."""

    node: Node
    run: Run
    probe: Probe
    apps: list[App]
    receiver: Sink
    policy: Failing
    cpu_seen: tuple[float, float] = (math.nan, math.nan)
    """(time.monotonic(), the server's CPU seconds) at the last sample."""

    def waiting(self) -> tuple[int, int]:
        """Deliveries of the writes answered so far that have not arrived: those waiting for
        the retry of an attempt the receiver failed, and the others."""
        expected = sum((app.created + app.updated) * len(app.hooks) for app in self.apps)
        first_ok = self.receiver.first_ok
        retrying = sum(1 for delivery in self.policy.failed if delivery not in first_ok)
        return retrying, max(0, expected - len(self.receiver.ok_pairs) - retrying)

    def sample(self, start: float, end: float) -> Sample:
        """The process as it is now, and the load and probes of ``start`` to ``end``."""
        pid = self.node.pid
        workers = children(pid)
        window = [a for a in self.run.answered if start < a.at <= end]
        latencies = [a.latency for a in window if a.status]
        probed = self.probe.window(start, end)
        retrying, behind = self.waiting()
        used = cpu_seconds(pid)
        seen_at, seen = self.cpu_seen
        self.cpu_seen = (end, used)
        return Sample(
            t=end - self.run.began,
            cpu=100 * (used - seen) / (end - seen_at),
            load=load_average(),
            rss=rss_mb(pid),
            files=open_files(pid),
            tcp=tcp_connections(pid),
            workers=len(workers),
            workers_rss=sum(rss_mb(worker) for worker in workers),
            requests=len(window),
            p50=percentile(latencies, 0.5),
            p99=percentile(latencies, 0.99),
            errors=sum(1 for a in window if a.status == 0 or a.status >= 500),
            gap=max((second.longest_gap for second in probed), default=math.nan),
            slowest=max((second.slowest for second in probed), default=math.nan),
            retrying=retrying,
            behind=behind,
        )

    async def sample_every(self, every: float, seconds: float) -> None:
        previous = self.run.began
        for index in range(1, int(seconds / every) + 1):
            await trio.sleep(max(0.0, self.run.began + index * every - time.monotonic()))
            now = time.monotonic()
            sample = self.sample(previous, now)
            self.run.samples.append(sample)
            previous = now
            _print_sample(sample)


SAMPLE_HEAD = (
    f"{'t s':>7} {'cpu %':>5} {'load':>5} {'RSS MB':>7} {'files':>6} {'tcp':>4}"
    f" {'workers':>7} {'wrk MB':>7}"
    f" {'reqs':>5} {'p50 ms':>7} {'p99 ms':>7} {'5xx':>4} {'gap ms':>7} {'slowest':>7}"
    f" {'retry':>5} {'behind':>6}"
)


def _print_sample(s: Sample) -> None:
    say(
        f"{s.t:7.0f} {s.cpu:5.0f} {s.load:5.1f} {s.rss:7.1f} {s.files:6d} {s.tcp:4d}"
        f" {s.workers:7d} {s.workers_rss:7.1f}"
        f" {s.requests:5d} {ms(s.p50):>7} {ms(s.p99):>7} {s.errors:4d} {ms(s.gap):>7}"
        f" {ms(s.slowest):>7} {s.retrying:5d} {s.behind:6d}"
    )


def growth_per_hour(samples: list[Sample], memory: Callable[[Sample], float]) -> float:
    """Least-squares slope of ``memory`` (MB) over time, MB an hour; NaN with fewer than two
    samples."""
    if len(samples) < 2:
        return math.nan
    mean_t = sum(s.t for s in samples) / len(samples)
    mean_m = sum(memory(s) for s in samples) / len(samples)
    spread = sum((s.t - mean_t) ** 2 for s in samples)
    if spread == 0:
        return math.nan
    slope = sum((s.t - mean_t) * (memory(s) - mean_m) for s in samples) / spread
    return slope * 3600


async def _setup(http: httpx.AsyncClient, receiver: Sink, count: int) -> list[App]:
    apps = []
    for index in range(count):
        tenant = await provision_tenant(http, SCOPES, f"Soak {index}")
        rotation = answer(await exchange(http, tenant))["refresh_token"]
        app = App(tenant, rotation)
        for hook in range(WEBHOOKS_PER_APP):
            path = f"/app{index}/hook{hook}"
            await add_webhook(http, tenant, receiver.base + path, EVENTS)
            app.hooks.append(path)
        await put_function(http, tenant, "lookup", FUNCTION, ["customer.created"])
        apps.append(app)
    return apps


async def _runs_ended(http: httpx.AsyncClient) -> tuple[float, float]:
    succeeded = await metric(http, "ledgerport_function_runs_total", 'outcome="succeeded"')
    failed = await metric(http, "ledgerport_function_runs_total", 'outcome="failed"')
    return succeeded, failed


async def run_backend(backend: str, args: argparse.Namespace) -> bool:
    """One soak on ``backend``; answers whether nothing was lost and nothing failed."""
    seconds = args.minutes * 60
    say(f"\n== {backend}: {args.minutes:g} min at {args.rate:g} requests/s, {args.apps} apps")
    with (
        tempfile.TemporaryDirectory(prefix="ledgerport-soak-") as directory,
        store_env(backend, Path(directory)) as env,
    ):
        env |= {
            "LEDGERPORT_FUNCTION_WORKERS": "2",
            "LEDGERPORT_RATE_LIMIT_FACTOR": "10",
            "LEDGERPORT_PASSWORD_HASHING": "fast",
        }
        with nodes(Path(directory), env) as served:
            node = await served.start("serve")
            run = Run()
            policy = Failing()
            async with sink(policy=policy) as receiver, client(node.base) as http:
                apps = await _setup(http, receiver, args.apps)
                probe_limit = seconds + args.settle + 60
                async with start_prober(node.base, PROBE_INTERVAL, probe_limit) as probe:
                    soak = Soak(node, run, probe, apps, receiver, policy)
                    load = Load(http, run)
                    run.began = time.monotonic()
                    soak.cpu_seen = (run.began, cpu_seconds(node.pid))
                    say(SAMPLE_HEAD)
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(soak.sample_every, args.sample_seconds, seconds)
                        await drive(load, apps, args.rate, seconds)
                    run.load_ended = time.monotonic()
                    ok = await _settle_and_report(http, soak, args)
            problems = served.problems()
    say(f"server.log: {len(problems)} error lines")
    for line in problems[:5]:
        say(f"   {line[:300]}")
    return ok


async def _settle_and_report(http: httpx.AsyncClient, soak: Soak, args: argparse.Namespace) -> bool:
    run, probe, apps, receiver, policy = soak.run, soak.probe, soak.apps, soak.receiver, soak.policy
    for app in apps:
        await app.feed.catch_up(http, app.tenant)
    expected = {(path, event) for app in apps for path in app.hooks for event, _ in app.feed.events}
    settle_began = time.monotonic()
    await receiver.wait(lambda: expected <= receiver.ok_pairs, args.settle)
    delivered_in = time.monotonic() - settle_began
    customers = sum(app.created for app in apps)
    succeeded = failed = 0.0
    for _ in range(int(args.settle) + 1):
        succeeded, failed = await _runs_ended(http)
        if succeeded + failed >= customers or time.monotonic() - settle_began > args.settle:
            break
        await trio.sleep(1.0)
    settled = soak.sample(run.load_ended, time.monotonic())
    say(
        f"{'settled':>7} {settled.cpu:5.0f} {settled.load:5.1f} {settled.rss:7.1f}"
        f" {settled.files:6d} {settled.tcp:4d}"
        f" {settled.workers:7d} {settled.workers_rss:7.1f}"
    )

    _report_requests(run)
    seconds = run.load_ended - run.began
    warm = [s for s in run.samples if s.t >= WARM_UP * seconds]
    growth = growth_per_hour(warm, lambda sample: sample.rss)
    workers_growth = growth_per_hour(warm, lambda sample: sample.workers_rss)
    say("summary:")
    if warm:
        first, last = warm[0], run.samples[-1]
        say(
            f"   RSS {first.rss:.1f} MB at warm-up (t={first.t:.0f} s), {last.rss:.1f} MB at"
            f" the end (t={last.t:.0f} s): {last.rss - first.rss:+.1f} MB;"
            f" growth after warm-up {growth:+.1f} MB/h (target <= {TARGET_GROWTH:g} MB/h)"
        )
        say(
            f"   sandbox workers {first.workers} -> {last.workers},"
            f" their RSS {first.workers_rss:.1f} -> {last.workers_rss:.1f} MB"
            f" ({workers_growth:+.1f} MB/h);"
            f" open files {first.files} -> {last.files}; TCP connections {first.tcp} -> {last.tcp}"
        )
    loaded = probe.window(run.began, run.load_ended)
    worst = max(loaded, key=lambda second: second.longest_gap, default=None)
    warmed = [s for s in loaded if s.at - run.began >= WARM_UP * seconds]
    worst_warm = max(warmed, key=lambda second: second.longest_gap, default=None)
    probe_errors = sum(second.errors for second in loaded)
    if worst is not None and worst_warm is not None:
        say(
            f"   longest pause: {ms(worst.longest_gap)} ms between two /healthz answers at"
            f" t={worst.at - run.began:.0f} s, after warm-up {ms(worst_warm.longest_gap)} ms at"
            f" t={worst_warm.at - run.began:.0f} s (target < {TARGET_PAUSE * 1000:.0f} ms);"
            f" slowest /healthz {ms(max(s.slowest for s in loaded))} ms;"
            f" {sum(s.answers for s in loaded)} probes, {probe_errors} failed"
        )
    thirds = [
        [
            a.latency
            for a in run.answered
            if a.status
            and run.began + part * seconds / 3 < a.at <= run.began + (part + 1) * seconds / 3
        ]
        for part in (0, 2)
    ]
    first_p99, last_p99 = percentile(thirds[0], 0.99), percentile(thirds[1], 0.99)
    say(
        f"   p99 first third {ms(first_p99)} ms, last third {ms(last_p99)} ms"
        f" ({last_p99 / first_p99:.2f}x)"
    )
    arrived = expected & receiver.ok_pairs
    lost = len(expected) - len(arrived)
    writes = sum(app.created + app.updated for app in apps)
    events = sum(len(app.feed.events) for app in apps)
    stray = len(receiver.ok_pairs - expected)
    say(
        f"   deliveries: {len(expected)} expected ({WEBHOOKS_PER_APP} webhooks x {events} events"
        f" of the feed; {writes} writes answered), {len(arrived)} arrived, {lost} lost,"
        f" {receiver.duplicates()} duplicates, {stray} unexpected;"
        f" {len(policy.failed)} attempts answered 500 and retried;"
        f" all arrived {delivered_in:.1f} s after the load"
    )
    missing_runs = customers - int(succeeded) - int(failed)
    say(
        f"   function runs: {customers} customers created, {succeeded:.0f} succeeded,"
        f" {failed:.0f} failed, {missing_runs} not ended"
    )
    server_errors = sum(1 for a in run.answered if a.status >= 500)
    ok = lost == 0 and missing_runs <= 0 and failed == 0 and server_errors == 0
    say(f"   verdict: {'nothing lost, no 5xx' if ok else 'SOMETHING LOST OR FAILED'}")
    return ok


def _report_requests(run: Run) -> None:
    seconds = run.load_ended - run.began
    loaded = [a for a in run.answered if a.at <= run.load_ended]
    say(
        f"requests: {len(loaded)} in {seconds:.0f} s ({len(loaded) / seconds:.1f}/s);"
        f" {run.skipped} not started (64 already in flight)"
    )
    say(
        f"   {'request':28} {'n':>6} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7}"
        f" {'4xx':>4} {'429':>4} {'5xx':>4} {'no answer':>9}"
    )
    for what in sorted({a.what for a in loaded}):
        mine = [a for a in loaded if a.what == what]
        latencies = [a.latency for a in mine if a.status]
        say(
            f"   {what:28} {len(mine):6d} {ms(percentile(latencies, 0.5)):>7}"
            f" {ms(percentile(latencies, 0.99)):>7} {ms(max(latencies, default=math.nan)):>7}"
            f" {sum(1 for a in mine if 400 <= a.status < 500 and a.status != 429):4d}"
            f" {sum(1 for a in mine if a.status == 429):4d}"
            f" {sum(1 for a in mine if a.status >= 500):4d}"
            f" {sum(1 for a in mine if a.status == 0):9d}"
        )


async def main(args: argparse.Namespace) -> int:
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    failed = False
    for backend in backends:
        limit = args.minutes * 60 + args.settle + 300
        with trio.fail_after(limit):
            failed |= not await run_backend(backend, args)
    return 1 if failed else 0


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=" ".join((__doc__ or "").split("\n\n")[0].split()),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        epilog="Read the figures as described at the top of bench/soak.py.",
    )
    parser.add_argument(
        "--backend", choices=["sqlite", "postgres", "both"], default="both", help="the store"
    )
    parser.add_argument("--minutes", type=float, default=30.0, help="length of the load")
    parser.add_argument("--rate", type=float, default=36.0, help="requests a second")
    parser.add_argument("--apps", type=int, default=2, help="apps, each in its own business")
    parser.add_argument(
        "--sample-seconds", type=float, default=10.0, help="seconds between two samples"
    )
    parser.add_argument(
        "--settle", type=float, default=150.0, help="seconds allowed for the last deliveries"
    )
    args = parser.parse_args()
    if not 0.5 <= args.minutes <= 24 * 60:
        parser.error("--minutes must be 0.5..1440")
    if not 1 <= args.rate <= 500:
        parser.error("--rate must be 1..500")
    if not 1 <= args.apps <= 10:
        parser.error("--apps must be 1..10")
    if not 1 <= args.sample_seconds <= 600:
        parser.error("--sample-seconds must be 1..600")
    if not 10 <= args.settle <= 3600:
        parser.error("--settle must be 10..3600")
    return args


if __name__ == "__main__":
    arguments = parse()
    say(
        "soak: "
        + " ".join(f"--{name.replace('_', '-')}={value}" for name, value in vars(arguments).items())
    )
    sys.exit(trio.run(until_signalled, functools.partial(main, arguments)))
