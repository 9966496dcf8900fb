"""An endpoint's rate limit shared by every process (contract.md, third round: ``rateLimit``):
attempts started per endpoint and second, counted in the store, so that however many processes
attempt an endpoint's deliveries, no second sees more than its limit start."""

from __future__ import annotations

from ledgerport.storage import Transaction


async def take_sends(
    tx: Transaction, *, webhook_id: str, second: int, want: int, limit: int
) -> int:
    """Take up to ``want`` of the ``limit`` attempts ``webhook_id`` may start in ``second``
    (unix seconds); answers how many were granted (0: the second's are all taken). The count's
    row is locked until the transaction ends, so two processes never share one unit; the rows
    of seconds gone are deleted as they are passed."""
    if want < 1:
        return 0
    await tx.execute(
        "DELETE FROM webhook_send_counts WHERE webhook_id = $1 AND second < $2",
        webhook_id,
        second,
    )
    # One statement makes the row or locks the one there: made, then read and locked apart,
    # it could be deleted in between by another process passing the second.
    started = await tx.fetchval(
        "INSERT INTO webhook_send_counts (webhook_id, second, started) VALUES ($1, $2, 0)"
        " ON CONFLICT (webhook_id, second) DO UPDATE SET started = webhook_send_counts.started"
        " RETURNING started",
        webhook_id,
        second,
    )
    granted = max(0, min(want, limit - int(started)))
    if granted:
        await tx.execute(
            "UPDATE webhook_send_counts SET started = started + $3"
            " WHERE webhook_id = $1 AND second = $2",
            webhook_id,
            second,
            granted,
        )
    return granted
