"""An app's hosted functions in the console: upload (each upload a new version), list, read,
delete, and the recent runs (contract.md: Developer console API, Hosted functions)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, with_config
from quart import Response
from quart_schema import validate_request
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12

from ledgerport import apps, auth, catalog, storage
from ledgerport.errors import InvalidInput

from .._context import platform, unit_of_work
from .._ids import RUN
from .._openapi import JSON_BODY_ERRORS, Param, Reply, json_reply, one_of, operation
from ._blueprint import blueprint, developed_app, iso_time

EventName = Annotated[str, WithJsonSchema(one_of(event.name for event in catalog.EVENTS))]
RunStatus = Annotated[str, WithJsonSchema(one_of(apps.RUN_STATUSES))]
NAME = Param(
    "name",
    "path",
    "The function's name: a letter or digit, then up to 63 letters, digits, _ or -",
    {"type": "string", "pattern": catalog.FUNCTION_NAME_PATTERN},
)
RUN_ID = Param("run_id", "path", "The run's id", RUN.schema)
SOURCE_DESCRIPTION = (
    "An ES module exporting `handler(event, context)`, sync or async; it may import nothing."
    f" At most {catalog.FUNCTION_SOURCE_MAX_BYTES} bytes of UTF-8, brackets nested at most"
    f" {catalog.FUNCTION_SOURCE_MAX_DEPTH} deep, compiled within"
    f" {catalog.FUNCTION_COMPILE_SECONDS} seconds"
)
EVENTS_DESCRIPTION = (
    "The event types the function runs on, each at most once; a business or privacy event"
    " needs its gating scope among the app's registered scopes"
)


class FunctionIn(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    source: str = Field(
        min_length=1, max_length=catalog.FUNCTION_SOURCE_MAX_BYTES, description=SOURCE_DESCRIPTION
    )
    events: list[EventName] = Field(description=EVENTS_DESCRIPTION)


@with_config(ConfigDict(extra="forbid"))
class Function(TypedDict):
    id: str
    name: str
    events: list[EventName]
    version: int
    createdAt: str
    updatedAt: str


@with_config(ConfigDict(extra="forbid"))
class FunctionWithSource(TypedDict):
    """The function and the source of its latest version, as uploaded."""

    id: str
    name: str
    events: list[EventName]
    version: int
    createdAt: str
    updatedAt: str
    source: str


@with_config(ConfigDict(extra="forbid"))
class FunctionPage(TypedDict):
    """Every function of the app, oldest first: ``next`` is null."""

    data: list[Function]
    next: str | None


@with_config(ConfigDict(extra="forbid"))
class Run(TypedDict):
    id: str
    eventId: str | None
    type: EventName
    status: RunStatus
    attempts: int
    version: int | None
    durationMs: float | None
    logs: list[str]
    error: str | None
    result: Any
    createdAt: str
    logsTruncated: bool
    resultTruncated: bool


@with_config(ConfigDict(extra="forbid"))
class RunDetail(Run):
    """A run whole: every log line, its result, what it ran on and, when the handler threw an
    Error, its stack (``logsTruncated`` and ``resultTruncated`` are false)."""

    event: Any
    stack: str | None


@with_config(ConfigDict(extra="forbid"))
class RunPage(TypedDict):
    """The function's most recent runs, newest first: ``next`` is null."""

    data: list[Run]
    next: str | None


@with_config(ConfigDict(extra="forbid"))
class TestRun(TypedDict):
    """The queued test run: follow it at ``.../runs/{runId}``."""

    runId: str


def _function(function: apps.HostedFunction) -> Function:
    return {
        "id": function.id,
        "name": function.name,
        "events": list(function.events),
        "version": function.version,
        "createdAt": iso_time(function.created_at),
        "updatedAt": iso_time(function.updated_at),
    }


def _run(run: apps.FunctionRun) -> Run:
    return {
        "id": run.id,
        "eventId": run.event_id,
        "type": run.type,
        "status": run.status,
        "attempts": run.attempts,
        "version": run.version,
        "durationMs": run.duration_ms,
        "logs": run.logs,
        "error": run.error,
        "result": run.result,
        "createdAt": iso_time(run.created_at),
        "logsTruncated": run.logs_truncated,
        "resultTruncated": run.result_truncated,
    }


async def _count_upload(app_id: str) -> None:
    """Count an upload against the app's budget (catalog.RATE_LIMIT_FUNCTION_UPLOADS): each one
    costs a worker process. Taken outside any transaction, as every limit is (a shared limiter
    uses a connection of its own), and only once the caller is known to develop the app, so no
    one else can spend its budget."""
    p = platform()
    verdict = await p.limiter.take(auth.Budget(catalog.RATE_LIMIT_FUNCTION_UPLOADS, (app_id,)))
    if verdict.refused_by is not None:
        p.metrics.rate_limited.labels(verdict.refused_by.name).inc()
        raise auth.RateLimited(verdict.retry_after)


