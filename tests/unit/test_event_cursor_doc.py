"""The event cursor's receiver in docs/webhooks.md ("Catching up: the event cursor"), run as the
page shows it against a fake of the Events API: a block whose first line is ``# example:
<name>`` is that example, so the page cannot drift from what is tested.

The fake answers ``GET /events`` by the rules docs/catalog.md gives it: a business's events
oldest first, ``limit`` a page (50 unless asked, at most 100), ``next`` the id of the page's last
event when more are left and null on the last page, ``after`` any event of the log (anything
else is ``UNKNOWN_CURSOR``), ``types`` keeping only those types. Event ids are random, as the
service's are: nothing can be learnt from their order.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from werkzeug.datastructures import Headers

DOC = Path(__file__).resolve().parents[2] / "docs" / "webhooks.md"
EXAMPLE = re.compile(r"^```python\n# example: (?P<name>[\w-]+)\n(?P<code>.*?)^```$", re.M | re.S)
TYPES = ("invoice.created", "invoice.updated", "invoice.paid", "customer.updated")
PAGE_DEFAULT, PAGE_MAX = 50, 100
TOKEN = "lp_at_example-access-token"
READS_MAX = 10_000
"""More pages than any test here reads of one feed."""

Event = dict[str, Any]


def _examples() -> dict[str, str]:
    found = [(m["name"], m["code"]) for m in EXAMPLE.finditer(DOC.read_text())]
    examples = dict(found)
    assert len(examples) == len(found), "two examples share a name"
    return examples


def _example(name: str, function: str) -> Callable[..., Any]:
    namespace: dict[str, Any] = {"__name__": f"docs_webhooks_{name.replace('-', '_')}"}
    code = compile(_examples()[name], f"docs/webhooks.md (example: {name})", "exec")
    exec(code, namespace)  # the document's own example
    found = namespace[function]
    assert callable(found)
    return found  # type: ignore[no-any-return]


class UnknownCursor(Exception):
    """What the Events API answers as 400 UNKNOWN_CURSOR."""


@dataclass
class Feed:
    """One business's event log, as its app reads it through ``GET /events``."""

    business: str = "bus_a"
    events: list[Event] = field(default_factory=list)
    reads: int = 0
    """Pages answered."""

    def commit(self, count: int = 1, *, type: str | None = None) -> list[Event]:
        """Record ``count`` events (ids random, as the service's are); answers them."""
        made = []
        for _ in range(count):
            position = len(self.events)
            event = {
                "id": f"evt_{secrets.token_hex(12)}",
                "type": type or TYPES[position % len(TYPES)],
                "apiVersion": "2026-09-22",
                "created": 1790000000 + position,
                "data": {"id": f"inv_{position}", "number": f"INV-{position:04d}"},
            }
            self.events.append(event)
            made.append(event)
        return made

    def page(
        self,
        after: str | None,
        *,
        limit: int = PAGE_DEFAULT,
        types: Sequence[str] | None = None,
    ) -> tuple[list[Event], str | None]:
        """One page of ``GET /events``: ``(data, next)``."""
        assert 1 <= limit <= PAGE_MAX
        self.reads += 1
        # A reader that does not move on fails here instead of reading for ever.
        assert self.reads <= READS_MAX, f"{self.reads} pages read: the reader does not move on"
        start = 0
        if after is not None:
            ids = [event["id"] for event in self.events]
            if after not in ids:
                raise UnknownCursor(after)
            start = ids.index(after) + 1
        rest = [e for e in self.events[start:] if types is None or e["type"] in types]
        if len(rest) > limit:
            return [dict(e) for e in rest[:limit]], rest[limit - 1]["id"]
        return [dict(e) for e in rest], None

    def fetcher(self, limit: int = PAGE_DEFAULT) -> Callable[[str | None], tuple[list[Event], Any]]:
        """``fetch_page`` as the page describes it, reading this feed ``limit`` at a time."""
        return lambda after: self.page(after, limit=limit)

    def delivery(self, event: Event) -> tuple[dict[str, Any], Headers]:
        """The delivery of ``event`` (its body parsed, its headers as a framework hands them
        over: names in lower case, as HTTP/2 carries them)."""
        body = {
            "id": f"dlv_{secrets.token_hex(12)}",
            "eventId": event["id"],
            "type": event["type"],
            "apiVersion": event["apiVersion"],
            "businessId": self.business,
            "created": event["created"],
            "data": event["data"],
        }
        headers = Headers(
            [
                ("content-type", "application/json"),
                ("x-webhook-id", body["id"]),
                ("x-webhook-event", event["type"]),
                ("x-webhook-event-id", event["id"]),
                ("x-webhook-event-cursor", event["id"]),
            ]
        )
        return body, headers


