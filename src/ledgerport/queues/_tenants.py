"""What the fair claims of both queues share: the tenants with due work, read by a loose scan,
each with its app's developer, and the key both queues' claims read them by."""

from __future__ import annotations

from dataclasses import dataclass

from ledgerport.storage import Transaction

HOT = "status IN ('queued', 'retrying')"
"""The hot queue of both tables: what waits for an attempt or a run."""
TENANT = "(app_id || '/' || COALESCE(business_id, ''))"
"""A tenant of both hot queues as the fair claims key it: its app and its business ('' for
none; an app id holds no '/'). Each queue's hot index leads with this expression
(``function_runs_tenant_due``, ``webhook_deliveries_tenant_due``), so a statement must spell
it exactly so for the index to serve it."""


@dataclass(frozen=True)
class DueTenant:
    """A tenant with work waiting in a hot queue, and when its earliest is due (claimed work is
    due when its claim runs out)."""

    developer: str
    """The app's developer (``apps.developer_user_id``; it never changes), or the app's own id
    when it has none (a client registered dynamically): such an app is its own developer."""
    app_id: str
    business: str
    """The business of the run or delivery ('' for none: a test, an event recorded without
    one)."""
    due: float


def tenant_key(app_id: str, business: str) -> str:
    """The value of :data:`TENANT` for an app and a business ('' for none)."""
    return f"{app_id}/{business}"


async def due_tenants(tx: Transaction, table: str) -> list[DueTenant]:
    """Each tenant (app and business) with work in ``table``'s hot queue, its app's developer,
    and when its earliest work is due: a loose scan of the index on ``(tenant,
    next_attempt_at)`` of that queue, one index step per tenant whatever its backlog, and one
    step of the apps' primary key per tenant for the developer."""
    # The key's app is what precedes its '/'.
    if tx.kind == "postgresql":
        app = "split_part(tenants.k, '/', 1)"
    else:
        app = "substr(tenants.k, 1, instr(tenants.k, '/') - 1)"
    hot = f"FROM {table} WHERE {HOT}"
    rows = await tx.fetch(
        f"WITH RECURSIVE tenants(k) AS (SELECT MIN({TENANT}) {hot}"
        f" UNION ALL SELECT (SELECT MIN({TENANT}) {hot} AND {TENANT} > tenants.k)"
        " FROM tenants WHERE tenants.k IS NOT NULL)"
        " SELECT k,"
        f" (SELECT MIN(next_attempt_at) {hot} AND {TENANT} = tenants.k) AS due,"
        # A subquery, not a join: one look-up of the apps' primary key per tenant, whatever
        # the planner makes of the number of apps.
        f" (SELECT developer_user_id FROM apps WHERE id = {app}) AS developer"
        " FROM tenants WHERE k IS NOT NULL"
    )
    tenants: list[DueTenant] = []
    for row in rows:
        if row["due"] is None:
            continue  # its work was taken meanwhile
        app_id, _, business = row["k"].partition("/")
        tenants.append(DueTenant(row["developer"] or app_id, app_id, business, float(row["due"])))
    return tenants
