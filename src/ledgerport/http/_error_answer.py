"""How one kind of exception is answered (:class:`Answer`): a row of the error table
(``_errors.ANSWERS``), which every renderer reads (the envelopes, the OAuth envelope, the problem
page and the OpenAPI document)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, TypeAlias

from ledgerport import catalog
from ledgerport.errors import DomainError, InvalidInput

Message: TypeAlias = str | list[str]


@dataclass(frozen=True)
class Answer:
    """How one kind of exception is answered.

    ``code`` is the standard envelope's code (None: no code, as for validation failures);
    ``oauth_error`` the OAuth envelope's ``error`` (None: by status). ``message`` and
    ``headers`` are fixed or computed from the exception; a domain error's own message wins.
    ``page`` is what a page shows a person instead (``{0}``... filled from the exception's
    params): plain words, no internal ids, and the way forward; with ``explains`` the page shows
    the message word for word and ``page`` beside it as its explanation (the specification's
    consent-page messages).
    """

    status: int
    code: str | None = None
    oauth_error: str | None = None
    message: Message | Callable[[Any], Message] | None = None
    params: tuple[object, ...] = ()
    headers: Callable[[Any], Mapping[str, str]] | None = field(default=None, compare=False)
    page: str | None = None
    explains: bool = False

    @property
    def oauth(self) -> str:
        if self.oauth_error is not None:
            return self.oauth_error
        if self.status >= 500:
            return "server_error"
        if self.status == 429:
            return "temporarily_unavailable"
        return "invalid_request"

    def text(self, error: BaseException) -> Message:
        if isinstance(error, InvalidInput):
            return error.messages
        if isinstance(error, DomainError):
            return error.rendered
        if callable(self.message):
            return self.message(error)
        return self.message if self.message is not None else HTTPStatus(self.status).phrase

    def arguments(self, error: BaseException) -> tuple[object, ...]:
        return error.params if isinstance(error, DomainError) else self.params

    def details(self, error: BaseException) -> list[dict[str, Any]] | None:
        """The envelope's ``details``: a domain error's own list of objects, when it has one
        (INVALID_APP_DATA_VALUE names every refused value there)."""
        details = getattr(error, "details", None) if isinstance(error, DomainError) else None
        return details if isinstance(details, list) else None

    def header_values(self, error: BaseException) -> dict[str, str]:
        return dict(self.headers(error)) if self.headers is not None else {}

    def page_words(self, error: BaseException) -> tuple[str, str | None]:
        """What a page shows for ``error``: the words in its alert, and the explanation beside
        them (None when the words stand alone)."""
        text = self.text(error)
        message = "; ".join(text) if isinstance(text, list) else text
        if self.page is None:
            return message, None
        try:
            words = self.page.format(*(str(value) for value in self.arguments(error)))
        except (IndexError, KeyError):  # an exception raised with fewer params than its row says
            return message, None
        return (message, words) if self.explains else (words, None)


def coded(code: str, **extra: Any) -> Answer:
    """An answer with an envelope code of the catalog, at the code's status."""
    return Answer(catalog.ERROR_CODES[code].status, code, **extra)


def oauth_answer(error: str, **extra: Any) -> Answer:
    """An answer with an OAuth error of the catalog, at the error's status."""
    return Answer(catalog.OAUTH_ERRORS[error].status, oauth_error=error, **extra)


Rule: TypeAlias = Answer | Callable[[Any], Answer]
"""A row of the table: an answer, or how the exception makes one (the framework's errors)."""
