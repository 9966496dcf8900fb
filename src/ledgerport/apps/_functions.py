"""An app's hosted functions as code: upload (a new version each time), list, read, delete,
the versions kept and the active one (contract.md: Hosted functions, Developer console API and
its second round). Their runs are the queues package's.

An upload is an ES module exporting ``handler``, the event types it runs on and the hosts its
``context.fetch`` may reach (``_allowed_hosts.py``). The module is
turned into a script at upload (:mod:`._module_source`), in a worker process and before any
transaction opens (:func:`prepare_function`): a slow parse holds neither the event loop nor the
store. Each upload keeps its source and script as a new version, numbered on, which becomes the
active one: the version runs use. An earlier version kept can be made active again (a
rollback); the FUNCTION_VERSIONS_KEPT newest are kept, and the active one always. The event
types are the function's, not a version's: an upload sets them, an activation leaves them.
Each event type must be one the app may receive: business and privacy events need their
gating scope among the app's registered scopes (an installation may grant it), app events need
none. A function may also have a schedule (:mod:`._schedules`: five cron fields, UTC), set by
an upload as its event types are, with the tick it is due at next; a schedule may stand alone,
with no event type. Deleting a function keeps its row (``deleted_at``), so its runs stay listed
until they age out and a run still queued for it fails unrun; the name is free again at once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ledgerport import catalog
from ledgerport.errors import InvalidInput
from ledgerport.ids import new_id
from ledgerport.storage import Row, Transaction

from ._allowed_hosts import allowed_hosts_problems, normal_allowed_hosts
from ._apps import App, app_columns, developed_app_in
from ._compiler import compile_upload
from ._errors import FunctionNotFound, FunctionVersionNotFound
from ._module_source import CompiledModule
from ._schedules import next_tick, normal_schedule, schedule_problems
from ._webhooks import subscription_problems

_NAME = re.compile(catalog.FUNCTION_NAME_PATTERN)
_VERSION_MAX = 2**31 - 1
"""The largest version number a database integer holds: none beyond it can exist."""
FUNCTION_VERSIONS_KEPT = 10
"""Versions of a function kept: the newest ones (and always the active one). Enough to roll
back over several bad uploads; each keeps a source of up to 256 KiB and its script, so a
function keeps a few MiB at most however often it is uploaded."""


@dataclass(frozen=True)
class HostedFunction:
    id: str
    app_id: str
    name: str
    events: tuple[str, ...]
    version: int
    """The active version: the one runs use."""
    created_at: float
    updated_at: float
    latest_version: int
    """The newest version uploaded (the active one, unless an earlier one was activated)."""
    allowed_hosts: tuple[str, ...] = ()
    """The hosts its runs' ``context.fetch`` may reach (``_allowed_hosts.py``)."""
    schedule: str | None = None
    """Five cron fields, UTC (None: it runs on events only)."""
    next_run_at: float | None = None
    """The tick of its schedule due next, not run yet (None: no schedule, or one that fires no
    more); in the past when no process has run it yet."""

    @property
    def test_event_type(self) -> str:
        """The event a test run runs on: the first subscribed, else invoice.created."""
        return self.events[0] if self.events else catalog.DEFAULT_TEST_EVENT

    @classmethod
    def from_row(cls, row: Row) -> HostedFunction:
        return cls(
            id=row["id"],
            app_id=row["app_id"],
            name=row["name"],
            events=tuple(json.loads(row["events"])),
            version=int(row["version"]),
            created_at=float(row["created_at"]),
            updated_at=float(row["updated_at"]),
            latest_version=int(row["latest_version"]),
            allowed_hosts=tuple(json.loads(row["allowed_hosts"])),
            schedule=row["schedule"],
            next_run_at=row["schedule_next_at"],
        )


@dataclass(frozen=True)
class FunctionVersion:
    """A version kept of a function."""

    version: int
    created_at: float
    active: bool
    source_bytes: int
    """The size of its source, as uploaded (UTF-8)."""


