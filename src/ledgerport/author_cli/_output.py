"""How the app author's commands speak: aligned tables for people, JSON for scripts, colour only
on a terminal, one-line refusals, and the exit codes 0 (done), 1 (refused or failed) and 2
(usage, as click answers it)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import IO, Any

import click
from rich.console import Console
from rich.table import Table

EXIT_REFUSED = 1


class Refused(click.ClickException):
    """The server refused, or a local run failed: its message in one line, exit 1."""

    exit_code = EXIT_REFUSED

    def show(self, file: IO[Any] | None = None) -> None:
        line = " ".join(self.format_message().split())
        click.echo(f"ledgerport: {line}", file=file or sys.stderr)


def console(file: IO[str] | None = None) -> Console:
    """A console that colours only a terminal (and never with NO_COLOR set)."""
    return Console(file=file or sys.stdout, highlight=False, soft_wrap=True)


def table(columns: Sequence[str], rows: Iterable[Sequence[object]]) -> Table:
    """An aligned table: one column per name, cells as text, nothing for None."""
    shown = Table(box=None, pad_edge=False, header_style="bold")
    for name in columns:
        shown.add_column(name, overflow="fold")
    for row in rows:
        shown.add_row(*("" if cell is None else str(cell) for cell in row))
    return shown


def emit_json(document: object, file: IO[str] | None = None) -> None:
    """One JSON document on one line (a stream writes one such line per item)."""
    out = file or sys.stdout
    out.write(json.dumps(document, separators=(",", ":"), sort_keys=True) + "\n")
    out.flush()


def show_rows(
    rows: Sequence[Mapping[str, object]],
    columns: Sequence[tuple[str, str]],
    *,
    as_json: bool,
    empty: str,
) -> None:
    """``rows`` as one JSON document ``{"data": rows}``, or as a table of ``columns`` (title,
    key), or ``empty`` when there are none."""
    if as_json:
        emit_json({"data": list(rows)})
        return
    if not rows:
        console().print(empty)
        return
    console().print(
        table([title for title, _ in columns], ([r.get(k) for _, k in columns] for r in rows))
    )
