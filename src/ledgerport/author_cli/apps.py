"""``ledgerport apps``: the developer's apps, with their webhook endpoints and functions."""

from __future__ import annotations

import click

from ._group import CONTEXT, common, session
from ._output import show_rows

COLUMNS = (
    ("ID", "id"),
    ("NAME", "name"),
    ("STATUS", "status"),
    ("WEBHOOKS", "webhooks"),
    ("FUNCTIONS", "functions"),
)


@click.command(context_settings=CONTEXT)
@common
def apps(server: str | None, as_json: bool) -> None:
    """List the apps you develop.

    \b
    Example:
      ledgerport apps
      ledgerport apps --json
    """
    answer = session(server, as_json).call("GET", "/developer/apps")
    show_rows(answer["data"], COLUMNS, as_json=as_json, empty="You develop no apps yet.")