@blueprint.put("/apps/<app_id>/functions/<name>")
@validate_request(FunctionIn)
@operation(
    json_reply(200, Function, "The function, at its new version"),
    raises=(
        *JSON_BODY_ERRORS,
        InvalidInput,
        apps.FunctionSourceNoHandler,
        auth.RateLimited,
        storage.BadValue,
    ),
    params=(NAME,),
)
async def put_function(app_id: str, name: str, data: FunctionIn) -> Function:
    """Upload a function: the first upload of a name creates it (version 1), each later one
    makes a new version, which is the one that runs from then on. The source is refused with
    FUNCTION_SOURCE_NO_HANDLER when it is not an ES module (a syntax error) or exports no
    ``handler``, and with a validation 400 when it imports anything, nests brackets too deep or
    takes too long to compile. An app's uploads past its budget a minute answer
    APP_RATE_LIMITED."""
    p = platform()
    # Two transactions around the compile (a worker process): no transaction waits for a parse.
    async with unit_of_work() as tx:
        app = await developed_app(tx, app_id)
    await _count_upload(app.id)
    upload = await apps.prepare_function(app, name=name, source=data.source, events=data.events)
    async with unit_of_work() as tx:
        app = await developed_app(tx, app_id)
        function = await apps.put_function(tx, now=p.now(), app=app, upload=upload)
    return _function(function)


@blueprint.get("/apps/<app_id>/functions")
@operation(json_reply(200, FunctionPage, "The app's functions"), raises=(storage.BadValue,))
async def list_functions(app_id: str) -> FunctionPage:
    """The app's functions, without their sources."""
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        functions = await apps.list_functions(tx, app_id)
    return {"data": [_function(f) for f in functions], "next": None}


@blueprint.get("/apps/<app_id>/functions/<name>")
@operation(
    json_reply(200, FunctionWithSource, "The function and its source"),
    raises=(storage.BadValue, apps.FunctionNotFound),
    params=(NAME,),
)
async def get_function(app_id: str, name: str) -> FunctionWithSource:
    """The function, with the source of the version that runs."""
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        function = await apps.get_function(tx, app_id, name)
        source = await apps.function_source(tx, function)
    return {**_function(function), "source": source}


@blueprint.delete("/apps/<app_id>/functions/<name>")
@operation(
    Reply(204, "The function is deleted"),
    raises=(storage.BadValue, apps.FunctionNotFound),
    params=(NAME,),
)
async def delete_function(app_id: str, name: str) -> Response:
    """Delete the function: it runs no more, runs still queued for it fail unrun, and its name
    is free again."""
    p = platform()
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        await apps.delete_function(tx, now=p.now(), app_id=app_id, name=name)
    return Response("", status=204)


@blueprint.post("/apps/<app_id>/functions/<name>/test")
@operation(
    json_reply(202, TestRun, "The test run is queued"),
    raises=(storage.BadValue, apps.FunctionNotFound, auth.RateLimited),
    params=(NAME,),
)
async def test_run(app_id: str, name: str) -> tuple[TestRun, int]:
    """Run the function once on a sample event: the sample of its first event type with
    ``test: true``, businessId ``test``, eventId null. It runs in no business, so its
    ``context.api`` calls answer 503; it is listed with the function's runs. Counted against
    the app's upload budget (a run costs a worker's time)."""
    p = platform()
    async with unit_of_work() as tx:
        app = await developed_app(tx, app_id)
        await apps.get_function(tx, app_id, name)
    await _count_upload(app.id)
    async with unit_of_work() as tx:
        app = await developed_app(tx, app_id)
        function = await apps.get_function(tx, app_id, name)
        run_id = await apps.create_test_run(
            tx,
            now=p.now(),
            function_id=function.id,
            app_id=app.id,
            event_type=function.events[0],
            pinned_version=app.pinned_version,
        )
    return {"runId": run_id}, 202


@blueprint.get("/apps/<app_id>/functions/<name>/runs")
@operation(
    json_reply(200, RunPage, "The function's recent runs"),
    raises=(storage.BadValue, apps.FunctionNotFound),
    params=(NAME,),
)
async def list_runs(app_id: str, name: str) -> RunPage:
    """The function's 100 most recent runs, newest first: status, the version that ran,
    duration, error, and an excerpt of what each wrote: its first log lines up to 4,096
    characters (``logsTruncated`` when it wrote more) and its result when its JSON is at most
    4,096 characters (else null, with ``resultTruncated``). A run's own route answers it
    whole."""
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        function = await apps.get_function(tx, app_id, name)
        runs = await apps.recent_runs(tx, function)
    return {"data": [_run(run) for run in runs], "next": None}


@blueprint.get("/apps/<app_id>/functions/<name>/runs/<run_id>")
@operation(
    json_reply(200, RunDetail, "The run whole"),
    raises=(storage.BadValue, apps.FunctionNotFound, apps.RunNotFound),
    params=(NAME, RUN_ID),
)
async def get_run(app_id: str, name: str, run_id: str) -> RunDetail:
    """One run of the function whole: every log line, the result, the event it ran on, and
    the stack of what the handler threw when it threw an Error."""
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        function = await apps.get_function(tx, app_id, name)
        detail = await apps.get_run(tx, function, run_id)
    return {**_run(detail.run), "event": detail.event, "stack": detail.stack}
