"""``ledgerport deliveries recover``: redeliver a webhook's failed deliveries since a moment, as
the console API's ``recover`` does, going on with its ``next`` until none are left."""

from __future__ import annotations

import click

from ._group import CONTEXT, app_option, common, session
from ._output import console, emit_json


@click.group(context_settings=CONTEXT)
def deliveries() -> None:
    """Act on an app's webhook deliveries.

    \b
    Example:
      ledgerport deliveries recover --app app_123 --webhook wh_456 --since 2026-12-07T08:00:00Z
    """


@deliveries.command(context_settings=CONTEXT)
@app_option
@click.option("--webhook", "webhook_id", required=True, metavar="ID", help="The endpoint.")
@click.option(
    "--since",
    required=True,
    metavar="T",
    help="ISO 8601 with its UTC offset, within the last 30 days.",
)
@common
def recover(app_id: str, webhook_id: str, since: str, server: str | None, as_json: bool) -> None:
    """Redeliver every failed delivery of the webhook created at or after T.

    \b
    Example:
      ledgerport deliveries recover --app app_123 --webhook wh_456 --since 2026-12-07T08:00:00Z
    """
    chosen = session(server, as_json)
    queued = skipped = 0
    after: str | None = None
    while True:
        body = {"since": since, **({"after": after} if after else {})}
        answer = chosen.call(
            "POST", f"/developer/apps/{app_id}/webhooks/{webhook_id}/recover", json=body
        )
        queued += answer["queued"]
        skipped += answer["skipped"]
        after = answer["next"]
        if after is None:
            break
    if as_json:
        emit_json({"queued": queued, "skipped": skipped})
    else:
        console().print(f"Queued {queued} failed deliveries again; skipped {skipped}")
