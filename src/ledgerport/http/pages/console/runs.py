"""The console's pages for debugging an app's functions, on the application host: a function with
its actions, its recent runs (filtered by status) and its versions, a version's source (the
rollback to it, confirmed with its diff, is ``function_rollback``'s); a run with its timeline
(``run_timeline``), its error and stack into the source, its replays, and the replay button.

Server-rendered from the same domain calls as the JSON console API (``developer/functions.py``),
for the signed-in developer; every button is a form with a CSRF token, every filter a GET form
or a link. Anyone else's app, and any function, version or run id that is not the app's, is not
found (404). A form's refusal comes back to its page as a notice, by the error table.
"""

from __future__ import annotations

import re

from quart.typing import ResponseReturnValue
from quart_schema import security_scheme
from werkzeug.exceptions import NotFound

from ledgerport import apps, auth, queues
from ledgerport.errors import InvalidInput

from ..._context import platform, unit_of_work
from ..._function_budget import count_function_upload
from ..._openapi import (
    SET_COOKIE,
    SIGNED_IN_OR_SENT_TO_SIGN_IN,
    Param,
    operation,
    page,
    redirect_reply,
)
from .._csrf import CSRF_COOKIE_PARAM, back_with_notice, form_guard
from .._form_models import BUTTON_BODY, query_params, read_query
from .._frame import console_developer, returns_to
from .._notices import form_page, with_notice
from ._debug import (
    BUTTON_ERRORS,
    LIVE_CSP,
    NOT_THE_APPS,
    PAGE_ERRORS,
    SIGN_IN,
    blueprint,
    pretty_json,
    query_string,
    quota_mib,
    shown_log_lines,
)
from ._shared import CONSOLE_CSP
from ._source_views import SOURCE_PAGE_LINES, numbered_source, shown_stack
from .function_queries import RunsQuery, VersionQuery
from .functions import LISTED_EXCERPT_CHARS
from .run_timeline import timeline_items

FUNCTION_PARAM = Param(
    "name", "path", "The function's name: a letter or digit, then up to 63 letters, digits, _ or -"
)
VERSION_MAX = 2**31 - 1
"""The largest version number (a database integer): a larger one is no version's."""
VERSION_PARAM = Param(
    "version",
    "path",
    "A version's number",
    {"type": "integer", "minimum": 1, "maximum": VERSION_MAX},
)
RUNS_SHOWN = 25
"""A function's most recent runs its page lists (the console API pages through them all)."""


def function_page_path(app_id: str, name: str) -> str:
    return f"/console/apps/{app_id}/functions/{name}"


def _run_path(app_id: str, name: str, run_id: str) -> str:
    return f"{function_page_path(app_id, name)}/runs/{run_id}"


# --- A function -----------------------------------------------------------------------------------


def version_number(text: str) -> int:
    """A version's number from its path; NotFound (as for a path no route takes) when it is no
    number a version can have."""
    if re.fullmatch(r"[1-9][0-9]{0,9}", text) and int(text) <= VERSION_MAX:
        return int(text)
    raise NotFound()


@blueprint.get("/console/apps/<app_id>/functions/<name>")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The function, its actions, its recent runs (filtered by status) and its versions"),
    redirect_reply(SIGN_IN),
    page(404, NOT_THE_APPS.format("function")),
    raises=(*PAGE_ERRORS, InvalidInput, apps.FunctionNotFound),
    params=(FUNCTION_PARAM, *query_params(RunsQuery)),
)
async def function_page(app_id: str, name: str) -> ResponseReturnValue:
    """The function: its actions first (edit and upload a new version, run a test, its schedule,
    the app's secrets, delete); its active and newest versions, events and schedule with the
    next tick; its RUNS_SHOWN most recent runs, newest first (``status`` keeps those in one
    status), each with its error and linking to its page; and every version kept, newest
    first, the active one marked, each with its source's page and, but the active one, the
    way to make it active (a rollback, confirmed with the diff). When runs' output was dropped
    to keep the app within its storage quota, it says so, and so does each such run."""
    status = read_query(RunsQuery).status
    async with unit_of_work(reads=True) as tx:
        app, storage = await queues.developed_app_storage(tx, app_id, console_developer())
        function, versions = await apps.function_and_versions(tx, app_id, name)
        runs = await queues.recent_runs(
            tx,
            function,
            statuses=[status] if status else [],
            shown=RUNS_SHOWN,
            excerpt=LISTED_EXCERPT_CHARS,
        )
    here = function_page_path(app_id, name)
    chips = [("All", here, status is None)] + [
        (shown, here + query_string({"status": shown}), status == shown)
        for shown in queues.RUN_STATUSES
    ]
    return await form_page(
        "console_function.html",
        csp=LIVE_CSP,
        live=status is None,
        app=app,
        function=function,
        runs=runs,
        versions=versions,
        chips=chips,
        runs_shown=RUNS_SHOWN,
        storage=storage,
        quota_mib=quota_mib(),
        current="functions",
        below=True,
    )


