"""Lines of runs: a worker the fair choice gives to one of an app's runs also takes, one after
another, that app's due runs for other businesses (its riders), as many as the app's recent
runs say fill half of the line's time; a rider not started within the line's time is given
back unstarted (due again at once, no attempt counted). A tick of a schedule, which makes one
run per installation, is where lines count. The line's time is the platform's clock: tests
move it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import trio

from ledgerport.clock import FrozenClock
from ledgerport.engine import FunctionRunner, ScheduleTicker
from ledgerport.http import in_process_api
from ledgerport.platform import Platform
from ledgerport.runtime import RunLimits, RunOutcome, RunRequest

from .test_function_schedules import T0, TIMEOUT, Scheduled, put, scheduled, scheduled_runs

INSTALLATIONS = 6
FAST = 0.001
"""Seconds each run is said to take: a line holds many."""


def timed_as(runner: FunctionRunner, seconds: float, before: Callable[[int], None]) -> None:
    """The runner's runs said to take ``seconds``; ``before(n)`` is called as the n-th starts."""
    invoke = runner.pool.invoke
    started = [0]

    async def said(request: RunRequest) -> RunOutcome:
        started[0] += 1
        before(started[0])
        return dataclasses.replace(await invoke(request), seconds=seconds)

    runner.pool.invoke = said  # type: ignore[method-assign]


async def ticked(
    client: Any, admin_headers: dict[str, str], platform: Platform, clock: FrozenClock
) -> Scheduled:
    """The app on a one-minute schedule in INSTALLATIONS businesses, its tick just run: one
    run due in each."""
    clock.set(T0 - 1)
    world = await scheduled(client, admin_headers, platform, more=INSTALLATIONS - 1)
    await put(world, "* * * * *")
    clock.set(T0)
    await ScheduleTicker(platform).tick_once()
    return world


async def rows(platform: Platform) -> list[dict[str, Any]]:
    async with platform.store.transaction() as tx:
        found = await tx.fetch(
            "SELECT id, status, attempts, lease, next_attempt_at FROM function_runs"
            " WHERE type = 'schedule' ORDER BY id"
        )
    return [dict(row) for row in found]


async def test_a_worker_takes_a_line_of_a_ticks_runs_once_the_apps_runs_are_timed(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform, clock: FrozenClock
) -> None:
    """Two workers, so the app keeps one: the first claim takes one run (nothing timed yet);
    the next takes every other installation's run on that one worker, one after another."""
    with trio.fail_after(TIMEOUT):
        world = await ticked(client, admin_headers, platform, clock)
        async with in_process_api(app, "http://localhost") as call:
            runner = FunctionRunner(platform, workers=2, limits=RunLimits(), api=call)
            timed_as(runner, FAST, lambda n: None)
            async with runner.running():
                first = await runner.claim_once()
                await runner.settle()
                lined = await runner.claim_once()
                await runner.settle()
                after = await runner.claim_once()
        runs = await scheduled_runs(platform.store)
    assert (first, lined, after) == (1, INSTALLATIONS - 1, 0)
    assert {run["status"] for run in runs} == {"succeeded"}
    assert sorted(run["business_id"] for run in runs) == world.businesses


async def test_riders_not_started_within_the_lines_time_are_given_back_unstarted(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform, clock: FrozenClock
) -> None:
    """The line's first run takes longer than the line's time (the clock moves a second while
    it runs): its riders go back as they were, queued with no attempt and no lease, due at
    once; the next claims run each of them once."""
    with trio.fail_after(TIMEOUT):
        await ticked(client, admin_headers, platform, clock)

        def slow_second_run(n: int) -> None:
            if n == 2:
                clock.advance(1.0)

        async with in_process_api(app, "http://localhost") as call:
            runner = FunctionRunner(platform, workers=2, limits=RunLimits(), api=call)
            timed_as(runner, FAST, slow_second_run)
            async with runner.running():
                assert await runner.claim_once() == 1
                await runner.settle()
                assert await runner.claim_once() == INSTALLATIONS - 1
                await runner.settle()
                given_back = [row for row in await rows(platform) if row["status"] == "queued"]
                while await runner.claim_once():
                    await runner.settle()
        runs = await rows(platform)
    assert len(given_back) == INSTALLATIONS - 2
    assert {(row["attempts"], row["lease"]) for row in given_back} == {(0, None)}
    assert {row["next_attempt_at"] for row in given_back} == {T0 + 1.0}
    assert {(row["status"], row["attempts"]) for row in runs} == {("succeeded", 1)}
    assert len(runs) == INSTALLATIONS