@dataclass
class Receiver:
    """The state the page's receiver keeps, and the events it handled, in order."""

    cursors: dict[str, str] = field(default_factory=dict)
    handled_ids: set[str] = field(default_factory=set)
    handled: list[Event] = field(default_factory=list)
    fail_on: set[str] = field(default_factory=set)
    """Event ids whose handling raises once."""

    def handle(self, event: Event) -> None:
        if event["id"] in self.fail_on:
            self.fail_on.discard(event["id"])
            raise RuntimeError(f"handling {event['id']} failed")
        self.handled.append(event)

    def receive(self, feed: Feed, event: Event, *, limit: int = PAGE_DEFAULT) -> None:
        body, headers = feed.delivery(event)
        on_delivery = _example("event-cursor", "on_delivery")
        on_delivery(body, headers, self.cursors, self.handled_ids, feed.fetcher(limit), self.handle)

    def ids(self) -> list[str]:
        return [event["id"] for event in self.handled]


def _ids(events: Sequence[Event]) -> list[str]:
    return [event["id"] for event in events]


def test_the_page_has_both_examples() -> None:
    assert sorted(_examples()) == ["event-cursor", "events-fetcher"]


def test_a_gap_is_filled_in_the_order_of_the_log() -> None:
    feed, receiver = Feed(), Receiver()
    [first] = feed.commit()
    receiver.receive(feed, first)
    [second] = feed.commit()
    receiver.receive(feed, second)
    lost = feed.commit(3)  # their deliveries never come
    [last] = feed.commit()
    receiver.receive(feed, last)

    assert receiver.ids() == _ids(feed.events)
    assert receiver.handled == feed.events  # each as the Events API shows it
    assert receiver.cursors == {"bus_a": last["id"]}
    assert all(event["id"] in receiver.handled_ids for event in lost)


def test_a_repeated_delivery_is_handled_once_and_reads_nothing() -> None:
    feed, receiver = Feed(), Receiver()
    events = feed.commit(3)
    for event in (events[0], events[1], events[1], events[0], events[2], events[2]):
        receiver.receive(feed, event)
    reads = feed.reads
    receiver.receive(feed, events[1])

    assert receiver.ids() == _ids(events)
    assert feed.reads == reads


def test_deliveries_out_of_order_are_handled_in_the_order_of_the_log() -> None:
    feed, receiver = Feed(), Receiver()
    events = feed.commit(5)
    for index in (0, 3, 1, 4, 2):
        receiver.receive(feed, events[index])

    assert receiver.ids() == _ids(events)
    assert receiver.cursors["bus_a"] == events[4]["id"]


def test_an_event_from_before_the_first_delivery_is_handled_when_it_arrives() -> None:
    feed, receiver = Feed(), Receiver()
    events = feed.commit(4)
    receiver.receive(feed, events[2])  # the business's first delivery here
    receiver.receive(feed, events[0])
    receiver.receive(feed, events[0])

    assert receiver.ids() == _ids([events[2], events[3], events[0]])
    assert receiver.cursors["bus_a"] == events[3]["id"]
    assert receiver.handled[2] == events[0]  # taken from the delivery, in the feed's shape


def test_a_test_delivery_is_no_event_and_reads_nothing() -> None:
    feed, receiver = Feed(), Receiver()
    [event] = feed.commit()
    receiver.receive(feed, event)
    feed.commit(2)
    body, headers = feed.delivery(event)
    body.update(eventId=None, businessId="test", data={**event["data"], "test": True})
    del headers["x-webhook-event-id"]
    del headers["x-webhook-event-cursor"]
    on_delivery = _example("event-cursor", "on_delivery")
    reads = feed.reads
    on_delivery(
        body, headers, receiver.cursors, receiver.handled_ids, feed.fetcher(), receiver.handle
    )

    assert receiver.ids() == [event["id"]]
    assert feed.reads == reads
    assert receiver.cursors == {"bus_a": event["id"]}


