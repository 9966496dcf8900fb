"""Hosted-function runs through the sandbox pool against bare mini-racer calls, in one run.

Usage::

    .venv/bin/python bench/functions.py [--runs N]

Measured:

- ``bare``: in a child process (V8 shares no process with the service's event loop), one
  mini-racer isolate with the trivial handler loaded; each call evaluates
  ``handler(<event JSON>)``, as the pool's worker does, and is timed from Python;
- ``pool``: a SandboxPool of one warm worker; each run of the same handler (compiled from its ES
  module, as uploaded) is timed from ``invoke`` to its outcome: the frame to the worker, the
  call, the frame back.

The target (issue: hosted functions): a warm invocation costs at most 2x a bare call (p50).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from ledgerport.apps import compile_module
from ledgerport.runtime import RunRequest, SandboxPool

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
            outcome = await pool.invoke(RunRequest(f"run_{index}", "fn_bench:1", script, EVENT))
            if index >= WARM_UP:
                times.append(time.perf_counter() - started)
            assert outcome.result == "2", outcome
        nursery.cancel_scope.cancel()
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=2000)
    args = parser.parse_args()
    runs = max(100, min(args.runs, 50_000))
    bare_times = bare(runs)
    pool_times = trio.run(pooled, runs)
    bare_p50, pool_p50 = statistics.median(bare_times), statistics.median(pool_times)
    print(  # noqa: T201 - the bench's report
        f"trivial handler, {runs} warm runs each\n"
        f"  bare mini-racer call   p50 {bare_p50 * 1e6:7.1f} us\n"
        f"  pool invocation        p50 {pool_p50 * 1e6:7.1f} us"
        f"  ratio {pool_p50 / bare_p50:.2f}x (target <= 2x)"
    )


if __name__ == "__main__":
    main()