def _problems(
    app: App,
    name: str,
    source: str,
    events: Sequence[str],
    allowed_hosts: Sequence[str],
    schedule: str | None = None,
) -> list[str]:
    problems: list[str] = []
    if not _NAME.match(name):
        problems.append("name must be a letter or digit, then up to 63 letters, digits, _ or -")
    elif name in catalog.FUNCTION_NAMES_RESERVED:
        problems.append(f"name {name!r} is reserved (the console's page for a new function)")
    size = len(source.encode())
    if size > catalog.FUNCTION_SOURCE_MAX_BYTES:
        problems.append(
            f"source must be at most {catalog.FUNCTION_SOURCE_MAX_BYTES} bytes of UTF-8"
            f" (it is {size})"
        )
    problems += subscription_problems(events, app.scopes)
    problems += allowed_hosts_problems(allowed_hosts)
    problems += schedule_problems(schedule)
    return problems


@dataclass(frozen=True)
class FunctionUpload:
    """An upload checked and compiled (:func:`prepare_function`), ready to be stored."""

    name: str
    source: str
    events: tuple[str, ...]
    module: CompiledModule
    allowed_hosts: tuple[str, ...] = ()
    """As kept (``normal_allowed_hosts``)."""
    schedule: str | None = None
    """Five cron fields, UTC, as kept (:func:`normal_schedule`), or None."""


async def prepare_function(
    app: App,
    *,
    name: str,
    source: str,
    events: Sequence[str],
    allowed_hosts: Sequence[str] = (),
    schedule: str | None = None,
    cpu_limit: float = catalog.FUNCTION_COMPILE_SECONDS,
) -> FunctionUpload:
    """Check an upload of ``app``'s function ``name`` and compile its module in a worker process
    (:func:`compile_upload`), within ``cpu_limit`` seconds of CPU time. Call it before the
    transaction that stores the upload: a transaction must never wait for a parse.

    Raises InvalidInput (name, size, events, allowed hosts, schedule, bracket depth, imports,
    time) or FunctionSourceNoHandler.
    """
    problems = _problems(app, name, source, events, allowed_hosts, schedule)
    if problems:
        raise InvalidInput(problems)
    module = await compile_upload(source, cpu_limit=cpu_limit)
    kept = None if schedule is None else normal_schedule(schedule)
    return FunctionUpload(
        name, source, tuple(events), module, normal_allowed_hosts(allowed_hosts), kept
    )


async def put_function(
    tx: Transaction, *, now: float, app: App, upload: FunctionUpload
) -> HostedFunction:
    """Create the function of ``app`` the upload names, or give it a new version: the upload's
    source, script, events, allowed hosts and schedule (:func:`_set_schedule`), the new version
    active, the versions older than the FUNCTION_VERSIONS_KEPT newest deleted. The rules are
    checked again against ``app`` as this transaction read it (its scopes may have changed since
    the upload was prepared); nothing is parsed here. Raises InvalidInput (name, size, events,
    allowed hosts, schedule, an app's 21st function)."""
    name, source, events, hosts = upload.name, upload.source, upload.events, upload.allowed_hosts
    problems = _problems(app, name, source, events, hosts, upload.schedule)
    if problems:
        raise InvalidInput(problems)
    # Two uploads of one name at once: the second waits and becomes the next version.
    await tx.serialize(f"function:{app.id}:{name}")
    row = await tx.fetchrow(
        f"SELECT * FROM functions WHERE app_id = $1 AND name = $2 AND deleted_at IS NULL"
        f"{tx.row_lock}",
        app.id,
        name,
    )
    events_json = json.dumps(list(events))
    hosts_json = json.dumps(list(hosts))
    if row is None:
        count = await tx.fetchval(
            "SELECT COUNT(*) FROM functions WHERE app_id = $1 AND deleted_at IS NULL", app.id
        )
        if int(count) >= catalog.FUNCTIONS_PER_APP_MAX:
            raise InvalidInput([f"an app has at most {catalog.FUNCTIONS_PER_APP_MAX} functions"])
        function_id, version, created_at = new_id("fn"), 1, now
        await tx.execute(
            "INSERT INTO functions (id, app_id, name, events, version, latest_version,"
            " created_at, updated_at, allowed_hosts) VALUES ($1, $2, $3, $4, 1, 1, $5, $5, $6)",
            function_id,
            app.id,
            name,
            events_json,
            now,
            hosts_json,
        )
    else:
        function_id, version = row["id"], int(row["latest_version"]) + 1
        created_at = float(row["created_at"])
        await tx.execute(
            "UPDATE functions SET events = $1, version = $2, latest_version = $2,"
            " updated_at = $3, allowed_hosts = $5 WHERE id = $4",
            events_json,
            version,
            now,
            function_id,
            hosts_json,
        )
        await tx.execute(
            "DELETE FROM function_versions WHERE function_id = $1 AND version <= $2",
            function_id,
            version - FUNCTION_VERSIONS_KEPT,
        )
    await tx.execute(
        "INSERT INTO function_versions (function_id, version, source, script, created_at)"
        " VALUES ($1, $2, $3, $4, $5)",
        function_id,
        version,
        source,
        upload.module.script,
        now,
    )
    next_run_at = await _set_schedule(tx, function_id, row, upload.schedule, now=now)
    return HostedFunction(
        function_id,
        app.id,
        name,
        events,
        version,
        created_at,
        now,
        version,
        hosts,
        schedule=upload.schedule,
        next_run_at=next_run_at,
    )


