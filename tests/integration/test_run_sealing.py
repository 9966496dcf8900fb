"""A run is sealed: nothing a run started acts after it ends or under another run's identity,
whatever the handler does, and a worker that speaks out of turn serves no one else.

The pool here is real (real sandbox workers, or a worker that forges frames on purpose); its
API is a fake that records, for each call, the run the pool made it for, and checks that this
is the run going on at that moment."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from ledgerport.apps import compile_module
from ledgerport.ops import Metrics
from ledgerport.runtime import (
    ApiAnswer,
    ApiCall,
    FetchAnswer,
    FetchCall,
    RunLimits,
    RunOutcome,
    RunRequest,
    SandboxPool,
)

TIMEOUT = 60
FORGED_WORKER = str(Path(__file__).with_name("forged_worker.py"))


class Ledger:
    """The fake data API: answers each call with the run it was made for, and records it."""

    def __init__(self) -> None:
        self.going_on: str | None = None
        self.calls: list[tuple[str, str, str]] = []
        self.out_of_turn: list[tuple[str, str]] = []
        self.fetches: list[tuple[str, str]] = []

    async def api(self, run: RunRequest, call: ApiCall) -> ApiAnswer:
        if run.run_id != self.going_on:
            self.out_of_turn.append((run.run_id, call.path))
        self.calls.append((run.run_id, call.method, call.path))
        await trio.sleep(0.005)
        return ApiAnswer(200, {"data": [{"run": run.run_id}]})

    async def fetch(self, run: RunRequest, call: FetchCall) -> FetchAnswer:
        self.fetches.append((run.run_id, call.url))
        return FetchAnswer(status=200, body="fetched")

    async def invoke(self, pool: SandboxPool, request: RunRequest) -> RunOutcome:
        self.going_on = request.run_id
        try:
            return await pool.invoke(request)
        finally:
            self.going_on = None


@asynccontextmanager
async def pool_of(ledger: Ledger, **options: Any) -> AsyncIterator[SandboxPool]:
    pool = SandboxPool(**{"size": 1, "api": ledger.api, "fetch": ledger.fetch, **options})
    async with trio.open_nursery() as nursery:
        await nursery.start(pool.run)
        yield pool
        nursery.cancel_scope.cancel()


_runs = 0


def request(source: str, key: str) -> RunRequest:
    global _runs
    _runs += 1
    event = {"id": f"run_{_runs}", "type": "customer.created", "data": {"id": "cus_1"}}
    return RunRequest(f"run_{_runs}", key, compile_module(source).script, json.dumps(event))


ATTACKS = {
    "a chain started before a sync return": """
        export function handler(event, context) {
          context.api.get("/customers")
            .then((page) => context.api.post("/customers", { name: JSON.stringify(page) }));
          return "returned";
        }""",
    "a call started in a then after an async return": """
        export async function handler(event, context) {
          const first = context.api.get("/customers");
          first.then(() => first.then(() => context.api.get("/invoices")));
          await null;
          return "returned";
        }""",
    "a chain of continuations after return": """
        export function handler(event, context) {
          let step = Promise.resolve();
          for (let i = 0; i < 5; i++) step = step.then(() => context.api.get("/step/" + i));
          return "returned";
        }""",
    "a call inside a result's toJSON": """
        export function handler(event, context) {
          return { toJSON() { context.api.post("/customers", { name: "late" }); return 1; } };
        }""",
    "calls from a rejected handler": """
        export async function handler(event, context) {
          context.api.get("/customers").then(() => context.api.get("/invoices"));
          throw new Error("failed on purpose");
        }""",
}
VICTIM = """
export async function handler(event, context) {
  const page = await context.api.get("/customers");
  return page.data[0].run;
}
"""


@pytest.mark.parametrize("attack", sorted(ATTACKS))
async def test_calls_a_run_started_end_with_it_and_another_apps_next_run_is_its_own(
    attack: str,
) -> None:
    """The attacker's run, then another app's run on the same worker: every call is made for
    the run that made it, while it goes on."""
    ledger = Ledger()
    with trio.fail_after(TIMEOUT):
        async with pool_of(ledger) as pool:
            attacker = request(ATTACKS[attack], "fn_attacker:1")
            first = await ledger.invoke(pool, attacker)
            made_by_attacker = list(ledger.calls)
            victim = request(VICTIM, "fn_victim:1")
            second = await ledger.invoke(pool, victim)
    assert ledger.out_of_turn == []
    assert made_by_attacker, "the attack made its calls while its run went on"
    assert {run for run, _, _ in made_by_attacker} == {attacker.run_id}
    assert ledger.calls[len(made_by_attacker) :] == [(victim.run_id, "GET", "/customers")]
    assert second.ok, second.error
    assert json.loads(second.result or "null") == victim.run_id
    assert first.error is None or "failed on purpose" in first.error


@pytest.mark.parametrize("attack", sorted(ATTACKS))
async def test_two_runs_of_one_function_version_on_one_worker_each_make_their_own_calls(
    attack: str,
) -> None:
    """Runs of one version share an isolate (one app, maybe two businesses): what the first
    left running acts for neither the second nor after its own end."""
    ledger = Ledger()
    with trio.fail_after(TIMEOUT):
        async with pool_of(ledger) as pool:
            first = request(ATTACKS[attack], "fn_attacker:1")
            await ledger.invoke(pool, first)
            made_by_first = list(ledger.calls)
            second = request(ATTACKS[attack], "fn_attacker:1")
            await ledger.invoke(pool, second)
    assert ledger.out_of_turn == []
    assert {run for run, _, _ in made_by_first} == {first.run_id}
    made_by_second = ledger.calls[len(made_by_first) :]
    assert [call[1:] for call in made_by_second] == [call[1:] for call in made_by_first]
    assert {run for run, _, _ in made_by_second} == {second.run_id}


async def test_every_continuation_of_a_run_is_waited_for() -> None:
    ledger = Ledger()
    with trio.fail_after(TIMEOUT):
        async with pool_of(ledger) as pool:
            run = request(ATTACKS["a chain of continuations after return"], "fn_1:1")
            outcome = await ledger.invoke(pool, run)
    assert outcome.ok
    assert [path for _, _, path in ledger.calls] == [f"/step/{i}" for i in range(5)]


async def test_a_call_after_the_run_has_closed_never_leaves_the_isolate() -> None:
    """A handler keeps its context and calls it in its next run (same isolate): the old run's
    api is closed; only the new run's calls go out."""
    source = """
    let kept = null;
    export async function handler(event, context) {
      let old = "none";
      if (kept !== null) {
        try { await kept.api.get("/from-an-old-run"); old = "answered"; }
        catch (error) { old = error.message; }
      }
      kept = context;
      await context.api.get("/own");
      return old;
    }
    """
    ledger = Ledger()
    with trio.fail_after(TIMEOUT):
        async with pool_of(ledger) as pool:
            first = await ledger.invoke(pool, request(source, "fn_keeper:1"))
            second_request = request(source, "fn_keeper:1")
            second = await ledger.invoke(pool, second_request)
    assert json.loads(first.result or "null") == "none"
    assert json.loads(second.result or "null") == "the run has ended: context.api is closed"
    assert [path for _, _, path in ledger.calls] == ["/own", "/own"]
    assert ledger.out_of_turn == []


