"""The group of the app author's commands, and how ``ledgerport`` hands them an argument list.

A command's module is imported when the command runs (or its help is asked), not before: so
``functions run`` starts without the HTTP client, and the others without the sandbox."""

from __future__ import annotations

import importlib
from collections.abc import Sequence

import click

from ._group import CONTEXT

COMMAND_MODULES = {
    "login": "login",
    "logout": "login",
    "apps": "apps",
    "trigger": "trigger",
    "tail": "tail",
    "listen": "listen",
    "deliveries": "deliveries",
    "runs": "runs",
    "functions": "functions",
}
"""Each command by name, and the module (of this package) that holds it under that name."""


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMAND_MODULES)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMAND_MODULES.get(cmd_name)
        if module is None:
            return None
        command = getattr(importlib.import_module(f"{__package__}.{module}"), cmd_name)
        assert isinstance(command, click.Command)
        return command


@click.group(cls=_LazyGroup, context_settings=CONTEXT)
def author() -> None:
    """The app author's commands."""


AUTHOR_COMMANDS = frozenset(COMMAND_MODULES)
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
