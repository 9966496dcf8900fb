"""What the console API's function endpoints read and answer, as the OpenAPI document states
them: the upload's model, the answers, and a function, a version and a run as they are
answered."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, with_config
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12

from ledgerport import apps, catalog, queues

from .._ids import FUNCTION_NAME, RUN
from .._openapi import Param, one_of
from ._blueprint import iso_time

EventName = Annotated[str, WithJsonSchema(one_of(event.name for event in catalog.EVENTS))]
RunType = Annotated[
    str,
    WithJsonSchema(one_of([*(event.name for event in catalog.EVENTS), queues.SCHEDULE_TYPE])),
]
"""A run's type: the event type it ran on, or ``schedule`` for a tick of its schedule."""
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
SCHEDULE_DESCRIPTION = (
    "Five cron fields (minute hour day-of-month month day-of-week), read in UTC, e.g."
    " `*/15 * * * *`: each tick runs the function once for every ACTIVE installation of the"
    " app, on a `schedule` event. At most once a minute: a sixth field (seconds) and the `@`"
    f" nicknames are refused; at most {apps.SCHEDULE_MAX_CHARS} characters. Null (the default):"
    " no schedule"
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


ALLOWED_HOSTS_DESCRIPTION = (
    "The hosts the function's `context.fetch` may reach: each a host name written exactly, `*.`"
    " and a domain of at least two labels (every name under it, not the domain itself), or an IP"
    f" address; at most {catalog.FUNCTION_ALLOWED_HOSTS_MAX}, each once. Only over https (in"
    " development, a listed loopback host over http too); the address a name resolves to is"
    " checked as the request connects, as for webhooks"
)
AllowedHost = Annotated[str, Field(min_length=1, max_length=255)]


class FunctionIn(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    source: Source
    events: list[EventName] = Field(description=EVENTS_DESCRIPTION)
    allowedHosts: list[AllowedHost] = Field(
        default_factory=list, max_length=100, description=ALLOWED_HOSTS_DESCRIPTION
    )
    schedule: str | None = Field(default=None, description=SCHEDULE_DESCRIPTION)


@with_config(ConfigDict(extra="forbid"))
class Function(TypedDict):
    """A function: ``version`` is the active version, the one runs use; ``latestVersion`` the
    newest uploaded (they differ after a rollback). ``schedule``: its five cron fields (UTC),
    or null; ``nextRunAt``: the tick of that schedule due next, not run yet (null without a
    schedule; in the past while no process has run it: it runs once at the next start)."""

    id: str
    name: str
    events: list[EventName]
    version: int
    latestVersion: int
    allowedHosts: list[str]
    createdAt: str
    updatedAt: str
    schedule: str | None
    nextRunAt: str | None


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
    type: RunType
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
    type: RunType
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


def function_json(function: apps.HostedFunction) -> Function:
    return {
        "id": function.id,
        "name": function.name,
        "events": list(function.events),
        "version": function.version,
        "latestVersion": function.latest_version,
        "allowedHosts": list(function.allowed_hosts),
        "createdAt": iso_time(function.created_at),
        "updatedAt": iso_time(function.updated_at),
        "schedule": function.schedule,
        "nextRunAt": None if function.next_run_at is None else iso_time(function.next_run_at),
    }


def version_number(version: str) -> int:
    """A version's number from its path (0, which no version has, when it is not one)."""
    return int(version) if re.fullmatch(r"[1-9][0-9]{0,9}", version) else 0


def version_json(version: apps.FunctionVersion) -> Version:
    return {
        "version": version.version,
        "createdAt": iso_time(version.created_at),
        "active": version.active,
        "sourceBytes": version.source_bytes,
    }


def run_json(run: queues.FunctionRun) -> Run:
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
        "outputDroppedAt": dropped_at(run),
    }


def dropped_at(run: queues.FunctionRun) -> str | None:
    return None if run.output_dropped_at is None else iso_time(run.output_dropped_at)


def run_detail_json(detail: queues.RunDetail) -> RunDetail:
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
        "outputDroppedAt": dropped_at(run),
    }
