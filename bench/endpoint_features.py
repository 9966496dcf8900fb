"""The pipeline from a bulk import to signed deliveries, with the webhook endpoint's features:
each signature scheme (and ordering) in turn on one served process, against a bare httpx client
in the same rounds.

Usage::

    .venv/bin/python bench/endpoint_features.py [--backend sqlite|postgres|both]
        [--signatures S [S ...]] [--ordering none|record] [--invoices I] [--rounds R]
        [--instructions]

For each store a ``ledgerport serve`` process starts as for ``bench/request_path.py``'s
pipeline (tests/e2e/served.py: SQLite in a temporary directory, PostgreSQL in a scratch database
dropped afterwards; ``LEDGERPORT_RATE_LIMIT_FACTOR=1000``, no function workers), and a
receiver on loopback answers 200 at once. Each scheme of ``--signatures`` gets a tenant of its
own (a business with an app installed) whose one webhook, subscribed to ``invoice.created`` and
created with that ``signature`` (and ``--ordering``), posts to a path of its own; the engine
sends up to 8 attempts to it at once.

A measurement is request_path.py's pipeline: ``--invoices`` invoices go through
``POST /invoices/bulk-import``, 200 a request, one request after another, and the deliveries a
second from the first import request to the receipt of the last delivery are compared with a
bare httpx client (8 one-connection clients, the engine's shape) posting as many signed bodies
of the same size to the same receiver right after; also the ingest rate (invoices a second
until the last import is answered) and the drain (last receipt after the last import answer).
Beside the rates, what the pipeline cost in CPU: the served process's CPU time (every thread of
it: on SQLite the database's work too) and, on PostgreSQL, the CPU time of the database's
backends (the processes whose title names the scratch database), each in microseconds per
delivery over the measurement (ingest included). The rates move with whatever else the machine
runs; the CPU a delivery costs moves much less.

After a warm-up import, ``--rounds`` rounds each measure every scheme once, the schemes taking
turns in an order that rotates from round to round, so that whatever else the machine does
falls on each alike; each scheme's figures are the median of its rounds, and each scheme's
ratio is also given against ``stripe``'s (the spec's scheme) when it was measured.

With ``--instructions`` the served process runs under valgrind's callgrind, instrumentation on
for each measurement alone (from the first import request to 3 s after the last receipt, so
that the last outcomes are written), and what is printed is the instructions a delivery costs
(thousands; every thread of the served process, not the WAL's syncer nor PostgreSQL's
backends), which is the same from run to run whatever else the machine does (see
``bench/request_instructions.py``); the rates, under valgrind, mean nothing then, and the
bare client is left out. The recorder lingers 50 ms of wall time for a batch, so under valgrind
its batches are smaller than at full speed: what a batch costs weighs more in the count.

A webhook made with the defaults (``stripe``, no ordering) is created with the fields the spec
had before the endpoint features (``url``, ``events``) alone, so the script measures a checkout
from before them the same way.

Targets (issue: webhook endpoints beyond the spec): the pipeline at least 0.8x the bare client
on both stores; ``standard`` within 5% of ``stripe``; ``standard-asymmetric`` measured.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import os
import re
import shutil
import stat
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tests.e2e.served as served_module
from bench._load import (
    Sink,
    Tenant,
    answer,
    client,
    cpu_seconds,
    create_customer,
    import_invoices,
    load_average,
    nodes,
    provision_tenant,
    say,
    sink,
    until_signalled,
)
from bench.request_path import bare
from tests.e2e.served import store_env

SCHEMES = ("stripe", "standard", "standard-asymmetric")
SCOPES = ["invoices:read", "invoices:write", "customers:read", "customers:write"]
PER_IMPORT = 200
TIMEOUT = 900
BODY_SIZE = len(json.dumps({"id": "evt_", "type": "invoice.created", "data": {}})) + 420
"""The size of the bare client's bodies: about a delivery's of one imported invoice (as
request_path.py posts)."""
SETTLE = 3.0
"""Seconds counted after the last receipt, under callgrind: the last outcomes are written."""


@dataclass(frozen=True)
class Endpoint:
    """A scheme's tenant, its customer and the path its webhook posts to."""

    scheme: str
    tenant: Tenant
    customer: str
    path: str


