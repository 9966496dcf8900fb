"""The options every app author's command takes, and the group they hang on."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from ._client import Session, open_session

F = TypeVar("F", bound=Callable[..., Any])

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def common(command: F) -> F:
    """``--server URL`` and ``--json`` on a command."""
    command = click.option(
        "--json", "as_json", is_flag=True, help="Print JSON (one document, or one a line)."
    )(command)
    return click.option(
        "--server",
        metavar="URL",
        envvar="LEDGERPORT_SERVER",
        help="The server's address (default: the one signed in to last).",
    )(command)


def session(server: str | None, as_json: bool) -> Session:
    return open_session(server, as_json=as_json)


def app_option(command: F) -> F:
    return click.option("--app", "app_id", required=True, metavar="APP", help="The app's id.")(
        command
    )