async def _set_schedule(
    tx: Transaction, function_id: str, before: Row | None, schedule: str | None, *, now: float
) -> float | None:
    """Keep the function's schedule and answer its next tick. A schedule uploaded again as it
    was keeps its next tick (one due and not run yet still runs); a new one starts from the
    first tick after ``now``."""
    if before is not None and before["schedule"] == schedule:
        kept: float | None = before["schedule_next_at"]
        return kept
    next_run_at = None if schedule is None else next_tick(schedule, now)
    await tx.execute(
        "UPDATE functions SET schedule = $1, schedule_next_at = $2 WHERE id = $3",
        schedule,
        next_run_at,
        function_id,
    )
    return next_run_at


async def list_functions(tx: Transaction, app_id: str) -> list[HostedFunction]:
    rows = await tx.fetch(
        "SELECT * FROM functions WHERE app_id = $1 AND deleted_at IS NULL ORDER BY created_at, id",
        app_id,
    )
    return [HostedFunction.from_row(row) for row in rows]


async def get_function(tx: Transaction, app_id: str, name: str) -> HostedFunction:
    """The app's function ``name``; FunctionNotFound when it has none (or it was deleted)."""
    row = await tx.fetchrow(
        "SELECT * FROM functions WHERE app_id = $1 AND name = $2 AND deleted_at IS NULL",
        app_id,
        name,
    )
    if row is None:
        raise FunctionNotFound(name)
    return HostedFunction.from_row(row)


async def get_developed_function(
    tx: Transaction, app_id: str, developer_user_id: str, name: str
) -> tuple[App, HostedFunction]:
    """The app, when ``developer_user_id`` develops it (AppNotFound otherwise, as
    ``get_developed_app``), and its function ``name`` (:func:`get_function`, FunctionNotFound
    alike), in one statement: what the console's pages of a function read first."""
    row = await tx.fetchrow(
        f"SELECT {app_columns('a')}, f.* FROM apps a LEFT JOIN functions f ON f.app_id = a.id"
        " AND f.name = $2 AND f.deleted_at IS NULL WHERE a.id = $1",
        app_id,
        name,
    )
    app = developed_app_in(row, app_id, developer_user_id)
    if row is None or row["id"] is None:
        raise FunctionNotFound(name)
    return app, HostedFunction.from_row(row)


async def function_source(tx: Transaction, function: HostedFunction) -> str:
    """The source of the function's active version, as uploaded."""
    source: str = await tx.fetchval(
        "SELECT source FROM function_versions WHERE function_id = $1 AND version = $2",
        function.id,
        function.version,
    )
    return source


async def function_versions(tx: Transaction, function: HostedFunction) -> list[FunctionVersion]:
    """Every version kept of the function, newest first."""
    size = "octet_length(source)" if tx.kind == "postgresql" else "length(CAST(source AS BLOB))"
    rows = await tx.fetch(
        f"SELECT version, created_at, {size} AS size FROM function_versions"
        " WHERE function_id = $1 ORDER BY version DESC",
        function.id,
    )
    return [_kept(function, row["version"], row["created_at"], row["size"]) for row in rows]


