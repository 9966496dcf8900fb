"""``ledgerport functions run FILE``: a module run here, in the sandbox the server runs it in.

The same code as the server's: the module is compiled by ``apps.compile_module`` (what an
upload is compiled by) and run by ``runtime.SandboxPool`` with the platform's ``RunLimits``
(CPU, wall, heap, log and result), in a worker process of its own. The handler gets the event a
test run gets (the type's sample payload with ``test: true``, businessId ``test``), or the JSON
of a file. ``context.api`` calls are refused unless ``--api-token`` gives an access token of
the app: then they go to the server (``--server``, else the one signed in to last) as that
token's calls, as a deployed run's go with its run token. ``context.fetch`` calls are refused,
as in a test run. With ``--watch`` the file runs again each time it is saved.

Only this command imports the runtime and the compiler, and only when it runs: the other
commands start without them.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ._group import CONTEXT
from ._output import Refused, console, emit_json

if TYPE_CHECKING:
    from ledgerport.runtime import ApiAnswer, ApiCall, RunApi, RunOutcome, RunRequest, SandboxPool

WATCH_POLL = 0.25
"""Seconds between looks at the file's modification time under ``--watch``."""
DEFAULT_EVENT = "invoice.created"
"""The event type of a run given neither --event nor --event-file (as a test run's)."""
TEST_BUSINESS_ID = "test"
API_REFUSED = (
    "context.api is refused in a local run: give --api-token with an access token of the app"
    " (its calls then go to the server as that token's)"
)


async def refused_api(request: RunRequest, call: ApiCall) -> ApiAnswer:
    """The data API of a run given no ``--api-token``: every call refused (403)."""
    from ledgerport.runtime import ApiAnswer

    return ApiAnswer(403, {"message": API_REFUSED, "code": "API_TOKEN_REQUIRED"})


def api_over_http(server: str, token: str) -> RunApi:
    """The data API of ``server`` called with the access token ``token``: a call answers as
    the server answered it (a server out of reach: 503 naming it)."""
    import httpx

    from ledgerport.runtime import ApiAnswer

    client = httpx.AsyncClient(
        base_url=server,
        headers={"Authorization": f"Bearer {token}", "User-Agent": "ledgerport-cli"},
        timeout=httpx.Timeout(30.0, connect=10.0),
    )

    async def api(request: RunRequest, call: ApiCall) -> ApiAnswer:
        headers = {"Content-Type": "application/json"} if call.body is not None else {}
        try:
            response = await client.request(
                call.method, call.path, content=call.body, headers=headers
            )
        except httpx.HTTPError as exc:
            return ApiAnswer(503, {"message": f"cannot reach {server}: {exc}"})
        try:
            body = response.json() if response.content else None
        except ValueError:
            body = {"message": response.text[:500]}
        retry_after = response.headers.get("retry-after", "")
        return ApiAnswer(
            response.status_code, body, float(retry_after) if retry_after.isdigit() else None
        )

    return api


def sample_event(event_type: str) -> str:
    """The body a test run of ``event_type`` gets: its sample with ``test: true``, as the
    server's test runs have it (``queues.test_body``)."""
    from ledgerport import catalog

    kind = catalog.event_type(event_type)
    if kind is None:
        raise click.BadParameter(f"{event_type!r} is not an event type", param_hint="--event")
    return json.dumps(
        {
            "id": "run_local",
            "eventId": None,
            "type": kind.name,
            "apiVersion": catalog.CURRENT_API_VERSION,
            "businessId": TEST_BUSINESS_ID,
            "created": int(time.time()),
            "data": {**kind.sample_data(), "test": True},
        },
        separators=(",", ":"),
    )


