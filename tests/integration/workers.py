"""Child processes of this test process, and a legal module that is heavy to compile."""

from __future__ import annotations

import os
from pathlib import Path

from ledgerport import catalog

HANDLER = "export const handler = () => 1;\n"


def child_processes() -> set[int]:
    """The ids of the processes whose parent is this one (zombies included: a worker killed but
    not waited for still shows)."""
    mine = str(os.getpid())
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # it ended while the folder was read
        # The command name may hold spaces and parentheses: the fields follow its last ")".
        fields = text.rsplit(")", 1)[1].split()
        if fields[1] == mine:
            found.add(int(stat.parent.name))
    return found


def heavy_module() -> str:
    """A legal module as large as an upload may be, of the smallest statements: about half a
    million syntax nodes, the most a source of that size makes (a few hundred ms to compile)."""
    return HANDLER + "0;" * ((catalog.FUNCTION_SOURCE_MAX_BYTES - len(HANDLER)) // 2)