async def test_a_promise_that_can_never_settle_ends_its_run_at_once_and_frees_the_worker() -> None:
    ledger = Ledger()
    with trio.fail_after(TIMEOUT):
        async with pool_of(ledger, limits=RunLimits(wall=30)) as pool:
            (pid,) = pool.pids()
            started = trio.current_time()
            stuck = await ledger.invoke(
                pool, request("export const handler = () => new Promise(() => {})", "fn_s:1")
            )
            took = trio.current_time() - started
            after = await ledger.invoke(pool, request(VICTIM, "fn_v:1"))
            (still,) = pool.pids()
    assert (stuck.ok, stuck.limit) == (False, None)
    assert stuck.error is not None
    assert "can never settle" in stuck.error
    assert took < 15, "it did not wait for the 30 s wall limit"
    assert after.ok
    assert still == pid


UNREACHABLE = {
    "SharedArrayBuffer": "typeof SharedArrayBuffer",
    "Atomics": "typeof Atomics",
    "WebAssembly": "typeof WebAssembly",
    "FinalizationRegistry": "typeof FinalizationRegistry",
    "setTimeout": "typeof setTimeout",
    "a shared buffer by its prototype": "typeof Object.getPrototypeOf(new Int32Array(1).buffer)"
    " .constructor === 'function' && Object.getPrototypeOf(new Int32Array(1).buffer)"
    ".constructor.name",
}


@pytest.mark.parametrize("name", sorted(UNREACHABLE))
async def test_what_a_function_does_not_get(name: str) -> None:
    ledger = Ledger()
    source = f"export const handler = () => {UNREACHABLE[name]}"
    with trio.fail_after(TIMEOUT):
        async with pool_of(ledger) as pool:
            outcome = await ledger.invoke(pool, request(source, "fn_g:1"))
    assert outcome.ok, outcome.error
    assert json.loads(outcome.result or "null") in ("undefined", "ArrayBuffer")


