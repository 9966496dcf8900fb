"""The pull feed of the event log: what an app may read of its business's events, page by page.

An app sees, in the one business its token is for, the events its webhooks could receive there
(spec: Webhook registration and audiences): business and privacy events whose gating scope the
app registered AND its ACTIVE installation grants, and app events recorded for this app. Nothing
older than the retention period is answered, whether or not the cleanup has purged it yet.

Paging is by keyset on the log's ``seq``: the cursor is the id of the last event of the previous
page. Each visible type is read from its own ordered range of a feed index (``events_feed``, and
``events_app_feed`` for the app's own events), at most one page of each, and the oldest of those
make the page. So a page costs the same whatever the log's size and however rare the visible
types are in it; one scan of the business's log in ``seq`` order would have to walk past every
event the app may not see.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from ledgerport import catalog
from ledgerport.storage import Transaction

from ._errors import EventNotFound, UnknownCursor, UnknownEventTypes
from ._events import Event


@dataclass(frozen=True)
class FeedView:
    """What one app may read of one business's event log.

    ``gated``: the business and privacy event types whose scope the app holds there (registered
    by the app and granted by its ACTIVE installation); ``own``: the app event types, visible
    when recorded for this app. A types filter narrows both.
    """

    business_id: str
    app_id: str
    gated: frozenset[str]
    own: frozenset[str]

    def shows(self, event: Event) -> bool:
        if event.business_id != self.business_id:
            return False
        if event.type in self.gated:
            return True
        return event.type in self.own and event.app_id == self.app_id


def feed_view(
    *,
    business_id: str,
    app_id: str,
    app_scopes: Iterable[str],
    installation_scopes: Iterable[str],
    types: Iterable[str] | None = None,
) -> FeedView:
    """The view of ``app_id`` in ``business_id``. ``installation_scopes`` are those the
    business's ACTIVE installation of the app grants (none when it has no ACTIVE one);
    ``types``, when given, keeps only those event types (UnknownEventTypes for a name the
    catalog lacks)."""
    wanted = None if types is None else frozenset(types)
    unknown = sorted(name for name in wanted or () if catalog.event_type(name) is None)
    if unknown:
        raise UnknownEventTypes(unknown)
    held = frozenset(app_scopes) & frozenset(installation_scopes)
    gated: set[str] = set()
    own: set[str] = set()
    for event in catalog.EVENTS:
        if wanted is not None and event.name not in wanted:
            continue
        if event.audience == "app":
            own.add(event.name)
        elif event.scope in held:
            gated.add(event.name)
    return FeedView(business_id, app_id, frozenset(gated), frozenset(own))


@dataclass(frozen=True)
class FeedPage:
    """Events oldest first; ``next`` is the id to pass as the next page's cursor, None on the
    last page."""

    events: list[Event]
    next: str | None


_COLUMNS = "seq, id, business_id, app_id, type, api_version, data, created_at"


def _retention_cutoff(now: float) -> float:
    """The oldest ``created_at`` still answered."""
    return now - catalog.EVENT_RETENTION


async def _cursor_seq(tx: Transaction, business_id: str, after: str, cutoff: float) -> int:
    """The position of the cursor event: any event of the business within retention."""
    row = await tx.fetchrow(
        "SELECT seq, created_at FROM events WHERE id = $1 AND business_id = $2",
        after,
        business_id,
    )
    if row is None or row["created_at"] < cutoff:
        raise UnknownCursor(after)
    return int(row["seq"])


def _page_query(view: FeedView, start: int, cutoff: float, take: int) -> tuple[str, list[object]]:
    """The SQL of the ``take`` oldest visible events after ``start`` and its arguments. Each
    branch of the union is one ordered index range of one type, at most ``take`` long.

    ``take`` is written into the statement rather than bound: PostgreSQL then settles on one
    generic plan for the statement instead of planning its dozens of branches at every call.
    """
    args: list[object] = [view.business_id, start, cutoff]

    def bind(value: object) -> str:
        args.append(value)
        return f"${len(args)}"

    own_app = bind(view.app_id) if view.own else ""
    branches = [
        f"SELECT seq FROM (SELECT seq FROM events WHERE business_id = $1{app}"
        f" AND type = {bind(name)} AND seq > $2 AND created_at >= $3"
        f" ORDER BY seq LIMIT {take}) AS b{index}"
        for index, (name, app) in enumerate(
            [(name, "") for name in sorted(view.gated)]
            + [(name, f" AND app_id = {own_app}") for name in sorted(view.own)]
        )
    ]
    sql = (
        f"SELECT {_COLUMNS} FROM events WHERE seq IN (SELECT seq FROM"
        f" ({' UNION ALL '.join(branches)}) AS visible ORDER BY seq LIMIT {take})"
        " ORDER BY seq"
    )
    return sql, args


async def feed_page(
    tx: Transaction,
    *,
    now: float,
    business_id: str,
    app_id: str,
    app_scopes: Iterable[str],
    installation_scopes: Iterable[str],
    after: str | None = None,
    types: Collection[str] | None = None,
    limit: int = catalog.EVENTS_PAGE_DEFAULT,
) -> FeedPage:
    """The app's next page of its business's events after the event ``after`` (from the oldest
    retained when None), at most ``limit`` of them, of ``types`` only when given.

    UnknownEventTypes when ``types`` names an event the catalog lacks; UnknownCursor when
    ``after`` is not an event of the business within retention.
    """
    if not 1 <= limit <= catalog.EVENTS_PAGE_MAX:
        raise ValueError(f"limit {limit} is outside 1..{catalog.EVENTS_PAGE_MAX}")
    view = feed_view(
        business_id=business_id,
        app_id=app_id,
        app_scopes=app_scopes,
        installation_scopes=installation_scopes,
        types=types,
    )
    cutoff = _retention_cutoff(now)
    start = 0 if after is None else await _cursor_seq(tx, business_id, after, cutoff)
    if not view.gated and not view.own:
        return FeedPage([], None)
    # One more than the page tells whether another page follows.
    sql, args = _page_query(view, start, cutoff, limit + 1)
    rows = await tx.fetch(sql, *args)
    events = [Event.from_row(row) for row in rows]
    if len(events) > limit:
        return FeedPage(events[:limit], events[limit - 1].id)
    return FeedPage(events, None)


async def feed_event(
    tx: Transaction,
    *,
    now: float,
    business_id: str,
    app_id: str,
    app_scopes: Iterable[str],
    installation_scopes: Iterable[str],
    event_id: str,
) -> Event:
    """One event of the app's view of its business; EventNotFound when there is none, when the
    app may not see it, or when it is older than the retention period."""
    view = feed_view(
        business_id=business_id,
        app_id=app_id,
        app_scopes=app_scopes,
        installation_scopes=installation_scopes,
    )
    row = await tx.fetchrow(
        f"SELECT {_COLUMNS} FROM events WHERE id = $1 AND business_id = $2",
        event_id,
        business_id,
    )
    if row is None or row["created_at"] < _retention_cutoff(now):
        raise EventNotFound(event_id)
    event = Event.from_row(row)
    if not view.shows(event):
        raise EventNotFound(event_id)
    return event


async def purge_expired_events(tx: Transaction, *, now: float) -> int:
    """Delete the events older than the retention period; answers how many."""
    return await tx.execute("DELETE FROM events WHERE created_at < $1", _retention_cutoff(now))
