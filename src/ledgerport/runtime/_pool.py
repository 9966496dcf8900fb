"""The pool of sandbox workers: warm V8 processes that run hosted functions, supervised from trio.

:class:`SandboxPool` keeps ``size`` workers started (``python -m ledgerport.runtime.sandbox``,
a fresh interpreter each: V8 is not fork-safe) and hands each run to an idle one. It speaks to a
worker in the frames of ``_frames.py`` over its stdin and stdout. A run's calls to the data API
come back to the pool, which makes them with the ``api`` it was made with and answers; its
fetches likewise, with the ``fetch`` it was made with (the worker has no network).

A run is sealed here too: the pool answers an ``Api`` frame only when it names the run going on,
and only while that run goes on; any other frame (another run's, or one a worker never sends) is
refused, logged and counted, never answered, and the worker is recycled before it serves anyone
else, as is a worker that reports it saw something outside its run act. The outcome a worker
reports is checked against the run's limits again (``_limits.recheck``) before it goes further.

The pool enforces the run's wall time: past it, the worker is killed (which also stops a handler
that keeps V8's microtask queue busy after returning). A worker that dies during a run ends that
run: by the kernel's CPU limit (SIGXCPU) or V8 running out of memory, the run broke a limit; by
anything else, the platform failed it and the caller may run it again. Either way the pool
starts a replacement, as it does for a worker that has made ``runs_per_worker`` runs, and for
one whose run was cancelled under it (its state is unknown).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import trio

from ledgerport.ops import Metrics

from ._frames import (
    Api,
    ApiResult,
    Done,
    Fetch,
    FetchResult,
    Frame,
    FrameError,
    FrameReader,
    Ready,
    Run,
    WorkerStartFailed,
    encode_frame,
)
from ._limits import RunLimits, recheck

log = logging.getLogger("ledgerport.runtime.pool")

START_TIMEOUT = 30.0
"""Seconds a new worker has to report that V8 is up."""
RESTART_BACKOFF = (0.1, 0.5, 1.0, 5.0)
"""Seconds between attempts to start a replacement worker that keeps failing to start."""
STDERR_KEPT = 4096
"""Bytes of a worker's standard error kept for the log when it dies."""
WORKER_COMMAND = (sys.executable, "-m", "ledgerport.runtime.sandbox")
"""How a worker starts (``--memory-mib N`` follows)."""
WORKER_NICENESS = 10
"""How much lower than the service's a worker's CPU priority is (a nice(2) increment), set
as soon as it is spawned: guest code, and a worker's start, yield the CPU to the service, so a
tenant's busy runs slow other runs, not the requests every tenant sends."""
LOWEST_PRIORITY = 19
"""The highest niceness there is: a service started under ``nice`` above 9 gets workers here,
fewer than WORKER_NICENESS levels below it (at 19, none), and the pool says so as it starts."""


@dataclass(frozen=True)
class RunRequest:
    run_id: str
    key: str
    """The function version: runs of one key share an isolate, no two keys ever do."""
    script: str
    """The compiled module (``apps.compile_module``)."""
    event: str
    """What the handler gets, as JSON text."""
    secrets: Mapping[str, str] = field(default_factory=dict)
    """The placeholder ``context.secret(name)`` answers, by name (drawn for this run)."""


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
    stack: str | None = None
    """The stack of what the handler threw, when it threw an Error."""
    log_times: list[int] = field(default_factory=list)
    """When each log line was written, in milliseconds after the handler was called (empty
    when that is not known)."""


@dataclass(frozen=True)
class ApiCall:
    """One ``context.api`` call of a run."""

    method: str
    path: str
    body: str | None
    """JSON text, or None."""
    at: int = 0
    """When the guest called, in milliseconds after its handler was called (its log's clock,
    so the platform's line about the call goes in its place among the guest's)."""
    lines: int = 0
    """How many lines the guest had logged when it called: the platform's line about the call
    comes after them."""


