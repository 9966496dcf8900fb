"""Fair shares per developer: what one developer's apps, 1, 4 or 16 of them, cost another
developer's run, on a served instance.

Usage::

    .venv/bin/python bench/fair_shares.py [--backend sqlite|postgres|both] [--samples N]
        [--apps 1,4,16]

Per store, a ``ledgerport serve`` process (two sandbox workers, development mode, rate limits
times ten) and two developers:

- the victim: an app of its own, installed in a business, with a function on
  ``customer.created`` that answers when it started (``Date.now()``);
- the flood: for each round, a developer with that many apps, each installed in a business of
  its own (a business keeps at most half the workers whatever apps its events run, so apps
  sharing one would be held by that), each with a function on ``customer.created`` that spins
  for FLOOD_SPIN seconds and ends (within its CPU limit: a run killed at its limit costs its
  worker's replacement, which any run may then wait for, whatever the shares), and a backlog of
  those runs (FLOOD_RUNS in all, shared out among the apps, at least two each).

The victim creates a customer every INTERVAL (``--samples`` of them, default 30), first with no
flood, then in each round while the flood's backlog is being run, and each time measures its
wait: from the answer (the event committed) to its run's start; a run that has not started
SETTLE seconds after the last customer is left out (the ``n`` column). After a round the
flood's apps are suspended, so what is left of their backlog fails unrun, and the next round
begins once nothing of it is queued.

Reported per round: the victim's wait (p50, p99, max) and its p50 and p99 as multiples of the
same with no flood, measured in the same run on the same server. Target (issue 44): the wait
does not grow with the number of the flood's apps: a developer's apps together keep one app's
share of the workers (one of two), so the victim's run never waits for a flood run.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.e2e.served import Provisioned, provision, served, store_env

ADMIN_TOKEN = "lp_admin_bench-fair-shares-0123456789abcdef"
SCOPES = ["customers:read", "customers:write"]
INTERVAL = 0.5
"""Seconds between two of the victim's customers."""
FLOOD_RUNS = 32
"""The flood's backlog in each round, shared out among its apps (at least two each): more
than its runs can end while the victim measures."""
FLOOD_SPIN = 1.5
"""Seconds each of the flood's runs holds its worker, computing."""
SETTLE = 60.0
"""Seconds the victim's last runs, or the end of a flood's backlog, have to come."""
VICTIM_RUN = "export function handler(event) { return { id: event.data.id, started: Date.now() } }"
FLOOD_RUN = (
    "export function handler() {"
    f" const end = Date.now() + {FLOOD_SPIN * 1000:.0f}; while (Date.now() < end) {{}} }}"
)


def _ok(response: httpx.Response) -> Any:
    if response.status_code >= 300:
        raise SystemExit(f"{response.request.url}: {response.status_code} {response.text}")
    return response.json() if response.content else None


def _client(base: str, token: str, path: str = "") -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=f"{base}{path}",
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
        trust_env=False,
    )


async def _flood_developer(base: str, count: int, round_name: str) -> list[Provisioned]:
    """A new developer with ``count`` apps, each with the spinning function."""
    first = await trio.to_thread.run_sync(provision, base, ADMIN_TOKEN, SCOPES, round_name)
    made = [first]
    for index in range(1, count):
        sibling = functools.partial(
            provision,
            base,
            ADMIN_TOKEN,
            SCOPES,
            f"{round_name} {index}",
            developer_id=first.user_id,
        )
        made.append(await trio.to_thread.run_sync(sibling))
    for app in made:
        async with _client(base, app.developer_token, f"/developer/apps/{app.app_id}") as console:
            _ok(
                await console.put(
                    "/functions/spin", json={"source": FLOOD_RUN, "events": ["customer.created"]}
                )
            )
    return made


