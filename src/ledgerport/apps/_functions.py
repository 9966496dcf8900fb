"""An app's hosted functions as code: upload (a new version each time), list, read, delete
(contract.md: Hosted functions, Developer console API). Their runs are the queues package's.

An upload is an ES module exporting ``handler`` and the event types it runs on. The module is
turned into a script at upload (:mod:`._module_source`), in a worker process and before any
transaction opens (:func:`prepare_function`): a slow parse holds neither the event loop nor the
store. The source, the script and a version number are kept, and the latest version is the one
that runs. Each event type must be one the app may receive: business and privacy events need
their gating scope among the app's registered scopes (an installation may grant it), app events
need none. Deleting a function
keeps its row (``deleted_at``), so its runs stay listed until they age out and a run still
queued for it fails unrun; the name is free again at once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ledgerport import catalog
from ledgerport.errors import InvalidInput
from ledgerport.ids import new_id
from ledgerport.storage import Row, Transaction

from ._apps import App
from ._compiler import compile_upload
from ._errors import FunctionNotFound
from ._module_source import CompiledModule

_NAME = re.compile(catalog.FUNCTION_NAME_PATTERN)


@dataclass(frozen=True)
class HostedFunction:
    id: str
    app_id: str
    name: str
    events: tuple[str, ...]
    version: int
    """The latest version: the one that runs."""
    created_at: float
    updated_at: float

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
        )


def _problems(app: App, name: str, source: str, events: Sequence[str]) -> list[str]:
    problems: list[str] = []
    if not _NAME.match(name):
        problems.append("name must be a letter or digit, then up to 63 letters, digits, _ or -")
    size = len(source.encode())
    if size > catalog.FUNCTION_SOURCE_MAX_BYTES:
        problems.append(
            f"source must be at most {catalog.FUNCTION_SOURCE_MAX_BYTES} bytes of UTF-8"
            f" (it is {size})"
        )
    if len(set(events)) != len(events):
        problems.append("events must not repeat an event")
    registered = set(app.scopes)
    for index, event in enumerate(events):
        kind = catalog.event_type(event)
        if kind is None:
            problems.append(f"events.{index} {event!r} is not an event of the catalog")
        elif kind.audience != "app" and kind.scope not in registered:
            problems.append(
                f"events.{index} {event!r} needs the scope {kind.scope},"
                " which the app does not register"
            )
    return problems


@dataclass(frozen=True)
class FunctionUpload:
    """An upload checked and compiled (:func:`prepare_function`), ready to be stored."""

    name: str
    source: str
    events: tuple[str, ...]
    module: CompiledModule


async def prepare_function(
    app: App,
    *,
    name: str,
    source: str,
    events: Sequence[str],
    time_limit: float = catalog.FUNCTION_COMPILE_SECONDS,
) -> FunctionUpload:
    """Check an upload of ``app``'s function ``name`` and compile its module in a worker process
    (:func:`compile_upload`), within ``time_limit`` seconds. Call it before the transaction that
    stores the upload: a transaction must never wait for a parse.

    Raises InvalidInput (name, size, events, bracket depth, imports, time) or
    FunctionSourceNoHandler.
    """
    problems = _problems(app, name, source, events)
    if problems:
        raise InvalidInput(problems)
    module = await compile_upload(source, time_limit=time_limit)
    return FunctionUpload(name, source, tuple(events), module)


async def put_function(
    tx: Transaction, *, now: float, app: App, upload: FunctionUpload
) -> HostedFunction:
    """Create the function of ``app`` the upload names, or give it a new version: the upload's
    source, script and events. The rules are checked again against ``app`` as this transaction
    read it (its scopes may have changed since the upload was prepared); nothing is parsed
    here. Raises InvalidInput (name, size, events, an app's 21st function)."""
    name, source, events = upload.name, upload.source, upload.events
    problems = _problems(app, name, source, events)
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
    if row is None:
        count = await tx.fetchval(
            "SELECT COUNT(*) FROM functions WHERE app_id = $1 AND deleted_at IS NULL", app.id
        )
        if int(count) >= catalog.FUNCTIONS_PER_APP_MAX:
            raise InvalidInput([f"an app has at most {catalog.FUNCTIONS_PER_APP_MAX} functions"])
        function_id, version, created_at = new_id("fn"), 1, now
        await tx.execute(
            "INSERT INTO functions (id, app_id, name, events, version, created_at, updated_at)"
            " VALUES ($1, $2, $3, $4, 1, $5, $5)",
            function_id,
            app.id,
            name,
            events_json,
            now,
        )
    else:
        function_id, version = row["id"], int(row["version"]) + 1
        created_at = float(row["created_at"])
        await tx.execute(
            "UPDATE functions SET events = $1, version = $2, updated_at = $3 WHERE id = $4",
            events_json,
            version,
            now,
            function_id,
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
    return HostedFunction(function_id, app.id, name, events, version, created_at, now)


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


async def function_source(tx: Transaction, function: HostedFunction) -> str:
    """The source of the function's latest version, as uploaded."""
    source: str = await tx.fetchval(
        "SELECT source FROM function_versions WHERE function_id = $1 AND version = $2",
        function.id,
        function.version,
    )
    return source


async def delete_function(tx: Transaction, *, now: float, app_id: str, name: str) -> None:
    function = await get_function(tx, app_id, name)
    await tx.execute(
        "UPDATE functions SET deleted_at = $1, updated_at = $1 WHERE id = $2", now, function.id
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
