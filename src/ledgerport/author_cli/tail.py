"""``ledgerport tail deliveries|runs --app APP``: each delivery attempt or run of the app as it
ends, from the live streams (``GET /developer/apps/{app}/deliveries/stream`` and
``.../runs/stream``), resumed after a dropped connection where it stopped."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import click

from ._events import follow
from ._group import CONTEXT, app_option, common, session
from ._output import console, emit_json


def delivery_line(item: Mapping[str, Any]) -> str:
    """One delivery attempt as a line: when, type, status and answer, attempt, ids."""
    code = item.get("responseCode")
    answer = f" {code}" if code is not None else ""
    error = (
        f"  {item['lastError']}"
        if item.get("lastError") and item.get("status") != "delivered"
        else ""
    )
    return (
        f"{item.get('createdAt', '')}  {item.get('type', '')}  {item.get('status', '')}{answer}"
        f"  attempt {item.get('attempt', item.get('attempts', ''))}"
        f"  {item.get('id', '')} -> {item.get('webhookId', '')}{error}"
    )


def run_line(item: Mapping[str, Any]) -> str:
    """One run as a line: when, function, type, status, duration, id, and its error."""
    duration = item.get("durationMs")
    took = f" {duration} ms" if duration is not None else ""
    error = f"  {item['error']}" if item.get("error") else ""
    return (
        f"{item.get('createdAt', '')}  {item.get('function', '')}  {item.get('type', '')}"
        f"  {item.get('status', '')}{took}  {item.get('id', '')}{error}"
    )


@click.command(context_settings=CONTEXT)
@click.argument("what", type=click.Choice(["deliveries", "runs"]))
@app_option
@click.option(
    "--last-event-id", metavar="ID", help="Resume after this event (within the last hour)."
)
@click.option("--max-events", type=click.IntRange(min=1), metavar="N", help="Stop after N events.")
@common
def tail(
    what: str,
    app_id: str,
    last_event_id: str | None,
    max_events: int | None,
    server: str | None,
    as_json: bool,
) -> None:
    """Print each delivery attempt or run of the app as it ends, until interrupted.

    A dropped connection is resumed where it stopped (Last-Event-ID): nothing that ended
    meanwhile is missed, nothing is printed twice. With --json, one JSON document a line.

    \b
    Example:
      ledgerport tail deliveries --app app_123
      ledgerport tail runs --app app_123 --json
    """
    chosen = session(server, as_json).signed_in()
    line = delivery_line if what == "deliveries" else run_line
    out, status = console(), console(sys.stderr)
    seen = 0

    def connected(again: bool) -> None:
        word = "Reconnected: resuming" if again else "Waiting for"
        status.print(f"{word} the {what} of {app_id} (Ctrl-C to stop)", style="dim")

    path = f"/developer/apps/{app_id}/{what}/stream"
    try:
        for event in follow(chosen, path, last_event_id, connected):
            if as_json:
                emit_json({"id": event.id, "event": event.event, "data": event.data})
            else:
                out.print(line(event.data), markup=False)
            seen += 1
            if max_events is not None and seen >= max_events:
                return
    except KeyboardInterrupt:
        return
