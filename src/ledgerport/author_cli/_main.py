"""The group of the app author's commands, and how ``ledgerport`` hands them an argument list."""

from __future__ import annotations

from collections.abc import Sequence

import click

from ._group import CONTEXT
from .apps import apps
from .deliveries import deliveries
from .functions import functions
from .login import login, logout
from .runs import runs
from .tail import tail
from .trigger import trigger


@click.group(context_settings=CONTEXT)
def author() -> None:
    """The app author's commands."""


for _command in (login, logout, apps, trigger, tail, deliveries, runs, functions):
    author.add_command(_command)

AUTHOR_COMMANDS = frozenset(author.commands)
"""The first words that name an app author's command (the rest are the operator's)."""


def run_author_command(argv: Sequence[str]) -> int:
    """Run one app author's command; its exit code (0 done, 1 refused or failed, 2 usage)."""
    try:
        # Not standalone: a command's Exit comes back as its code.
        code = author.main(list(argv), prog_name="ledgerport", standalone_mode=False)
    except click.ClickException as exc:  # usage (2) or a refusal (1)
        exc.show()
        return exc.exit_code
    except click.Abort:
        return 1
    return code if isinstance(code, int) else 0
