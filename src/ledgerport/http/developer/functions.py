"""An app's hosted functions in the console: upload (each upload a new version, made active),
list, read, delete, the versions kept and the active one (a rollback), the recent runs
(filtered), one run whole, a test run and a replay (contract.md: Developer console API and its
second round, Hosted functions)."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, with_config
from quart import Response, request
from quart_schema import validate_request
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12

from ledgerport import apps, auth, catalog, queues, storage
from ledgerport.errors import InvalidInput

from .._context import platform, unit_of_work
from .._function_budget import count_function_upload, queue_test_run
from .._ids import FUNCTION_NAME, RUN
from .._openapi import JSON_BODY_ERRORS, Param, Reply, json_reply, one_of, operation
from ._blueprint import blueprint, developed_app, developer_id, iso_time

EventName = Annotated[str, WithJsonSchema(one_of(event.name for event in catalog.EVENTS))]
RunStatus = Annotated[str, WithJsonSchema(one_of(queues.RUN_STATUSES))]
NAME = Param(
    "name",
    "path",
    "The function's name: a letter or digit, then up to 63 letters, digits, _ or -; not new",
    FUNCTION_NAME,
)
RUN_ID = Param("run_id", "path", "The run's id", RUN.schema)
VERSION = Param(
    "version", "path", "A version's number", {"type": "integer", "minimum": 1, "maximum": 2**31 - 1}
)
_STATUS = "(?:" + "|".join(queues.RUN_STATUSES) + ")"
STATUS_FILTER = Param(
    "status",
    "query",
    "Comma-separated statuses: only runs in one of them",
    {"type": "string", "pattern": f"^{_STATUS}(?:,{_STATUS})*$"},
)
SOURCE_DESCRIPTION = (
    "An ES module exporting `handler(event, context)`, sync or async; it may import nothing."
    f" At most {catalog.FUNCTION_SOURCE_MAX_BYTES} bytes of UTF-8, brackets nested at most"
    f" {catalog.FUNCTION_SOURCE_MAX_DEPTH} deep, compiled within"
    f" {catalog.FUNCTION_COMPILE_SECONDS} seconds of CPU time"
)
EVENTS_DESCRIPTION = (
    "The event types the function runs on, each at most once; a business or privacy event"
    " needs its gating scope among the app's registered scopes"
)


# A source that is not an ES module exporting a handler is the spec's FUNCTION_SOURCE_NO_HANDLER
# whatever was sent (an empty text, or no text at all), so it is taken as sent and judged by
# the compile; the document states its form.
Source = Annotated[
    Any,
    WithJsonSchema(
        {
            "type": "string",
            "minLength": 1,
            "maxLength": catalog.FUNCTION_SOURCE_MAX_BYTES,
            "description": SOURCE_DESCRIPTION,
        }
    ),
]


class FunctionIn(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    source: Source
    events: list[EventName] = Field(description=EVENTS_DESCRIPTION)


@with_config(ConfigDict(extra="forbid"))
class Function(TypedDict):
    """A function: ``version`` is the active version, the one runs use; ``latestVersion`` the
    newest uploaded (they differ after a rollback)."""

    id: str
    name: str
    events: list[EventName]
    version: int
    latestVersion: int
    createdAt: str
    updatedAt: str


@with_config(ConfigDict(extra="forbid"))
class FunctionWithSource(Function):
    """The function and the source of its active version, as uploaded."""

    source: str


@with_config(ConfigDict(extra="forbid"))
class Version(TypedDict):
    """A version kept of a function: ``active`` for the one runs use; ``sourceBytes`` the size
    of its source (UTF-8)."""

    version: int
    createdAt: str
    active: bool
    sourceBytes: int


@with_config(ConfigDict(extra="forbid"))
class VersionWithSource(Version):
    """A version kept and its source, as uploaded: what a run's stack positions point into."""

    source: str


@with_config(ConfigDict(extra="forbid"))
class VersionPage(TypedDict):
    """Every version kept of the function (the 10 newest, and the active one), newest first:
    ``next`` is null."""

    data: list[Version]
    next: str | None


@with_config(ConfigDict(extra="forbid"))
class FunctionPage(TypedDict):
    """Every function of the app, oldest first: ``next`` is null."""

    data: list[Function]
    next: str | None


@with_config(ConfigDict(extra="forbid"))
class Run(TypedDict):
    """A run as listed: an excerpt of what it wrote (``logsTruncated``, ``resultTruncated``:
    more exists). ``outputDroppedAt``: when its output (log lines, result, error, stack) was
    dropped to keep the app within its storage quota (``LEDGERPORT_APP_STORAGE_QUOTA_MB``, the
    app's oldest first); null while it is kept."""

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
    replayOf: str | None
    outputDroppedAt: str | None