@blueprint.get("/console/apps/<app_id>/functions/<name>/versions/<version>")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "A version kept of the function and its source, line by line, a page at a time"),
    redirect_reply(SIGN_IN),
    page(404, NOT_THE_APPS.format("function or version")),
    raises=(
        *PAGE_ERRORS,
        InvalidInput,
        NotFound,
        apps.FunctionNotFound,
        apps.FunctionVersionNotFound,
    ),
    params=(FUNCTION_PARAM, VERSION_PARAM, *query_params(VersionQuery)),
)
async def version_page(app_id: str, name: str, version: str) -> ResponseReturnValue:
    """A version kept of the function: when it was uploaded, whether it is active (else a
    button that makes it active), and its source as uploaded, each line numbered and
    addressable (``#L12``), as a stack frame's position links to it; 5,000 lines a page,
    ``from`` the first (links to the lines before and after)."""
    number = version_number(version)
    first = read_query(VersionQuery).first or 1
    async with unit_of_work(reads=True) as tx:
        app, function = await apps.get_developed_function(tx, app_id, console_developer(), name)
        kept, source = await apps.version_source(tx, function, number)
    lines = apps.source_lines(source)
    if first > len(lines):
        raise InvalidInput([f"from must be a line of the source: from 1 to {len(lines)}"])
    shown = lines[first - 1 : first - 1 + SOURCE_PAGE_LINES]
    here = f"{function_page_path(app_id, name)}/versions/{number}"
    earlier = later = None
    if first > 1:
        back = max(first - SOURCE_PAGE_LINES, 1)
        earlier = here if back == 1 else f"{here}?from={back}"
    if first - 1 + len(shown) < len(lines):
        later = f"{here}?from={first + len(shown)}"
    return await form_page(
        "console_version.html",
        csp=CONSOLE_CSP,
        app=app,
        function=function,
        version=kept,
        source=numbered_source(shown, first),
        first=first,
        last=first + len(shown) - 1,
        total=len(lines),
        earlier_href=earlier,
        later_href=later,
        current="functions",
        below=True,
    )


# --- A run ----------------------------------------------------------------------------------------


@blueprint.get("/console/apps/<app_id>/functions/<name>/runs/<run_id>")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The run: its timeline of log lines and fetches, error and stack, replays"),
    redirect_reply(SIGN_IN),
    page(404, NOT_THE_APPS.format("function or run")),
    raises=(*PAGE_ERRORS, apps.FunctionNotFound, queues.RunNotFound),
    params=(FUNCTION_PARAM,),
)
async def run_page(app_id: str, name: str, run_id: str) -> ResponseReturnValue:
    """The run: its status, duration, the version it ran, the run it replays and the runs
    replayed from it (each linking to its page); its timeline, a line each: queued, started,
    each log line with when it was written (a fetch with its method, host, answer and time, a
    long line whole, behind a ``<details>``), and how it ended: its result, or the error it
    ended with and, when the handler threw an Error, its stack, each frame's position linking
    to its line in the source of the version that ran, shown with the lines around it (or, for
    a run whose output was dropped to keep the app within its storage quota, when that was);
    the event it ran on, pretty-printed; and the replay button."""
    async with unit_of_work(reads=True) as tx:
        app, function = await apps.get_developed_function(tx, app_id, console_developer(), name)
        detail = await queues.get_run(tx, function, run_id)
        replays = await queues.replays_of(tx, function, run_id)
        ran = detail.run.version
        source = None
        if ran is not None:
            try:
                _, source = await apps.version_source(tx, function, ran)
            except apps.FunctionVersionNotFound:
                pass  # no longer kept: named, not linked
    version_href = None
    if source is not None:
        version_href = f"{function_page_path(app_id, name)}/versions/{ran}"
    stack = (
        shown_stack(detail.stack, source=source, version_href=version_href)
        if detail.stack is not None
        else []
    )
    result = detail.run.result
    return await form_page(
        "console_run.html",
        csp=CONSOLE_CSP,
        app=app,
        function=function,
        run=detail.run,
        started_at=detail.started_at,
        timeline=timeline_items(shown_log_lines(detail.log_lines, detail.started_at)),
        log_count=len(detail.run.logs),
        replays=replays,
        event=pretty_json(detail.event),
        result=None if result is None else pretty_json(result),
        stack=stack,
        version_href=version_href,
        quota_mib=quota_mib(),
        current="functions",
        below=True,
    )


@blueprint.post("/console/apps/<app_id>/functions/<name>/runs/<run_id>/replay")
@form_guard(back_with_notice(_run_path))
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply(
        "To the new run's page, saying it is queued; or back to the run's page, saying why not",
        SET_COOKIE.optional(),
    ),
    page(404, NOT_THE_APPS.format("function or run")),
    raises=(
        *PAGE_ERRORS,
        *BUTTON_ERRORS,
        apps.FunctionNotFound,
        queues.RunNotFound,
        auth.RateLimited,
    ),
    bodies=BUTTON_BODY,
    params=(FUNCTION_PARAM, CSRF_COOKIE_PARAM),
)
async def replay(app_id: str, name: str, run_id: str) -> ResponseReturnValue:
    """The replay button: a new run of the function on the event the run ran on, as
    ``POST .../runs/{runId}/replay`` (the same business, the version active when it starts, a
    token of its own), counted against the app's upload budget; then the new run's page."""
    back = _run_path(app_id, name, run_id)
    p = platform()
    returns_to(back)
    async with unit_of_work() as tx:
        app = await apps.get_developed_app(tx, app_id, console_developer())
        function = await apps.get_function(tx, app_id, name)
        # Not found is found before the budget is spent.
        await queues.get_run(tx, function, run_id)
    await count_function_upload(app.id)
    async with unit_of_work() as tx:
        await apps.get_developed_app(tx, app_id, console_developer())
        function = await apps.get_function(tx, app_id, name)
        replay_id = await queues.replay_run(tx, now=p.now(), function=function, run_id=run_id)
    return with_notice(_run_path(app_id, name, replay_id), "replay-queued", run_id)
