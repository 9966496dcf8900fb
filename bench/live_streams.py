"""What open live streams cost the delivery pipeline: the pipeline of ``bench/endpoint_features.py``
with no stream open and with 20 clients following the app's deliveries stream, in the same run.

Usage::

    .venv/bin/python bench/live_streams.py [--backend sqlite|postgres|both] [--streams N]
        [--invoices I] [--rounds R] [--attribute]

For each store one ``ledgerport serve`` process starts as for endpoint_features.py (a receiver
on loopback answering 200 at once, ``LEDGERPORT_RATE_LIMIT_FACTOR=1000``, which scales the
bound of streams a developer to 10,000 as it scales the rate limits), with one tenant whose
``stripe`` webhook gets every invoice's delivery. A measurement imports ``--invoices``
invoices and waits for their deliveries (the rate from the first import request to the last
receipt, and the CPU a delivery of the served process and of PostgreSQL's backends), as
endpoint_features.py measures it. With streams, ``--streams`` clients (in this process, each a
bare HTTP/1.1 request on a socket that counts the events as they come: the clients share the
two cores with the server) each hold ``GET /developer/apps/{appId}/deliveries/stream`` open
through the measurement; after it, each must have had one event per delivery (checked, outside
the time measured).

After a warm-up, ``--rounds`` rounds each measure both, the order alternating from round to
round; printed: each round's figures, then the medians and the ratios with streams against
without (rate, and CPU a delivery: the CPU moves less with what else the machine runs).

With ``--attribute``, each measurement is also sampled by py-spy (250 samples a second of the
served process's threads while they run, the process not paused): the share of the samples
with streams open whose stack passes through the streams' code (``http/_live.py``,
``http/developer/streams.py``, ``queues/_streams.py``) is the share of the served process's CPU
the streams take to read, render and hand over their events, which the end-to-end ratio above
cannot resolve below its round-to-round spread. A stream's bytes then leave through quart's
body loop and hypercorn to the socket, outside the streams' frames: the samples in those writes
(``ANSWER_WRITES``) with streams open, less their share with none (the pipeline's own answers),
are the streams' writes, and the two together the streams' share in all, which the target is
read against. On loopback a write's system time includes the receiving end's TCP work, which a
client on another machine would do on its own. What it does not see: the streams' reads as
PostgreSQL runs them (one a tick for all the streams of an app, once a second), and the cursor
columns every recording writes, open streams or not.

Target (issue: live streams): the stream adds under 2% to the delivery pipeline with 20 streams
open.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._load import answer, client, load_average, nodes, say, sink
from bench.endpoint_features import PER_IMPORT, Endpoint, Figures, Served, add_endpoint
from bench.endpoint_features import pipeline_once as measure
from tests.e2e.served import store_env

STREAM_CODE = ("http/_live.py", "http/developer/streams.py", "queues/_streams.py")
"""The streams' own modules: a sample whose stack passes through one is the streams'."""
ANSWER_WRITES = ("ASGIHTTPConnection._send_response", "send_all")
"""Frames of a sample writing an answer's bytes to its socket (quart's body loop, down to the
socket): a stream's bytes leave there, after the stream's frames have yielded them."""
SAMPLES_A_SECOND = 250
TIMEOUT = 1800
CAUGHT_UP = 30.0
"""Seconds the streams get after a measurement to have read every delivery's event."""


@dataclass
class Streams:
    """Clients following the deliveries stream: events each has read; ``caught_up`` is set once
    each has read ``target``."""

    counts: list[int]
    target: int
    caught_up: trio.Event = field(default_factory=trio.Event)

    @property
    def fewest(self) -> int:
        return min(self.counts)

    def read(self, index: int) -> None:
        self.counts[index] += 1
        if self.counts[index] == self.target and self.fewest >= self.target:
            self.caught_up.set()


