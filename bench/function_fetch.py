"""A hosted function's ``context.fetch`` against a bare httpx request to the same local server.

Usage::

    .venv/bin/python bench/function_fetch.py [--rounds N] [--fetches N]

Measured, alternately in each round, against one HTTP/1.1 server on loopback that answers
``{"ok":true}`` at once (h11, in a process of its own, so neither side pays for it):

- ``bare``: an ``httpx.AsyncClient`` (keep-alive) making ``--fetches`` GET requests one after
  another; the time of one request;
- ``fetch``: a SandboxPool of one warm worker and the engine's ``Egress`` (as the runner has
  them: development, the server's host allowed, a secret put into a header), running a handler
  that makes ``--fetches`` ``context.fetch`` calls one after another (the most a run may make is
  50); the run's time divided by the fetches: a fetch's frame out of the worker, the engine's
  checks and request, the answer's frame back into the isolate;
- ``empty``: the same handler making no fetch: the part of a run's time that is not its fetches
  (reported, not subtracted).

Each is given as wall time and as CPU time: the bench process's (the client, or the pool and the
engine) and, for ``fetch``, the worker's too. On a loaded machine the wall time of a fetch, which
wakes three processes in turn (worker, service, server) where a bare request wakes two, grows
with every wait for a core; its CPU time does not.

The target (issue: functions that do real work): a fetch costs at most 1.5x a bare httpx request
to the same local server.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import h11
import httpx
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._load import cpu_seconds, load_average, say

from ledgerport import apps
from ledgerport.apps import compile_module
from ledgerport.engine import Egress
from ledgerport.keys import Keyring
from ledgerport.runtime import RunLimits, RunRequest, SandboxPool

TARGET = 1.5
HANDLER = """
export async function handler(event, context) {
  const key = context.secret("API_KEY");
  let ok = 0;
  for (let i = 0; i < event.data.fetches; i++) {
    const headers = { Authorization: "Bearer " + key };
    const answer = await context.fetch(event.data.url, { headers });
    if (answer.status === 200) ok++;
  }
  return ok;
}
"""
BODY = b'{"ok":true}'


# -- the server, in a process of its own ------------------------------------------------------


async def _serve(stream: trio.SocketStream) -> None:
    conn = h11.Connection(h11.SERVER)
    try:
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await stream.receive_some(65536)
                if not data:
                    return
                conn.receive_data(data)
            elif isinstance(event, h11.EndOfMessage):
                await stream.send_all(
                    b"".join(
                        conn.send(e) or b""
                        for e in (
                            h11.Response(
                                status_code=200,
                                headers=[
                                    ("content-length", str(len(BODY))),
                                    ("content-type", "application/json"),
                                ],
                            ),
                            h11.Data(data=BODY),
                            h11.EndOfMessage(),
                        )
                    )
                )
                conn.start_next_cycle()
            elif isinstance(event, h11.ConnectionClosed):
                return
    except (trio.BrokenResourceError, h11.ProtocolError):
        return


async def serve() -> None:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    say(str(listeners[0].socket.getsockname()[1]))
    await trio.serve_listeners(_serve, listeners)


# -- the measurements -------------------------------------------------------------------------


async def bare(url: str, count: int) -> tuple[float, float]:
    """A request's wall time and CPU time."""
    async with httpx.AsyncClient() as client:
        await client.get(url)  # connected
        cpu = time.process_time()
        started = time.perf_counter()
        for _ in range(count):
            answer = await client.get(url, headers={"Authorization": "Bearer sk_bench"})
            assert answer.status_code == 200
        took = time.perf_counter() - started
        return took / count, (time.process_time() - cpu) / count


