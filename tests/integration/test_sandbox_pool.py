"""The sandbox pool with real worker processes: handler shapes, every limit of a run (the pool's
event loop stays responsive meanwhile), a worker killed mid-run, recycling, isolation between
function versions, and ``context.api`` calls coming back to the pool."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from ledgerport.apps import compile_module
from ledgerport.runtime import (
    ApiAnswer,
    ApiCall,
    RunLimits,
    RunOutcome,
    RunRequest,
    SandboxPool,
    WorkerStartFailed,
)

TIMEOUT = 60
EVENT = {"id": "dlv_1", "type": "invoice.created", "businessId": "biz_1", "data": {"id": "inv_1"}}


@asynccontextmanager
async def running(**options: Any) -> AsyncIterator[SandboxPool]:
    pool = SandboxPool(**{"size": 1, **options})
    async with trio.open_nursery() as nursery:
        await nursery.start(pool.run)
        yield pool
        nursery.cancel_scope.cancel()


_runs = 0


def request(source: str, *, key: str = "fn_1:1", event: dict[str, Any] | None = None) -> RunRequest:
    global _runs
    _runs += 1
    return RunRequest(
        f"run_{_runs}", key, compile_module(source).script, json.dumps(event or EVENT)
    )


SHAPES = {
    "sync": ("export function handler(event) { return event.data.id }", "inv_1"),
    "async": (
        "export async function handler(e) { await null; return {type: e.type} }",
        {"type": "invoice.created"},
    ),
    "nothing": ("export function handler() {}", None),
    "top-level await": (
        "const n = await Promise.resolve(7); export const handler = () => n * 6",
        42,
    ),
}


async def test_a_worker_whose_process_cannot_start_is_a_failed_start() -> None:
    """What the pool tries again when it replaces a worker, and reports at its start."""
    pool = SandboxPool(size=1, worker_command=("/nonexistent/sandbox-worker",))
    with trio.fail_after(TIMEOUT), pytest.raises(ExceptionGroup) as caught:
        async with trio.open_nursery() as nursery:
            await nursery.start(pool.run)
    assert caught.group_contains(WorkerStartFailed, match="could not start")


@pytest.mark.parametrize("shape", sorted(SHAPES))
async def test_handler_shapes(shape: str) -> None:
    source, expected = SHAPES[shape]
    with trio.fail_after(TIMEOUT):
        async with running() as pool:
            outcome = await pool.invoke(request(source))
    assert outcome.ok, outcome.error
    assert (json.loads(outcome.result) if outcome.result is not None else None) == expected


async def test_logs_and_console_go_to_the_run_and_there_are_no_timers() -> None:
    source = (
        "export function handler(e, context) {"
        " context.log('created', e.data, 3); console.log('from console');"
        " return [typeof setTimeout, typeof clearTimeout] }"
    )
    with trio.fail_after(TIMEOUT):
        async with running() as pool:
            outcome = await pool.invoke(request(source))
    assert outcome.logs == ['created {"id":"inv_1"} 3', "from console"]
    assert json.loads(outcome.result or "null") == ["undefined", "undefined"]


async def test_a_throwing_handler_fails_its_run_and_keeps_the_worker() -> None:
    with trio.fail_after(TIMEOUT):
        async with running() as pool:
            before = pool.pids()
            thrown = await pool.invoke(
                request("export const handler = () => { throw new RangeError('no') }")
            )
            rejected = await pool.invoke(
                request("export const handler = async () => { throw 'plain' }", key="fn_2:1")
            )
            after = pool.pids()
    assert (thrown.ok, thrown.error, thrown.platform_failure) == (False, "RangeError: no", False)
    assert rejected.error == "thrown: plain"
    assert before == after


LIMITS = {
    "cpu": ("export const handler = () => { for (;;) {} }", RunLimits(cpu=1, wall=30)),
    "wall, a call never answered": (
        "export const handler = (e, c) => c.api.get('/slow')",
        RunLimits(wall=0.5),
    ),
    "wall, microtasks kept busy after returning": (
        "export const handler = () => {"
        " const spin = () => Promise.resolve().then(spin); spin(); return 1 }",
        RunLimits(wall=0.5, cpu=30, heap=512 * 1024 * 1024),
    ),
    "heap": (
        "export const handler = () => { const a = []; for (;;) a.push(new Array(1e5).fill(1)) }",
        RunLimits(heap=32 * 1024 * 1024),
    ),
    "log": (
        "export const handler = (e, c) => { for (;;) c.log('x'.repeat(100)) }",
        RunLimits(log=1000),
    ),
    "result": ("export const handler = () => 'y'.repeat(5000)", RunLimits(result=1000)),
}
LIMIT_NAMES = {
    "cpu": "cpu",
    "wall, a call never answered": "wall",
    "wall, microtasks kept busy after returning": "wall",
    "heap": "heap",
    "log": "log",
    "result": "result",
}


@pytest.mark.parametrize("case", sorted(LIMITS))
async def test_every_limit_ends_the_run_with_a_clear_error_and_the_pool_goes_on(case: str) -> None:
    source, limits = LIMITS[case]
    lags: list[float] = []

    async def tick(cancel: trio.CancelScope) -> None:
        with cancel:
            while True:
                before = trio.current_time()
                await trio.sleep(0.01)
                lags.append(trio.current_time() - before - 0.01)

    async def never_answers(run: RunRequest, call: ApiCall) -> ApiAnswer:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    with trio.fail_after(TIMEOUT):
        async with running(limits=limits, api=never_answers) as pool:
            async with trio.open_nursery() as nursery:
                ticking = trio.CancelScope()
                nursery.start_soon(tick, ticking)
                outcome = await pool.invoke(request(source))
                ticking.cancel()
            await pool.until_full()
            after = await pool.invoke(request("export const handler = () => 'fine'", key="fn_9:1"))
    assert outcome.limit == LIMIT_NAMES[case]
    assert not outcome.ok
    assert not outcome.platform_failure
    assert outcome.error is not None
    assert "limit" in outcome.error or "larger than" in outcome.error
    assert after.result == '"fine"'
    assert max(lags, default=0.0) < 1.0  # the pool's own loop kept serving


async def test_a_worker_killed_mid_run_fails_the_run_as_the_platforms_and_is_replaced() -> None:
    with trio.fail_after(TIMEOUT):
        async with running(limits=RunLimits(wall=30, cpu=30)) as pool:
            (pid,) = pool.pids()
            async with trio.open_nursery() as nursery:

                async def kill_soon() -> None:
                    await trio.sleep(0.3)
                    os.kill(pid, signal.SIGKILL)

                nursery.start_soon(kill_soon)
                outcome: RunOutcome = await pool.invoke(
                    request("export const handler = () => { for (;;) {} }")
                )
            await pool.until_full()
            (replacement,) = pool.pids()
            again = await pool.invoke(request("export const handler = () => 2"))
    assert outcome.platform_failure
    assert outcome.error == "the sandbox worker ended during the run (signal 9)"
    assert replacement != pid
    assert again.result == "2"


async def test_a_worker_is_recycled_after_its_runs() -> None:
    with trio.fail_after(TIMEOUT):
        async with running(runs_per_worker=2) as pool:
            pids = []
            for _ in range(5):
                await pool.until_full()
                pids.append(pool.pids()[0])
                await pool.invoke(request("export const handler = () => 1"))
    assert pids[0] == pids[1] != pids[2] == pids[3] != pids[4]


async def test_function_versions_never_share_state() -> None:
    writer = (
        "globalThis.seen = (globalThis.seen ?? 0) + 1; export const handler = () => globalThis.seen"
    )
    reader = "export const handler = () => typeof globalThis.seen"
    with trio.fail_after(TIMEOUT):
        async with running() as pool:
            first = await pool.invoke(request(writer, key="app_a:1"))
            other_app = await pool.invoke(request(reader, key="app_b:1"))
            same_again = await pool.invoke(request(writer, key="app_a:1"))
            next_version = await pool.invoke(request(writer, key="app_a:2"))
    assert [first.result, other_app.result, same_again.result, next_version.result] == [
        "1",
        '"undefined"',
        "1",  # the module ran once in its isolate: the handler reads what it left
        "1",
    ]


async def test_api_calls_come_back_to_the_pool() -> None:
    """Each with the lines the handler had logged when it called."""
    calls: list[tuple[str, str, str, Any, int]] = []

    async def api(run: RunRequest, call: ApiCall) -> ApiAnswer:
        body = None if call.body is None else json.loads(call.body)
        calls.append((run.run_id, call.method, call.path, body, call.lines))
        if call.path == "/missing":
            return ApiAnswer(404, {"statusCode": 404, "message": "Record missing not found"})
        return ApiAnswer(200, {"data": [call.path]})

    source = """
    export async function handler(event, context) {
      const [a, b] = await Promise.all(
        [context.api.get("/customers"), context.api.get("/invoices")]);
      const made = await context.api.post("/customers", { name: "Acme" });
      context.log("made");
      let missing = null;
      try { await context.api.get("/missing"); }
      catch (error) { missing = [error.name, error.status, error.message]; }
      await context.api.delete("/customers/cus_1");
      return { a, b, made, missing };
    }
    """
    with trio.fail_after(TIMEOUT):
        async with running(api=api) as pool:
            run = request(source)
            outcome = await pool.invoke(run)
    assert outcome.ok, outcome.error
    assert json.loads(outcome.result or "null") == {
        "a": {"data": ["/customers"]},
        "b": {"data": ["/invoices"]},
        "made": {"data": ["/customers"]},
        "missing": ["ApiError", 404, "GET /missing: 404 Record missing not found"],
    }
    assert sorted(calls) == sorted(
        [
            (run.run_id, "GET", "/customers", None, 0),
            (run.run_id, "GET", "/invoices", None, 0),
            (run.run_id, "POST", "/customers", {"name": "Acme"}, 0),
            (run.run_id, "GET", "/missing", None, 1),
            (run.run_id, "DELETE", "/customers/cus_1", None, 1),
        ]
    )


async def test_concurrent_runs_spread_over_the_workers() -> None:
    waiting: list[str] = []
    both = trio.Event()

    async def api(run: RunRequest, call: ApiCall) -> ApiAnswer:
        # Answers only once two runs wait here at the same time.
        waiting.append(run.run_id)
        if len(waiting) == 2:
            both.set()
        await both.wait()
        return ApiAnswer(200, {"data": []})

    source = "export const handler = async (e, c) => (await c.api.get('/customers')).data"
    with trio.fail_after(TIMEOUT):
        async with running(size=2, api=api) as pool:
            outcomes: list[RunOutcome] = []

            async def run(index: int) -> None:
                outcomes.append(await pool.invoke(request(source, key=f"fn_{index}:1")))

            async with trio.open_nursery() as nursery:
                for index in range(2):
                    nursery.start_soon(run, index)
    assert [outcome.result for outcome in outcomes] == ["[]", "[]"]


def _limits_of(pid: int) -> dict[str, str]:
    limits: dict[str, str] = {}
    with open(f"/proc/{pid}/limits") as table:
        for line in table.readlines()[1:]:
            name, soft = line[:26].strip(), line[26:47].strip()
            limits[name] = soft
    return limits


async def test_a_worker_runs_under_memory_and_address_space_limits() -> None:
    with trio.fail_after(TIMEOUT):
        async with running(memory_mib=768) as pool:
            # Many function versions, more than a worker keeps isolates for, fit in its limits.
            for index in range(20):
                outcome = await pool.invoke(
                    request("export const handler = () => 1", key=f"fn_{index}:1")
                )
                assert outcome.result == "1", outcome.error
            (pid,) = pool.pids()
            limits = _limits_of(pid)
            niceness = os.getpriority(os.PRIO_PROCESS, pid)
    # Ten below the service, or the lowest priority there is when the service (or the test run,
    # under `nice`) is already near it.
    assert niceness == min(os.getpriority(os.PRIO_PROCESS, 0) + 10, 19), "workers yield the CPU"
    assert limits["Max data size"] == str(768 * 1024 * 1024)
    assert limits["Max address space"] != "unlimited"
    assert limits["Max core file size"] == "0"


_AT_HIGH_NICE = """
import json, logging, os, trio
from ledgerport.runtime import SandboxPool