def _file_event(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8")
        json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise click.BadParameter(f"{path}: {exc}", param_hint="--event-file") from exc
    return text


def _script(file: Path) -> str:
    """The compiled module, or Refused with why it cannot run (what an upload would say)."""
    from ledgerport import apps
    from ledgerport.errors import DomainError

    try:
        source = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise Refused(f"{file}: {exc}") from exc
    try:
        return apps.compile_module(source).script
    except DomainError as exc:
        raise Refused(f"{file}: {exc}") from exc


def show_outcome(outcome: RunOutcome, *, as_json: bool) -> None:
    """Logs, then the result or the error with its stack (and the limit broken)."""
    result: Any = json.loads(outcome.result) if outcome.result is not None else None
    if as_json:
        emit_json(
            {
                "ok": outcome.ok,
                "logs": outcome.logs,
                "result": result,
                "error": outcome.error,
                "stack": outcome.stack,
                "limit": outcome.limit,
                "durationMs": round(outcome.seconds * 1000),
            }
        )
        return
    out = console()
    for line in outcome.logs:
        out.print(line, markup=False)
    took = f"{outcome.seconds * 1000:.0f} ms"
    if outcome.ok:
        out.print(f"[green]ok[/green] in {took}: ", end="")
        out.print(json.dumps(result, indent=2), markup=False)
        return
    limit = f" (the {outcome.limit} limit)" if outcome.limit else ""
    out.print(f"[red]failed[/red] in {took}{limit}: ", end="")
    out.print(outcome.error or "", markup=False)
    if outcome.stack:
        out.print(outcome.stack, markup=False)


async def _run_all(
    file: Path, event: str, *, watch: bool, as_json: bool, api: RunApi = refused_api
) -> bool:
    import trio

    from ledgerport.runtime import RunLimits, SandboxPool

    pool = SandboxPool(size=1, limits=RunLimits(), api=api)
    # The file as it was before it is read: a save from then on runs it again, even one made
    # while this run was under way (a watch that looked only after the run would miss it).
    seen = _saved_at(file)
    async with trio.open_nursery() as nursery:
        # The worker boots (V8 and all) while this process compiles the module in a thread.
        first: list[str | Refused] = []
        compiled_first = trio.Event()

        async def compile_first() -> None:
            first.append(await trio.to_thread.run_sync(_script_or_refusal, file))
            compiled_first.set()

        nursery.start_soon(compile_first)
        await nursery.start(pool.run)
        await compiled_first.wait()
        ok = await _run_once(pool, first[0], event, 1, as_json=as_json)
        number = 1
        while watch:
            seen = await _next_save(trio.Path(file), seen)
            number += 1
            if not as_json:
                console().rule(f"{file} changed: run {number}")
            compiled = await trio.to_thread.run_sync(_script_or_refusal, file)
            ok = await _run_once(pool, compiled, event, number, as_json=as_json)
        nursery.cancel_scope.cancel()
    return ok


def _script_or_refusal(file: Path) -> str | Refused:
    try:
        return _script(file)
    except Refused as refused:
        return refused


def _saved_at(file: Path) -> tuple[int, int]:
    """What tells one save of the file from the next: its modification time and size."""
    stat = file.stat()
    return stat.st_mtime_ns, stat.st_size


async def _next_save(path: Any, seen: tuple[int, int]) -> tuple[int, int]:
    """Until the file at ``path`` (a ``trio.Path``) differs from ``seen`` (``_saved_at``);
    answers how it stands then, before it is read again."""
    import trio

    while True:
        stat = await path.stat()
        now = (stat.st_mtime_ns, stat.st_size)
        if now != seen:
            return now
        await trio.sleep(WATCH_POLL)


async def _run_once(
    pool: SandboxPool, compiled: str | Refused, event: str, number: int, *, as_json: bool
) -> bool:
    from ledgerport.runtime import RunRequest

    if isinstance(compiled, Refused):
        compiled.show()
        return False
    # Each save is a new version: a new key, so an isolate of its own, as on the server.
    request = RunRequest(f"run_local_{number}", f"local:{number}", compiled, event)
    outcome = await pool.invoke(request)
    show_outcome(outcome, as_json=as_json)
    return outcome.ok


@click.command("run", context_settings=CONTEXT)
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--event", "event_type", metavar="TYPE", help="Run on this type's sample event.")
@click.option(
    "--event-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Run on the JSON in this file instead.",
)
@click.option("--watch", is_flag=True, help="Run again each time FILE is saved.")
@click.option(
    "--api-token",
    metavar="TOKEN",
    envvar="LEDGERPORT_API_TOKEN",
    help="An access token of the app: context.api calls go to the server with it"
    " (without it they are refused).",
)
@click.option(
    "--server",
    metavar="URL",
    envvar="LEDGERPORT_SERVER",
    help="Where context.api calls go with --api-token (default: the one signed in to last).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
def run(
    file: Path,
    event_type: str | None,
    event_file: Path | None,
    watch: bool,
    api_token: str | None,
    server: str | None,
    as_json: bool,
) -> None:
    """Run the module FILE here, with the server's sandbox and limits, and print its logs and
    result, or its error with the stack. Exits 1 when the run throws or breaks a limit.

    \b
    Example:
      ledgerport functions run sync.js --event customer.created
      ledgerport functions run sync.js --event-file event.json --watch
      ledgerport functions run sync.js --api-token lp_at_... --server http://127.0.0.1:8080
    """
    import trio

    if event_type and event_file:
        raise click.UsageError("give --event or --event-file, not both")
    event = _file_event(event_file) if event_file else sample_event(event_type or DEFAULT_EVENT)
    api = refused_api if api_token is None else api_over_http(_api_server(server), api_token)
    try:
        ok = trio.run(lambda: _run_all(file, event, watch=watch, as_json=as_json, api=api))
    except KeyboardInterrupt:
        return
    if not ok:
        raise click.exceptions.Exit(1)


def _api_server(server: str | None) -> str:
    """Where ``context.api`` calls go: ``--server``, else the server signed in to last."""
    from ._credentials import CredentialsUnreadable, load_credentials, normal_server

    if server:
        return normal_server(server)
    try:
        current = load_credentials().current
    except CredentialsUnreadable as exc:
        raise Refused(str(exc)) from exc
    if current is None:
        raise click.UsageError("--api-token needs --server URL (or a server signed in to)")
    return current
