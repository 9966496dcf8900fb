"""``context.secret`` and ``context.fetch`` in real sandbox workers, at the pool's level: a secret
is a placeholder drawn for the run (an unknown name throws at once), a fetch leaves the worker
as a frame the pool hands to its ``fetch`` with the guest's method, URL, headers and body as
written, its answer or its error comes back to the handler, and the run is over only when its
fetches are (contract.md, third round: "Hosted functions: secrets, outbound fetch, schedules").
What the engine does with a fetch is tests/integration/test_function_fetch.py's."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from ledgerport.apps import compile_module
from ledgerport.runtime import FetchAnswer, FetchCall, RunRequest, SandboxPool

TIMEOUT = 60
EVENT = {"id": "dlv_1", "type": "invoice.created", "data": {"id": "inv_1"}}
PLACEHOLDER = "lpsecret_0123456789abcdef0123456789abcdef"


@asynccontextmanager
async def running(**options: Any) -> AsyncIterator[SandboxPool]:
    pool = SandboxPool(**{"size": 1, **options})
    async with trio.open_nursery() as nursery:
        await nursery.start(pool.run)
        yield pool
        nursery.cancel_scope.cancel()


_runs = 0


def request(source: str, *, secrets: dict[str, str] | None = None) -> RunRequest:
    global _runs
    _runs += 1
    return RunRequest(
        f"run_{_runs}",
        f"fn_{_runs}:1",
        compile_module(source).script,
        json.dumps(EVENT),
        secrets or {},
    )


async def test_a_secret_is_its_runs_placeholder_and_an_unknown_name_throws() -> None:
    source = (
        "export function handler(e, context) {"
        " const key = context.secret('API_KEY');"
        " let unknown; try { context.secret('NOPE') } catch (error) { unknown = error.message }"
        " context.log(key); return {key, unknown, type: typeof key} }"
    )
    with trio.fail_after(TIMEOUT):
        async with running() as pool:
            outcome = await pool.invoke(request(source, secrets={"API_KEY": PLACEHOLDER}))
    assert outcome.ok, outcome.error
    assert json.loads(outcome.result or "null") == {
        "key": PLACEHOLDER,
        "unknown": 'context.secret: the app has no secret named "NOPE"',
        "type": "string",
    }
    assert outcome.logs == [PLACEHOLDER]


async def test_a_fetch_goes_to_the_pool_as_written_and_its_answer_comes_back() -> None:
    seen: list[FetchCall] = []

    async def fetch(run: RunRequest, call: FetchCall) -> FetchAnswer:
        seen.append(call)
        await trio.sleep(0.05)
        return FetchAnswer(
            status=201,
            headers=[["Content-Type", "application/json"], ["X-A", "1"], ["x-a", "2"]],
            body='{"ok":true}',
        )

    source = (
        "export async function handler(e, context) {"
        " context.log('charging'); console.log('5');"
        " const answer = await context.fetch('https://api.example.com/v1/charges?x=1', {"
        "  method: 'POST', headers: {Authorization: 'Bearer ' + context.secret('API_KEY'),"
        "  'Content-Type': 'application/json'}, body: JSON.stringify({amount: 5}) });"
        " return {status: answer.status, headers: answer.headers, body: JSON.parse(answer.body)}"
        " }"
    )
    with trio.fail_after(TIMEOUT):
        async with running(fetch=fetch) as pool:
            outcome = await pool.invoke(request(source, secrets={"API_KEY": PLACEHOLDER}))
    assert outcome.ok, outcome.error
    (call,) = seen
    assert call == FetchCall(
        "POST",
        "https://api.example.com/v1/charges?x=1",
        [["Authorization", f"Bearer {PLACEHOLDER}"], ["Content-Type", "application/json"]],
        '{"amount":5}',
        call.at,
        2,  # the lines logged before it
    )
    assert 0 <= call.at < 10_000  # on the handler's clock
    assert json.loads(outcome.result or "null") == {
        "status": 201,
        "headers": {"content-type": "application/json", "x-a": "1, 2"},
        "body": {"ok": True},
    }


async def test_a_refused_fetch_rejects_with_its_error() -> None:
    async def fetch(run: RunRequest, call: FetchCall) -> FetchAnswer:
        return FetchAnswer(error="context.fetch: evil.example refused: not an allowed host")

    source = (
        "export async function handler(e, context) {"
        " try { await context.fetch('https://evil.example/') } catch (error) {"
        "  return [error.name, error.message] } }"
    )
    with trio.fail_after(TIMEOUT):
        async with running(fetch=fetch) as pool:
            outcome = await pool.invoke(request(source))
    assert json.loads(outcome.result or "null") == [
        "FetchError",
        "context.fetch: evil.example refused: not an allowed host",
    ]


async def test_a_body_that_is_not_text_is_refused_in_the_sandbox() -> None:
    calls = 0

    async def fetch(run: RunRequest, call: FetchCall) -> FetchAnswer:
        nonlocal calls
        calls += 1
        return FetchAnswer(status=200)

    source = (
        "export async function handler(e, context) {"
        " try { await context.fetch('https://a.example/', {method: 'POST', body: {a: 1}}) }"
        " catch (error) { return error.name + ': ' + error.message } }"
    )
    with trio.fail_after(TIMEOUT):
        async with running(fetch=fetch) as pool:
            outcome = await pool.invoke(request(source))
    assert json.loads(outcome.result or "null") == (
        "TypeError: context.fetch: body must be a string (JSON.stringify it)"
    )
    assert calls == 0


async def test_a_run_ends_only_when_its_fetches_have_answered() -> None:
    """A handler that returns without awaiting its fetch: the run waits for it, as for
    ``context.api``."""
    answered = trio.Event()

    async def fetch(run: RunRequest, call: FetchCall) -> FetchAnswer:
        await trio.sleep(0.2)
        answered.set()
        return FetchAnswer(status=204)

    source = (
        "export function handler(e, context) {"
        " context.fetch('https://a.example/').then((a) => context.log('status', a.status));"
        " return 'returned' }"
    )
    with trio.fail_after(TIMEOUT):
        async with running(fetch=fetch) as pool:
            outcome = await pool.invoke(request(source))
    assert answered.is_set()
    assert outcome.ok, outcome.error
    assert outcome.seconds >= 0.2


async def test_a_pool_without_fetch_refuses_every_fetch() -> None:
    source = (
        "export async function handler(e, context) {"
        " try { await context.fetch('https://a.example/') } catch (error) {"
        "  return error.message } }"
    )
    with trio.fail_after(TIMEOUT):
        async with running() as pool:
            outcome = await pool.invoke(request(source))
    assert json.loads(outcome.result or "null") == "context.fetch is not available to this run"