os.nice(15)
said = []
handler = logging.Handler()
handler.emit = lambda record: said.append(record.getMessage())
logging.getLogger("ledgerport.runtime.pool").addHandler(handler)

async def main():
    pool = SandboxPool(size=1)
    async with trio.open_nursery() as nursery:
        await nursery.start(pool.run)
        (pid,) = pool.pids()
        service = os.getpriority(os.PRIO_PROCESS, 0)
        worker = os.getpriority(os.PRIO_PROCESS, pid)
        print(json.dumps({"service": service, "worker": worker, "said": said}))
        nursery.cancel_scope.cancel()

trio.run(main)
"""
"""A service started at nice 15 or more (15 more than the test run's) with one worker."""


async def test_a_service_near_the_lowest_priority_gets_workers_at_the_lowest_and_says_so() -> None:
    with trio.fail_after(TIMEOUT):
        done = await trio.run_process(
            [sys.executable, "-c", _AT_HIGH_NICE], capture_stdout=True, capture_stderr=True
        )
    seen = json.loads(done.stdout)
    assert seen["service"] >= 15
    assert seen["worker"] == 19
    (said,) = seen["said"]
    assert f"the service runs at nice {seen['service']}, so its workers run at 19" in said


async def test_a_run_reaches_no_process_file_system_or_network() -> None:
    source = (
        "export const handler = () => [typeof require, typeof process, typeof fetch,"
        " typeof XMLHttpRequest, typeof Deno, typeof setInterval, typeof setTimeout]"
    )
    with trio.fail_after(TIMEOUT):
        async with running() as pool:
            outcome = await pool.invoke(request(source))
    assert json.loads(outcome.result or "null") == ["undefined"] * 7
