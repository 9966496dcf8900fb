"""A sandbox worker: ``python -m ledgerport.runtime.sandbox --memory-mib N``.

One process, started by the engine's pool (``_pool.py``) and spoken to over its stdin and stdout
in frames (``_frames.py``). It runs hosted functions in V8 through mini-racer, one run at a time.
V8 lives only in these processes: it is not fork-safe, and mini-racer's own asyncio loop cannot
share a process with trio_asyncio. A worker that crashes, runs out of memory or is killed takes
no more than its current run with it.

Messages (maps), engine to worker:

- ``{"op": "run", "run", "key", "script", "event", "limits": {"cpu", "heap", "log",
  "result"}}``: run ``script`` (a compiled module, ``apps.compile_module``) on ``event``;
- ``{"op": "api_result", "call", "status", "body"}``: the answer to an API call of the run.

Worker to engine:

- ``{"op": "ready", "pid"}`` once V8 is up;
- ``{"op": "api", "run", "call", "method", "path", "body"}``: the run calls the data API
  (``context.api``); the run waits for ``api_result``;
- ``{"op": "done", "run", "ok", "result", "logs", "error", "limit", "cpu_ms"}``: the run ended.
  ``result`` is the handler's answer as JSON text (None when it answered nothing), ``limit``
  names the limit it broke (``heap``, ``log``, ``result``) or is None.

Each function version gets its own V8 isolate, kept for the next runs of that version (its
module's top level runs once per isolate, as a module's does), so one app's state is never seen
by another app's run. Isolates are dropped least recently used first, and after a run that broke
the heap limit. The process limits itself: its data segment (RLIMIT_DATA, which V8's heap and
buffers count against), its address space (RLIMIT_AS, set once V8 is up to what V8 reserved, a
terabyte for its sandbox, plus a headroom for isolates) and, per run, its CPU time (RLIMIT_CPU:
the kernel stops a run that exceeds it with SIGXCPU). Wall time is the engine's to enforce: it kills
the worker.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import resource
import time
from collections import OrderedDict
from typing import Any

from ._frames import HEADER_SIZE, MAX_FRAME, decode_frame, encode_frame, frame_length

ISOLATES_KEPT = 16
"""Function versions whose isolate a worker keeps at once."""
ADDRESS_SPACE_HEADROOM = 64 * 1024**3
"""Bytes of address space a worker may map beyond what V8 reserved at start: each isolate
reserves about 1.7 GiB (measured), so ISOLATES_KEPT and more fit."""
OOM_CHECK = 0.02
"""Seconds between looks at the heap limit while an asynchronous run goes on."""

# Installed once per isolate: takes timers away (a function has none), sends console output to
# the run's log, then defines the run.
_HARNESS = r"""
(() => {
  "use strict";
  // Not configurable, but writable: nothing left to call.
  for (const name of ["setTimeout", "clearTimeout", "__timer_manager"]) {
    globalThis[name] = undefined;
  }
  let currentLog = null;
  const toLog = (...values) => { if (currentLog !== null) currentLog(...values); };
  globalThis.console = Object.freeze(
    { log: toLog, info: toLog, warn: toLog, error: toLog, debug: toLog });
  const utf8Length = (text) => {
    let size = 0;
    for (let i = 0; i < text.length; i++) {
      const code = text.charCodeAt(i);
      if (code < 0x80) size += 1;
      else if (code < 0x800) size += 2;
      else if (code >= 0xd800 && code < 0xdc00 && i + 1 < text.length) { size += 4; i++; }
      else size += 3;
    }
    return size;
  };
  const show = (value) => {
    if (typeof value === "string") return value;
    try { const text = JSON.stringify(value); return text === undefined ? String(value) : text; }
    catch { return String(value); }
  };
  const describe = (error) => {
    if (error instanceof Error) return `${error.name}: ${error.message}`;
    return `thrown: ${show(error)}`;
  };
  let exported = null;
  // Answers the outcome as JSON text, or a promise of it when the handler (or the module's
  // first load) is asynchronous.
  globalThis.__ledgerport_run = (load, event, limits) => {
    const logs = [];
    let logged = 0;
    let logOver = false;
    const log = (...values) => {
      const line = values.map(show).join(" ");
      const size = utf8Length(line) + 1;
      if (logOver || logged + size > limits.log) {
        logOver = true;
        throw new Error(`log limit of ${limits.log} bytes exceeded`);
      }
      logged += size;
      logs.push(line);
    };
    const call = async (method, path, body) => {
      const answer = JSON.parse(
        await globalThis.__ledgerport_call(method, String(path),
          body === undefined ? null : JSON.stringify(body)));
      if (answer.status >= 400) {
        const message = answer.body && answer.body.message !== undefined
          ? show(answer.body.message) : `HTTP ${answer.status}`;
        const error = new Error(`${method} ${path}: ${answer.status} ${message}`);
        error.name = "ApiError";
        error.status = answer.status;
        error.body = answer.body;
        throw error;
      }
      return answer.body;
    };
    const api = Object.freeze({
      get: (path) => call("GET", path),
      post: (path, body) => call("POST", path, body),
      delete: (path) => call("DELETE", path),
    });
    const context = Object.freeze({ log, api });
    const ended = (outcome) => JSON.stringify({ logs, ...outcome });
    const logLimit = () =>
      ended({ ok: false, limit: "log", error: `log limit of ${limits.log} bytes exceeded` });
    const failed = (error) => {
      if (logOver) return logLimit();
      return ended({ ok: false, error: describe(error) });
    };
    const finished = (result) => {
      if (logOver) return failed(null);
      let json = null;
      try { json = result === undefined ? null : JSON.stringify(result) ?? null; }
      catch (error) {
        return ended({ ok: false, error: `result is not JSON: ${describe(error)}` });
      }
      if (json !== null && utf8Length(json) > limits.result) {
        return ended({ ok: false, limit: "result",
                       error: `result larger than ${limits.result} bytes` });
      }
      return ended({ ok: true, result: json });
    };
    const invoke = () => {
      if (typeof exported.handler !== "function") {
        return ended({ ok: false, error: "TypeError: the exported handler is not a function" });
      }
      currentLog = log;
      let result;
      try { result = exported.handler(event, context); }
      catch (error) { currentLog = null; return failed(error); }
      if (result === null || typeof result !== "object" || typeof result.then !== "function") {
        currentLog = null;
        return finished(result);  // a sync handler: the answer without a promise
      }
      return Promise.resolve(result).then(finished, failed)
        .finally(() => { currentLog = null; });
    };
    if (exported !== null) return invoke();
    return load().then((module) => { exported = module; return invoke(); }, failed);
  };
})();
"""


class _Isolate:
    """One function version's V8 isolate, with its module loaded lazily by its first run."""

    def __init__(self, script: str, heap: int, worker: _Worker) -> None:
        from py_mini_racer import MiniRacer

        self.racer = MiniRacer()
        self.racer.set_hard_memory_limit(heap)
        self._stack = contextlib.AsyncExitStack()
        self._worker = worker
        self._script = script

    async def start(self) -> None:
        from py_mini_racer import JSMappedObject

        call = await self._stack.enter_async_context(
            self.racer.wrap_py_function(self._worker.api_call)
        )
        global_object = self.racer.eval("this")
        assert isinstance(global_object, JSMappedObject)
        global_object["__ledgerport_call"] = call
        self.racer.eval(_HARNESS)
        self.racer.eval(f"globalThis.__ledgerport_load = {self._script}")

    async def close(self) -> None:
        await self._stack.aclose()
        self.racer.close()