@dataclass(frozen=True)
class ApiAnswer:
    status: int
    body: Any
    """The answer's JSON, parsed."""
    retry_after: float | None = None
    """A refusal's Retry-After (seconds), when it said one."""
    refused_by: str | None = None
    """The name of the rate limit that refused the call (its RateLimit-Policy), when one did."""


@dataclass(frozen=True)
class FetchCall:
    """One ``context.fetch`` call of a run, as the guest made it."""

    method: str
    url: str
    headers: list[list[str]]
    """[name, value] pairs, placeholders and all."""
    body: str | None
    at: int = 0
    """When the guest called it, in milliseconds after its handler was called."""
    lines: int = 0
    """How many lines the guest had logged when it called: the platform's line about the call
    comes after them."""


@dataclass(frozen=True)
class FetchAnswer:
    """What a fetch answers the guest: its ``error`` (a refusal or a failure, naming the host
    and never a header's value), else the answer's status, headers and body as text."""

    status: int = 0
    headers: list[list[str]] = field(default_factory=list)
    body: str = ""
    error: str | None = None


RunApi = Callable[[RunRequest, ApiCall], Awaitable[ApiAnswer]]
"""How a pool makes the calls of the run ``RunRequest``: given to the pool when it is made."""
DataApi = Callable[[str, ApiCall], Awaitable[ApiAnswer]]
"""The data API, called with an access token: what the runner makes a run's calls with."""


RunFetch = Callable[[RunRequest, FetchCall], Awaitable[FetchAnswer]]
"""How a pool makes the fetches of the run ``RunRequest``: given to the pool when it is made."""


async def no_api(request: RunRequest, call: ApiCall) -> ApiAnswer:
    """The API of a pool given none: every call is refused."""
    return ApiAnswer(503, {"message": "the data API is not available to this run"})


async def no_fetch(request: RunRequest, call: FetchCall) -> FetchAnswer:
    """The fetch of a pool given none: every fetch is refused."""
    return FetchAnswer(error="context.fetch is not available to this run")


@dataclass(eq=False)
class _Worker:
    process: trio.Process
    reader: FrameReader
    send_lock: trio.Lock = field(default_factory=trio.Lock)
    runs: int = 0
    stderr: bytearray = field(default_factory=bytearray)
    stderr_ended: trio.Event = field(default_factory=trio.Event)
    killed: bool = False
    unclean: bool = False
    """It must serve no one else: a frame outside its run came from it, or it said so."""

    async def send(self, frame: Frame) -> None:
        assert self.process.stdin is not None
        data = encode_frame(frame)
        try:
            self.send_lock.acquire_nowait()  # the usual case: no answer is being sent
        except trio.WouldBlock:
            await self.send_lock.acquire()
        try:
            await self.process.stdin.send_all(data)
        finally:
            self.send_lock.release()


