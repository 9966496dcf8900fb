"""What the fair claims of both queues share: the tenants with due work, read by a loose scan."""

from __future__ import annotations

HOT = "status IN ('queued', 'retrying')"
"""The hot queue of both tables: what waits for an attempt or a run."""


def tenant_due_times_sql(table: str, key: str) -> str:
    """Each tenant (value of ``key``) with work in ``table``'s hot queue, ``k``, and when its
    earliest work is due, ``due``: a loose scan of the index on ``(key, next_attempt_at)`` of
    that queue, one index step per tenant whatever its backlog."""
    return (
        f"WITH RECURSIVE tenants(k) AS (SELECT MIN({key}) FROM {table} WHERE {HOT}"
        f" UNION ALL SELECT (SELECT MIN({key}) FROM {table} WHERE {HOT} AND {key} > tenants.k)"
        " FROM tenants WHERE tenants.k IS NOT NULL)"
        f" SELECT k, (SELECT MIN(next_attempt_at) FROM {table} WHERE {HOT} AND {key} = tenants.k)"
        " AS due FROM tenants WHERE k IS NOT NULL"
    )