@dataclass(frozen=True)
class Figures:
    """One measurement of the pipeline."""

    rate: float
    """Deliveries a second, from the first import request to the last receipt."""
    bare: float
    """The bare client's posts a second, right after."""
    ingest: float
    """Invoices a second until the last import was answered."""
    drain: float
    """Seconds from the last import's answer to the last receipt."""
    served_cpu: float
    """Microseconds of the served process's CPU a delivery, over the measurement."""
    database_cpu: float
    """Microseconds of the PostgreSQL backends' CPU a delivery (0 on SQLite)."""
    instructions: float = math.nan
    """Thousands of instructions of the served process a delivery (NaN: not counted)."""

    @property
    def ratio(self) -> float:
        return self.rate / self.bare


async def add_endpoint(
    http: httpx.AsyncClient, scheme: str, ordering: str, receiver: Sink
) -> Endpoint:
    """A tenant whose webhook signs in ``scheme`` and orders as ``ordering`` says."""
    tenant = await provision_tenant(http, SCOPES, f"Pipeline {scheme}")
    path = f"/hook/{scheme}"
    fields: dict[str, object] = {"url": f"{receiver.base}{path}", "events": ["invoice.created"]}
    if scheme != "stripe":
        fields["signature"] = scheme
    if ordering != "none":
        fields["ordering"] = ordering
    answer(await http.post(f"{tenant.console}/webhooks", json=fields, headers=tenant.developer))
    customer = await create_customer(http, tenant, f"Pipeline customer {scheme}")
    return Endpoint(scheme, tenant, customer, path)


def database_cpu(database_url: str) -> float:
    """CPU seconds used so far by the PostgreSQL backends of ``database_url``'s database, those
    alive now (a backend's process title names its database); 0 for SQLite."""
    if not database_url.startswith("postgres"):
        return 0.0
    name = urlsplit(database_url).path.lstrip("/").encode()
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            title = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if title.startswith(b"postgres:") and name in title:
            used = cpu_seconds(int(entry.name))
            total += 0.0 if math.isnan(used) else used
    return total


@dataclass(frozen=True)
class Served:
    """The served process's id and its database's URL; ``counts``: the directory of its
    callgrind dumps when it runs under callgrind."""

    pid: int
    database_url: str
    counts: Path | None = None

    def cpu(self) -> tuple[float, float]:
        """CPU seconds used so far: the served process's and its database backends'."""
        return cpu_seconds(self.pid), database_cpu(self.database_url)

    def count(self, *args: str) -> None:
        """Tell the process's callgrind ``args`` (``--zero``, ``--instr=on``...)."""
        subprocess.run(["callgrind_control", *args, str(self.pid)], check=True, capture_output=True)

    def counted(self, label: str) -> int:
        """Dump the counts under ``label``; answers the instructions counted since zeroed."""
        assert self.counts is not None
        self.count(f"--dump={label}")
        dumps = sorted(self.counts.glob(f"callgrind.{self.pid}.*"), key=os.path.getmtime)
        total = re.search(r"^totals: (\d+)", dumps[-1].read_text(), re.MULTILINE)
        assert total is not None, dumps[-1]
        return int(total.group(1))