TAMPERING = {
    "JSON.stringify": 'JSON.stringify = () => \'{"ok":true,"logs":["forged"]}\';',
    "JSON.parse": "JSON.parse = () => ({ status: 200, body: 'forged' });",
    "Array.prototype.push": "Array.prototype.push = function () { return 0 };",
    "Object.prototype.toJSON": (
        "Object.prototype.toJSON = function () { return 'x'.repeat(1e6) };"
    ),
    "String.prototype.slice": "String.prototype.slice = function () { return '' };",
    "String.prototype.charCodeAt": "String.prototype.charCodeAt = function () { return 0 };",
    "Promise.prototype.then": "Promise.prototype.then = function () { return this };",
}


@pytest.mark.parametrize("tampered", sorted(TAMPERING))
async def test_the_limits_hold_whatever_the_handler_replaces(tampered: str) -> None:
    """The handler replaces what an outcome's report could rely on, then logs and answers far
    past the limits: the run fails on a limit, and nothing kept is over it."""
    limits = RunLimits(log=1000, result=1000)
    source = f"""
    export function handler(event, context) {{
      {TAMPERING[tampered]}
      for (let i = 0; i < 50; i++) context.log("line " + i + " " + "z".repeat(100));
      return "r".repeat(100000);
    }}
    """
    ledger = Ledger()
    with trio.fail_after(TIMEOUT):
        async with pool_of(ledger, limits=limits) as pool:
            outcome = await ledger.invoke(pool, request(source, f"fn_{len(tampered)}:1"))
            after = await ledger.invoke(pool, request(VICTIM, "fn_next:1"))
    assert not outcome.ok
    assert outcome.limit in ("log", "result")
    assert sum(len(line.encode()) + 1 for line in outcome.logs) <= limits.log
    assert outcome.result is None or len(outcome.result.encode()) <= limits.result
    assert after.ok, after.error


async def test_a_forged_success_within_the_limits_stays_the_handlers_own() -> None:
    """What a handler that replaces JSON.stringify can still do is answer its own result:
    the logs and result kept are what it wrote, within the limits."""
    source = """
    export function handler(event, context) {
      JSON.stringify = () => '{"ok":true,"result":"\\\\"forged\\\\"","logs":[]}';
      context.log("kept");
      return { real: 1 };
    }
    """
    ledger = Ledger()
    with trio.fail_after(TIMEOUT):
        async with pool_of(ledger) as pool:
            outcome = await ledger.invoke(pool, request(source, "fn_forge:1"))
    assert outcome.logs == ["kept"]
    assert json.loads(outcome.result or "null") == {"real": 1}


@pytest.mark.parametrize("behaviour", ["other-run-api", "other-run-fetch"])
async def test_the_pool_refuses_a_call_of_another_run_and_recycles_the_worker(
    behaviour: str,
) -> None:
    """A data API call or a fetch naming another run: never made, never answered."""
    ledger = Ledger()
    metrics = Metrics()
    with trio.fail_after(TIMEOUT):
        async with pool_of(
            ledger, metrics=metrics, worker_command=(sys.executable, FORGED_WORKER, behaviour)
        ) as pool:
            (pid,) = pool.pids()
            outcome = await ledger.invoke(pool, request("export const handler = () => 1", "k:1"))
            await pool.until_full()
            (replacement,) = pool.pids()
    assert ledger.calls == []
    assert ledger.fetches == []
    assert outcome.logs == ["unanswered"]
    assert replacement != pid
    refused = metrics.function_frames_refused.labels("other_run")._value.get()
    assert refused == 1


@pytest.mark.parametrize("behaviour", ["api-after-done", "fetch-after-done"])
async def test_a_call_sent_after_done_is_never_answered(behaviour: str) -> None:
    """A data API call or a fetch sent after the run's Done: never made."""
    ledger = Ledger()
    with trio.fail_after(TIMEOUT):
        async with pool_of(
            ledger, worker_command=(sys.executable, FORGED_WORKER, behaviour)
        ) as pool:
            first = await ledger.invoke(pool, request("export const handler = () => 1", "k:1"))
            await pool.until_full()
            second = await ledger.invoke(pool, request("export const handler = () => 1", "k:1"))
    assert first.ok
    assert second.ok
    assert ledger.calls == []
    assert ledger.fetches == []


