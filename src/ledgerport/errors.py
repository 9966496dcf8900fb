"""The domain's error roots, mapped to HTTP envelopes in one place (``http/_errors.py``).

Each domain package raises intent-named subclasses; the HTTP layer needs only these roots.
``message`` may hold ``{0}``-style placeholders filled from ``params`` (the envelope's p0, p1...).
"""

from __future__ import annotations

from collections.abc import Sequence


class DomainError(Exception):
    status = 400
    default_code: str | None = None

    def __init__(
        self, message: str, *, code: str | None = None, params: Sequence[object] = ()
    ) -> None:
        self.message = message
        self.code = code if code is not None else self.default_code
        self.params = tuple(params)
        super().__init__(self.rendered)

    @property
    def rendered(self) -> str:
        return self.message.format(*self.params) if self.params else self.message


class InvalidInput(DomainError):
    """Validation failure: answered with an array message and no code."""

    def __init__(self, messages: Sequence[str]) -> None:
        self.messages = list(messages)
        super().__init__("; ".join(self.messages))


class BadRequest(DomainError):
    status = 400


class Unauthorized(DomainError):
    status = 401


class Forbidden(DomainError):
    status = 403


class NotFound(DomainError):
    status = 404


class Conflict(DomainError):
    status = 409
