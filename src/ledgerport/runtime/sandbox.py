"""A sandbox worker: ``python -m ledgerport.runtime.sandbox --memory-mib N``.

One process, started by the engine's pool (``_pool.py``) and spoken to over its stdin and stdout
in the frames of ``_frames.py``. It runs hosted functions in V8 through mini-racer, one run at a
time. V8 lives only in these processes: it is not fork-safe, and mini-racer's own asyncio loop
cannot share a process with trio_asyncio. A worker that crashes, runs out of memory or is killed
takes no more than its current run with it.

Each function version gets its own V8 isolate, kept for the next runs of that version (its
module's top level runs once per isolate, as a module's does), so one app's state is never seen
by another app's run. Isolates are dropped least recently used first, and after a run that broke
the heap limit.

A run is sealed:

- Its ``context.api`` and ``context.log`` are made for it and stamp every call with its run id
  when the call is made. The way out to the pool is bound to its isolate and given to the
  harness only: no global of the guest's reaches it. A call of an earlier run, or from an
  isolate other than the running one, is refused here (and would be by the pool) and marks the
  worker unclean, so the pool recycles it.
- It is over only when nothing it started is pending: when its handler has settled, the worker
  waits (within the wall limit, which the pool enforces) for the calls it started and those
  their continuations start, then closes it in one step that succeeds only when none is
  pending. A closed run's calls throw in the guest and never leave the isolate.
- A handler whose promise waits on nothing that can ever settle it (no call pending, nothing
  else to come: the isolate has no timers, no shared memory, no WebAssembly and no finalizers)
  ends at once instead of holding its worker for the whole wall limit.

What reports a run is the harness's own: it captures the JSON functions, string and promise
methods it uses before any guest code runs, builds the outcome's text by concatenating strings it
quoted itself, and the worker checks every size again (``_limits.bounded``) before it answers.

The way out of the isolate is mini-racer's one-way notification, a private part
(``Context._register_js_notification``, reached as ``MiniRacer._ctx``): the public
``wrap_py_function`` costs a promise and seven round trips to V8's thread a call. The release is
bounded in ``pyproject.toml``; ``tests/unit/test_dependency_contracts.py::test_mini_racer_*``
names what is relied on, and ``docs/upstream/mini-racer.md`` what would let it go.

The process limits itself: its data segment (RLIMIT_DATA, which V8's heap and buffers count
against), its address space (RLIMIT_AS, set once V8 is up to what V8 reserved, a terabyte for its
sandbox, plus a headroom for isolates) and, per run, its CPU time (RLIMIT_CPU: the kernel stops a
run that exceeds it with SIGXCPU). Wall time is the engine's to enforce: it kills the worker.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import resource
import secrets
import time
from collections import OrderedDict
from typing import Any

from ._frames import (
    HEADER_SIZE,
    MAX_FRAME,
    Api,
    ApiResult,
    Done,
    Fetch,
    FetchResult,
    Frame,
    FrameError,
    Ready,
    Run,
    decode_frame,
    encode_frame,
    frame_length,
    is_header_pair,
)
from ._limits import LOG_TIME_MAX, RunLimits, bounded

_MORE_ARGUMENTS = {"report": 2, "idle": 1}
"""Arguments after the first of the harness's ``call(kind, run id, ...)`` by kind; a call out
(``api``, ``fetch``) is one JSON text."""
ISOLATES_KEPT = 16
"""Function versions whose isolate a worker keeps at once."""
ADDRESS_SPACE_HEADROOM = 64 * 1024**3
"""Bytes of address space a worker may map beyond what V8 reserved at start: each isolate
reserves about 1.7 GiB (measured), so ISOLATES_KEPT and more fit."""
POLL = 0.02
"""Seconds between looks at the heap limit, and at whether a waiting handler can still settle,
while an asynchronous run goes on."""
LOG_TEXT_PER_BYTE = 13
"""Characters of the outcome's text one byte of the log limit can take at most: an empty line
costs one byte (its newline) and takes its quotes, a comma and its time (at most nine
characters with its comma); a character of a line takes at most six (an escape)."""
OUTCOME_OVERHEAD = 64 * 1024
"""Bytes of an outcome's text beyond its log and result limits (quoting, the error): past
them the text is not read."""
NEVER_SETTLES = (
    "the handler's promise can never settle: it waits for nothing that is pending"
    " (no context.api call, and a function has no timers)"
)

# Evaluated once per isolate, before the module: a function of the way out (a one-way
# notification to Python bound to this isolate: the call returns at once, and mini-racer hands
# its arguments to the worker as an array V8 made) answering the harness, which the worker keeps
# under a name of its own drawn at random (a global lexical binding: no object lists it, so no
# guest code finds or replaces it). The worker calls it only by evaluating source text, never by
# passing arguments from Python: mini-racer builds an argument list through Array.prototype,
# which guest code may have replaced.
_HARNESS = r"""
(call) => {
  "use strict";
  const global = globalThis;
  // Captured before any guest code runs: what reports a run must not be the guest's to change.
  const uncurry = Function.prototype.bind.bind(Function.prototype.call);
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  const toText = String;
  const charCodeAt = uncurry(String.prototype.charCodeAt);
  const promiseThen = uncurry(Promise.prototype.then);
  const PromiseCtor = Promise;
  const promiseResolve = Promise.resolve.bind(Promise);
  const promiseReject = Promise.reject.bind(Promise);
  const ErrorCtor = Error;
  const dateNow = Date.now;
  const mapGet = uncurry(Map.prototype.get);
  const mapSet = uncurry(Map.prototype.set);
  const mapDelete = uncurry(Map.prototype.delete);
  const freeze = Object.freeze;
  const objectKeys = Object.keys;
  const TypeErrorCtor = TypeError;
  const define = Object.defineProperty;
  const apply = Reflect.apply;
  // A function has no timers. Shared memory and Atomics would let a handler hold its worker at
  // no CPU cost (Atomics.wait) and settle promises from outside the run (Atomics.waitAsync);
  // WebAssembly's memory lies outside the heap limit; finalizers run after a run has ended.
  for (const name of ["setTimeout", "clearTimeout", "__timer_manager"]) {
    define(global, name, { value: undefined, writable: false });
  }
  for (const name of ["SharedArrayBuffer", "Atomics", "WebAssembly", "FinalizationRegistry"]) {
    delete global[name];
  }
  let toLog = () => {};
  const console = freeze({ log: (...v) => toLog(v), info: (...v) => toLog(v),
    warn: (...v) => toLog(v), error: (...v) => toLog(v), debug: (...v) => toLog(v) });
  define(global, "console", { value: console, writable: false, configurable: false });

  const utf8Length = (text) => {
    let size = 0;
    for (let i = 0; i < text.length; i++) {
      const code = charCodeAt(text, i);
      if (code < 0x80) size += 1;
      else if (code < 0x800) size += 2;
      else if (code >= 0xd800 && code < 0xdc00 && i + 1 < text.length) { size += 4; i++; }
      else size += 3;
    }
    return size;
  };
  // A string primitive: JSON.stringify quotes it without consulting anything of the guest's.
  const quote = (text) => stringify(text);
  const show = (value) => {
    if (typeof value === "string") return value;
    try { const text = stringify(value); if (typeof text === "string") return text; }
    catch {}
    try { return toText(value); } catch { return "[value that cannot be shown]"; }
  };
  const describe = (error) => {
    try {
      if (error instanceof ErrorCtor) return toText(error.name) + ": " + toText(error.message);
    } catch {}
    return "thrown: " + show(error);
  };
  const stackOf = (error) => {
    try {
      const stack = error instanceof ErrorCtor ? error.stack : undefined;
      return typeof stack === "string" ? stack : null;
    } catch { return null; }
  };

  let load = null;
  let exported = null;
  let active = null;
  let calls = 0;
  // The calls waiting for their answer, by number: the worker answers by evaluating
  // answer(number, text), so no answer passes through an argument list.
  const answers = new Map();

  const run = (runId, eventText, logLimit, resultLimit, secretsText) => {
    let pending = 0;
    let closed = false;
    let settled = false;
    let waitingForIdle = false;
    let logged = 0;
    let logCount = 0;
    let logText = "";
    let logTimes = "";
    let logOver = false;
    const startedAt = dateNow();
    const logLimitError = "log limit of " + logLimit + " bytes exceeded";
    const report = (text) => { call("report", runId, text); };

    const log = (values) => {
      if (closed) throw new ErrorCtor("the run has ended");
      let line = "";
      for (let i = 0; i < values.length; i++) line += (i ? " " : "") + show(values[i]);
      const size = utf8Length(line) + 1;
      if (logOver || logged + size > logLimit) {
        logOver = true;
        throw new ErrorCtor(logLimitError);
      }
      logged += size;
      logTimes += (logCount ? "," : "") + toText(dateNow() - startedAt);
      logText += (logCount++ ? "," : "") + quote(line);
    };
    const callEnded = () => {
      pending--;
      if (pending === 0 && waitingForIdle) { waitingForIdle = false; call("idle", runId); }
    };
    const apiCall = (method, path, body) => {
      if (closed) return promiseReject(new ErrorCtor("the run has ended: context.api is closed"));
      let bodyText = null;
      let target;
      try {
        if (body !== undefined) {
          bodyText = stringify(body);
          if (typeof bodyText !== "string") bodyText = null;
        }
        target = toText(path);
      } catch (error) { return promiseReject(error); }
      pending++;
      const id = ++calls;
      return new PromiseCtor((resolve, reject) => {
        mapSet(answers, id, (text) => {
          callEnded();
          let answer;
          try { answer = parse(text); } catch (error) { reject(error); return; }
          if (answer.status >= 400) {
            const message = answer.body && answer.body.message !== undefined
              ? show(answer.body.message) : "HTTP " + answer.status;
            const error = new ErrorCtor(
              method + " " + target + ": " + answer.status + " " + message);
            error.name = "ApiError";
            error.status = answer.status;
            error.body = answer.body;
            reject(error);
          } else {
            resolve(answer.body);
          }
        });
        // One argument, the harness's own JSON: each argument of the way out costs mini-racer
        // a round trip to read.
        call('{"kind":"api","run":' + quote(runId) + ',"id":' + toText(id) + ',"method":'
          + quote(method) + ',"path":' + quote(target) + ',"body":'
          + (bodyText === null ? "null" : quote(bodyText)) + ',"at":'
          + toText(dateNow() - startedAt) + ',"lines":' + toText(logCount) + "}");
      });
    };
    const api = freeze({
      get: (path) => apiCall("GET", path),
      post: (path, body) => apiCall("POST", path, body),
      delete: (path) => apiCall("DELETE", path),
    });
    // The run's placeholders by secret name: what context.secret answers. A placeholder is
    // drawn for this run and means nothing outside it; the value never enters the isolate.
    const placeholders = new Map();
    {
      const given = parse(secretsText);
      const names = objectKeys(given);
      for (let i = 0; i < names.length; i++) mapSet(placeholders, names[i], given[names[i]]);
    }
    const secret = (name) => {
      if (closed) throw new ErrorCtor("the run has ended: context.secret is closed");
      const key = toText(name);
      const placeholder = mapGet(placeholders, key);
      if (placeholder === undefined) {
        throw new ErrorCtor("context.secret: the app has no secret named " + quote(key));
      }
      return placeholder;
    };
    // context.fetch(url, {method, headers, body}): the engine makes the request (the worker
    // has no network), to a host the function allows, putting a secret's value where its
    // placeholder stands in a header value. The request goes out as one JSON text the harness
    // writes itself: {method, url, headers: [[name, value], ...], body}.
    const fetchCall = (url, init) => {
      if (closed) return promiseReject(new ErrorCtor("the run has ended: context.fetch is closed"));
      let target;
      let method = "GET";
      let headerText = "[";
      let bodyText = "null";
      try {
        target = toText(url);
        if (init !== undefined && init !== null) {
          const givenMethod = init.method;
          if (givenMethod !== undefined) method = toText(givenMethod);
          const given = init.headers;
          if (given !== undefined && given !== null) {
            const names = objectKeys(given);
            for (let i = 0; i < names.length; i++) {
              headerText += (i ? "," : "") + "[" + quote(toText(names[i])) + ","
                + quote(toText(given[names[i]])) + "]";
            }
          }
          const body = init.body;
          if (body !== undefined && body !== null) {
            if (typeof body !== "string") {
              throw new TypeErrorCtor("context.fetch: body must be a string (JSON.stringify it)");
            }
            bodyText = quote(body);
          }
        }
      } catch (error) { return promiseReject(error); }
      headerText += "]";
      pending++;
      const id = ++calls;
      return new PromiseCtor((resolve, reject) => {
        mapSet(answers, id, (text) => {
          callEnded();
          let answer;
          try { answer = parse(text); } catch (error) { reject(error); return; }
          if (answer.error !== null) {
            const error = new ErrorCtor(answer.error);
            error.name = "FetchError";
            reject(error);
          } else {
            resolve(freeze({ status: answer.status, headers: freeze(answer.headers),
              body: answer.body }));
          }
        });
        call('{"kind":"fetch","run":' + quote(runId) + ',"id":' + toText(id) + ',"method":'
          + quote(method) + ',"url":' + quote(target) + ',"headers":' + headerText + ',"body":'
          + bodyText + ',"at":' + toText(dateNow() - startedAt) + ',"lines":'
          + toText(logCount) + "}");
      });
    };
    const context = freeze({
      log: (...values) => log(values), api, secret, fetch: fetchCall,
    });

    const outcome = (ok, result, error, limit, stack = null) => {
      settled = true;
      return '{"ok":' + (ok ? "true" : "false")
        + ',"result":' + (result === null ? "null" : quote(result))
        + ',"error":' + (error === null ? "null" : quote(error))
        + ',"stack":' + (stack === null ? "null" : quote(stack))
        + ',"limit":' + (limit === null ? "null" : quote(limit))
        + ',"logs":[' + logText + "]"
        + ',"logTimes":[' + logTimes + "]}";
    };
    const failed = (error) => {
      if (logOver) return outcome(false, null, logLimitError, "log");
      return outcome(false, null, describe(error), null, stackOf(error));
    };
    const finished = (value) => {
      if (logOver) return failed(null);
      let json = null;
      if (value !== undefined) {
        try { json = stringify(value); } catch (error) {
          return outcome(false, null, "result is not JSON: " + describe(error), null);
        }
        if (typeof json !== "string") json = null;
      }
      if (json !== null && utf8Length(json) > resultLimit) {
        return outcome(false, null, "result larger than " + resultLimit + " bytes", "result");
      }
      return outcome(true, json, null, null);
    };
    // The outcome's text when the handler answers at once; else null, and it is reported.
    const invoke = () => {
      if (exported === null || typeof exported.handler !== "function") {
        return outcome(false, null, "TypeError: the exported handler is not a function", null);
      }
      let answer;
      try { answer = apply(exported.handler, undefined, [parse(eventText), context]); }
      catch (error) { return failed(error); }
      let thenable = false;
      try {
        thenable = answer !== null && (typeof answer === "object" || typeof answer === "function")
          && typeof answer.then === "function";
      } catch (error) { return failed(error); }
      if (!thenable) return finished(answer);
      promiseThen(promiseResolve(answer),
        (value) => report(finished(value)), (error) => report(failed(error)));
      return null;
    };

    active = freeze({
      close: () => {
        if (pending > 0) return false;
        closed = true;
        return true;
      },
      state: () => (settled ? "settled" : pending > 0 ? "waiting" : "stuck"),
      waitIdle: () => {
        if (pending === 0) call("idle", runId);
        else waitingForIdle = true;
      },
      abandon: (error) => outcome(false, null, error, null),
    });
    toLog = (values) => { if (!closed) log(values); };
    if (exported !== null) return invoke();
    promiseThen(load(), (module) => {
      exported = module;
      const text = invoke();
      if (text !== null) report(text);
    }, (error) => report(failed(error)));
    return null;
  };
  return freeze({
    load: (loader) => { if (load === null) load = loader; },
    answer: (id, text) => {
      const settle = mapGet(answers, id);
      if (settle === undefined) return;
      mapDelete(answers, id);
      settle(text);
    },
    run,
    close: () => active.close(),
    state: () => active.state(),
    waitIdle: () => active.waitIdle(),
    abandon: (error) => active.abandon(error),
  });
}
"""


class NeverSettles(Exception):
    """The handler waits on a promise nothing can settle."""


class _Isolate:
    """One function version's V8 isolate with the harness installed; its module loads lazily
    with its first run."""

    def __init__(self, key: str, script: str, heap: int, worker: _Worker) -> None:
        from py_mini_racer import MiniRacer

        self.key = key
        self.racer = MiniRacer()
        self.racer.set_hard_memory_limit(heap)
        context = self.racer._ctx
        if context is None:
            raise RuntimeError("mini-racer made no context")
        self._context = context
        self._stack = contextlib.AsyncExitStack()
        self._worker = worker
        self._script = script
        self._name = f"__harness_{secrets.token_hex(16)}"
        self.outcome: asyncio.Future[str] | None = None
        self.idle: asyncio.Future[None] | None = None

    async def start(self) -> None:
        from py_mini_racer import JSMappedObject

        # mini-racer's private notification: see the module's docstring.
        call = self._stack.enter_context(self._context._register_js_notification(self._notified))
        global_object = self.racer.eval("this")
        assert isinstance(global_object, JSMappedObject)
        global_object[self._name] = call
        # No guest code has run yet: the way out goes into the harness and off the global.
        self.racer.eval(
            f"const {self._name}_ = ({_HARNESS})(globalThis.{self._name});"
            f" delete globalThis.{self._name};"
        )
        self._name += "_"
        # Evaluated as a script of its own (an indirect eval), so the positions in its stacks
        # are the script's, under the name it gives itself (``//# sourceURL``).
        self.racer.eval(f"{self._name}.load((0, eval)({json.dumps(self._script)}))")

    def _notified(self, handle: Any) -> None:
        """The harness called the way out (on mini-racer's loop, once V8's thread is done with
        the call): its arguments, read here, go to the worker."""
        from py_mini_racer import JSArray

        context = self._context
        args: tuple[Any, ...] = ()
        try:
            given = context._value_handle_to_python(handle)
            if isinstance(given, JSArray):
                # Each read is a round trip to V8's thread: only the arguments the harness
                # passes for that kind are read (its calls pass one, a report three).
                args = (context.get_object_item(given, 0),)
                more = _MORE_ARGUMENTS.get(args[0]) if isinstance(args[0], str) else None
                for index in range(1, 1 + (more or 0)):
                    args += (context.get_object_item(given, index),)
        except Exception:  # the isolate went away under the call: nothing to answer
            args = ()
        self._worker.way_out(self, args)

    def control(self, call: str) -> Any:
        """Call the harness: source text only (see _HARNESS)."""
        return self.racer.eval(f"{self._name}.{call}")

    async def close(self) -> None:
        self._worker.forget(self)
        await self._stack.aclose()
        self.racer.close()

    async def run(self, message: Run) -> str:
        """The run's outcome text, once nothing it started is pending."""
        loop = asyncio.get_running_loop()
        self.outcome = loop.create_future()
        answer = self.control(
            f"run({json.dumps(message.run)}, {json.dumps(message.event)},"
            f" {int(message.log)}, {int(message.result)},"
            f" {json.dumps(json.dumps(message.secrets))})"
        )
        if not isinstance(answer, str):
            try:
                answer = str(await self._until(self.outcome, watch_stuck=True))
            except NeverSettles:
                answer = str(self.control(f"abandon({json.dumps(NEVER_SETTLES)})"))
        # Closed by a step of its own: the continuations the handler left run between steps
        # (V8 runs its microtasks once a step's script is done), and may still make calls.
        while not self.control("close()"):
            self.idle = loop.create_future()
            self.control("waitIdle()")
            await self._until(self.idle, watch_stuck=False)
        return answer

    async def _until(self, future: asyncio.Future[Any], *, watch_stuck: bool) -> Any:
        """What ``future`` is set to. V8 stops a run that reaches the heap limit without
        settling, and a handler may wait on nothing at all: both are looked for while
        waiting."""
        from py_mini_racer import JSOOMException

        while True:
            done, _ = await asyncio.wait([future], timeout=POLL)
            if done:
                return future.result()
            # Reading the state lets V8 run what is queued: the heap limit is looked at after.
            stuck = watch_stuck and self.control("state()") == "stuck"
            if self.racer.was_hard_memory_limit_reached():
                raise JSOOMException("heap limit reached")
            if stuck:
                raise NeverSettles