async def function_and_versions(
    tx: Transaction, app_id: str, name: str
) -> tuple[HostedFunction, list[FunctionVersion]]:
    """The app's function ``name`` (:func:`get_function`, FunctionNotFound alike) and every
    version kept of it, newest first (:func:`function_versions`), in one statement."""
    size = "octet_length(v.source)" if tx.kind == "postgresql" else "length(CAST(v.source AS BLOB))"
    rows = await tx.fetch(
        "SELECT f.*, v.version AS kept_version, v.created_at AS kept_at,"
        f" {size} AS kept_size"
        " FROM functions f LEFT JOIN function_versions v ON v.function_id = f.id"
        " WHERE f.app_id = $1 AND f.name = $2 AND f.deleted_at IS NULL"
        " ORDER BY v.version DESC",
        app_id,
        name,
    )
    if not rows:
        raise FunctionNotFound(name)
    function = HostedFunction.from_row(rows[0])
    return function, [
        _kept(function, row["kept_version"], row["kept_at"], row["kept_size"])
        for row in rows
        if row["kept_version"] is not None
    ]


def _kept(function: HostedFunction, version: int, created_at: float, size: int) -> FunctionVersion:
    return FunctionVersion(
        version=int(version),
        created_at=float(created_at),
        active=int(version) == function.version,
        source_bytes=int(size),
    )


async def version_source(
    tx: Transaction, function: HostedFunction, version: int
) -> tuple[FunctionVersion, str]:
    """A version kept of the function and its source, as uploaded; FunctionVersionNotFound
    when it is not kept."""
    if not 1 <= version <= _VERSION_MAX:
        raise FunctionVersionNotFound(function.name, version)
    row = await tx.fetchrow(
        "SELECT created_at, source FROM function_versions WHERE function_id = $1 AND version = $2",
        function.id,
        version,
    )
    if row is None:
        raise FunctionVersionNotFound(function.name, version)
    source: str = row["source"]
    kept = FunctionVersion(
        version, float(row["created_at"]), version == function.version, len(source.encode())
    )
    return kept, source


async def activate_version(
    tx: Transaction, *, now: float, app_id: str, name: str, version: int
) -> HostedFunction:
    """Make ``version`` of the app's function ``name`` the active one (a rollback, or forward
    again): runs claimed from then on run it; a run already claimed keeps the version it was
    claimed with. FunctionNotFound, FunctionVersionNotFound when the version is not kept."""
    if not 1 <= version <= _VERSION_MAX:
        await get_function(tx, app_id, name)
        raise FunctionVersionNotFound(name, version)
    await tx.serialize(f"function:{app_id}:{name}")
    row = await tx.fetchrow(
        "SELECT f.*, v.version AS kept FROM functions f LEFT JOIN function_versions v"
        " ON v.function_id = f.id AND v.version = $3"
        " WHERE f.app_id = $1 AND f.name = $2 AND f.deleted_at IS NULL"
        f"{tx.row_lock and tx.row_lock + ' OF f'}",
        app_id,
        name,
        version,
    )
    if row is None:
        raise FunctionNotFound(name)
    if row["kept"] is None:
        raise FunctionVersionNotFound(name, version)
    await tx.execute(
        "UPDATE functions SET version = $1, updated_at = $2 WHERE id = $3", version, now, row["id"]
    )
    return replace(HostedFunction.from_row(row), version=version, updated_at=now)


async def delete_function(tx: Transaction, *, now: float, app_id: str, name: str) -> None:
    function = await get_function(tx, app_id, name)
    await tx.execute(
        "UPDATE functions SET deleted_at = $1, updated_at = $1, schedule_next_at = NULL"
        " WHERE id = $2",
        now,
        function.id,
    )


async def purge_deleted_functions(tx: Transaction, *, now: float) -> int:
    """Delete, with their versions, the functions deleted more than the run history kept (30
    days) ago that no run refers to any more (the cleanup calls it after
    ``queues.purge_runs``); answers how many."""
    unused = (
        "SELECT id FROM functions WHERE deleted_at IS NOT NULL AND deleted_at < $1"
        " AND NOT EXISTS (SELECT 1 FROM function_runs r WHERE r.function_id = functions.id)"
    )
    cutoff = now - catalog.DELIVERY_RETENTION
    await tx.execute(f"DELETE FROM function_versions WHERE function_id IN ({unused})", cutoff)
    return await tx.execute(f"DELETE FROM functions WHERE id IN ({unused})", cutoff)
