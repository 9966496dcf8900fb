"""Schedules of hosted functions: how soon after a tick the runs of 1,000 installations start,
on one process.

Usage::

    .venv/bin/python bench/schedules.py [--installations N] [--workers N] [--apps N]
        [--backend sqlite|postgres|both]

Per store: ``--apps`` apps (one by default: the worst case for the fair shares, every run one
app's, so it keeps half the workers at most), each of a developer of its own and with a trivial
function on the schedule ``* * * * *``, installed in ``--installations`` businesses in all
(round robin); then, in one process as ``ledgerport serve`` has them, the function runner with
``--workers`` warm workers (the default of ``LEDGERPORT_FUNCTION_WORKERS``) and the scheduler's
ticker. Once the pool is warm, the platform's clock (the real one, shifted) is set two seconds
before the next tick, so no one waits for a whole minute. For each run, the time from the tick
to its run being handed to a worker; the figure is the last of them: every installation's run
started within it.

The baseline, in the same run and per store: as many runs of the same kind queued at once by
events instead (one app installed in one business, ``--installations`` events committed in one
transaction and fanned out by the dispatcher), from their commit to the last run's start. The
ratio is what a tick of many installations costs beyond the same runs in one business: the
ticker, and the runner's fair choice among one tenant per installation.

The target (issue: hosted functions, schedules): 1,000 installations on a one-minute schedule
start their runs within 10 s of the tick, on one process.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import trio
import trio_asyncio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._load import load_average, percentile, say
from bench.delivery import bench_platform, store_for

from ledgerport import apps, books
from ledgerport.engine import DeliveryEngine, FunctionRunner, ScheduleTicker
from ledgerport.platform import Platform
from ledgerport.runtime import RunOutcome, RunRequest

WORKERS = 2
"""LEDGERPORT_FUNCTION_WORKERS' default."""
HANDLER = "export const handler = (event) => event.data.scheduledAt"
EVENT_HANDLER = "export const handler = (event) => event.data.id"
LEAD = 2.0
"""Seconds from the start to the tick."""
TIMEOUT = 120.0


class Shifted:
    """The real clock, shifted by ``shift`` seconds."""

    def __init__(self, shift: float) -> None:
        self.shift = shift

    def now(self) -> float:
        return time.time() + self.shift


async def provision(platform: Platform, installations: int, app_count: int) -> float:
    """``app_count`` apps each of its own developer and with the scheduled function, installed
    in ``installations`` businesses in all (round robin), all owned by one user; answers the
    functions' next tick."""
    now = platform.now()
    async with platform.store.transaction() as tx:
        user = await books.create_user(
            tx, now=now, email="schedules@example.com", password_hash="unused"
        )
        made = []
        for index in range(app_count):
            developer = await books.create_user(
                tx, now=now, email=f"developer{index}@example.com", password_hash="unused"
            )
            app, _ = await apps.create_app(
                tx,
                platform.keyring,
                now=now,
                name=f"Scheduled {index}",
                type="CONFIDENTIAL",
                redirect_uris=["https://bench.example.com/cb"],
                scopes=["customers:read"],
                developer_user_id=developer.id,
                reviewed=True,
            )
            made.append(app)
        for index in range(installations):
            business = await books.create_business(tx, now=now, name=f"Business {index}")
            await books.set_membership(
                tx, now=now, business_id=business.id, user_id=user.id, role="owner", active=True
            )
            await apps.install(
                tx,
                now=now,
                app_id=made[index % app_count].id,
                business_id=business.id,
                user_id=user.id,
                scopes=["customers:read"],
            )
    ticks = set()
    for app in made:
        upload = await apps.prepare_function(
            app, name="every-minute", source=HANDLER, events=[], schedule="* * * * *"
        )
        async with platform.store.transaction() as tx:
            function = await apps.put_function(tx, now=platform.now(), app=app, upload=upload)
        assert function.next_run_at is not None
        ticks.add(function.next_run_at)
    if len(ticks) > 1:
        raise SystemExit("provisioning went past a whole minute: run it again")
    return ticks.pop()