class SandboxPool:
    """Warm sandbox workers and the runs handed to them (see the module docstring)."""

    def __init__(
        self,
        *,
        size: int = 2,
        spare: int = 0,
        runs_per_worker: int = 1000,
        memory_mib: int = 1024,
        limits: RunLimits | None = None,
        api: RunApi = no_api,
        fetch: RunFetch = no_fetch,
        metrics: Metrics | None = None,
        worker_command: Sequence[str] = WORKER_COMMAND,
    ) -> None:
        self.size = size
        self.spare = spare
        """Workers started beyond ``size`` when a run finds none idle: its caller let it start
        while other runs wait on the network (``engine/_run_book.py``). Once started, they stay
        warm in the pool."""
        self._worker_command = tuple(worker_command)
        self.limits = limits or RunLimits()
        self._runs_per_worker = runs_per_worker
        self._memory_mib = memory_mib
        self._api = api
        self._fetch = fetch
        self._metrics = metrics
        self._idle_send, self._idle = trio.open_memory_channel[_Worker](size + spare)
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
        service = os.getpriority(os.PRIO_PROCESS, 0)
        if self.size and service + WORKER_NICENESS > LOWEST_PRIORITY:
            log.warning(
                "sandbox pool: the service runs at nice %d, so its workers run at %d, %d levels"
                " below it instead of %d: busy runs take more of the CPU from requests",
                service,
                LOWEST_PRIORITY,
                LOWEST_PRIORITY - service,
                WORKER_NICENESS,
            )
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                try:
                    for _ in range(self.size):
                        self._idle_send.send_nowait(await self._start())
                    task_status.started()
                    await trio.sleep_forever()
                finally:
                    self._nursery = None  # stopping: nothing new starts in it
        finally:
            self._nursery = None
            leaving = self._alive | self._retiring
            for worker in leaving:
                self._kill(worker)
            for worker in leaving:
                await self._close(worker)

    async def _start(self) -> _Worker:
        if self._nursery is None:
            raise WorkerStartFailed("the pool is stopping")
        try:
            process = await trio.lowlevel.open_process(
                [*self._worker_command, "--memory-mib", str(self._memory_mib)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        except OSError as exc:  # no process (the system's limits, its memory): tried again
            raise WorkerStartFailed(f"sandbox worker could not start: {exc}") from exc
        assert process.stdout is not None
        niceness = min(os.getpriority(os.PRIO_PROCESS, 0) + WORKER_NICENESS, LOWEST_PRIORITY)
        with contextlib.suppress(ProcessLookupError):
            os.setpriority(os.PRIO_PROCESS, process.pid, niceness)
        worker = _Worker(process, FrameReader(process.stdout))
        self._alive.add(worker)
        self._gauge()
        if self._nursery is None:  # the pool stopped while the process started
            self._kill(worker)
            await self._close(worker)
            raise WorkerStartFailed("the pool is stopping")
        self._nursery.start_soon(self._drain_stderr, worker)
        try:
            with trio.fail_after(START_TIMEOUT):
                ready = await worker.reader.receive()
        except (trio.TooSlowError, FrameError, trio.BrokenResourceError) as exc:
            self._kill(worker)
            await self._close(worker)
            raise WorkerStartFailed(f"sandbox worker did not start: {exc!r}") from exc
        if not isinstance(ready, Ready):
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
        # A caller already cancelled takes no worker (a run cancelled under way costs it).
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            worker = self._idle.receive_nowait()  # the usual case: a worker is idle
        except trio.WouldBlock:
            worker = await self._spare_or_idle()
        started = time.perf_counter()
        try:
            outcome = await self._invoke_on(worker, request, started)
        except BaseException:
            # Cancelled (or a fault) in the middle of a run: what the worker holds is unknown,
            # so it serves no one again.
            self._kill(worker)
            if self._nursery is not None:
                self._retire(worker, "killed")
            else:
                await self._close(worker)  # the pool is stopping: no replacement
            raise
        if self._nursery is None:  # the pool stopped as the run ended: no replacement
            self._kill(worker)
            await self._close(worker)
        elif worker.process.returncode is not None or worker.killed:
            self._retire(worker, "killed" if worker.killed else "died")
        elif worker.unclean:
            self._retire(worker, "unclean")
        elif worker.runs >= self._runs_per_worker:
            self._retire(worker, "recycled")
        else:
            self._idle_send.send_nowait(worker)
        if outcome.limit is not None and self._metrics is not None:
            self._metrics.function_limit_kills.labels(outcome.limit).inc()
        return outcome

    async def _spare_or_idle(self) -> _Worker:
        """A spare worker started now, while the pool has fewer than ``size + spare``; else
        the next to be idle."""
        if self._nursery is None or len(self._alive) >= self.size + self.spare:
            return await self._idle.receive()
        try:
            return await self._start()
        except WorkerStartFailed as exc:
            log.warning("sandbox pool: a spare worker: %s", exc)
            return await self._idle.receive()

    async def _invoke_on(self, worker: _Worker, request: RunRequest, started: float) -> RunOutcome:
        worker.runs += 1
        done: Done | None = None
        try:
            await worker.send(
                Run(
                    run=request.run_id,
                    key=request.key,
                    script=request.script,
                    event=request.event,
                    cpu=self.limits.cpu,
                    heap=self.limits.heap,
                    log=self.limits.log,
                    result=self.limits.result,
                    secrets=dict(request.secrets),
                )
            )
            with trio.move_on_after(self.limits.wall) as deadline:
                frame = await worker.reader.receive()
                if isinstance(frame, Done) and frame.run == request.run_id:
                    done = frame  # the usual case: no call to answer
                elif frame is not None:
                    done = await self._serve_calls(worker, request, frame)
        except (FrameError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            log.warning("sandbox pool: worker %d: %s", worker.process.pid, exc)
            self._kill(worker)
        seconds = time.perf_counter() - started
        if done is not None:
            if not done.clean:
                worker.unclean = True
            checked = recheck(self.limits, done)
            return RunOutcome(
                ok=checked.ok,
                result=checked.result,
                logs=checked.logs,
                error=checked.error,
                limit=checked.limit,
                platform_failure=False,
                seconds=seconds,
                stack=checked.stack,
                log_times=checked.log_times,
            )
        if deadline.cancelled_caught:
            self._kill(worker)
            return _broke(f"wall time limit of {self.limits.wall:g} s exceeded", "wall", seconds)
        if worker.unclean:
            self._kill(worker)
        return await self._died(worker, seconds)

    async def _serve_calls(self, worker: _Worker, request: RunRequest, first: Frame) -> Done | None:
        """Answer the run's calls, ``first`` the first of its frames, until its Done (None if
        the worker stopped speaking the protocol or ended)."""
        done: Done | None = None
        async with trio.open_nursery() as calls:
            frame: Frame | None = first
            while frame is not None:
                if isinstance(frame, Api) and frame.run == request.run_id:
                    calls.start_soon(self._answer, worker, request, frame)
                elif isinstance(frame, Fetch) and frame.run == request.run_id:
                    calls.start_soon(self._answer_fetch, worker, request, frame)
                elif isinstance(frame, Done) and frame.run == request.run_id:
                    done = frame
                    break
                else:
                    self._refuse(worker, request, frame)
                    if not isinstance(frame, Api | Fetch):
                        break  # no longer a worker of this protocol
                frame = await worker.reader.receive()
            # Nothing of the run is answered once it is over.
            calls.cancel_scope.cancel()
        return done

    def _refuse(self, worker: _Worker, request: RunRequest, frame: Frame) -> None:
        """A frame that is not of the run going on, or not one a worker sends: never answered;
        the worker serves no one else."""
        worker.unclean = True
        reason = "other_run" if isinstance(frame, Api | Fetch | Done) else "unexpected"
        log.warning(
            "sandbox pool: worker %d sent a %s frame during run %s (%s): refused",
            worker.process.pid,
            frame.op,
            request.run_id,
            reason,
        )
        if self._metrics is not None:
            self._metrics.function_frames_refused.labels(reason).inc()

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

    async def _answer(self, worker: _Worker, request: RunRequest, frame: Api) -> None:
        try:
            answer = await self._api(
                request, ApiCall(frame.method, frame.path, frame.body, frame.at, frame.lines)
            )
        except Exception:
            log.exception("sandbox pool: an API call of run %s", request.run_id)
            answer = ApiAnswer(500, {"message": "the call failed on the service side"})
        try:
            await worker.send(
                ApiResult(run=frame.run, call=frame.call, status=answer.status, body=answer.body)
            )
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass

    async def _answer_fetch(self, worker: _Worker, request: RunRequest, frame: Fetch) -> None:
        try:
            answer = await self._fetch(
                request,
                FetchCall(
                    frame.method, frame.url, frame.headers, frame.body, frame.at, frame.lines
                ),
            )
        except Exception:
            # The exception's text is not the guest's to read: it may carry what was sent.
            log.error("sandbox pool: a fetch of run %s failed on the service side", request.run_id)
            answer = FetchAnswer(error="context.fetch failed on the service side")
        try:
            await worker.send(
                FetchResult(
                    run=frame.run,
                    call=frame.call,
                    status=answer.status,
                    headers=answer.headers,
                    body=answer.body,
                    error=answer.error,
                )
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
