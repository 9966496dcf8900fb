"""Nodes: the processes serving the database, and the takeover of a dead node's claims.

A node's deliveries and runs are claimed under its id (their ``lease``). While the node lives it
holds the store's mark of ``node:<id>`` (``Store.hold``); when it dies the mark goes with it, and
the first node to find the mark free gives the dead node's claims back to the queue, due before
newer work (at their creation time), and deletes its row. The claims' own expiry
(``next_attempt_at`` at the lease's end) stays as the last resort for a claim no row names.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from ledgerport.storage import Transaction, placeholders

from ._tenants import HOT

NODE_KEY_PREFIX = "node:"
"""A node's mark is ``Store.hold(NODE_KEY_PREFIX + node_id)``."""


@dataclass(frozen=True)
class TakenOver:
    """What one takeover gave back to the queue: the dead nodes, their deliveries and runs."""

    nodes: tuple[str, ...]
    deliveries: int
    runs: int


async def register_node(tx: Transaction, *, node_id: str, host: str, pid: int, now: float) -> None:
    """Record the node ``node_id`` (again, if its row was taken over while it lived)."""
    await tx.execute(
        "INSERT INTO nodes (id, host, pid, started_at) VALUES ($1, $2, $3, $4)"
        " ON CONFLICT (id) DO NOTHING",
        node_id,
        host,
        pid,
        now,
    )


async def remove_node(tx: Transaction, node_id: str) -> None:
    """The node ``node_id`` stops (it gave its claims back)."""
    await tx.execute("DELETE FROM nodes WHERE id = $1", node_id)


async def take_over(tx: Transaction, *, alive: Collection[str]) -> TakenOver:
    """Give back to the queue every claim of a dead node (``alive``: this process's nodes).

    On PostgreSQL a node is dead when its mark can be taken: ``pg_try_advisory_xact_lock``
    succeeds only where no live session holds the node's key, and holds it until this
    transaction ends, so two nodes never take the same one over at once. On SQLite one process
    owns the database: every node but this process's is dead, and so is every claim of a lease
    none of them holds. Claims given back are due at their creation time: before newer work."""
    known = sorted(alive)
    exclude = f" WHERE id NOT IN ({placeholders(len(known))})" if known else ""
    if tx.kind == "postgresql":
        mark = f"pg_try_advisory_xact_lock(hashtextextended('{NODE_KEY_PREFIX}' || id, 0))"
        rows = await tx.fetch(
            f"SELECT id FROM nodes{exclude}{' AND' if known else ' WHERE'} {mark}", *known
        )
        dead = [row["id"] for row in rows]
        if not dead:
            return TakenOver((), 0, 0)
        claims = f"lease IN ({placeholders(len(dead))})"
        claim_args: list[str] = dead
    else:
        rows = await tx.fetch(f"SELECT id FROM nodes{exclude}", *known)
        dead = [row["id"] for row in rows]
        claims = "lease IS NOT NULL" + (
            f" AND lease NOT IN ({placeholders(len(known))})" if known else ""
        )
        claim_args = known
    deliveries = await tx.execute(
        f"UPDATE webhook_deliveries SET lease = NULL, next_attempt_at = created_at"
        f" WHERE {HOT} AND {claims}",
        *claim_args,
    )
    runs = await tx.execute(
        f"UPDATE function_runs SET lease = NULL, next_attempt_at = created_at"
        f" WHERE {HOT} AND {claims}",
        *claim_args,
    )
    if dead:
        await tx.execute(f"DELETE FROM nodes WHERE id IN ({placeholders(len(dead))})", *dead)
    return TakenOver(tuple(dead), deliveries, runs)
