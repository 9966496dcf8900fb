"""What the books refuse: unknown businesses and users, a taken email."""

from __future__ import annotations

from ledgerport.errors import DomainError


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