class _Worker:
    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self._isolates: OrderedDict[str, _Isolate] = OrderedDict()
        self._run_id: str | None = None
        self._calls = 0
        self._answers: dict[int, asyncio.Future[dict[str, Any]]] = {}

    def send(self, message: dict[str, Any]) -> None:
        self._writer.write(encode_frame(message))

    async def api_call(self, method: str, path: str, body: str | None) -> str:
        """``context.api``'s way out: the engine makes the call and answers."""
        self._calls += 1
        call = self._calls
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._answers[call] = answer
        self.send(
            {
                "op": "api",
                "run": self._run_id,
                "call": call,
                "method": method,
                "path": path,
                "body": body,
            }
        )
        await self._writer.drain()
        try:
            result = await answer
        finally:
            self._answers.pop(call, None)
        return json.dumps({"status": result["status"], "body": result["body"]})

    def answered(self, message: dict[str, Any]) -> None:
        answer = self._answers.get(int(message["call"]))
        if answer is not None and not answer.done():
            answer.set_result(message)

    async def _isolate(self, key: str, script: str, heap: int) -> _Isolate:
        isolate = self._isolates.get(key)
        if isolate is not None:
            self._isolates.move_to_end(key)
            return isolate
        isolate = _Isolate(script, heap, self)
        await isolate.start()
        self._isolates[key] = isolate
        while len(self._isolates) > ISOLATES_KEPT:
            _, oldest = self._isolates.popitem(last=False)
            await oldest.close()
        return isolate

    async def _drop(self, key: str) -> None:
        isolate = self._isolates.pop(key, None)
        if isolate is not None:
            with contextlib.suppress(Exception):
                await isolate.close()

    async def run(self, message: dict[str, Any]) -> dict[str, Any]:
        from py_mini_racer import JSOOMException

        limits = message["limits"]
        key = str(message["key"])
        self._run_id = str(message["run"])
        _limit_cpu(float(limits["cpu"]))
        started = time.process_time()
        outcome: dict[str, Any]
        try:
            isolate = await self._isolate(key, str(message["script"]), int(limits["heap"]))
            answer = isolate.racer.eval(
                "__ledgerport_run(__ledgerport_load,"
                f" {json.dumps(message['event'])}, {json.dumps(limits)})"
            )
            if not isinstance(answer, str):
                answer = await _settled(isolate, answer)
            outcome = json.loads(answer)
        except JSOOMException:
            await self._drop(key)
            outcome = {
                "ok": False,
                "limit": "heap",
                "error": f"heap limit of {limits['heap']} bytes exceeded",
                "logs": [],
            }
        except Exception as exc:
            await self._drop(key)
            outcome = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000], "logs": []}
        finally:
            self._run_id = None
        return {
            "op": "done",
            "run": message["run"],
            "ok": bool(outcome.get("ok")),
            "result": outcome.get("result"),
            "logs": outcome.get("logs", []),
            "error": outcome.get("error"),
            "limit": outcome.get("limit"),
            "cpu_ms": (time.process_time() - started) * 1000,
        }