class _Worker:
    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self._isolates: OrderedDict[str, _Isolate] = OrderedDict()
        self._run: Run | None = None
        self._calls = 0
        self._answers: dict[int, tuple[_Isolate, int, type[ApiResult | FetchResult]]] = {}
        """The calls out waiting for the pool's answer: the isolate, the harness's number and
        the answer's kind."""
        self._unclean = False
        """Something outside the run going on tried to act: the pool recycles this worker."""

    def send(self, frame: Frame) -> None:
        self._writer.write(encode_frame(frame))

    def way_out(self, isolate: _Isolate, given: tuple[Any, ...]) -> None:
        """The harness of ``isolate`` reports or calls out for a run: ``(kind, run id, ...)``
        for a report and the wait for idle, one JSON text ``{kind, run, id, ...}`` for a call
        (``api``, ``fetch``), answered later by ``answer(id, text)``. Refused unless the run is
        the one going on in that isolate (the worker is then unclean, and the call is never
        answered)."""
        call = _call_of(given[0]) if len(given) == 1 else None
        if call is not None:
            kind, run_id, args = call["kind"], call["run"], (call,)
        elif len(given) >= 2:
            kind, run_id, args = given[0], given[1], given[2:]
        else:
            self._unclean = True
            return
        run = self._run
        if run is None or run.key != isolate.key or run_id != run.run:
            self._unclean = True
            return
        if kind == "report" and len(args) == 1 and isinstance(args[0], str):
            if isolate.outcome is not None and not isolate.outcome.done():
                isolate.outcome.set_result(args[0])
            return
        if kind == "idle" and not args:
            if isolate.idle is not None and not isolate.idle.done():
                isolate.idle.set_result(None)
            return
        if kind == "api" and call is not None:
            self._api_call(isolate, run, call)
        elif kind == "fetch" and call is not None:
            self._fetch_call(isolate, run, call)
        else:
            self._unclean = True

    def _api_call(self, isolate: _Isolate, run: Run, message: dict[str, Any]) -> None:
        """``context.api``'s way out: the pool makes the call, and its answer goes back to the
        harness as the call ``id`` of the isolate (``answered``)."""
        number, method, path, body = (message.get(k) for k in ("id", "method", "path", "body"))
        if not (
            isinstance(number, int)
            and isinstance(method, str)
            and isinstance(path, str)
            and (body is None or isinstance(body, str))
        ):
            self._unclean = True
            return
        call = self._waiting(isolate, number, ApiResult)
        self.send(
            Api(
                run=run.run,
                call=call,
                method=method,
                path=path,
                body=body,
                at=_at(message),
                lines=_lines(message),
            )
        )

    def _fetch_call(self, isolate: _Isolate, run: Run, message: dict[str, Any]) -> None:
        """``context.fetch``'s way out: the pool has the engine make the request, and its
        answer (or why there is none) goes back to the harness as the call ``id``."""
        number = message.get("id")
        request = _fetch_request(message)
        if not isinstance(number, int) or request is None:
            self._unclean = True
            return
        method, url, pairs, body = request
        call = self._waiting(isolate, number, FetchResult)
        self.send(
            Fetch(
                run=run.run,
                call=call,
                method=method,
                url=url,
                headers=pairs,
                body=body,
                at=_at(message),
                lines=_lines(message),
            )
        )

    def _waiting(self, isolate: _Isolate, number: int, kind: type[ApiResult | FetchResult]) -> int:
        """A call out, numbered for the frames, waiting for its answer of ``kind``."""
        self._calls += 1
        self._answers[self._calls] = (isolate, number, kind)
        return self._calls

    def forget(self, isolate: _Isolate) -> None:
        """An isolate closes: nothing is answered into it any more."""
        for call, (waiting, _, _) in list(self._answers.items()):
            if waiting is isolate:
                del self._answers[call]

    def answered(self, frame: ApiResult | FetchResult) -> None:
        """An answer of the pool: into the harness of the isolate that made the call, by
        evaluating ``answer(id, text)``; an answer for no call of the run going on is
        dropped."""
        waiting = self._answers.get(frame.call)
        if self._run is None or frame.run != self._run.run or waiting is None:
            return
        del self._answers[frame.call]
        isolate, number, kind = waiting
        if not isinstance(frame, kind) and kind is ApiResult:
            text = json.dumps({"status": 500, "body": {"message": "the engine answered a fetch"}})
        elif not isinstance(frame, kind):
            text = json.dumps({"error": "context.fetch: the engine answered something else"})
        elif isinstance(frame, ApiResult):
            text = json.dumps({"status": frame.status, "body": frame.body})
        elif frame.error is not None:
            text = json.dumps({"error": frame.error})
        else:
            text = json.dumps(
                {
                    "error": None,
                    "status": frame.status,
                    "headers": _header_object(frame.headers),
                    "body": frame.body,
                }
            )
        try:
            isolate.control(f"answer({number}, {json.dumps(text)})")
        except Exception:  # the isolate broke under the answer: the run ends with it
            self._unclean = True

    async def _isolate(self, message: Run) -> _Isolate:
        isolate = self._isolates.get(message.key)
        if isolate is not None:
            self._isolates.move_to_end(message.key)
            return isolate
        isolate = _Isolate(message.key, message.script, message.heap, self)
        await isolate.start()
        self._isolates[message.key] = isolate
        while len(self._isolates) > ISOLATES_KEPT:
            _, oldest = self._isolates.popitem(last=False)
            await oldest.close()
        return isolate

    async def _drop(self, key: str) -> None:
        isolate = self._isolates.pop(key, None)
        if isolate is not None:
            with contextlib.suppress(Exception):
                await isolate.close()

    async def run(self, message: Run) -> Done:
        from py_mini_racer import JSOOMException

        limits = RunLimits(
            cpu=message.cpu, heap=message.heap, log=message.log, result=message.result
        )
        self._run = message
        _limit_cpu(message.cpu)
        started = time.process_time()
        outcome: dict[str, Any]
        try:
            isolate = await self._isolate(message)
            outcome = _read_outcome(await isolate.run(message), limits)
        except JSOOMException:
            await self._drop(message.key)
            outcome = {
                "ok": False,
                "limit": "heap",
                "error": f"heap limit of {message.heap} bytes exceeded",
            }
        except Exception as exc:
            await self._drop(message.key)
            outcome = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        finally:
            self._run = None
        checked = bounded(
            limits,
            ok=outcome.get("ok") is True,
            result=_text_or_none(outcome.get("result")),
            logs=[line for line in outcome.get("logs") or [] if isinstance(line, str)],
            error=_text_or_none(outcome.get("error")),
            limit=_text_or_none(outcome.get("limit")),
            stack=_text_or_none(outcome.get("stack")),
            log_times=outcome.get("logTimes") or [],
        )
        clean = not self._unclean and not self._answers
        self._unclean = False
        return Done(
            run=message.run,
            ok=checked.ok,
            result=checked.result,
            logs=checked.logs,
            error=checked.error,
            limit=checked.limit,
            stack=checked.stack,
            log_times=checked.log_times,
            cpu_ms=(time.process_time() - started) * 1000,
            clean=clean,
        )