@pytest.mark.parametrize("limit", [1, 2, 3, PAGE_DEFAULT, PAGE_MAX])
def test_every_page_is_read_to_the_last(limit: int) -> None:
    feed, receiver = Feed(), Receiver()
    [first] = feed.commit()
    receiver.receive(feed, first, limit=limit)
    missed = feed.commit(7)
    receiver.receive(feed, missed[-1], limit=limit)

    assert receiver.ids() == _ids(feed.events)
    # One read a page: the last page says it is the last (next null), even when it is full.
    assert feed.reads == -(-len(missed) // limit)


def test_catch_up_alone_finds_what_no_delivery_told() -> None:
    catch_up = _example("event-cursor", "catch_up")
    feed, receiver = Feed(), Receiver()
    [first] = feed.commit()
    receiver.receive(feed, first)
    cursor = receiver.cursors["bus_a"]
    assert catch_up(cursor, feed.fetcher(2), receiver.handle, receiver.handled_ids) == cursor

    feed.commit(5)  # committed while the endpoint was switched off: delivered nowhere
    cursor = catch_up(cursor, feed.fetcher(2), receiver.handle, receiver.handled_ids)

    assert cursor == feed.events[-1]["id"]
    assert receiver.ids() == _ids(feed.events)


def test_an_error_part_way_keeps_the_cursor_and_handles_each_event_once() -> None:
    feed, receiver = Feed(), Receiver()
    [first] = feed.commit()
    receiver.receive(feed, first)
    events = feed.commit(4)
    receiver.fail_on.add(events[2]["id"])

    with pytest.raises(RuntimeError, match="handling"):
        receiver.receive(feed, events[3], limit=2)
    assert receiver.cursors["bus_a"] == first["id"]
    assert receiver.ids() == _ids([first, events[0], events[1]])

    receiver.receive(feed, events[3], limit=2)  # the delivery's retry
    assert receiver.ids() == _ids(feed.events)
    assert receiver.cursors["bus_a"] == events[3]["id"]


def test_each_business_keeps_its_own_cursor() -> None:
    mine, theirs, receiver = Feed("bus_a"), Feed("bus_b"), Receiver()
    a = mine.commit(3)
    b = theirs.commit(3)
    receiver.receive(mine, a[0])
    receiver.receive(theirs, b[0])
    receiver.receive(mine, a[2])
    receiver.receive(theirs, b[1])

    assert receiver.ids() == _ids([a[0], b[0], a[1], a[2], b[1], b[2]])
    assert receiver.cursors == {"bus_a": a[2]["id"], "bus_b": b[2]["id"]}


@given(
    size=st.integers(min_value=1, max_value=25),
    arrivals=st.lists(st.integers(min_value=0, max_value=24), min_size=1, max_size=40),
    limit=st.integers(min_value=1, max_value=PAGE_MAX),
)
def test_any_arrival_handles_each_event_once_and_the_log_in_order(
    size: int, arrivals: list[int], limit: int
) -> None:
    """Whatever arrives, in whatever order and how often: each event is handled at most once;
    the first delivery's event and every one delivered are handled; once a second event was
    delivered, every event after the first is, and those after it in the order of the log."""
    feed, receiver = Feed(), Receiver()
    events = feed.commit(size)
    delivered = [index % size for index in arrivals]
    for index in delivered:
        receiver.receive(feed, events[index], limit=limit)

    start = delivered[0]
    later = {index for index in delivered[1:] if index != start}
    position = {event["id"]: index for index, event in enumerate(events)}
    handled = [position[event_id] for event_id in receiver.ids()]
    expected = {start} | later | (set(range(start + 1, size)) if later else set())
    assert len(handled) == len(set(handled))
    assert set(handled) == expected
    after_start = [index for index in handled if index > start]
    assert after_start == sorted(after_start)
    assert receiver.cursors["bus_a"] == events[size - 1 if later else start]["id"]

    catch_up = _example("event-cursor", "catch_up")
    catch_up(receiver.cursors["bus_a"], feed.fetcher(limit), receiver.handle, receiver.handled_ids)
    assert sorted(position[event_id] for event_id in receiver.ids()) == sorted(
        expected | set(range(start, size))
    )


def _served(feed: Feed) -> httpx.MockTransport:
    """``GET /events`` of ``feed`` over HTTP, for an access token of its installation."""

    def answer(request: httpx.Request) -> httpx.Response:
        assert (request.method, request.url.path) == ("GET", "/events")
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            return httpx.Response(401, json={"code": "INVALID_TOKEN"})
        params = request.url.params
        assert set(params) <= {"after", "limit", "types"}, params
        types = params["types"].split(",") if "types" in params else None
        try:
            data, next_ = feed.page(
                params.get("after"), limit=int(params.get("limit", PAGE_DEFAULT)), types=types
            )
        except UnknownCursor:
            return httpx.Response(400, json={"code": "UNKNOWN_CURSOR"})
        return httpx.Response(200, json={"data": data, "next": next_})

    return httpx.MockTransport(answer)


def _client(feed: Feed) -> httpx.Client:
    return httpx.Client(base_url="https://api.ledgerport.example", transport=_served(feed))


def test_the_fetcher_reads_the_events_api_page_by_page() -> None:
    events_fetcher = _example("events-fetcher", "events_fetcher")
    catch_up = _example("event-cursor", "catch_up")
    feed, receiver = Feed(), Receiver()
    feed.commit(250)
    with _client(feed) as client:
        fetch_page = events_fetcher(client, TOKEN)
        cursor = catch_up(feed.events[0]["id"], fetch_page, receiver.handle, receiver.handled_ids)

    assert receiver.ids() == _ids(feed.events[1:])
    assert cursor == feed.events[-1]["id"]
    assert feed.reads == 3  # 100 a page


def test_the_fetcher_keeps_the_types_asked_for() -> None:
    events_fetcher = _example("events-fetcher", "events_fetcher")
    feed = Feed()
    feed.commit(12)
    with _client(feed) as client:
        fetch_page = events_fetcher(client, TOKEN, ("invoice.paid", "customer.updated"))
        data, next_ = fetch_page(feed.events[0]["id"])

    assert {event["type"] for event in data} == {"invoice.paid", "customer.updated"}
    assert len(data) == 6
    assert next_ is None


def test_the_fetcher_raises_on_a_refused_cursor() -> None:
    events_fetcher = _example("events-fetcher", "events_fetcher")
    feed = Feed()
    feed.commit(2)
    with _client(feed) as client, pytest.raises(httpx.HTTPStatusError, match="400"):
        events_fetcher(client, TOKEN)(f"evt_{'0' * 24}")
