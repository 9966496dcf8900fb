"""The pool of sandbox workers: warm V8 processes that run hosted functions, supervised from trio.

:class:`SandboxPool` keeps ``size`` workers started (``python -m ledgerport.runtime.sandbox``,
a fresh interpreter each: V8 is not fork-safe) and hands each run to an idle one. It speaks to a
worker in frames over its stdin and stdout (``_frames.py``). A run's calls to the data API come
back to the pool, which makes them with the ``api`` it was given and answers.

The pool enforces the run's wall time: past it, the worker is killed (which also stops a handler
that keeps V8's microtask queue busy after returning). A worker that dies during a run ends that
run: by the kernel's CPU limit (SIGXCPU) or V8 running out of memory, the run broke a limit; by
anything else, the platform failed it and the caller may run it again. Either way the pool
starts a replacement, as it does for a worker that has made ``runs_per_worker`` runs.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import trio

from ledgerport.ops import Metrics

from ._frames import FrameError, FrameReader, encode_frame

log = logging.getLogger("ledgerport.runtime.pool")

START_TIMEOUT = 30.0
"""Seconds a new worker has to report that V8 is up."""
RESTART_BACKOFF = (0.1, 0.5, 1.0, 5.0)
"""Seconds between attempts to start a replacement worker that keeps failing to start."""
STDERR_KEPT = 4096
"""Bytes of a worker's standard error kept for the log when it dies."""


@dataclass(frozen=True)
class RunLimits:
    """What one run may use (contract.md: Hosted functions)."""

    cpu: float = 2.0
    """Seconds of CPU (the kernel's granularity is a second)."""
    wall: float = 10.0
    """Seconds from the run's start to its end."""
    heap: int = 64 * 1024 * 1024
    """Bytes of V8 heap."""
    log: int = 64 * 1024
    """Bytes of log lines (UTF-8, a newline each)."""
    result: int = 64 * 1024
    """Bytes of the result's JSON."""

    def frame(self) -> dict[str, Any]:
        return {"cpu": self.cpu, "heap": self.heap, "log": self.log, "result": self.result}


@dataclass(frozen=True)
class RunRequest:
    run_id: str
    key: str
    """The function version: runs of one key share an isolate, no two keys ever do."""
    script: str
    """The compiled module (``apps.compile_module``)."""
    event: dict[str, Any]


@dataclass(frozen=True)
class RunOutcome:
    ok: bool
    result: str | None
    """The handler's answer as JSON text (None when it answered nothing)."""
    logs: list[str]
    error: str | None
    limit: str | None
    """The limit the run broke (cpu, wall, heap, log, result), if any."""
    platform_failure: bool
    """The worker died for a reason that is not the run's: the run may go again."""
    seconds: float


ApiCall = Callable[[RunRequest, str, str, str | None], Awaitable[tuple[int, Any]]]
"""``(request, method, path, body JSON or None) -> (status, body)``: one ``context.api`` call."""


async def no_api(request: RunRequest, method: str, path: str, body: str | None) -> tuple[int, Any]:
    """The API of a pool given none: every call is refused."""
    return 503, {"message": "the data API is not available to this run"}


@dataclass(eq=False)
class _Worker:
    process: trio.Process
    reader: FrameReader
    send_lock: trio.Lock = field(default_factory=trio.Lock)
    runs: int = 0
    stderr: bytearray = field(default_factory=bytearray)
    stderr_ended: trio.Event = field(default_factory=trio.Event)
    killed: bool = False

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        async with self.send_lock:
            await self.process.stdin.send_all(encode_frame(message))


