"""``ledgerport runs replay``: run a function again on the event one of its runs ran on."""

from __future__ import annotations

import click

from ._group import CONTEXT, app_option, common, session
from ._output import console, emit_json


@click.group(context_settings=CONTEXT)
def runs() -> None:
    """Act on an app's function runs.

    \b
    Example:
      ledgerport runs replay run_789 --app app_123 --function sync
    """


@runs.command(context_settings=CONTEXT)
@click.argument("run_id", metavar="RUN")
@app_option
@click.option("--function", "name", required=True, metavar="NAME", help="The function's name.")
@common
def replay(run_id: str, app_id: str, name: str, server: str | None, as_json: bool) -> None:
    """Queue a new run of the function on the event RUN ran on.

    \b
    Example:
      ledgerport runs replay run_789 --app app_123 --function sync
    """
    answer = session(server, as_json).call(
        "POST", f"/developer/apps/{app_id}/functions/{name}/runs/{run_id}/replay"
    )
    if as_json:
        emit_json(answer)
    else:
        console().print(f"Queued run {answer['runId']}, a replay of {run_id}")