@with_config(ConfigDict(extra="forbid"))
class LogLine(TypedDict):
    """A log line and when it was written (null for a run ended before times were kept)."""

    at: str | None
    message: str


@with_config(ConfigDict(extra="forbid"))
class RunDetail(TypedDict):
    """A run whole: its fields as listed, every log line with its time, its whole result, the
    ``event`` it ran on and, when the handler threw an Error, its ``stack`` (positions
    ``function.js:line:column`` point into the source of the run's ``version``; at most 50
    frames of 512 characters, 8,192 characters in all). ``outputDroppedAt``: when its output
    was dropped to keep the app within its storage quota (null while it is kept)."""

    id: str
    eventId: str | None
    type: EventName
    status: RunStatus
    attempts: int
    version: int | None
    durationMs: float | None
    startedAt: str | None
    logs: list[LogLine]
    error: str | None
    stack: str | None
    result: Any
    event: Any
    createdAt: str
    replayOf: str | None
    outputDroppedAt: str | None


@with_config(ConfigDict(extra="forbid"))
class RunPage(TypedDict):
    """The function's most recent runs, newest first: ``next`` is null."""

    data: list[Run]
    next: str | None


@with_config(ConfigDict(extra="forbid"))
class TestRun(TypedDict):
    """The queued test run: follow it at ``.../runs/{runId}``."""

    runId: str


@with_config(ConfigDict(extra="forbid"))
class Replay(TypedDict):
    """The queued replay: follow it at ``.../runs/{runId}``."""

    runId: str


def _function(function: apps.HostedFunction) -> Function:
    return {
        "id": function.id,
        "name": function.name,
        "events": list(function.events),
        "version": function.version,
        "latestVersion": function.latest_version,
        "createdAt": iso_time(function.created_at),
        "updatedAt": iso_time(function.updated_at),
    }


def _number(version: str) -> int:
    """A version's number from its path (0, which no version has, when it is not one)."""
    return int(version) if re.fullmatch(r"[1-9][0-9]{0,9}", version) else 0


def _version(version: apps.FunctionVersion) -> Version:
    return {
        "version": version.version,
        "createdAt": iso_time(version.created_at),
        "active": version.active,
        "sourceBytes": version.source_bytes,
    }


def _run(run: queues.FunctionRun) -> Run:
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
        "replayOf": run.replay_of,
        "outputDroppedAt": _dropped(run),
    }


def _dropped(run: queues.FunctionRun) -> str | None:
    return None if run.output_dropped_at is None else iso_time(run.output_dropped_at)


