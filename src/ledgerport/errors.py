"""The root of what the domain refuses, and the validation failure every package shares.

Domain exceptions are named for what happened (``BusinessNotFound``, ``RefreshTokenReused``...)
and carry no HTTP status: each package has one root (``books.BooksError``, ``apps.AppsError``,
``queues.QueuesError``, ``auth.AuthError``, ``access.AccessError``), and ``http/_errors.py``
maps every class to its status, code and headers in one table. ``message`` is English prose
that may hold ``{0}``-style placeholders filled from ``params`` (the envelope's p0, p1, ...).
"""

from __future__ import annotations

from collections.abc import Sequence


class DomainError(Exception):
    """Something the domain refuses to do; the subclass says what."""

    def __init__(self, message: str, *, params: Sequence[object] = ()) -> None:
        self.message = message
        self.params = tuple(params)
        super().__init__(self.rendered)

    @property
    def rendered(self) -> str:
        return self.message.format(*self.params) if self.params else self.message


class InvalidInput(DomainError):
    """Input breaks a rule the request models cannot state: one sentence per problem."""

    def __init__(self, messages: Sequence[str]) -> None:
        self.messages = list(messages)
        super().__init__("; ".join(self.messages))