async def pipeline_once(
    http: httpx.AsyncClient, receiver: Sink, endpoint: Endpoint, invoices: int, served: Served
) -> Figures:
    """Import ``invoices`` invoices of ``endpoint``'s tenant and wait for their deliveries; then
    the bare client's rate."""
    before = len(receiver.first_ok)
    if served.counts is not None:
        served.count("--zero")
        served.count("--instr=on")
    cpu_before = served.cpu()
    started = time.monotonic()
    left = invoices
    while left:
        count = min(PER_IMPORT, left)
        answer(await import_invoices(http, endpoint.tenant, endpoint.customer, count))
        left -= count
    imported = time.monotonic()
    done = await receiver.wait(lambda: len(receiver.first_ok) >= before + invoices, TIMEOUT)
    if not done:
        raise RuntimeError(f"{len(receiver.first_ok) - before} of {invoices} deliveries arrived")
    instructions = math.nan
    if served.counts is not None:
        await trio.sleep(SETTLE)
        served.count("--instr=off")
        instructions = served.counted(endpoint.scheme) / invoices / 1000
    cpu_after = served.cpu()
    # Delivery ids are unique: the first receipts since ``before`` are this import's.
    last = max(list(receiver.first_ok.values())[before:])
    baseline = math.nan if served.counts else await bare(receiver, invoices, BODY_SIZE)
    per_delivery = [(b - a) / invoices * 1e6 for a, b in zip(cpu_before, cpu_after, strict=True)]
    return Figures(
        rate=invoices / (last - started),
        bare=baseline,
        ingest=invoices / (imported - started),
        drain=last - imported,
        served_cpu=per_delivery[0],
        database_cpu=per_delivery[1],
        instructions=instructions,
    )


async def run_backend(backend: str, args: argparse.Namespace) -> None:
    say(
        f"\n== {backend}: {args.invoices} invoices a measurement, {args.rounds} rounds,"
        f" ordering {args.ordering}; load average {load_average():.2f}"
    )
    # A scratch PostgreSQL database is made and dropped with asyncio.run, which no trio task
    # may call: the store's context is entered and left in a worker thread.
    stack = contextlib.ExitStack()
    try:
        directory = stack.enter_context(
            tempfile.TemporaryDirectory(prefix="ledgerport-endpoint-features-")
        )
        store = await trio.to_thread.run_sync(
            stack.enter_context, store_env(backend, Path(directory))
        )
        counts = None
        if args.instructions:
            counts = Path(directory) / "counts"
            counts.mkdir()
            stack.enter_context(under_callgrind(counts))
        await _run_served(args, Path(directory), store, counts)
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(stack.close)


