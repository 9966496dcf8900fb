"""The developer's apps at a glance (``ledgerport apps``): each one's id, name and status, and
how many webhook endpoints and hosted functions it has."""

from __future__ import annotations

from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12

from ledgerport import apps, storage

from .._context import unit_of_work
from .._openapi import json_reply, operation
from ._blueprint import blueprint, developer_id


@with_config(ConfigDict(extra="forbid"))
class DevelopedApp(TypedDict):
    """One app the caller develops."""

    id: str
    name: str
    status: str
    webhooks: int
    functions: int


@with_config(ConfigDict(extra="forbid"))
class DevelopedAppPage(TypedDict):
    """Every app the caller develops, by name: ``next`` is null."""

    data: list[DevelopedApp]
    next: str | None


@blueprint.get("/apps")
@operation(json_reply(200, DevelopedAppPage, "The caller's apps"), raises=(storage.BadValue,))
async def list_developed_apps() -> DevelopedAppPage:
    """The apps the caller develops, by name, with their webhook endpoints and functions
    counted."""
    async with unit_of_work() as tx:
        developed = await apps.apps_developed_by(tx, developer_id())
        data: list[DevelopedApp] = [
            {
                "id": app.id,
                "name": app.name,
                "status": app.status,
                "webhooks": len(await apps.list_webhooks(tx, app.id)),
                "functions": len(await apps.list_functions(tx, app.id)),
            }
            for app in developed
        ]
    return {"data": data, "next": None}