def _at(message: dict[str, Any]) -> int:
    """When the guest made a call, as the harness wrote it (0 when it is not a time)."""
    given = message.get("at")
    return given if type(given) is int and 0 <= given <= LOG_TIME_MAX else 0


def _lines(message: dict[str, Any]) -> int:
    """How many lines the guest had logged when it made a call, as the harness wrote it (0 when
    it is not a count)."""
    given = message.get("lines")
    return given if type(given) is int and 0 <= given < 2**31 else 0


def _call_of(text: Any) -> dict[str, Any] | None:
    """A call the harness wrote as JSON text (``{kind, run, id, ...}``); None unless it is
    one."""
    if not isinstance(text, str):
        return None
    try:
        call = json.loads(text)
    except ValueError:
        return None
    if not isinstance(call, dict) or not {"kind", "run", "id"} <= call.keys():
        return None
    return call


def _fetch_request(request: dict[str, Any]) -> tuple[str, str, list[list[str]], str | None] | None:
    """The method, URL, [name, value] header pairs and body of a fetch the harness wrote;
    None unless it is exactly that."""
    if not {"method", "url", "headers", "body"} <= request.keys():
        return None
    method, url, pairs, body = (request[k] for k in ("method", "url", "headers", "body"))
    if not (
        isinstance(method, str)
        and isinstance(url, str)
        and (body is None or isinstance(body, str))
        and isinstance(pairs, list)
        and all(is_header_pair(pair) for pair in pairs)
    ):
        return None
    return method, url, pairs, body