class Runs:
    def __init__(self, pool: SandboxPool, egress: Egress, sealed: apps.SealedSecret) -> None:
        self.pool = pool
        self.egress = egress
        self.sealed = sealed
        self.script = compile_module(HANDLER).script
        self.deadlines: dict[str, float] = {}
        self.count = 0

    async def run(self, url: str, fetches: int) -> tuple[float, float, float]:
        """The run's wall time, the CPU time it took here and in the worker, and the worker's
        part of it."""
        self.count += 1
        run_id = f"run_{self.count}"
        self.deadlines[run_id] = trio.current_time() + self.pool.limits.wall
        placeholders = self.egress.open(
            run_id, allowed_hosts=("127.0.0.1",), secrets_by_name={"API_KEY": self.sealed}
        )
        event = json.dumps({"id": run_id, "data": {"url": url, "fetches": fetches}})
        here, there = time.process_time(), sum(map(cpu_seconds, self.pool.pids()))
        started = time.perf_counter()
        outcome = await self.pool.invoke(
            RunRequest(run_id, "fn_bench:1", self.script, event, placeholders)
        )
        took = time.perf_counter() - started
        here = time.process_time() - here
        there = sum(map(cpu_seconds, self.pool.pids())) - there
        self.egress.close(run_id)
        assert outcome.ok, outcome.error
        assert json.loads(outcome.result or "0") == fetches
        return took, here + there, there


@dataclass
class Figures:
    bare: list[float] = field(default_factory=list)
    fetch: list[float] = field(default_factory=list)
    empty: list[float] = field(default_factory=list)
    bare_cpu: list[float] = field(default_factory=list)
    fetch_cpu: list[float] = field(default_factory=list)
    worker_cpu: list[float] = field(default_factory=list)


async def measure(port: int, rounds: int, fetches: int) -> Figures:
    url = f"http://127.0.0.1:{port}/v1/things"
    keyring = Keyring("b" * 43)
    sealed = apps.SealedSecret.seal(keyring, app_id="app_b", name="API_KEY", value="sk_bench")
    deadlines: dict[str, float] = {}
    egress = Egress(
        keyring=keyring,
        note=lambda run_id, note, at: None,
        deadlines=deadlines,
        development=True,
        loopback=True,
    )
    pool = SandboxPool(size=1, fetch=egress.fetch, limits=RunLimits(wall=60.0))
    figures = Figures()
    async with trio.open_nursery() as nursery:
        await nursery.start(pool.run)
        runs = Runs(pool, egress, sealed)
        runs.deadlines = deadlines
        for _ in range(5):  # warm: the isolate, the connection, the code paths
            await runs.run(url, fetches)
            await bare(url, fetches)
        for _ in range(rounds):
            wall, cpu = await bare(url, fetches)
            figures.bare.append(wall)
            figures.bare_cpu.append(cpu)
            wall, cpu, worker = await runs.run(url, fetches)
            figures.fetch.append(wall / fetches)
            figures.fetch_cpu.append(cpu / fetches)
            figures.worker_cpu.append(worker / fetches)
            figures.empty.append((await runs.run(url, 0))[0])
        await egress.aclose()
        nursery.cancel_scope.cancel()
    return figures


def report(figures: Figures, rounds: int, fetches: int) -> None:
    b, f, e = (statistics.median(t) for t in (figures.bare, figures.fetch, figures.empty))
    ratios = sorted(fe / ba for fe, ba in zip(figures.fetch, figures.bare, strict=True))
    bc, fc = statistics.median(figures.bare_cpu), statistics.median(figures.fetch_cpu)
    say(f"rounds {rounds}, {fetches} requests a round each (medians)")
    say(f"  bare httpx request      {b * 1e6:8.0f} µs")
    say(f"  context.fetch           {f * 1e6:8.0f} µs   (a run without fetches: {e * 1e3:.2f} ms)")
    say(
        f"  fetch / bare, wall      {f / b:8.2f}x   (rounds: {ratios[0]:.2f}x to"
        f" {ratios[-1]:.2f}x; target at most {TARGET}x: {'met' if f / b <= TARGET else 'MISSED'})"
    )
    say(f"  CPU, bare request       {bc * 1e6:8.0f} µs")
    wc = statistics.median(figures.worker_cpu)
    say(f"  CPU, context.fetch      {fc * 1e6:8.0f} µs   (the pool, the engine and the worker)")
    say(f"    of which the worker   {wc * 1e6:8.0f} µs")
    say(
        f"  fetch / bare, CPU       {fc / bc:8.2f}x   (target at most {TARGET}x:"
        f" {'met' if fc / bc <= TARGET else 'MISSED'})"
    )
    say(f"  load average            {load_average():.2f}")


def main(rounds: int, fetches: int) -> None:
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        figures = trio.run(measure, port, rounds, fetches)
    finally:
        server.terminate()
        server.wait()
    report(figures, rounds, fetches)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--fetches", type=int, default=50)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        trio.run(serve)
    else:
        main(args.rounds, args.fetches)
