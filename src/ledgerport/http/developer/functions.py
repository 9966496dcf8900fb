"""An app's hosted functions in the console: upload (each upload a new version, made active),
list, read, delete, the versions kept and the active one (a rollback), the recent runs
(filtered), one run whole, a test run and a replay (contract.md: Developer console API and its
second round, Hosted functions); a function's schedule and its next tick (third round)."""

from __future__ import annotations

from quart import Response, request
from quart_schema import validate_request

from ledgerport import apps, auth, queues, storage
from ledgerport.errors import InvalidInput

from .._context import platform, unit_of_work
from .._function_budget import count_function_upload, queue_test_run
from .._openapi import JSON_BODY_ERRORS, Reply, json_reply, operation
from ._blueprint import blueprint, developed_app, developer_id
from ._function_shapes import (
    NAME,
    RUN_ID,
    STATUS_FILTER,
    VERSION,
    Function,
    FunctionIn,
    FunctionPage,
    FunctionWithSource,
    Replay,
    RunDetail,
    RunPage,
    TestRun,
    VersionPage,
    VersionWithSource,
    function_json,
    run_detail_json,
    run_json,
    version_json,
    version_number,
)


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
    no ``handler`` (an empty one too); a syntax error is V8's first, at the line and column of
    the source as sent, in V8's words, which the message and its params p0 (line), p1 (column,
    in UTF-16 code units) and p2 (words) carry. A validation 400 refuses a source that is too
    large, imports anything, nests too deep or takes too long or too much memory to compile.
    ``schedule`` (five cron fields, UTC; null by default) runs it on each tick for every ACTIVE
    installation of the app, once a tick and installation however many processes serve; a
    schedule that is not five valid fields, or never fires, is a validation 400. ``events`` may
    be empty. An app's uploads past its budget a minute answer APP_RATE_LIMITED."""
    p = platform()
    # Two transactions around the compile (a worker process): no transaction waits for a parse.
    async with unit_of_work() as tx:
        app = await developed_app(tx, app_id)
    if not isinstance(data.source, str):
        raise apps.FunctionSourceNoHandler("the source is not text")
    await count_function_upload(app.id)
    upload = await apps.prepare_function(
        app,
        name=name,
        source=data.source,
        events=data.events,
        allowed_hosts=data.allowedHosts,
        schedule=data.schedule,
    )
    async with unit_of_work() as tx:
        app = await developed_app(tx, app_id)
        function = await apps.put_function(tx, now=p.now(), app=app, upload=upload)
    return function_json(function)


@blueprint.get("/apps/<app_id>/functions")
@operation(json_reply(200, FunctionPage, "The app's functions"), raises=(storage.BadValue,))
async def list_functions(app_id: str) -> FunctionPage:
    """The app's functions, without their sources."""
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        functions = await apps.list_functions(tx, app_id)
    return {"data": [function_json(f) for f in functions], "next": None}


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
    return {**function_json(function), "source": source}


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
    return {"data": [run_json(run) for run in runs], "next": None}


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
    return run_detail_json(detail)


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
    return {"data": [version_json(version) for version in versions], "next": None}


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
        kept, source = await apps.version_source(tx, function, version_number(version))
    return {**version_json(kept), "source": source}


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
            tx, now=p.now(), app_id=app_id, name=name, version=version_number(version)
        )
    return function_json(function)