async def follow(
    base: str,
    endpoint: Endpoint,
    streams: Streams,
    index: int,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """One client reading the app's deliveries stream until cancelled: a bare HTTP/1.1 request
    on a socket, counting the events' ``id:`` lines as the bytes come (no parsing: the clients
    share the machine's two cores with the server, and should take as little of them as
    they can)."""
    address = urlsplit(base)
    sock = await trio.open_tcp_stream(address.hostname or "127.0.0.1", address.port or 80)
    async with sock:
        token = endpoint.tenant.developer["Authorization"]
        await sock.send_all(
            f"GET {endpoint.tenant.console}/deliveries/stream HTTP/1.1\r\n"
            f"Host: {address.netloc}\r\nAuthorization: {token}\r\n"
            "Accept: text/event-stream\r\n\r\n".encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            part = await sock.receive_some()
            if not part:
                raise RuntimeError(f"stream {index}: closed before its head")
            head += part
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"stream {index}: {head[:200]!r}")
        task_status.started()
        tail = head.split(b"\r\n\r\n", 1)[1]
        while True:
            for _ in range(tail.count(b"\nid: ")):
                streams.read(index)
            part = await sock.receive_some()
            if not part:
                return
            tail = tail[-4:] + part  # too short to hold a whole "\nid: " counted already


@dataclass
class Samples:
    """py-spy's samples of the served process: all of them, and the streams'."""

    total: int = 0
    streams: int = 0
    writes: int = 0
    """Samples writing answers' bytes to their sockets (``ANSWER_WRITES``): the streams' events
    and every other answer."""
    where: Counter[str] = field(default_factory=Counter)
    """The streams' samples by their innermost frame in the streams' code and the frame they
    were running (``outer > running``)."""

    def add(self, raw: Path) -> None:
        """Count a py-spy ``--format raw`` file: one stack a line, its count last."""
        for line in raw.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if not count.isdigit():
                continue
            self.total += int(count)
            if any(code in stack for code in STREAM_CODE):
                self.streams += int(count)
                frames = stack.split(";")
                ours = [f for f in frames if any(code in f for code in STREAM_CODE)]
                self.where[f"{_function(ours[-1])} > {_function(frames[-1])}"] += int(count)
            elif all(frame in stack for frame in ANSWER_WRITES):
                self.writes += int(count)

    @property
    def share(self) -> float:
        return self.streams / self.total if self.total else float("nan")

    @property
    def writes_share(self) -> float:
        return self.writes / self.total if self.total else float("nan")


def _function(frame: str) -> str:
    """A py-spy frame's function and file name: ``name (path/to/file.py:12)`` as
    ``name (file.py)``."""
    name, _, place = frame.partition(" (")
    return f"{name} ({Path(place.rpartition(':')[0]).name})"


@contextlib.contextmanager
def sampled(pid: int, into: Path) -> Iterator[None]:
    """py-spy recording ``pid`` into ``into`` while the block runs."""
    spy = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("py-spy")),
            "record",
            "--pid",
            str(pid),
            "--rate",
            str(SAMPLES_A_SECOND),
            "--nonblocking",
            "--format",
            "raw",
            "--output",
            str(into),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)  # py-spy writes what it has on an interrupt
        spy.wait(timeout=60)


def _samples_of(raw: Path, samples: Samples) -> None:
    try:
        samples.add(raw)
    finally:
        raw.unlink(missing_ok=True)


async def with_streams(
    base: str,
    http: httpx.AsyncClient,
    receiver: object,
    endpoint: Endpoint,
    args: argparse.Namespace,
    served: Served,
    samples: Samples | None = None,
) -> Figures:
    """The pipeline measured with ``--streams`` clients following the stream throughout;
    sampled into ``samples`` when given."""
    streams = Streams([0] * args.streams, args.invoices)
    async with trio.open_nursery() as nursery:
        for index in range(args.streams):
            await nursery.start(follow, base, endpoint, streams, index)
        if samples is None:
            figures = await measure(http, receiver, endpoint, args.invoices, served)  # type: ignore[arg-type]
        else:
            raw = Path(tempfile.mkstemp(prefix="ledgerport-streams-", suffix=".txt")[1])
            with sampled(served.pid, raw):
                figures = await measure(http, receiver, endpoint, args.invoices, served)  # type: ignore[arg-type]
            await trio.to_thread.run_sync(_samples_of, raw, samples)
        with trio.move_on_after(CAUGHT_UP):
            await streams.caught_up.wait()
        nursery.cancel_scope.cancel()
    if streams.fewest < args.invoices:
        raise RuntimeError(f"a stream read {streams.fewest} events of {args.invoices}")
    return figures


