"""The replays of a run, as its page marks them: a run replayed from another names it
(``FunctionRun.replay_of``), and the run it was replayed from lists its replays, newest first,
REPLAYS_SHOWN at most (a run may be replayed any number of times; the page says how many in
all)."""

from __future__ import annotations

from dataclasses import dataclass

from ledgerport.apps import HostedFunction
from ledgerport.storage import Reader

REPLAYS_SHOWN = 20
"""A run's replays its page lists at most, the newest."""


@dataclass(frozen=True)
class Replay:
    """A run replayed from another: its id, status and when it was queued."""

    id: str
    status: str
    created_at: float


@dataclass(frozen=True)
class Replays:
    """A run's replays: the newest ``shown`` of them, and how many there are in all."""

    shown: tuple[Replay, ...]
    total: int


async def replays_of(
    reader: Reader, function: HostedFunction, run_id: str, *, shown: int = REPLAYS_SHOWN
) -> Replays:
    """The runs of the function replayed from its run ``run_id``, newest first, ``shown`` at
    most, and their number (one statement; the function's runs are read through their index
    by function)."""
    rows = await reader.fetch(
        "SELECT id, status, created_at, COUNT(*) OVER () AS total FROM function_runs"
        " WHERE function_id = $1 AND replay_of = $2 ORDER BY created_at DESC, id DESC LIMIT $3",
        function.id,
        run_id,
        shown,
    )
    return Replays(
        tuple(Replay(row["id"], row["status"], float(row["created_at"])) for row in rows),
        int(rows[0]["total"]) if rows else 0,
    )
