"""docs/events.md, rendered from the event catalog: every event with its audience, gating scope
and the ``data`` it carries (its sample payload).

Regenerate with ``python -m ledgerport.catalog.events_doc > docs/events.md``; a unit test fails
when the page and the catalog differ.
"""

from __future__ import annotations

import json

from ._events import EVENTS

_HEADER = """# Events and their payloads

Every write of the data API records its events in the same transaction as the write: an event
never exists without its write, and a write that fails leaves none. The same event reaches an
app three ways, each with the same `data`: the Events API (`GET /events`, `GET /events/{id}`,
30 days), webhook deliveries, and the hosted functions' `event` argument.

A business's events are answered by the Events API in the order they were committed: paging with
`after` from the last event seen never skips an event that commits later.

Audiences: **business** events (a change in the business's records) and **privacy** notices
reach an app only when the app holds the gating scope and the business's ACTIVE installation
grants it; **app** events (lifecycle notices) reach the app whatever the installation's state.
A record's `data` is the record as the data API answers it (money as decimal strings, dates as
ISO 8601); a deletion carries the id (and number) only. The payloads below are samples.

This page is generated from the catalog (`python -m ledgerport.catalog.events_doc`).
"""


def render() -> str:
    """The page, one section per event in the catalog's order."""
    sections = [_HEADER]
    for event in EVENTS:
        scope = f"`{event.scope}`" if event.scope else "none"
        sample = json.dumps(dict(event.sample), indent=2)
        sections.append(
            f"## `{event.name}`\n\nAudience: {event.audience}. Gating scope: {scope}.\n\n"
            f"```json\n{sample}\n```\n"
        )
    return "\n".join(sections)


if __name__ == "__main__":
    print(render(), end="")  # noqa: T201 - the command's output is the page
