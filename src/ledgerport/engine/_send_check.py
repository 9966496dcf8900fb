"""A delivery's send-time check, as made, and whether it still stands.

The check (``queues.send_plans``: the webhook's URL and signing secrets, or why a delivery must
fail unsent) is made in the transaction that claims a delivery (``_dispatcher.py``,
``_claimer.py``) and stands for its attempt until an entitlement change is committed anywhere
(``apps.ENTITLEMENTS_CHANNEL``: the engine counts them, ``DeliveryState.generation``), the
previous secret stops signing, or PLAN_FRESH pass; then the actor (``_actors.py``) checks again
just before sending.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ledgerport import queues

PLAN_FRESH = 30.0
"""Seconds at most the send-time check made in the transaction that claimed a delivery stands
for its attempt. Any entitlement change committed meanwhile (``apps.ENTITLEMENTS_CHANNEL``), in
this process or another, voids it at once: the delivery is checked again just before it is
sent."""


@dataclass(frozen=True)
class Planned:
    """A delivery's send-time check, as made."""

    plan: queues.SendPlan
    at: float
    """trio.current_time() of the check."""
    generation: int
    """The engine's count of entitlement changes when the check was made."""


def check_stands(
    planned: Planned | None, *, generation: int, at: float, now: Callable[[], float]
) -> bool:
    """Whether a send-time check still stands at ``at`` (trio's clock): nothing it read has
    changed since (no entitlement change was committed: the engine's count is still
    ``generation``; the previous secret still signs at ``now()``, the platform's clock) and it
    is at most PLAN_FRESH old (the safety net for a lost notification)."""
    if planned is None or planned.generation != generation:
        return False
    change_at = planned.plan.secrets_change_at
    if change_at is not None and now() >= change_at:
        return False
    return at - planned.at <= PLAN_FRESH