def _header_object(pairs: list[list[str]]) -> dict[str, str]:
    """An answer's headers as the guest reads them: names in lower case, a repeated one's
    values joined by ", "."""
    headers: dict[str, str] = {}
    for name, value in pairs:
        key = name.lower()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return headers


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _read_outcome(text: str, limits: RunLimits) -> dict[str, Any]:
    """The outcome the harness reported, read only when its size can be that of an outcome
    within the limits."""
    if len(text) > limits.log * LOG_TEXT_PER_BYTE + limits.result + OUTCOME_OVERHEAD:
        return {"ok": False, "limit": "log", "error": "the run's outcome is larger than its limits"}
    try:
        outcome = json.loads(text)
    except ValueError:
        return {"ok": False, "error": "the run's outcome could not be read"}
    if not isinstance(outcome, dict):
        return {"ok": False, "error": "the run's outcome could not be read"}
    return outcome


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


_cpu_soft_limit: int | None = None
"""The soft RLIMIT_CPU this process set last."""


def _limit_cpu(seconds: float) -> None:
    """From now on, this run may use ``seconds`` of CPU: past them the kernel sends SIGXCPU,
    whose default action ends the process (the engine reads the signal as the CPU limit).
    The limit is in whole seconds of the process's CPU time; it is set again only when that
    whole second changes (short runs in a row share it)."""
    global _cpu_soft_limit
    soft = math.ceil(time.process_time() + seconds)
    if soft == _cpu_soft_limit:
        return
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    _cpu_soft_limit = soft


async def _read_frame(reader: asyncio.StreamReader) -> Frame | None:
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
    worker.send(Ready(pid=os.getpid()))
    await writer.drain()
    running: asyncio.Task[None] | None = None

    async def run(message: Run) -> None:
        worker.send(await worker.run(message))
        await writer.drain()

    while (frame := await _read_frame(reader)) is not None:
        if isinstance(frame, Run):
            if running is not None and not running.done():
                raise FrameError("a run was sent while another went on")
            running = asyncio.create_task(run(frame))
        elif isinstance(frame, ApiResult | FetchResult):
            worker.answered(frame)
        else:
            raise FrameError(f"a {frame.op} frame is not for a worker")
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
