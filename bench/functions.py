"""Hosted-function runs: warm invocations against bare mini-racer calls, how soon a run starts
after its event's commit, and the service's health while hostile runs go on.

Usage::

    .venv/bin/python bench/functions.py [--runs N] [--backend sqlite|postgres|both]

Measured:

- ``bare``: in a child process (V8 shares no process with the service's event loop), one
  mini-racer isolate with the trivial handler loaded; each call evaluates
  ``handler(<event JSON>)``, as the pool's worker does, and is timed from Python;
- ``pool``: a SandboxPool of one warm worker; each run of the same handler (compiled from its ES
  module, as uploaded) is timed from ``invoke`` to its outcome: the frame to the worker, the
  call, the frame back.

- ``start``: per store, an app with a trivial function on customer.updated, the dispatcher,
  the runner and a warm pool of two in one process (as ``ledgerport serve`` has them); events
  committed one at a time, 20 a second; for each, the time from its commit to its run being
  handed to a worker;
- ``hostile``: a served ``ledgerport serve`` (SQLite, two workers, a 1-second wall limit) with
  four hostile functions on customer.created (an endless loop, a memory bomb, an endless log, a
  promise that never settles); 13 customers make 52 runs, while ``/healthz`` is asked every
  20 ms until every run has ended; the slowest answer is reported.

The targets (issue: hosted functions): a warm invocation costs at most 2x a bare call (p50); a
run starts within 10 ms (p50) of its event's commit; 50 concurrent hostile runs leave
``/healthz`` answering within 1 s throughout.
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import trio
import trio_asyncio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.delivery import bench_platform, installed_app, store_for
from tests.e2e.served import provision, start_server, stop, wait_healthy

from ledgerport import apps, books
from ledgerport.apps import compile_module
from ledgerport.engine import DeliveryEngine, FunctionRunner
from ledgerport.platform import Platform
from ledgerport.runtime import RunOutcome, RunRequest, SandboxPool

HANDLER = "export const handler = (event) => event.data.n + 1"
EVENT = {"id": "dlv_bench", "type": "customer.created", "businessId": "biz_bench", "data": {"n": 1}}
WARM_UP = 200

BARE = """
import json, sys, time
from py_mini_racer import MiniRacer
runs, warm, event = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
racer = MiniRacer()
racer.eval("globalThis.handler = (event) => event.data.n + 1")
times = []
for index in range(warm + runs):
    started = time.perf_counter()
    racer.eval(f"handler({event})")
    if index >= warm:
        times.append(time.perf_counter() - started)
print(json.dumps(times))
"""


def bare(runs: int) -> list[float]:
    done = subprocess.run(
        [sys.executable, "-c", BARE, str(runs), str(WARM_UP), json.dumps(EVENT)],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    times: list[float] = json.loads(done.stdout)
    return times


async def pooled(runs: int) -> list[float]:
    script = compile_module(HANDLER).script
    times: list[float] = []
    pool = SandboxPool(size=1)
    async with trio.open_nursery() as nursery:
        await nursery.start(pool.run)
        for index in range(WARM_UP + runs):
            started = time.perf_counter()
            outcome = await pool.invoke(
                RunRequest(f"run_{index}", "fn_bench:1", script, json.dumps(EVENT))
            )
            if index >= WARM_UP:
                times.append(time.perf_counter() - started)
            assert outcome.result == "2", outcome
        nursery.cancel_scope.cancel()
    return times


START_EVENTS = 200
START_RATE = 20.0
HOSTILE = {
    "loop": "export const handler = () => { for (;;) {} }",
    "bomb": (
        "export const handler = () => { const a = []; for (;;) a.push(new Array(1e5).fill(1)) }"
    ),
    "log": "export const handler = (e, c) => { for (;;) c.log('x'.repeat(1000)) }",
    "pending": "export const handler = () => new Promise(() => {})",
}
HOSTILE_EVENTS = 13
HOSTILE_TIMEOUT = 300.0


async def _provision(platform: Platform, functions: dict[str, str], event: str) -> str:
    """A business with an app holding customers:read installed, and its ``functions`` (name to
    source) on ``event``; answers the business's id."""
    async with platform.store.transaction() as tx:
        business_id, app = await installed_app(tx, platform)
    for name, source in functions.items():
        upload = await apps.prepare_function(app, name=name, source=source, events=[event])
        async with platform.store.transaction() as tx:
            await apps.put_function(tx, now=platform.now(), app=app, upload=upload)
    return business_id