async def tick_to_start(
    backend: str, installations: int, workers: int, app_count: int
) -> tuple[float, list[float], float]:
    """The tick, each run's start after it (seconds), and when the runs were queued after it."""
    async with store_for(backend) as store:
        platform = await bench_platform(store)
        clock = Shifted(0.0)
        platform.clock = clock
        tick = await provision(platform, installations, app_count)
        runner = FunctionRunner(platform, workers=workers)
        ticker = ScheduleTicker(platform)
        invoke = runner.pool.invoke
        starts: list[float] = []
        queued_after: list[float] = []
        all_started = trio.Event()

        async def timed(request: RunRequest) -> RunOutcome:
            starts.append(clock.now() - tick)
            if len(starts) == installations:
                all_started.set()
            scheduled_at = json.loads(request.event)["data"]["scheduledAt"]
            assert scheduled_at.endswith(":00Z"), scheduled_at
            return await invoke(request)

        runner.pool.invoke = timed  # type: ignore[method-assign]
        tick_once = ticker.tick_once

        async def timed_tick() -> list[object]:
            ticks = await tick_once()
            if any(t.runs for t in ticks):
                queued_after.append(clock.now() - tick)
            return ticks  # type: ignore[return-value]

        ticker.tick_once = timed_tick  # type: ignore[method-assign,assignment]
        async with trio.open_nursery() as nursery:
            await nursery.start(runner.run)  # its pool warm
            clock.shift = tick - LEAD - time.time()
            await nursery.start(ticker.run)
            with trio.fail_after(TIMEOUT):
                await all_started.wait()
            await runner.drain()
            nursery.cancel_scope.cancel()
    return tick, starts, queued_after[0]


async def event_runs(backend: str, runs: int, workers: int) -> list[float]:
    """The baseline: ``runs`` events committed at once in one business, each running the
    function; each run's start after the commit (seconds)."""
    async with store_for(backend) as store:
        platform = await bench_platform(store)
        now = platform.now()
        async with store.transaction() as tx:
            user = await books.create_user(
                tx, now=now, email="events@example.com", password_hash="unused"
            )
            app, _ = await apps.create_app(
                tx,
                platform.keyring,
                now=now,
                name="On events",
                type="CONFIDENTIAL",
                redirect_uris=["https://bench.example.com/cb"],
                scopes=["customers:read"],
                developer_user_id=user.id,
                reviewed=True,
            )
            business = await books.create_business(tx, now=now, name="One business")
            await books.set_membership(
                tx, now=now, business_id=business.id, user_id=user.id, role="owner", active=True
            )
            await apps.install(
                tx,
                now=now,
                app_id=app.id,
                business_id=business.id,
                user_id=user.id,
                scopes=["customers:read"],
            )
        upload = await apps.prepare_function(
            app, name="on-event", source=EVENT_HANDLER, events=["customer.updated"]
        )
        async with store.transaction() as tx:
            await apps.put_function(tx, now=platform.now(), app=app, upload=upload)
        runner = FunctionRunner(platform, workers=workers)
        invoke = runner.pool.invoke
        starts: list[float] = []
        committed = [0.0]
        all_started = trio.Event()

        async def timed(request: RunRequest) -> RunOutcome:
            if json.loads(request.event)["type"] == "customer.updated":
                starts.append(time.perf_counter() - committed[0])
                if len(starts) == runs:
                    all_started.set()
            return await invoke(request)

        runner.pool.invoke = timed  # type: ignore[method-assign]
        async with trio.open_nursery() as nursery:
            await nursery.start(runner.run)
            await nursery.start(DeliveryEngine(platform).run)
            async with store.transaction() as tx:
                for index in range(runs):
                    await books.record_event(
                        tx,
                        now=platform.now(),
                        type="customer.updated",
                        data={"id": f"cus_{index}", "name": "Acme"},
                        business_id=business.id,
                    )
            committed[0] = time.perf_counter()
            with trio.fail_after(TIMEOUT):
                await all_started.wait()
            await runner.drain()
            nursery.cancel_scope.cancel()
    return starts


def report(
    backend: str,
    installations: int,
    workers: int,
    app_count: int,
    starts: list[float],
    queued: float,
    baseline: list[float],
) -> None:
    ordered = sorted(starts)
    p50 = statistics.median(ordered)
    p99 = percentile(ordered, 0.99)
    verdict = "met" if ordered[-1] <= 10 else "MISSED"
    base = sorted(baseline)
    say(
        f"{backend}: {installations} installations of {app_count} app(s), {workers} workers:"
        f" runs queued {queued:.2f} s after the tick; started: first {ordered[0]:.2f} s,"
        f" p50 {p50:.2f} s, p99 {p99:.2f} s, last {ordered[-1]:.2f} s after the tick"
        f" (target: all within 10 s: {verdict}); load average {load_average():.1f}"
    )
    say(
        f"{backend}: baseline, {len(base)} runs on events in one business: last started"
        f" {base[-1]:.2f} s after their commit (p50 {statistics.median(base):.2f} s);"
        f" the tick's last start / the baseline's: {ordered[-1] / base[-1]:.2f}x"
    )


async def main(args: argparse.Namespace) -> None:
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    for backend in backends:
        baseline = await event_runs(backend, args.installations, args.workers)
        _, starts, queued = await tick_to_start(
            backend, args.installations, args.workers, args.apps
        )
        report(backend, args.installations, args.workers, args.apps, starts, queued, baseline)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--installations", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=WORKERS)
    parser.add_argument("--apps", type=int, default=1)
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    trio_asyncio.run(main, parser.parse_args())