async def test_a_context_kept_past_its_run_cannot_fetch() -> None:
    """A run's context kept in a global: its fetch in a later run throws in the guest and never
    leaves the isolate."""
    source = """
    let kept = null;
    export async function handler(event, context) {
      if (kept === null) { kept = context; return "kept"; }
      try { await kept.fetch("https://api.example.com/"); return "fetched"; }
      catch (error) { return error.message; }
    }
    """
    ledger = Ledger()
    with trio.fail_after(TIMEOUT):
        async with pool_of(ledger) as pool:
            first = await ledger.invoke(pool, request(source, "fn_keep:1"))
            second = await ledger.invoke(pool, request(source, "fn_keep:1"))
    assert json.loads(first.result or "null") == "kept"
    assert json.loads(second.result or "null") == "the run has ended: context.fetch is closed"
    assert ledger.fetches == []


async def test_a_done_of_another_run_fails_the_run_as_the_platforms() -> None:
    ledger = Ledger()
    with trio.fail_after(TIMEOUT):
        async with pool_of(
            ledger, worker_command=(sys.executable, FORGED_WORKER, "other-run-done")
        ) as pool:
            (pid,) = pool.pids()
            outcome = await ledger.invoke(pool, request("export const handler = () => 1", "k:1"))
            await pool.until_full()
            (replacement,) = pool.pids()
    assert outcome.platform_failure
    assert outcome.result is None
    assert replacement != pid


async def test_the_pool_checks_a_reported_outcome_against_the_limits() -> None:
    ledger = Ledger()
    limits = RunLimits()
    with trio.fail_after(TIMEOUT):
        async with pool_of(
            ledger, worker_command=(sys.executable, FORGED_WORKER, "huge-outcome")
        ) as pool:
            outcome = await ledger.invoke(pool, request("export const handler = () => 1", "k:1"))
    assert (outcome.ok, outcome.limit, outcome.result) == (False, "log", None)
    assert sum(len(line.encode()) + 1 for line in outcome.logs) <= limits.log


async def test_a_worker_that_says_it_is_unclean_serves_no_one_else() -> None:
    ledger = Ledger()
    with trio.fail_after(TIMEOUT):
        async with pool_of(
            ledger, worker_command=(sys.executable, FORGED_WORKER, "unclean")
        ) as pool:
            (pid,) = pool.pids()
            outcome = await ledger.invoke(pool, request("export const handler = () => 1", "k:1"))
            await pool.until_full()
            (replacement,) = pool.pids()
    assert outcome.ok
    assert replacement != pid


async def test_a_run_cancelled_under_the_pool_gives_its_worker_up_and_the_pool_refills() -> None:
    ledger = Ledger()
    with trio.fail_after(TIMEOUT):
        async with pool_of(ledger, limits=RunLimits(wall=30, cpu=30)) as pool:
            (pid,) = pool.pids()
            with trio.move_on_after(0.5):
                await pool.invoke(request("export const handler = () => { for (;;) {} }", "k:1"))
            await pool.until_full()
            (replacement,) = pool.pids()
            after = await ledger.invoke(pool, request(VICTIM, "fn_v:1"))
    assert replacement != pid
    assert after.ok


async def test_calls_out_and_their_answers_pass_by_no_prototype_of_the_guests() -> None:
    """A handler that puts accessors on ``Array.prototype``'s first indexes and replaces
    ``push`` sees none of what goes out or comes in: every call is made as written, every
    answer arrives whole, and the run reports itself."""
    source = """
    let seen = 0;
    for (let i = 0; i < 4; i++) {
      Object.defineProperty(Array.prototype, String(i), { configurable: true,
        get() { seen++; return "forged"; }, set(v) { seen++; } });
    }
    Array.prototype.push = function () { seen++; return 0; };
    export async function handler(event, context) {
      const page = await context.api.get("/customers");
      const fetched = await context.fetch("http://127.0.0.1:9/x");
      return { run: page.data[0].run, body: fetched.body, seen };
    }
    """
    ledger = Ledger()
    with trio.fail_after(TIMEOUT):
        async with pool_of(ledger) as pool:
            made = request(source, "fn_accessors:1")
            outcome = await ledger.invoke(pool, made)
    assert outcome.ok, outcome.error
    assert json.loads(outcome.result or "null") == {
        "run": made.run_id,
        "body": "fetched",
        "seen": 0,
    }
    assert ledger.calls == [(made.run_id, "GET", "/customers")]
    assert ledger.fetches == [(made.run_id, "http://127.0.0.1:9/x")]
