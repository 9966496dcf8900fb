"""The forms that write a function and a new version of one: refused, the form comes back as it
was sent, with the place in the source a refusal names shown beside it (a source cannot ride in
a redirect). Uploads count against the app's budget, as the API's do."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import partial

from pydantic import Field
from quart import Response, g
from quart.typing import ResponseReturnValue
from quart_schema import security_scheme
from werkzeug.exceptions import RequestEntityTooLarge

from ledgerport import apps, auth, catalog
from ledgerport.errors import InvalidInput

from ..._context import platform, unit_of_work
from ..._function_budget import count_function_upload
from ..._openapi import (
    FORM,
    RETRY_AFTER,
    SET_COOKIE,
    SIGNED_IN_OR_SENT_TO_SIGN_IN,
    Body,
    operation,
    page,
    redirect_reply,
)
from .._csrf import CSRF_COOKIE_PARAM, form_again, form_guard
from .._field_problems import FormField, FormProblems, refused_beside
from .._form_models import PageForm, Repeated, read_form
from .._frame import console_developer
from .._notices import (
    Notice,
    form_page,
    problem_code,
    with_notice,
)
from .._problems import answers_again
from ._forms import SourceProblem, areas_out_of_reach, event_groups, source_problem
from ._shared import (
    APP_PARAM,
    CONSOLE_CSP,
    FUNCTION_NOT_FOUND,
    NAME_PARAM,
    PAGE_ERRORS,
    SIGNED_OUT,
    blueprint,
    function_path,
    functions_path,
)

# --- Functions: write, edit, delete, test run -----------------------------------------------

STARTER_SOURCE = """export async function handler(event, context) {
  context.log(`${event.type} ${event.id}`);
  return { received: event.type };
}
"""
"""What a new function's source starts as."""


async def _function_form(
    app_id: str,
    *,
    function_name: str | None,
    name: str,
    source: str,
    events: Sequence[str],
    allowed_hosts: Sequence[str] = (),
    schedule: str = "",
    problem: Notice | None = None,
    syntax: apps.SyntaxProblem | None = None,
    status: int = 200,
) -> Response:
    """The form that writes a new function (``function_name`` None) or a new version of one,
    filled with ``name``, ``source``, ``events``, ``allowed_hosts`` and ``schedule``,
    ``problem`` beside the source (with the lines up to the place it names: ``syntax``'s, for a
    syntax error)."""
    position = _position(problem, syntax, source)
    async with unit_of_work(reads=True) as tx:
        function: apps.HostedFunction | None = None
        if function_name:
            app, function = await apps.get_developed_function(
                tx, app_id, console_developer(), function_name
            )
        else:
            app = await apps.get_developed_app(tx, app_id, console_developer())
    action = (
        function_path(app_id, function_name, "edit")
        if function_name
        else f"{functions_path(app_id)}/new"
    )
    return await form_page(
        "console_function_form.html",
        status=status,
        csp=CONSOLE_CSP,
        app=app,
        function=function,
        action=action,
        name=name,
        source=source,
        allowed_hosts="\n".join(allowed_hosts),
        hosts_max=catalog.FUNCTION_ALLOWED_HOSTS_MAX,
        schedule=schedule,
        schedule_max=apps.SCHEDULE_MAX_CHARS,
        groups=event_groups(app.scopes, events),
        out_of_reach=areas_out_of_reach(app.scopes),
        problem=problem,
        problems=function_problems(problem, position, adding=function_name is None),
        position=position,
        current="functions",
        below=True,
    )


FUNCTION_FIELDS = (
    FormField("name", "Name", ("name",)),
    FormField("source", "Source", ("source",)),
    FormField("events", "Events", ("events",)),
    FormField("allowed_hosts", "Hosts it may fetch from", ("allowedHosts",)),
    FormField("schedule", "Schedule", ("schedule",)),
)
"""The function form's fields in its order: the inputs' ids and labels, and how the function
rules name them."""
_NUMBERED = re.compile(r"^(events|allowedHosts)(?:\.(\d+)|\[(\d+)\]) ")


_NO_HANDLER = problem_code(apps.FunctionSourceNoHandler)


def _line_named(match: re.Match[str]) -> str:
    index = int(match[2] or match[3])
    return f"{match[1]}: " if match[1] == "events" else f"{match[1]}, line {index + 1}, "


