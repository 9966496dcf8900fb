"""What the queues refuse: a redelivery the rules do not allow, a delivery or a run that is not
there."""

from __future__ import annotations

from ledgerport.errors import DomainError


class QueuesError(DomainError):
    """Root of the queues package's errors."""


class DeliveryNotFound(QueuesError):
    """The webhook has no delivery of that id (or it aged out)."""

    def __init__(self, delivery_id: str) -> None:
        super().__init__("Delivery {0} not found", params=[delivery_id])


class RunNotFound(QueuesError):
    """The function has no run of that id (or it aged out)."""

    def __init__(self, run_id: str) -> None:
        super().__init__("Run {0} not found", params=[run_id])


class RedeliveryRefused(QueuesError):
    """spec: Redelivery; ``reason`` says which refusal applies."""

    def __init__(self, delivery_id: str, reason: str) -> None:
        super().__init__("Delivery {0} cannot be redelivered: {1}", params=[delivery_id, reason])
