"""An endpoint's lifecycle as a pure core (contract.md, third round: the engine rules of
webhook endpoints): every change of an endpoint's state is one call of :func:`step`, which
never awaits and answers the new state and the operational events to raise.

An endpoint is switched on or off. The engine switches it off when a receiver answers 410 Gone
(reason ``gone``), or when it has had no delivered attempt for ``disable_after`` seconds while at
least three of its deliveries failed for good in that time (reason ``failing``); the app switches
it off and on (a null reason; switched on, the reason is cleared and the rule's window starts
again). Its health is ``healthy`` or ``failing``: ``failing`` from the first delivery of a healthy
endpoint to fail for good, ``healthy`` again when an attempt succeeds. Operational events mark
the changes: ``failing``, ``disabled`` (with its reason) and ``recovered``.

What happens to an endpoint arrives as :data:`Happening`: an attempt delivered, an attempt
failed (``final`` when it was the delivery's last), a 410, the app's switch, or a tick of the
clock (the rule's window can close with no attempt at all). ``tests/unit/test_endpoint_health.py``
checks with hypothesis that no sequence of them leaves an endpoint switched off and sending, or
switched on with a reason, and that only the app's switch turns an endpoint back on.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from ledgerport import catalog
from ledgerport.apps import DisabledReason, EndpointState


@dataclass(frozen=True)
class Endpoint:
    """What the lifecycle reads and changes of an endpoint."""

    enabled: bool
    disabled_reason: DisabledReason | None = None
    disabled_at: float | None = None
    health: EndpointState = field(default_factory=EndpointState)

    @property
    def sending(self) -> bool:
        """Whether its deliveries are attempted."""
        return self.enabled


@dataclass(frozen=True)
class Delivered:
    at: float


@dataclass(frozen=True)
class Failed:
    at: float
    error: str
    final: bool
    """The delivery's last attempt: it failed for good."""


@dataclass(frozen=True)
class Gone:
    """The receiver answered 410 Gone: the delivery fails for good, the endpoint goes off."""

    at: float
    error: str = "HTTP 410"


@dataclass(frozen=True)
class SwitchedOn:
    at: float


@dataclass(frozen=True)
class SwitchedOff:
    at: float


@dataclass(frozen=True)
class Tick:
    at: float


Happening = Delivered | Failed | Gone | SwitchedOn | SwitchedOff | Tick


@dataclass(frozen=True)
class Notice:
    """An operational event to raise."""

    type: Literal["failing", "disabled", "recovered"]
    reason: DisabledReason | None = None


def step(
    endpoint: Endpoint, happening: Happening, *, disable_after: float
) -> tuple[Endpoint, tuple[Notice, ...]]:
    """The endpoint after ``happening``, and the operational events it raises."""
    health = endpoint.health
    match happening:
        case Delivered(at):
            recovered = (Notice("recovered"),) if health.state == "failing" else ()
            health = replace(
                health,
                state="healthy",
                consecutive_failures=0,
                last_delivery_at=at,
                failing_since=None,
                recent_failures=(),
            )
            return replace(endpoint, health=health), recovered
        case Failed(at, error, final) if not final:
            return replace(endpoint, health=replace(health, last_error=error)), ()
        case Failed(at, error) | Gone(at, error):
            notices: tuple[Notice, ...] = ()
            if health.state == "healthy":
                notices = (Notice("failing"),)
                health = replace(health, state="failing", failing_since=at)
            health = replace(
                health,
                consecutive_failures=health.consecutive_failures + 1,
                last_error=error,
                recent_failures=(*health.recent_failures, at)[-catalog.WEBHOOK_DISABLE_FAILURES :],
            )
            endpoint = replace(endpoint, health=health)
            if isinstance(happening, Gone):
                return _switched_off(endpoint, "gone", at, notices)
            return _checked(endpoint, at, disable_after, notices)
        case Tick(at):
            return _checked(endpoint, at, disable_after, ())
        case SwitchedOn(at):
            if endpoint.enabled:
                return endpoint, ()
            health = replace(health, switched_on_at=at, recent_failures=())
            return Endpoint(True, None, None, health), ()
        case SwitchedOff(at):
            if not endpoint.enabled:
                return endpoint, ()
            return Endpoint(False, None, at, health), ()
    raise AssertionError(happening)


def failing_too_long(endpoint: Endpoint, at: float, disable_after: float) -> bool:
    """The disable rule: no delivered attempt for ``disable_after`` seconds (nor was the
    endpoint switched on in that time), while at least three of its deliveries failed for good
    in that time."""
    health = endpoint.health
    start = at - disable_after
    quiet_since = max(
        health.last_delivery_at if health.last_delivery_at is not None else float("-inf"),
        health.switched_on_at if health.switched_on_at is not None else float("-inf"),
    )
    failed = sum(1 for moment in health.recent_failures if moment >= start)
    return quiet_since <= start and failed >= catalog.WEBHOOK_DISABLE_FAILURES


def _checked(
    endpoint: Endpoint, at: float, disable_after: float, notices: tuple[Notice, ...]
) -> tuple[Endpoint, tuple[Notice, ...]]:
    if endpoint.enabled and failing_too_long(endpoint, at, disable_after):
        return _switched_off(endpoint, "failing", at, notices)
    return endpoint, notices


def _switched_off(
    endpoint: Endpoint, reason: DisabledReason, at: float, notices: tuple[Notice, ...]
) -> tuple[Endpoint, tuple[Notice, ...]]:
    if not endpoint.enabled:
        return endpoint, notices
    return Endpoint(False, reason, at, endpoint.health), (*notices, Notice("disabled", reason))
