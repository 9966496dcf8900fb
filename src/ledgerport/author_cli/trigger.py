"""``ledgerport trigger TYPE --app APP``: a test delivery of an event type, through the console
API (``POST /developer/apps/{app}/webhooks/{webhook}/test``), to the webhook named or else to
the app's first enabled endpoint that subscribes to the type."""

from __future__ import annotations

from typing import Any

import click

from ._client import Session
from ._group import CONTEXT, app_option, common, session
from ._output import Refused, console, emit_json


@click.command(context_settings=CONTEXT)
@click.argument("event_type", metavar="TYPE")
@app_option
@click.option("--webhook", "webhook_id", metavar="ID", help="The endpoint to send it to.")
@common
def trigger(
    event_type: str, app_id: str, webhook_id: str | None, server: str | None, as_json: bool
) -> None:
    """Send a test delivery of event TYPE, with the type's sample payload.

    \b
    Example:
      ledgerport trigger invoice.paid --app app_123
      ledgerport trigger invoice.paid --app app_123 --webhook wh_456
    """
    chosen = session(server, as_json)
    webhook_id = webhook_id or _subscribed(chosen, app_id, event_type)
    queued = chosen.call(
        "POST", f"/developer/apps/{app_id}/webhooks/{webhook_id}/test", json={"type": event_type}
    )
    if as_json:
        emit_json({**queued, "webhookId": webhook_id, "type": event_type})
    else:
        console().print(
            f"Queued test delivery {queued['deliveryId']} of {event_type} to {webhook_id}"
        )


def _subscribed(chosen: Session, app_id: str, event_type: str) -> str:
    """The first enabled endpoint of the app that subscribes to ``event_type``."""
    answer: dict[str, Any] = chosen.call("GET", f"/developer/apps/{app_id}/webhooks")
    for webhook in answer["data"]:
        if webhook.get("enabled", True) and event_type in webhook.get("events", ()):
            found: str = webhook["id"]
            return found
    raise Refused(
        f"no enabled webhook of {app_id} subscribes to {event_type}: name one with --webhook"
    )
