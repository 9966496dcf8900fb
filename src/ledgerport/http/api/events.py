"""The Events API: the pull feed of the token's business's event log, and one event by id.

An app reads the events its webhooks could receive (``books.feed_view``), with the installation's
and the app's scopes read at each call, so a widened installation counts at once. The application
host's session cookie is refused: the event log answers connected apps, which present an OAuth
access token.
"""

from __future__ import annotations

from typing import Annotated, Any, ParamSpec, TypeVar

from pydantic import ConfigDict, WithJsonSchema, with_config
from quart import request
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12
from werkzeug.datastructures import MultiDict

from ledgerport import apps, auth, books, catalog, storage
from ledgerport.errors import InvalidInput
from ledgerport.storage import Transaction

from .._ids import EVENT
from .._openapi import Param, json_reply, operation
from ._auth import RATE_LIMIT_HEADERS
from ._blueprint import blueprint
from ._endpoint import READ_RAISES, VERSION_HEADER, VERSION_PARAM, Call, data_route
from ._paging import PAGE_PARAMS, page_params

P = ParamSpec("P")
R = TypeVar("R")

_RETENTION_DAYS = catalog.EVENT_RETENTION // (24 * 3600)

LIMIT = next(param for param in PAGE_PARAMS if param.name == "limit")
# The cursor, the types and an event's id are looked up whatever their form: the spec answers
# any that names nothing with its code (UNKNOWN_CURSOR, UNKNOWN_EVENT_TYPE_TYPES,
# EVENT_NOT_FOUND), so no pattern refuses one first.
AFTER = Param(
    "after",
    "query",
    "The id of the last event already read (a page's next): the page starts after it. Any event"
    f" of the business within the {_RETENTION_DAYS}-day retention; without it,"
    " the page starts at the oldest",
    EVENT.looked_up("400 UNKNOWN_CURSOR, an empty one too"),
)
TYPES = Param(
    "types",
    "query",
    "Comma-separated event types: only events of these types are answered",
    {
        "type": "string",
        "description": "Event types of the catalog, comma-separated without spaces; any other"
        " name, an empty one too, is UNKNOWN_EVENT_TYPE_TYPES",
        "examples": ["invoice.created,invoice.paid"],
    },
)
EVENT_ID = Param("event_id", "path", "The event's id", EVENT.looked_up("404 EVENT_NOT_FOUND"))


@with_config(ConfigDict(extra="forbid"))
class Event(TypedDict):
    """An event of the business's log: ``data`` is the same object its webhook delivery
    carries; ``created`` is in unix seconds."""

    id: str
    type: Annotated[str, WithJsonSchema({"type": "string", "enum": list(catalog.EVENT_NAMES)})]
    apiVersion: str
    created: int
    data: dict[str, Any]


@with_config(ConfigDict(extra="forbid"))
class EventPage(TypedDict):
    """A page of events, oldest first; ``next`` is the ``after`` of the next page (null on the
    last one)."""

    data: list[Event]
    next: str | None


async def _scopes(
    tx: Transaction, grant: auth.AccessGrant
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The app's registered scopes and those its ACTIVE installation in the business grants,
    as stored now (none when the installation is no longer ACTIVE)."""
    app = await apps.get_app(tx, grant.app_id)
    installation = await apps.active_installation(tx, grant.app_id, grant.business_id)
    return app.scopes, () if installation is None else installation.scopes


def _rendered(event: books.Event, version: str) -> Event:
    """The event in the shape of the call's API version (its payload's shape is the same in
    every supported version today)."""
    return {
        "id": event.id,
        "type": event.type,
        "apiVersion": version,
        "created": int(event.created),
        "data": dict(event.data),
    }


def _types(args: MultiDict[str, str]) -> list[str] | None:
    """Every name of every ``types`` parameter, or None when there is none."""
    values = args.getlist("types")
    if not values:
        return None
    return [name for value in values for name in value.split(",")]


@blueprint.get("/events")
@operation(
    json_reply(
        200,
        EventPage,
        "A page of the business's events, oldest first",
        *RATE_LIMIT_HEADERS,
        VERSION_HEADER,
    ),
    raises=(
        *READ_RAISES,
        auth.ConnectedAppsOnly,
        InvalidInput,
        books.UnknownCursor,
        books.UnknownEventTypes,
        storage.BadValue,
    ),
    params=(LIMIT, AFTER, TYPES, VERSION_PARAM),
)
@data_route("events:read", connected_apps_only=auth.ConnectedAppsOnly)
async def get_events(tx: Transaction, call: Call) -> EventPage:
    """The events of the token's business the app may read, oldest first, ``limit`` a page
    (default 50, at most 100): ``{data, next}``; pass ``next`` as ``after`` for the next page."""
    limit, _ = page_params(request.args)
    grant = call.grant
    app_scopes, installation_scopes = await _scopes(tx, grant)
    page = await books.feed_page(
        tx,
        now=call.now,
        business_id=grant.business_id,
        app_id=grant.app_id,
        app_scopes=app_scopes,
        installation_scopes=installation_scopes,
        after=request.args.get("after"),
        types=_types(request.args),
        limit=limit,
    )
    return {"data": [_rendered(event, call.version) for event in page.events], "next": page.next}


@blueprint.get("/events/<event_id>")
@operation(
    json_reply(200, Event, "The event", *RATE_LIMIT_HEADERS, VERSION_HEADER),
    raises=(*READ_RAISES, auth.ConnectedAppsOnly, books.EventNotFound, storage.BadValue),
    params=(EVENT_ID, VERSION_PARAM),
)
@data_route("events:read", connected_apps_only=auth.ConnectedAppsOnly)
async def get_event(tx: Transaction, call: Call, event_id: str) -> Event:
    """One event of the token's business, when the app may read it (404 EVENT_NOT_FOUND
    otherwise, as for an event past the retention period)."""
    grant = call.grant
    app_scopes, installation_scopes = await _scopes(tx, grant)
    event = await books.feed_event(
        tx,
        now=call.now,
        business_id=grant.business_id,
        app_id=grant.app_id,
        app_scopes=app_scopes,
        installation_scopes=installation_scopes,
        event_id=event_id,
    )
    return _rendered(event, call.version)