@contextlib.contextmanager
def under_callgrind(counts: Path) -> Iterator[None]:
    """Served processes started in the block run under callgrind, instrumentation off, their
    dumps in ``counts``."""
    wrapper = counts / "python"
    wrapper.write_text(
        "#!/bin/sh\n"
        "exec valgrind --tool=callgrind --instr-atstart=no"
        f' --callgrind-out-file={counts}/callgrind.%p {sys.executable} "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    executable, timeout = sys.executable, served_module.STARTUP_TIMEOUT
    sys.executable, served_module.STARTUP_TIMEOUT = str(wrapper), 600.0
    try:
        yield
    finally:
        sys.executable, served_module.STARTUP_TIMEOUT = executable, timeout


async def _run_served(
    args: argparse.Namespace, directory: Path, store: dict[str, str], counts: Path | None
) -> None:
    env = store | {
        "LEDGERPORT_FUNCTION_WORKERS": "0",
        "LEDGERPORT_RATE_LIMIT_FACTOR": "1000",
        "LEDGERPORT_PASSWORD_HASHING": "fast",
    }
    figures: dict[str, list[Figures]] = {scheme: [] for scheme in args.signatures}
    with nodes(directory, env) as served:
        node = await served.start("bench")
        process = Served(node.pid, store["LEDGERPORT_DATABASE_URL"], counts)
        async with sink() as receiver, client(node.base) as http:
            # The server builds its OpenAPI document in a worker thread as it starts (seconds of
            # CPU): asking for it waits until that is done, so it does not slow the first round.
            answer(await http.get("/openapi.json", timeout=120 if counts is None else 1200))
            endpoints = [
                await add_endpoint(http, scheme, args.ordering, receiver)
                for scheme in args.signatures
            ]
            for endpoint in endpoints:  # warm-up: each endpoint's first connection and keys
                await pipeline_once(http, receiver, endpoint, PER_IMPORT, process)
            for round_ in range(args.rounds):
                shift = round_ % len(endpoints)
                for endpoint in endpoints[shift:] + endpoints[:shift]:
                    measured = await pipeline_once(http, receiver, endpoint, args.invoices, process)
                    figures[endpoint.scheme].append(measured)
                    say(
                        f"   round {round_ + 1} {endpoint.scheme:<20}"
                        f" {measured.rate:6.0f} deliveries/s, bare {measured.bare:6.0f}/s:"
                        f" {measured.ratio:.2f}x; ingest {measured.ingest:.0f} invoices/s,"
                        f" drain {measured.drain:.2f} s; CPU a delivery {measured.served_cpu:.0f}"
                        f" us served, {measured.database_cpu:.0f} us database;"
                        f" {measured.instructions:.0f} thousand instructions;"
                        f" load average {load_average():.2f}"
                    )
        problems = served.problems()
    report(figures)
    if problems:
        say(f"   server.log: {len(problems)} error lines, the first: {problems[0][:300]}")


def report(figures: dict[str, list[Figures]]) -> None:
    """Each scheme's medians, and its ratio against stripe's (the medians of the rounds' own
    ratios)."""
    say(
        f"   {'median of rounds':<20} {'pipeline/bare':>13} {'deliveries/s':>12} {'bare/s':>8}"
        f" {'ingest/s':>9} {'drain':>7} {'vs stripe':>9} {'CPU us served':>13}"
        f" {'CPU us database':>15} {'instructions':>12} {'vs stripe':>9}"
    )
    stripe = figures.get("stripe")
    for scheme, measured in figures.items():
        against = counted_against = "-"
        if stripe is not None and scheme != "stripe":
            rounds = list(zip(measured, stripe, strict=True))
            against = f"{statistics.median(m.ratio / s.ratio for m, s in rounds):.3f}x"
            counted_against = (
                f"{statistics.median(m.instructions / s.instructions for m, s in rounds):.3f}x"
            )
        say(
            f"   {scheme:<20}"
            f" {statistics.median(m.ratio for m in measured):12.2f}x"
            f" {statistics.median(m.rate for m in measured):12.0f}"
            f" {statistics.median(m.bare for m in measured):8.0f}"
            f" {statistics.median(m.ingest for m in measured):9.0f}"
            f" {statistics.median(m.drain for m in measured):6.2f}s"
            f" {against:>9}"
            f" {statistics.median(m.served_cpu for m in measured):13.0f}"
            f" {statistics.median(m.database_cpu for m in measured):15.0f}"
            f" {statistics.median(m.instructions for m in measured):12.0f}"
            f" {counted_against:>9}"
        )


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
    parser.add_argument(
        "--signatures",
        nargs="+",
        choices=SCHEMES,
        default=list(SCHEMES),
        help="the schemes measured, each with an endpoint of its own",
    )
    parser.add_argument("--ordering", choices=["none", "record"], default="none")
    parser.add_argument("--invoices", type=int, default=3000, help="invoices a measurement")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every scheme")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count the served process's instructions a delivery under callgrind (no timing)",
    )
    args = parser.parse_args()
    args.signatures = list(dict.fromkeys(args.signatures))
    if args.instructions and shutil.which("valgrind") is None:
        parser.error("--instructions needs valgrind (apt-get install -y valgrind)")
    if not 200 <= args.invoices <= 30000:
        parser.error("--invoices must be 200..30000")
    if not 1 <= args.rounds <= 20:
        parser.error("--rounds must be 1..20")
    return args


if __name__ == "__main__":
    arguments = parse()
    sys.exit(trio.run(until_signalled, functools.partial(main, arguments)))