def function_problems(
    problem: Notice | None, position: SourceProblem | None, *, adding: bool
) -> FormProblems | None:
    """Why the function was not saved, beside the form's fields, each said with its label (a
    host's problem names its line); a problem with a place in the source (a syntax error) is
    the source's. None when nothing was refused."""
    if problem is None or problem.tone != "problem":
        return None
    sentences = [_NUMBERED.sub(_line_named, s) for s in problem.sentences]
    if position is not None and position.words is not None:
        # A syntax error in the parser's words at its place, as the source's box says it.
        sentences = [
            f"Syntax error at line {position.line}, column {position.column}: {position.words}"
        ]
    outcome = "the function was not saved" if adding else "the new version was not saved"
    about_source = position is not None or problem.code == _NO_HANDLER
    owner = "source" if about_source else None
    return refused_beside(sentences, FUNCTION_FIELDS, outcome=outcome, owner=owner)


def _position(
    problem: Notice | None, syntax: apps.SyntaxProblem | None, source: str
) -> SourceProblem | None:
    """Where the refusal lies in the source: the compiler's syntax error when it found one
    (its column in UTF-16 code units, the parser's words), else the place its text names."""
    if syntax is not None:
        return source_problem(syntax, source)
    return source_problem(problem.text, source) if problem is not None else None


_SYNTAX = "function_source_syntax"
"""Where a request keeps the syntax error its upload was refused for, for the form again."""


@blueprint.get("/console/apps/<app_id>/functions/new")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The form that writes a new function: its name, events and source"),
    SIGNED_OUT,
    page(404, "Not an app of the signed-in developer"),
    raises=PAGE_ERRORS,
    params=(APP_PARAM,),
)
async def new_function_page(app_id: str) -> ResponseReturnValue:
    """The form that writes a new function: its name, the events it runs on as checkboxes
    grouped by area, its schedule, and its source, started with a handler that logs its
    event."""
    return await _function_form(
        app_id, function_name=None, name="", source=STARTER_SOURCE, events=()
    )


class FunctionForm(PageForm):
    """The function form: its ``name`` (a new function only), its ``source``, the events it
    runs on (``events`` repeated, one per checkbox), the hosts it may fetch from
    (``allowed_hosts``, one a line) and its ``schedule`` (five cron fields, UTC; empty for
    none). A field left out is as if empty: the form comes back saying what is wrong."""

    name: str = ""
    source: str = ""
    events: Repeated = Field(default_factory=list)
    allowed_hosts: str = ""
    schedule: str = ""

    @property
    def typed_source(self) -> str:
        """The source as typed: a browser sends a text area's line breaks as CRLF."""
        return self.source.replace("\r\n", "\n")

    @property
    def hosts(self) -> list[str]:
        """The hosts as typed: one a line (commas and spaces part them too)."""
        return self.allowed_hosts.replace(",", " ").split()


_UPLOAD_AGAIN = page(
    400,
    "The form again as it was sent, saying why not beside the source (with the line and"
    " column of a syntax error): the form expired, the source, the name or an event is refused",
)
_UPLOAD_LIMITED = page(
    429, "The form again as it was sent: the app's uploads are over budget", RETRY_AFTER
)
_UPLOAD_RAISES = (
    *PAGE_ERRORS,
    InvalidInput,
    apps.FunctionSourceNoHandler,
    auth.RateLimited,
    RequestEntityTooLarge,
)


async def _upload(
    app_id: str,
    *,
    name: str,
    source: str,
    events: Sequence[str],
    allowed_hosts: Sequence[str],
    schedule: str = "",
) -> apps.HostedFunction:
    """Upload the function as ``PUT /developer/apps/{appId}/functions/{name}`` does: counted
    against the app's budget, compiled outside any transaction, then stored as its new
    version."""
    user_id = console_developer()
    async with unit_of_work() as tx:
        app = await apps.get_developed_app(tx, app_id, user_id)
    await count_function_upload(app.id)
    try:
        upload = await apps.prepare_function(
            app,
            name=name,
            source=source,
            events=events,
            allowed_hosts=allowed_hosts,
            schedule=schedule.strip() or None,
        )
    except apps.FunctionSourceNoHandler as refused:
        # The notice carries the words; the form again shows the place, from the answer itself.
        setattr(g, _SYNTAX, refused.syntax)
        raise
    async with unit_of_work() as tx:
        app = await apps.get_developed_app(tx, app_id, user_id)
        return await apps.put_function(tx, now=platform().now(), app=app, upload=upload)


