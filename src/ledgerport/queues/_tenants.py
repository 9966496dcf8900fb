"""What the fair claims of both queues share: the tenants with due work, read by a loose scan,
each with its app's developer."""

from __future__ import annotations

from dataclasses import dataclass

from ledgerport.storage import Row

HOT = "status IN ('queued', 'retrying')"
"""The hot queue of both tables: what waits for an attempt or a run."""


@dataclass(frozen=True)
class DueTenant:
    """A tenant with work waiting in a hot queue, and when its earliest is due (claimed work is
    due when its claim runs out)."""

    developer: str
    """The app's developer (``apps.developer_user_id``; it never changes), or the app's own id
    when it has none (a client registered dynamically): such an app is its own developer."""
    app_id: str
    business: str
    """The business of a run ('' for none); '' for deliveries, which are shared by app."""
    due: float


def tenant_due_times_sql(table: str, key: str, app: str) -> str:
    """Each tenant (value of ``key``) with work in ``table``'s hot queue, ``k``, when its
    earliest work is due, ``due``, and its app's ``developer``: a loose scan of the index on
    ``(key, next_attempt_at)`` of that queue, one index step per tenant whatever its backlog,
    and one step of the apps' primary key per tenant for the developer. ``app`` is the
    tenant's app id as an expression of its key, ``tenants.k``."""
    return (
        f"WITH RECURSIVE tenants(k) AS (SELECT MIN({key}) FROM {table} WHERE {HOT}"
        f" UNION ALL SELECT (SELECT MIN({key}) FROM {table} WHERE {HOT} AND {key} > tenants.k)"
        " FROM tenants WHERE tenants.k IS NOT NULL)"
        " SELECT k,"
        f" (SELECT MIN(next_attempt_at) FROM {table} WHERE {HOT} AND {key} = tenants.k) AS due,"
        # A subquery, not a join: one look-up of the apps' primary key per tenant, whatever
        # the planner makes of the number of apps.
        f" (SELECT developer_user_id FROM apps WHERE id = {app}) AS developer"
        " FROM tenants WHERE k IS NOT NULL"
    )


def due_tenant(row: Row, app_id: str, business: str) -> DueTenant | None:
    """The tenant of a row of :func:`tenant_due_times_sql` (None when its work was taken
    meanwhile)."""
    if row["due"] is None:
        return None
    return DueTenant(row["developer"] or app_id, app_id, business, float(row["due"]))