async def _start_flood(base: str, flood: list[Provisioned]) -> None:
    """The flood's backlog: FLOOD_RUNS runs shared out among its apps, at least two each."""
    each = max(2, -(-FLOOD_RUNS // len(flood)))
    async with trio.open_nursery() as nursery:
        for app in flood:

            async def customers(app: Provisioned = app) -> None:
                async with _client(base, app.access_token) as api:
                    for index in range(each):
                        _ok(await api.post("/customers", json={"name": f"Flood {index}"}))

            nursery.start_soon(customers)


async def _end_flood(base: str, flood: list[Provisioned]) -> None:
    """Suspend the flood's apps and wait until none of their runs is queued any more."""
    async with _client(base, ADMIN_TOKEN) as admin:
        for app in flood:
            _ok(await admin.post(f"/admin/apps/{app.app_id}/status", json={"status": "SUSPENDED"}))
    deadline = time.monotonic() + SETTLE
    for app in flood:
        async with _client(base, app.developer_token, f"/developer/apps/{app.app_id}") as console:
            while time.monotonic() < deadline:
                waiting = _ok(await console.get("/functions/spin/runs?status=queued,retrying"))
                if not waiting["data"]:
                    break
                await trio.sleep(0.5)


async def _victim_waits(base: str, victim: Provisioned, samples: int, label: str) -> list[float]:
    """The victim's ``samples`` customers, one every INTERVAL: each one's wait from its
    creation's answer to its run's start, in seconds."""
    answered: dict[str, float] = {}
    started: dict[str, float] = {}
    async with (
        _client(base, victim.access_token) as api,
        _client(base, victim.developer_token, f"/developer/apps/{victim.app_id}") as console,
    ):
        for index in range(samples):
            began = time.perf_counter()
            made = _ok(await api.post("/customers", json={"name": f"{label} {index}"}))
            answered[made["id"]] = time.time()
            await trio.sleep(max(INTERVAL - (time.perf_counter() - began), 0.0))
        deadline = time.monotonic() + SETTLE
        while time.monotonic() < deadline and len(started) < samples:
            for run in _ok(await console.get("/functions/quick/runs"))["data"]:
                if run["status"] == "succeeded" and run["result"]["id"] in answered:
                    started[run["result"]["id"]] = run["result"]["started"] / 1000
            await trio.sleep(0.5)
    return [started[customer] - answered[customer] for customer in started]


async def run_backend(backend: str, samples: int, rounds: list[int]) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory(prefix="ledgerport-bench-") as directory:
        with store_env(backend, Path(directory)) as env:
            env |= {
                "LEDGERPORT_FUNCTION_WORKERS": "2",
                "LEDGERPORT_RATE_LIMIT_FACTOR": "10",
                "LEDGERPORT_PASSWORD_HASHING": "fast",
            }
            with served(Path(directory), ADMIN_TOKEN, env) as server:
                return await _against(server.base, samples, rounds)


async def _against(base: str, samples: int, rounds: list[int]) -> dict[str, list[float]]:
    victim = await trio.to_thread.run_sync(provision, base, ADMIN_TOKEN, SCOPES, "Victim")
    async with _client(base, victim.developer_token, f"/developer/apps/{victim.app_id}") as console:
        _ok(
            await console.put(
                "/functions/quick", json={"source": VICTIM_RUN, "events": ["customer.created"]}
            )
        )
    await _victim_waits(base, victim, 4, "Warm-up")
    waits = {"none": await _victim_waits(base, victim, samples, "Alone")}
    for count in rounds:
        flood = await _flood_developer(base, count, f"Flood of {count}")
        await _start_flood(base, flood)
        waits[f"{count} apps"] = await _victim_waits(base, victim, samples, f"Flooded {count}")
        await _end_flood(base, flood)
    return waits


def _summary(values: list[float]) -> tuple[float, float, float]:
    if not values:
        return (float("nan"),) * 3
    if len(values) < 2:
        return values[0], values[0], values[0]
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return statistics.median(values), cuts[98], max(values)


def _report(backend: str, waits: dict[str, list[float]], samples: int) -> None:
    alone_50, alone_99, _ = _summary(waits["none"])
    print(  # noqa: T201
        f"\n== {backend}: the victim's wait from its event's commit to its run's start,"
        f" {samples} runs a round; the flood: one developer's apps, {FLOOD_RUNS} runs of"
        f" {FLOOD_SPIN:g} s"
    )
    heads = ("p50", "p99", "max", "p50 ratio", "p99 ratio")
    print(f"   {'flood':10} " + " ".join(f"{head:>10}" for head in heads) + "  n")  # noqa: T201
    for name, values in waits.items():
        p50, p99, most = _summary(values)
        print(  # noqa: T201
            f"   {name:10} {p50 * 1000:8.1f}ms {p99 * 1000:8.1f}ms {most * 1000:8.1f}ms"
            f" {p50 / alone_50:9.2f}x {p99 / alone_99:9.2f}x  {len(values)}/{samples}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--apps", default="1,4,16", help="the flood's apps in each round")
    args = parser.parse_args()
    rounds = [int(count) for count in args.apps.split(",")]
    for backend in ["sqlite", "postgres"] if args.backend == "both" else [args.backend]:
        waits = trio.run(run_backend, backend, args.samples, rounds)
        _report(backend, waits, args.samples)


if __name__ == "__main__":
    main()
