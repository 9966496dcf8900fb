"""A noisy neighbour: how much one app's flood costs another app, on a served instance.

Usage::

    .venv/bin/python bench/noisy_neighbour.py [--backend sqlite|postgres|both] [--samples N]
        [--flood-events N]

Per store, a ``ledgerport serve`` process (two sandbox workers, development mode so webhooks may
point at loopback, rate limits times ten so the flood is not simply refused), two apps each
installed in a business of its own:

- the victim: a webhook on ``customer.created`` to a receiver that answers at once, and a
  function on ``customer.created`` that answers when it started (``Date.now()``);
- the flood: twenty webhooks (an app's most) on ``customer.created`` to an endpoint that accepts
  and never answers (each attempt hangs until the 10-second timeout), and a function on
  ``customer.created`` that loops until its CPU limit ends it; ``--flood-events`` customers
  (default 300: 6,000 deliveries to the dead endpoint and 300 runs of two CPU seconds each).

The victim creates a customer every 200 ms (``--samples`` of them, default 300), alone first and
then again while the flood goes on, and each time measures: the API call's latency; the time
from the answer (the event committed) to the delivery's arrival at its receiver; and the time
from the answer to its function run's start. Reported: p50 and p99 of each, alone and
flooded, and the flooded API p99 as a multiple of the lone one.

Targets (issue: tenant isolation and fairness): flooded, the victim's run starts within 2 s
(p99) and its delivery arrives within 1 s (p99); the flood changes its API p99 by at most 2x.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.e2e.served import Provisioned, provision, served, store_env
from tests.receiver import Answer, receiving

ADMIN_TOKEN = "lp_admin_bench-noisy-neighbour-0123456789"
SCOPES = ["customers:read", "customers:write"]
INTERVAL = 0.2
"""Seconds between two of the victim's customers."""
SETTLE = 20.0
"""Seconds the victim's last deliveries and runs have to arrive."""
FLOOD_CONCURRENCY = 8
RUNS_READ_EVERY = 40
"""Customers between two reads of the victim's runs."""
VICTIM_RUN = "export function handler(event) { return { id: event.data.id, started: Date.now() } }"
FLOOD_RUN = "export function handler() { for (;;) {} }"


@dataclass
class Phase:
    api: list[float] = field(default_factory=list)
    answered: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Customer id to (perf_counter, time.time()) when its creation was answered."""
    delivered: list[float] = field(default_factory=list)
    started: list[float] = field(default_factory=list)


def _quantiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return (values[0], values[0]) if values else (float("nan"), float("nan"))
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return statistics.median(values), cuts[98]


def _ok(response: httpx.Response) -> Any:
    if response.status_code >= 300:
        raise SystemExit(f"{response.request.url}: {response.status_code} {response.text}")
    return response.json() if response.content else None


def _console(base: str, made: Provisioned) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=f"{base}/developer/apps/{made.app_id}",
        headers={"Authorization": f"Bearer {made.developer_token}"},
        timeout=30,
        trust_env=False,
    )


def _api(base: str, made: Provisioned) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=base,
        headers={"Authorization": f"Bearer {made.access_token}"},
        timeout=30,
        trust_env=False,
    )


async def _victim_phase(
    api: httpx.AsyncClient, console: httpx.AsyncClient, fast: Any, samples: int, label: str
) -> Phase:
    phase = Phase()
    seen_before = len(fast.received)
    finished: dict[str, float] = {}
    for index in range(samples):
        began = time.perf_counter()
        made = _ok(await api.post("/customers", json={"name": f"{label} {index}"}))
        phase.api.append(time.perf_counter() - began)
        phase.answered[made["id"]] = (time.perf_counter(), time.time())
        if index % RUNS_READ_EVERY == RUNS_READ_EVERY - 1:
            # The listing shows the 100 most recent runs: read it before they scroll out.
            await _read_runs(console, phase, finished)
        await trio.sleep(max(INTERVAL - (time.perf_counter() - began), 0.0))
    with trio.move_on_after(SETTLE):
        await fast.wait_for(seen_before + samples, within=SETTLE)
    for received, arrived in zip(
        fast.received[seen_before:], fast.arrivals[seen_before:], strict=True
    ):
        customer = json.loads(received.body)["data"]["id"]
        if customer in phase.answered:
            phase.delivered.append(arrived - phase.answered[customer][0])
    deadline = time.monotonic() + SETTLE
    while time.monotonic() < deadline and len(finished) < samples:
        await _read_runs(console, phase, finished)
        await trio.sleep(0.5)
    phase.started = [
        started / 1000 - phase.answered[customer][1] for customer, started in finished.items()
    ]
    return phase


async def _read_runs(console: httpx.AsyncClient, phase: Phase, finished: dict[str, float]) -> None:
    """Each run of the phase's customers that has succeeded: when it started."""
    for run in _ok(await console.get("/functions/quick/runs"))["data"]:
        if run["status"] == "succeeded" and run["result"]["id"] in phase.answered:
            finished[run["result"]["id"]] = run["result"]["started"]


