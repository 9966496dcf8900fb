"""What the books refuse: unknown businesses and users, a taken email."""

from __future__ import annotations

from collections.abc import Sequence

from ledgerport import catalog
from ledgerport.errors import DomainError

_DAY = 24 * 3600


class BooksError(DomainError):
    """Root of the books' errors."""


class BusinessNotFound(BooksError):
    def __init__(self, business_id: str) -> None:
        super().__init__("Business {0} not found", params=[business_id])


class UserNotFound(BooksError):
    def __init__(self, user_id: str) -> None:
        super().__init__("User {0} not found", params=[user_id])


class EmailTaken(BooksError):
    def __init__(self, email: str) -> None:
        super().__init__("A user with email {0} exists", params=[email])


class RecordNotFound(BooksError):
    """No live record of that kind and id in the business (ids are per business)."""

    def __init__(self, kind: str, record_id: str) -> None:
        self.kind = kind
        super().__init__(
            "{0} {1} not found", params=[kind.replace("_", " ").capitalize(), record_id]
        )


class RecordInWrongState(BooksError):
    """The record's status does not allow the change (a paid invoice cannot be edited...)."""

    def __init__(self, kind: str, record_id: str, status: str, action: str) -> None:
        super().__init__(
            "{0} {1} is {2}: it cannot be {3}",
            params=[kind.replace("_", " ").capitalize(), record_id, status, action],
        )


class InvoiceCeilingReached(BooksError):
    """The business's plan allows no more invoices this calendar year (count or turnover)."""

    def __init__(self, plan: str, ceiling: str) -> None:
        super().__init__(
            "The business's {0} plan has reached its yearly invoice {1}; only new invoices are"
            " blocked",
            params=[plan, ceiling],
        )


class AccountCodeTaken(BooksError):
    def __init__(self, code: str) -> None:
        super().__init__("An account with code {0} exists in the chart of accounts", params=[code])


class UnknownCursor(BooksError):
    """The events cursor is not an event of the business, or its event is past retention."""

    def __init__(self, after: str) -> None:
        days = catalog.EVENT_RETENTION // _DAY
        super().__init__(
            f"after {{0}} is not an event of this business within the last {days} days",
            params=[after],
        )


class UnknownEventTypes(BooksError):
    """The events filter names event types the catalog does not have."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = tuple(names)
        super().__init__("types names unknown event types: {0}", params=[",".join(names)])


class EventNotFound(BooksError):
    """No event of that id the app may read in its business (missing, hidden or past retention)."""

    def __init__(self, event_id: str) -> None:
        super().__init__("Event {0} not found", params=[event_id])