class SandboxPool:
    """Warm sandbox workers and the runs handed to them (see the module docstring)."""

    def __init__(
        self,
        *,
        size: int = 2,
        runs_per_worker: int = 1000,
        memory_mib: int = 1024,
        limits: RunLimits | None = None,
        api: ApiCall = no_api,
        metrics: Metrics | None = None,
    ) -> None:
        self.size = size
        self.limits = limits or RunLimits()
        self._runs_per_worker = runs_per_worker
        self._memory_mib = memory_mib
        self.api = api
        """Makes a run's ``context.api`` calls."""
        self._metrics = metrics
        self._idle_send, self._idle = trio.open_memory_channel[_Worker](size)
        self._alive: set[_Worker] = set()
        self._retiring: set[_Worker] = set()
        self._full = trio.Event()
        self._nursery: trio.Nursery | None = None

    @property
    def workers(self) -> int:
        """Workers alive now."""
        return len(self._alive)

    def pids(self) -> list[int]:
        return sorted(worker.process.pid for worker in self._alive)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Start the workers, report started when all are warm, and supervise them until
        cancelled (then every worker is killed)."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                for _ in range(self.size):
                    self._idle_send.send_nowait(await self._start())
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None
            leaving = self._alive | self._retiring
            for worker in leaving:
                self._kill(worker)
            for worker in leaving:
                await self._close(worker)

    async def _start(self) -> _Worker:
        assert self._nursery is not None
        process = await trio.lowlevel.open_process(
            [
                sys.executable,
                "-m",
                "ledgerport.runtime.sandbox",
                "--memory-mib",
                str(self._memory_mib),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert process.stdout is not None
        worker = _Worker(process, FrameReader(process.stdout))
        self._alive.add(worker)
        self._gauge()
        self._nursery.start_soon(self._drain_stderr, worker)
        try:
            with trio.fail_after(START_TIMEOUT):
                ready = await worker.reader.receive()
        except (trio.TooSlowError, FrameError, trio.BrokenResourceError) as exc:
            self._kill(worker)
            await self._close(worker)
            raise WorkerStartFailed(f"sandbox worker did not start: {exc!r}") from exc
        if ready is None or ready.get("op") != "ready":
            self._kill(worker)
            await self._close(worker)
            raise WorkerStartFailed(f"sandbox worker did not start: {self._tail(worker)}")
        return worker

    async def _drain_stderr(self, worker: _Worker) -> None:
        stream = worker.process.stderr
        assert stream is not None
        try:
            while chunk := await stream.receive_some(65536):
                worker.stderr += chunk
                del worker.stderr[:-STDERR_KEPT]
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            worker.stderr_ended.set()

    def _tail(self, worker: _Worker) -> str:
        return bytes(worker.stderr[-STDERR_KEPT:]).decode(errors="replace").strip()

    def _kill(self, worker: _Worker) -> None:
        worker.killed = True
        if worker.process.returncode is None:
            worker.process.kill()

    async def _close(self, worker: _Worker) -> None:
        """Wait for a killed or ended worker and close its pipes."""
        with trio.CancelScope(shield=True), trio.move_on_after(5):
            await worker.process.wait()
            for stream in (worker.process.stdin, worker.process.stdout, worker.process.stderr):
                if stream is not None:
                    await stream.aclose()
        self._alive.discard(worker)
        self._retiring.discard(worker)
        self._gauge()

    async def until_full(self) -> None:
        """Wait until the pool has all its workers (it replaces those it lost in the
        background)."""
        await self._full.wait()

    def _gauge(self) -> None:
        if len(self._alive) >= self.size:
            self._full.set()
        elif self._full.is_set():
            self._full = trio.Event()
        if self._metrics is not None:
            self._metrics.function_workers.set(len(self._alive))

    def _retire(self, worker: _Worker, reason: str) -> None:
        """Take ``worker`` out of the pool now; a replacement starts in the background."""
        assert self._nursery is not None
        self._alive.discard(worker)
        self._retiring.add(worker)
        self._gauge()
        self._nursery.start_soon(self._replace, worker, reason)

    async def _replace(self, worker: _Worker, reason: str) -> None:
        """Close ``worker`` (killed if it still runs) and start another in its place."""
        self._kill(worker)
        await self._close(worker)
        if self._metrics is not None:
            self._metrics.function_worker_restarts.labels(reason).inc()
        for attempt, delay in enumerate((0.0, *RESTART_BACKOFF)):
            await trio.sleep(delay)
            try:
                fresh = await self._start()
            except WorkerStartFailed as exc:
                log.warning("sandbox pool: attempt %d: %s", attempt + 1, exc)
                continue
            self._idle_send.send_nowait(fresh)
            return
        log.error("sandbox pool: no replacement worker could start; the pool has one less")

    async def invoke(self, request: RunRequest) -> RunOutcome:
        """Run ``request`` on the next idle worker (waiting for one) and answer its outcome."""
        worker = await self._idle.receive()
        started = time.perf_counter()
        outcome = await self._invoke_on(worker, request, started)
        assert self._nursery is not None
        if worker.process.returncode is not None or worker.killed:
            self._retire(worker, "killed" if worker.killed else "died")
        elif worker.runs >= self._runs_per_worker:
            self._retire(worker, "recycled")
        else:
            self._idle_send.send_nowait(worker)
        if outcome.limit is not None and self._metrics is not None:
            self._metrics.function_limit_kills.labels(outcome.limit).inc()
        return outcome

    async def _invoke_on(self, worker: _Worker, request: RunRequest, started: float) -> RunOutcome:
        worker.runs += 1
        done: dict[str, Any] | None = None
        try:
            await worker.send(
                {
                    "op": "run",
                    "run": request.run_id,
                    "key": request.key,
                    "script": request.script,
                    "event": request.event,
                    "limits": self.limits.frame(),
                }
            )
            with trio.move_on_after(self.limits.wall) as deadline:
                async with trio.open_nursery() as calls:
                    while True:
                        message = await worker.reader.receive()
                        if message is None:
                            break
                        if message.get("op") == "api":
                            calls.start_soon(self._answer, worker, request, message)
                        elif message.get("op") == "done":
                            done = message
                            break
                    calls.cancel_scope.cancel()
        except (FrameError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            log.warning("sandbox pool: worker %d: %s", worker.process.pid, exc)
        seconds = time.perf_counter() - started
        if done is not None:
            return RunOutcome(
                ok=bool(done["ok"]),
                result=done.get("result"),
                logs=list(done.get("logs") or []),
                error=done.get("error"),
                limit=done.get("limit"),
                platform_failure=False,
                seconds=seconds,
            )
        if deadline.cancelled_caught:
            self._kill(worker)
            return _broke(f"wall time limit of {self.limits.wall:g} s exceeded", "wall", seconds)
        return await self._died(worker, seconds)

    async def _died(self, worker: _Worker, seconds: float) -> RunOutcome:
        """The outcome of a run whose worker ended under it."""
        with trio.move_on_after(5):
            await worker.process.wait()
        with trio.move_on_after(1):
            await worker.stderr_ended.wait()  # its last words
        code = worker.process.returncode
        tail = self._tail(worker)
        if code == -signal.SIGXCPU:
            return _broke(f"CPU time limit of {self.limits.cpu:g} s exceeded", "cpu", seconds)
        if "out of memory" in tail.lower():
            return _broke("memory limit exceeded", "heap", seconds)
        log.warning(
            "sandbox pool: worker %d ended (%s) during a run: %s",
            worker.process.pid,
            code,
            tail[-500:],
        )
        how = f"signal {-code}" if code is not None and code < 0 else f"exit status {code}"
        return RunOutcome(
            ok=False,
            result=None,
            logs=[],
            error=f"the sandbox worker ended during the run ({how})",
            limit=None,
            platform_failure=True,
            seconds=seconds,
        )

    async def _answer(self, worker: _Worker, request: RunRequest, message: dict[str, Any]) -> None:
        try:
            status, body = await self.api(
                request, str(message["method"]), str(message["path"]), message.get("body")
            )
        except Exception:
            log.exception("sandbox pool: an API call of run %s", request.run_id)
            status, body = 500, {"message": "the call failed on the service side"}
        try:
            await worker.send(
                {"op": "api_result", "call": message["call"], "status": status, "body": body}
            )
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass


def _broke(error: str, limit: str, seconds: float) -> RunOutcome:
    return RunOutcome(
        ok=False,
        result=None,
        logs=[],
        error=error,
        limit=limit,
        platform_failure=False,
        seconds=seconds,
    )


class WorkerStartFailed(Exception):
    """A sandbox worker did not report that V8 was up."""