async def _flood(api: httpx.AsyncClient, events: int) -> None:
    async with trio.open_nursery() as nursery:
        limiter = trio.CapacityLimiter(FLOOD_CONCURRENCY)

        async def one(index: int) -> None:
            async with limiter:
                _ok(await api.post("/customers", json={"name": f"Flood {index}"}))

        for index in range(events):
            nursery.start_soon(one, index)


async def run_backend(backend: str, samples: int, flood_events: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ledgerport-bench-") as directory:
        with store_env(backend, Path(directory)) as env:
            env |= {
                "LEDGERPORT_FUNCTION_WORKERS": "2",
                "LEDGERPORT_RATE_LIMIT_FACTOR": "10",
                "LEDGERPORT_PASSWORD_HASHING": "fast",
            }
            with served(Path(directory), ADMIN_TOKEN, env) as server:
                return await _against(server.base, samples, flood_events)


async def _against(base: str, samples: int, flood_events: int) -> dict[str, Any]:
    victim = provision(base, ADMIN_TOKEN, SCOPES, "Victim")
    flood = provision(base, ADMIN_TOKEN, SCOPES, "Flood")
    async with (
        receiving() as fast,
        receiving() as dead,
        _api(base, victim) as victim_api,
        _console(base, victim) as victim_console,
        _api(base, flood) as flood_api,
        _console(base, flood) as flood_console,
    ):
        dead.default = Answer(delay=3600.0)
        _ok(
            await victim_console.post(
                "/webhooks", json={"url": fast.url, "events": ["customer.created"]}
            )
        )
        _ok(
            await victim_console.put(
                "/functions/quick", json={"source": VICTIM_RUN, "events": ["customer.created"]}
            )
        )
        await _victim_phase(victim_api, victim_console, fast, 8, "Warm-up")
        alone = await _victim_phase(victim_api, victim_console, fast, samples, "Alone")
        for _ in range(20):
            _ok(
                await flood_console.post(
                    "/webhooks", json={"url": dead.url, "events": ["customer.created"]}
                )
            )
        _ok(
            await flood_console.put(
                "/functions/spin", json={"source": FLOOD_RUN, "events": ["customer.created"]}
            )
        )
        flood_began = time.perf_counter()
        await _flood(flood_api, flood_events)
        flood_posted = time.perf_counter() - flood_began
        with trio.move_on_after(30):
            await dead.wait_for(150, within=30)  # the flood's attempts hang at the endpoint
        hanging = len(dead.received)
        flooded = await _victim_phase(victim_api, victim_console, fast, samples, "Flooded")
    return {
        "alone": alone,
        "flooded": flooded,
        "flood_posted": flood_posted,
        "hanging": hanging,
        "dead_arrivals": list(dead.arrivals),
    }


def _report(backend: str, result: dict[str, Any], samples: int) -> None:
    alone: Phase = result["alone"]
    flooded: Phase = result["flooded"]
    print(f"\n== {backend}: {samples} victim customers alone, then flooded")  # noqa: T201
    print(  # noqa: T201
        f"   flood: posted in {result['flood_posted']:.1f} s;"
        f" {result['hanging']} attempts hanging at the dead endpoint when the victim began"
    )
    rows = [
        ("API POST /customers", alone.api, flooded.api),
        ("commit to delivery arrival", alone.delivered, flooded.delivered),
        ("commit to run start", alone.started, flooded.started),
    ]
    heads = ("alone p50", "alone p99", "flood p50", "flood p99")
    print(f"   {'':28} " + " ".join(f"{head:>10}" for head in heads) + "  n")  # noqa: T201
    for name, lone, noisy in rows:
        lone_50, lone_99 = _quantiles(lone)
        noisy_50, noisy_99 = _quantiles(noisy)
        print(  # noqa: T201
            f"   {name:28} {lone_50 * 1000:9.1f}ms {lone_99 * 1000:9.1f}ms"
            f" {noisy_50 * 1000:9.1f}ms {noisy_99 * 1000:9.1f}ms  {len(lone)}/{len(noisy)}"
        )
    ratio = _quantiles(flooded.api)[1] / _quantiles(alone.api)[1]
    run_99 = _quantiles(flooded.started)[1]
    delivery_99 = _quantiles(flooded.delivered)[1]
    print(  # noqa: T201
        f"   flooded API p99 / alone API p99: {ratio:.2f}x (target <= 2x);"
        f" run start p99 {run_99:.2f} s (target <= 2 s);"
        f" delivery p99 {delivery_99:.2f} s (target <= 1 s);"
        f" lost: {samples - len(flooded.delivered)} deliveries,"
        f" {samples - len(flooded.started)} runs"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--flood-events", type=int, default=300)
    args = parser.parse_args()
    for backend in ["sqlite", "postgres"] if args.backend == "both" else [args.backend]:
        result = trio.run(run_backend, backend, args.samples, args.flood_events)
        _report(backend, result, args.samples)


if __name__ == "__main__":
    main()