async def run_backend(backend: str, args: argparse.Namespace) -> dict[str, list[Figures]]:
    say(
        f"\n== {backend}: {args.invoices} invoices a measurement, {args.rounds} rounds,"
        f" {args.streams} streams; load average {load_average():.2f}"
    )
    stack = contextlib.ExitStack()
    try:
        directory = Path(
            stack.enter_context(tempfile.TemporaryDirectory(prefix="ledgerport-live-"))
        )
        store = await trio.to_thread.run_sync(stack.enter_context, store_env(backend, directory))
        env = store | {
            "LEDGERPORT_FUNCTION_WORKERS": "0",
            "LEDGERPORT_RATE_LIMIT_FACTOR": "1000",
            "LEDGERPORT_PASSWORD_HASHING": "fast",
        }
        figures: dict[str, list[Figures]] = {"none": [], "streams": []}
        samples = Samples() if args.attribute else None
        quiet = Samples() if args.attribute else None  # with no stream open: answers' writes
        with nodes(directory, env) as served:
            node = await served.start("bench")
            process = Served(node.pid, store["LEDGERPORT_DATABASE_URL"])
            async with sink() as receiver, client(node.base) as http:
                answer(await http.get("/openapi.json", timeout=120))
                endpoint = await add_endpoint(http, "stripe", "none", receiver)
                await measure(http, receiver, endpoint, PER_IMPORT, process)  # warm-up

                async def none() -> Figures:
                    if quiet is None:
                        return await measure(http, receiver, endpoint, args.invoices, process)
                    raw = Path(tempfile.mkstemp(prefix="ledgerport-streams-", suffix=".txt")[1])
                    with sampled(process.pid, raw):
                        measured = await measure(http, receiver, endpoint, args.invoices, process)
                    await trio.to_thread.run_sync(_samples_of, raw, quiet)
                    return measured

                async def streaming() -> Figures:
                    return await with_streams(
                        node.base, http, receiver, endpoint, args, process, samples
                    )

                ways = [("none", none), ("streams", streaming)]
                for round_ in range(args.rounds):
                    for name, way in ways if round_ % 2 == 0 else ways[::-1]:
                        measured = await way()
                        figures[name].append(measured)
                        say(
                            f"   round {round_ + 1} {name:<8} {measured.rate:6.0f} deliveries/s;"
                            f" CPU a delivery {measured.served_cpu:.0f} us served,"
                            f" {measured.database_cpu:.0f} us database;"
                            f" load average {load_average():.2f}"
                        )
            problems = served.problems()
        report(figures, args.streams)
        if samples is not None and quiet is not None:
            added = samples.share / (1 - samples.share)
            say(
                f"   sampled with streams open: {samples.streams} of {samples.total} samples of"
                f" the served process in the streams' code: {samples.share:.2%} of its CPU,"
                f" {added:.2%} added to the rest"
            )
            writes = max(0.0, samples.writes_share - quiet.writes_share)
            whole = samples.share + writes
            added_whole = whole / (1 - whole)
            say(
                f"   answers' socket writes: {samples.writes_share:.2%} of the samples with streams"
                f" open ({samples.writes}), {quiet.writes_share:.2%} with none ({quiet.writes} of"
                f" {quiet.total}): the streams' writes {writes:.2%}; the streams in all"
                f" {whole:.2%} of the CPU, {added_whole:.2%} added to the rest"
                f" (target: under 2%: {'met' if added_whole < 0.02 else 'MISSED'})"
            )
            say("   the streams' samples, by where in their code (outer > running):")
            for where, count in samples.where.most_common(12):
                say(f"     {count / samples.total:6.2%}  {where}")
        if problems:
            say(f"   server.log: {len(problems)} error lines, the first: {problems[0][:300]}")
        return figures
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(stack.close)


def report(figures: dict[str, list[Figures]], streams: int) -> None:
    def median(name: str, value: str) -> float:
        return statistics.median(getattr(m, value) for m in figures[name])

    say(f"   {'median of rounds':<18} {'deliveries/s':>12} {'CPU us served':>13} {'CPU us db':>9}")
    for name in figures:
        say(
            f"   {name:<18} {median(name, 'rate'):12.0f} {median(name, 'served_cpu'):13.0f}"
            f" {median(name, 'database_cpu'):9.0f}"
        )
    rounds = list(zip(figures["streams"], figures["none"], strict=True))
    rate = statistics.median(s.rate / n.rate for s, n in rounds)
    cpu = statistics.median(
        (s.served_cpu + s.database_cpu) / (n.served_cpu + n.database_cpu) for s, n in rounds
    )
    say(
        f"   with {streams} streams against none (median of the rounds' ratios):"
        f" rate {rate:.3f}x, CPU a delivery (served + database) {cpu:.3f}x"
    )


async def main(args: argparse.Namespace) -> int:
    for backend in ["sqlite", "postgres"] if args.backend == "both" else [args.backend]:
        with trio.fail_after(TIMEOUT):
            await run_backend(backend, args)
    return 0


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--streams", type=int, default=20)
    parser.add_argument("--invoices", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--attribute", action="store_true")
    return parser.parse_args()


if __name__ == "__main__":
    sys.exit(trio.run(main, parse()))