async def _sent_again(
    problem: Notice, status: int, *, app_id: str, name: str | None = None
) -> Response:
    """The form that writes a new function (``name`` None) or a new version of one again, as
    it was sent, ``problem`` beside it."""
    form = await read_form(FunctionForm)
    return await _function_form(
        app_id,
        function_name=name,
        name=name if name is not None else form.name.strip(),
        source=form.typed_source,
        events=form.events,
        allowed_hosts=form.hosts,
        schedule=form.schedule,
        problem=problem,
        syntax=g.get(_SYNTAX),
        status=status,
    )


@blueprint.post("/console/apps/<app_id>/functions/new")
@form_guard(form_again(_sent_again))
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply("Saved: back to the functions page, saying so", SET_COOKIE.optional()),
    _UPLOAD_AGAIN,
    _UPLOAD_LIMITED,
    page(404, "Not an app of the signed-in developer"),
    raises=_UPLOAD_RAISES,
    bodies=(Body(FORM, FunctionForm),),
    params=(APP_PARAM, CSRF_COOKIE_PARAM),
)
async def add_function(app_id: str) -> ResponseReturnValue:
    """Write a new function (version 1), as ``PUT /developer/apps/{appId}/functions/{name}``
    for a name the app has no function of: a name that is taken is refused, so no function is
    replaced unseen."""
    form = await read_form(FunctionForm)
    name = form.name.strip()
    source = form.typed_source
    events = form.events
    hosts = form.hosts
    schedule = form.schedule
    answers_again(partial(_sent_again, app_id=app_id))
    async with unit_of_work() as tx:
        await apps.get_developed_app(tx, app_id, console_developer())
        taken = any(function.name == name for function in await apps.list_functions(tx, app_id))
    if taken:
        raise InvalidInput([f"name {name!r} is taken: edit that function, or choose another name"])
    function = await _upload(
        app_id, name=name, source=source, events=events, allowed_hosts=hosts, schedule=schedule
    )
    return with_notice(functions_path(app_id), "function-saved", function.name, function.version)


@blueprint.get("/console/apps/<app_id>/functions/<name>/edit")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The form that edits a function: its events and the source that runs now"),
    SIGNED_OUT,
    FUNCTION_NOT_FOUND,
    raises=(*PAGE_ERRORS, apps.FunctionNotFound),
    params=(APP_PARAM, NAME_PARAM),
)
async def edit_function_page(app_id: str, name: str) -> ResponseReturnValue:
    """The form that edits a function: its events, and the source of the version that runs,
    saved as its next version."""
    async with unit_of_work(reads=True) as tx:
        _, function = await apps.get_developed_function(tx, app_id, console_developer(), name)
        source = await apps.function_source(tx, function)
    return await _function_form(
        app_id,
        function_name=name,
        name=name,
        source=source,
        events=function.events,
        allowed_hosts=function.allowed_hosts,
        schedule=function.schedule or "",
    )


@blueprint.post("/console/apps/<app_id>/functions/<name>/edit")
@form_guard(form_again(_sent_again))
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply("Saved: back to the functions page, saying so", SET_COOKIE.optional()),
    _UPLOAD_AGAIN,
    _UPLOAD_LIMITED,
    FUNCTION_NOT_FOUND,
    raises=(*_UPLOAD_RAISES, apps.FunctionNotFound),
    bodies=(Body(FORM, FunctionForm),),
    params=(APP_PARAM, NAME_PARAM, CSRF_COOKIE_PARAM),
)
async def edit_function(app_id: str, name: str) -> ResponseReturnValue:
    """Save the source and events as the function's next version, as
    ``PUT /developer/apps/{appId}/functions/{name}``; it runs from then on."""
    form = await read_form(FunctionForm)
    source = form.typed_source
    events = form.events
    hosts = form.hosts
    schedule = form.schedule
    answers_again(partial(_sent_again, app_id=app_id, name=name))
    async with unit_of_work() as tx:
        await apps.get_developed_app(tx, app_id, console_developer())
        await apps.get_function(tx, app_id, name)
    function = await _upload(
        app_id, name=name, source=source, events=events, allowed_hosts=hosts, schedule=schedule
    )
    return with_notice(functions_path(app_id), "function-saved", function.name, function.version)