async def _settled(isolate: _Isolate, promise: Any) -> str:
    """The outcome a run's promise settles with. V8 stops a run that reaches the heap limit
    without settling its promise: that is looked for while waiting."""
    from py_mini_racer import JSOOMException

    waiting = asyncio.ensure_future(promise)
    while True:
        done, _ = await asyncio.wait([waiting], timeout=OOM_CHECK)
        if done:
            return str(waiting.result())
        if isolate.racer.was_hard_memory_limit_reached():
            waiting.cancel()
            raise JSOOMException("heap limit reached")


def _limit_address_space() -> None:
    """Bound the address space to what V8 reserved at start plus ADDRESS_SPACE_HEADROOM.

    V8 reserves about a terabyte of address space when it starts (its sandbox), so a limit
    set before it would stop it from starting; set now, it bounds every later mapping. The
    memory a run may actually use is the data segment's limit (``--memory-mib``)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                size = int(line.split()[1]) * 1024
                break
        else:
            return
    limit = size + ADDRESS_SPACE_HEADROOM
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _limit_cpu(seconds: float) -> None:
    """From now on, this run may use ``seconds`` of CPU: past them the kernel sends SIGXCPU,
    whose default action ends the process (the engine reads the signal as the CPU limit)."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    spent = used.ru_utime + used.ru_stime
    soft = math.ceil(spent + seconds)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


async def _read_frame(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    try:
        header = await reader.readexactly(HEADER_SIZE)
    except asyncio.IncompleteReadError:
        return None
    payload = await reader.readexactly(frame_length(header))
    return decode_frame(payload)


async def _serve() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_FRAME + HEADER_SIZE)
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(0, "rb", buffering=0)
    )
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(1, "wb", buffering=0)
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    worker = _Worker(writer)

    from py_mini_racer import MiniRacer

    MiniRacer().close()  # V8 is up: the first isolate costs the most
    _limit_address_space()
    worker.send({"op": "ready", "pid": os.getpid()})
    await writer.drain()
    running: asyncio.Task[None] | None = None

    async def run(message: dict[str, Any]) -> None:
        worker.send(await worker.run(message))
        await writer.drain()

    while (message := await _read_frame(reader)) is not None:
        if message.get("op") == "run":
            if running is not None and not running.done():
                worker.send(
                    {
                        "op": "done",
                        "run": message.get("run"),
                        "ok": False,
                        "logs": [],
                        "error": "worker busy",
                        "limit": None,
                        "result": None,
                        "cpu_ms": 0.0,
                    }
                )
                continue
            running = asyncio.create_task(run(message))
        elif message.get("op") == "api_result":
            worker.answered(message)
    if running is not None:
        running.cancel()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m ledgerport.runtime.sandbox")
    parser.add_argument("--memory-mib", type=int, required=True)
    args = parser.parse_args(argv)
    limit = args.memory_mib * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    asyncio.run(_serve())


if __name__ == "__main__":
    main()