async def start_lags(backend: str) -> list[float]:
    """Commit-to-start of a run per event, the dispatcher, runner and pool in this process."""
    lags: list[float] = []
    committed: dict[str, float] = {}
    async with store_for(backend) as store:
        platform = await bench_platform(store)
        business_id = await _provision(platform, {"trivial": HANDLER}, "customer.updated")
        runner = FunctionRunner(platform, workers=2)
        invoke = runner.pool.invoke

        all_started = trio.Event()

        async def timed(request: RunRequest) -> RunOutcome:
            started = time.perf_counter()
            event_id = json.loads(request.event)["eventId"]
            if event_id in committed:
                lags.append(started - committed.pop(event_id))
                if len(lags) == START_EVENTS:
                    all_started.set()
            return await invoke(request)

        runner.pool.invoke = timed  # type: ignore[method-assign]
        async with trio.open_nursery() as nursery:
            await nursery.start(DeliveryEngine(platform).run)
            await nursery.start(runner.run)
            for _ in range(START_EVENTS):
                async with store.transaction() as tx:
                    event_id = await books.record_event(
                        tx,
                        now=platform.now(),
                        type="customer.updated",
                        data={"id": "cus_bench", "name": "Acme"},
                        business_id=business_id,
                    )
                committed[event_id] = time.perf_counter()
                await trio.sleep(1 / START_RATE)
            with trio.fail_after(60):
                await all_started.wait()
            nursery.cancel_scope.cancel()
    return lags


def hostile() -> tuple[float, float, dict[str, int]]:
    """The slowest /healthz answer while the hostile runs go on, how long they took in all, and
    how they ended (error to count)."""
    admin_token = "lp_admin_" + secrets.token_urlsafe(24)
    env = {"LEDGERPORT_PASSWORD_HASHING": "fast", "LEDGERPORT_FUNCTION_WALL_LIMIT": "1"}
    with tempfile.TemporaryDirectory(prefix="ledgerport-bench-") as directory:
        server = start_server(Path(directory), admin_token, env)
        try:
            wait_healthy(server)
            return _hostile_against(server.base, admin_token)
        finally:
            stop(server.process)


def _hostile_against(base: str, admin_token: str) -> tuple[float, float, dict[str, int]]:
    made = provision(base, admin_token, ["customers:read", "customers:write"], "Hostile")
    console = httpx.Client(
        base_url=f"{base}/developer/apps/{made.app_id}",
        headers={"Authorization": f"Bearer {made.developer_token}"},
        timeout=10,
        trust_env=False,
    )
    api = httpx.Client(
        base_url=base,
        headers={"Authorization": f"Bearer {made.access_token}"},
        timeout=10,
        trust_env=False,
    )
    with console, api:
        for name, source in HOSTILE.items():
            body = {"source": source, "events": ["customer.created"]}
            assert console.put(f"/functions/{name}", json=body).status_code == 200
        started = time.monotonic()
        for index in range(HOSTILE_EVENTS):
            assert api.post("/customers", json={"name": f"Customer {index}"}).status_code == 201
        slowest, outcomes = 0.0, {}
        while time.monotonic() - started < HOSTILE_TIMEOUT:
            asked = time.perf_counter()
            assert api.get("/healthz").status_code == 200
            slowest = max(slowest, time.perf_counter() - asked)
            time.sleep(0.02)
            outcomes = _ended(console)
            if sum(outcomes.values()) == HOSTILE_EVENTS * len(HOSTILE):
                break
        return slowest, time.monotonic() - started, outcomes


def _ended(console: httpx.Client) -> dict[str, int]:
    """How the runs that ended ended: their error, counted."""
    counts: dict[str, int] = {}
    for name in HOSTILE:
        for run in console.get(f"/functions/{name}/runs").json()["data"]:
            if run["status"] in ("succeeded", "failed"):
                counts[str(run["error"])] = counts.get(str(run["error"]), 0) + 1
    return counts


async def _timed_phases(backends: list[str], runs: int) -> None:
    pool_times = await pooled(runs)
    bare_times = bare(runs)
    bare_p50, pool_p50 = statistics.median(bare_times), statistics.median(pool_times)
    print(  # noqa: T201 - the bench's report
        f"trivial handler, {runs} warm runs each\n"
        f"  bare mini-racer call   p50 {bare_p50 * 1e6:7.1f} us\n"
        f"  pool invocation        p50 {pool_p50 * 1e6:7.1f} us"
        f"  ratio {pool_p50 / bare_p50:.2f}x (target <= 2x)",
        flush=True,
    )
    for backend in backends:
        lags = await start_lags(backend)
        print(  # noqa: T201 - the bench's report
            f"{backend}: commit to run start, {len(lags)} events at {START_RATE:g}/s:"
            f" p50 {statistics.median(lags) * 1000:.2f} ms (target <= 10 ms),"
            f" p99 {sorted(lags)[int(0.99 * len(lags))] * 1000:.2f} ms",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    args = parser.parse_args()
    runs = max(100, min(args.runs, 50_000))
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    trio_asyncio.run(_timed_phases, backends, runs)
    slowest, took, outcomes = hostile()
    print(  # noqa: T201 - the bench's report
        f"hostile: {HOSTILE_EVENTS * len(HOSTILE)} runs ended in {took:.1f} s;"
        f" slowest /healthz {slowest * 1000:.0f} ms (target < 1000 ms)\n"
        + "".join(f"  {count:3d} x {error}\n" for error, count in sorted(outcomes.items())),
        end="",
    )


if __name__ == "__main__":
    main()