def _run_detail(detail: queues.RunDetail) -> RunDetail:
    run = detail.run
    return {
        "id": run.id,
        "eventId": run.event_id,
        "type": run.type,
        "status": run.status,
        "attempts": run.attempts,
        "version": run.version,
        "durationMs": run.duration_ms,
        "startedAt": None if detail.started_at is None else iso_time(detail.started_at),
        "logs": [
            {"at": None if at is None else iso_time(at), "message": message}
            for at, message in detail.log_lines
        ],
        "error": run.error,
        "stack": detail.stack,
        "result": run.result,
        "event": detail.event,
        "createdAt": iso_time(run.created_at),
        "replayOf": run.replay_of,
        "outputDroppedAt": _dropped(run),
    }


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
    FUNCTION_SOURCE_NO_HANDLER when it is not an ES module (not text, a syntax error) or exports
    no ``handler`` (an empty one too), and with a validation 400 when it is too large, imports
    anything, nests brackets too deep or takes too long to compile. An app's uploads past its
    budget a minute answer APP_RATE_LIMITED."""
    p = platform()
    # Two transactions around the compile (a worker process): no transaction waits for a parse.
    async with unit_of_work() as tx:
        app = await developed_app(tx, app_id)
    if not isinstance(data.source, str):
        raise apps.FunctionSourceNoHandler("the source is not text")
    await count_function_upload(app.id)
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
    """Run the function once on a sample event: the sample of its first event type
    (``invoice.created`` for a function on none) with ``test: true``, businessId ``test``,
    eventId null. It runs in no business, so its
    ``context.api`` calls answer 503; it is listed with the function's runs. Counted against
    the app's upload budget (a run costs a worker's time)."""
    run_id, _ = await queue_test_run(app_id, name, developer_id())
    return {"runId": run_id}, 202


@blueprint.get("/apps/<app_id>/functions/<name>/runs")
@operation(
    json_reply(200, RunPage, "The function's recent runs"),
    raises=(InvalidInput, storage.BadValue, apps.FunctionNotFound),
    params=(NAME, STATUS_FILTER),
)
async def list_runs(app_id: str, name: str) -> RunPage:
    """The function's 100 most recent runs (with ``status``, comma-separated, of those in one
    of them), newest first: status, the version that ran, duration, error, the run it replays,
    and an excerpt of what each wrote: its first log lines up to 4,096 characters
    (``logsTruncated`` when it wrote more) and its result when its JSON is at most 4,096
    characters (else null, with ``resultTruncated``). A run's own route answers it whole. An
    unknown status is a validation 400."""
    values = [part for value in request.args.getlist("status") for part in value.split(",")]
    if any(value not in queues.RUN_STATUSES for value in values):
        raise InvalidInput(
            [f"status must be one or more of {', '.join(queues.RUN_STATUSES)}, comma-separated"]
        )
    statuses = [status for status in queues.RUN_STATUSES if status in values]
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        function = await apps.get_function(tx, app_id, name)
        runs = await queues.recent_runs(tx, function, statuses=statuses)
    return {"data": [_run(run) for run in runs], "next": None}


@blueprint.get("/apps/<app_id>/functions/<name>/runs/<run_id>")
@operation(
    json_reply(200, RunDetail, "The run whole"),
    raises=(storage.BadValue, apps.FunctionNotFound, queues.RunNotFound),
    params=(NAME, RUN_ID),
)
async def get_run(app_id: str, name: str, run_id: str) -> RunDetail:
    """One run of the function whole: the version it ran, every log line with when it was
    written, the result, the event it ran on, and the stack of what the handler threw when it
    threw an Error, its positions (``function.js:line:column``) in the source of that version
    as uploaded."""
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        function = await apps.get_function(tx, app_id, name)
        detail = await queues.get_run(tx, function, run_id)
    return _run_detail(detail)


@blueprint.post("/apps/<app_id>/functions/<name>/runs/<run_id>/replay")
@operation(
    json_reply(202, Replay, "The replay is queued"),
    raises=(storage.BadValue, apps.FunctionNotFound, queues.RunNotFound, auth.RateLimited),
    params=(NAME, RUN_ID),
)
async def replay_run(app_id: str, name: str, run_id: str) -> tuple[Replay, int]:
    """Run the function again on the event the run ran on: a new run, in the same business,
    queued like any other. When it is claimed it is checked as any run is (the function
    deleted, the app suspended or deactivated, the installation ended or the event's scope no
    longer held: it fails unrun, saying why), runs the version active then, and gets a token
    of its own, valid while it runs; the first run's token, if it had one, acts no more.
    Counted against the app's upload budget (a run costs a worker's time)."""
    p = platform()
    async with unit_of_work() as tx:
        app = await developed_app(tx, app_id)
        await apps.get_function(tx, app_id, name)
    await count_function_upload(app.id)
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        function = await apps.get_function(tx, app_id, name)
        replay_id = await queues.replay_run(tx, now=p.now(), function=function, run_id=run_id)
    answer: Replay = {"runId": replay_id}
    return answer, 202


@blueprint.get("/apps/<app_id>/functions/<name>/versions")
@operation(
    json_reply(200, VersionPage, "The function's versions kept"),
    raises=(storage.BadValue, apps.FunctionNotFound),
    params=(NAME,),
)
async def list_versions(app_id: str, name: str) -> VersionPage:
    """Every version kept of the function, newest first, the active one (the one runs use)
    marked: the 10 newest uploads, and the active one whatever its age. Uploading makes a new
    version and activates it; activating an earlier one is a rollback."""
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        function = await apps.get_function(tx, app_id, name)
        versions = await apps.function_versions(tx, function)
    return {"data": [_version(version) for version in versions], "next": None}


@blueprint.get("/apps/<app_id>/functions/<name>/versions/<version>")
@operation(
    json_reply(200, VersionWithSource, "The version and its source"),
    raises=(storage.BadValue, apps.FunctionNotFound, apps.FunctionVersionNotFound),
    params=(NAME, VERSION),
)
async def get_version(app_id: str, name: str, version: str) -> VersionWithSource:
    """A version kept of the function, with its source as uploaded: what the positions in the
    stack of a run of that version point into."""
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        function = await apps.get_function(tx, app_id, name)
        kept, source = await apps.version_source(tx, function, _number(version))
    return {**_version(kept), "source": source}


@blueprint.post("/apps/<app_id>/functions/<name>/versions/<version>/activate")
@operation(
    json_reply(200, Function, "The function, that version active"),
    raises=(storage.BadValue, apps.FunctionNotFound, apps.FunctionVersionNotFound),
    params=(NAME, VERSION),
)
async def activate_version(app_id: str, name: str, version: str) -> Function:
    """Make a version kept the active one (a rollback, or forward again): runs claimed from
    now on run it; a run already claimed keeps the version it was claimed with. The function's
    event types stay as they are. A version not kept is 404 FUNCTION_VERSION_NOT_FOUND."""
    p = platform()
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        function = await apps.activate_version(
            tx, now=p.now(), app_id=app_id, name=name, version=_number(version)
        )
    return _function(function)
