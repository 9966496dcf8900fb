"""``ledgerport functions``: upload a hosted function (``push``), list its versions, activate
an older one (``rollback``), through the console API; and ``run`` a module locally
(``functions_run.py``)."""

from __future__ import annotations

from pathlib import Path

import click

from ._group import CONTEXT, app_option, common, session
from ._output import Refused, console, emit_json, show_rows
from .functions_run import run

VERSION_COLUMNS = (
    ("VERSION", "version"),
    ("CREATED", "createdAt"),
    ("ACTIVE", "active"),
    ("BYTES", "sourceBytes"),
)


@click.group(context_settings=CONTEXT)
def functions() -> None:
    """Upload, list, roll back and run an app's hosted functions.

    \b
    Example:
      ledgerport functions push sync sync.js --app app_123 --events customer.created
      ledgerport functions run sync.js --event customer.created
    """


def _names(value: str | None) -> list[str]:
    return [part.strip() for part in (value or "").split(",") if part.strip()]


def _source(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise Refused(f"{path}: {exc}") from exc


@functions.command(context_settings=CONTEXT)
@click.argument("name")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@app_option
@click.option("--events", metavar="a,b", help="Event types that run it (comma-separated).")
@click.option("--schedule", metavar="CRON", help="Five cron fields, UTC (at most once a minute).")
@click.option("--allowed-hosts", metavar="h,..", help="Hosts context.fetch may reach.")
@common
def push(
    name: str,
    file: Path,
    app_id: str,
    events: str | None,
    schedule: str | None,
    allowed_hosts: str | None,
    server: str | None,
    as_json: bool,
) -> None:
    """Upload FILE as a new version of function NAME, active at once.

    \b
    Example:
      ledgerport functions push sync sync.js --app app_123 --events customer.created
      ledgerport functions push nightly nightly.js --app app_123 --schedule "0 3 * * *"
    """
    body = {
        "source": _source(file),
        "events": _names(events),
        "allowedHosts": _names(allowed_hosts),
        "schedule": schedule,
    }
    function = session(server, as_json).call(
        "PUT", f"/developer/apps/{app_id}/functions/{name}", json=body
    )
    if as_json:
        emit_json(function)
    else:
        console().print(f"Pushed {name}: version {function['version']} is active")


@functions.command(context_settings=CONTEXT)
@click.argument("name")
@app_option
@common
def versions(name: str, app_id: str, server: str | None, as_json: bool) -> None:
    """List the versions kept of function NAME, newest first.

    \b
    Example:
      ledgerport functions versions sync --app app_123
    """
    answer = session(server, as_json).call(
        "GET", f"/developer/apps/{app_id}/functions/{name}/versions"
    )
    rows = [{**row, "active": "yes" if row["active"] else ""} for row in answer["data"]]
    show_rows(
        answer["data"] if as_json else rows, VERSION_COLUMNS, as_json=as_json, empty="No versions."
    )


@functions.command(context_settings=CONTEXT)
@click.argument("name")
@click.argument("version", type=click.IntRange(min=1))
@app_option
@common
def rollback(name: str, version: int, app_id: str, server: str | None, as_json: bool) -> None:
    """Make VERSION of function NAME the active one again.

    \b
    Example:
      ledgerport functions rollback sync 3 --app app_123
    """
    function = session(server, as_json).call(
        "POST", f"/developer/apps/{app_id}/functions/{name}/versions/{version}/activate"
    )
    if as_json:
        emit_json(function)
    else:
        console().print(
            f"{name}: version {function['version']} is active"
            f" (the newest is {function['latestVersion']})"
        )


functions.add_command(run)
