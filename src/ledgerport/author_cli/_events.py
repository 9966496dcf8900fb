"""Reading a live stream (Server-Sent Events) and resuming it: each event's ``id`` is kept, and
a reconnect sends the last one as ``Last-Event-ID``, so nothing that ended while the connection
was down is missed (within the server's hour) and nothing is printed twice."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ._client import Session, server_message
from ._output import Refused

RECONNECT_DELAYS = (0.5, 1.0, 2.0, 5.0)
"""Seconds before each reconnect in a row; the last one repeats until the server answers."""
READ_TIMEOUT = 45.0
"""The server sends a comment at least every 15 s: three missed ones mean the connection is
gone, even when no error says so."""


@dataclass(frozen=True)
class StreamEvent:
    id: str | None
    event: str
    data: Any


def parse_events(lines: Iterable[str]) -> Iterator[StreamEvent]:
    """The events of an ``text/event-stream`` body's lines (comments skipped)."""
    event_id: str | None = None
    name, data = "message", list[str]()
    for line in lines:
        if not line:
            if data:
                yield StreamEvent(event_id, name, json.loads("\n".join(data)))
            name, data = "message", list[str]()
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "data":
            data.append(value)
        elif field == "event":
            name = value
        elif field == "id":
            event_id = value


def follow(
    session: Session,
    path: str,
    last_event_id: str | None = None,
    connected: Callable[[bool], None] = lambda again: None,
) -> Iterator[StreamEvent]:
    """Every event of the stream at ``path``, reconnecting with ``Last-Event-ID`` when the
    connection drops; a refusal (4xx) ends it with the server's message. ``connected`` is told
    of each connection the server accepts (``again``: a reconnect)."""
    import httpx

    connections = 0
    failures = 0
    timeout = httpx.Timeout(10.0, read=READ_TIMEOUT)
    while True:
        headers = {"Accept": "text/event-stream"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        try:
            with (
                session.client(timeout=timeout) as client,
                client.stream("GET", path, headers=headers) as response,
            ):
                if 400 <= response.status_code < 500 and response.status_code != 429:
                    response.read()
                    raise Refused(server_message(response))
                if response.status_code == 200:
                    failures = 0
                    connected(connections > 0)
                    connections += 1
                    for event in parse_events(response.iter_lines()):
                        if event.id is not None:
                            last_event_id = event.id
                        yield event
        except (httpx.HTTPError, ValueError):
            pass  # dropped, or cut mid-event: resume from the last whole one
        time.sleep(RECONNECT_DELAYS[min(failures, len(RECONNECT_DELAYS) - 1)])
        failures += 1
