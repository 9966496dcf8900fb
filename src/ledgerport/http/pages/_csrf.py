"""The CSRF guard of the application host's forms: one ``before_request`` of every page
blueprint (:func:`guard_forms`) checks the token of every request with an unsafe method before
its handler runs, so a route added later cannot forget it.

The token is the double-submit one of ``http._browser``: the form's ``csrf_token`` field holds
HMAC(the ``lp_csrf`` cookie). A form posted without a token at all did not come from its page:
the 400 problem page (:data:`MISSING_FORM`). A token that does not hold (expired, or another
browser's) is answered as the route declares with :func:`form_guard`: back to its page with the
"form expired" notice (:func:`back_with_notice`), its form again as it was sent with that
notice beside it (:func:`form_again`), or a page of its own. A route that declares nothing gets
the 400 problem page for both.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from quart import Blueprint, Response, current_app, request
from quart.typing import ResponseReturnValue

from ledgerport.errors import InvalidInput

from .._browser import CSRF_COOKIE, SAFE_METHODS, csrf_valid
from .._openapi import Param
from ._notices import Notice, notice_text, with_notice

CSRF_FIELD = "csrf_token"
"""The form field that carries the token."""
CSRF_COOKIE_PARAM = Param(
    CSRF_COOKIE,
    "cookie",
    "The random value the form's csrf_token is bound to, set by the page showing the form",
    required=True,
)
"""What every form of the application host posts with, in the OpenAPI document."""

MISSING_FORM = "The form was not sent from its page: open the page and try again"
EXPIRED_FORM = "The form expired: open the page and try again"
"""What a route that declares no answer of its own says of a token that does not hold."""

Refusal = Callable[..., Awaitable[ResponseReturnValue]]
"""A route's answer to a token that does not hold, called with the route's path arguments."""
Before = Callable[..., Awaitable[ResponseReturnValue | None]]
"""What a route checks before the token, as its handler did first (the sign-in, a path value):
called with the route's path arguments, it answers, raises, or lets the check go on (None)."""
FormAgain = Callable[..., Awaitable[Response]]
"""A form rendered again as it was sent: called with the notice beside it, the status, and the
route's path arguments."""
_F = TypeVar("_F", bound=Callable[..., Any])
_GUARD = "_ledgerport_form_guard"


@dataclass(frozen=True)
class FormGuard:
    """How one route's form answers a token that is missing or does not hold."""

    refuse: Refusal
    token_required: bool = True
    """A form without a token at all is the 400 problem page; otherwise it is refused as one
    whose token does not hold (the buttons that were always answered so)."""
    before: Before | None = None


async def _refused(**_: str) -> ResponseReturnValue:
    raise InvalidInput([EXPIRED_FORM])


DEFAULT_GUARD = FormGuard(_refused)
"""A route that declares nothing: the 400 problem page for a missing or expired token."""


def form_guard(
    refuse: Refusal, *, token_required: bool = True, before: Before | None = None
) -> Callable[[_F], _F]:
    """Declare how the route answers a form whose token is missing or does not hold (the guard,
    :func:`guard_forms`, checks it before the handler runs)."""

    def declare(handler: _F) -> _F:
        setattr(handler, _GUARD, FormGuard(refuse, token_required, before))
        return handler

    return declare


def expired_notice() -> Notice:
    """The notice a form shows when its token no longer holds."""
    expired = notice_text("form-expired")
    assert expired is not None
    return expired


def back_with_notice(path: Callable[..., str]) -> Refusal:
    """Back (303) to the page at ``path(**path arguments)``, which says the form expired."""

    async def refuse(**arguments: str) -> ResponseReturnValue:
        return with_notice(path(**arguments), "form-expired")

    return refuse


def form_again(render: FormAgain) -> Refusal:
    """The form again as it was sent (400), the expired notice beside it."""

    async def refuse(**arguments: str) -> ResponseReturnValue:
        return await render(expired_notice(), 400, **arguments)

    return refuse


def _guard_of(endpoint: str | None) -> FormGuard:
    handler = current_app.view_functions.get(endpoint) if endpoint is not None else None
    while handler is not None:
        declared = getattr(handler, _GUARD, None)
        if isinstance(declared, FormGuard):
            return declared
        handler = getattr(handler, "__wrapped__", None)
    return DEFAULT_GUARD


async def check_form_token() -> ResponseReturnValue | None:
    """A page blueprint's ``before_request``: a request with an unsafe method goes on to its
    handler only with the token of a form the service showed this browser."""
    if request.method in SAFE_METHODS:
        return None
    guard = _guard_of(request.endpoint)
    arguments = request.view_args or {}
    if guard.before is not None:
        early = await guard.before(**arguments)
        if early is not None:
            return early
    token = (await request.form).get(CSRF_FIELD)
    if not token and guard.token_required:
        raise InvalidInput([MISSING_FORM])
    if csrf_valid(token):
        return None
    return await guard.refuse(**arguments)


def guard_forms(*blueprints: Blueprint) -> None:
    """Check the CSRF token of every unsafe request to ``blueprints`` before its handler, after
    what the blueprints already check first (the console's sign-in)."""
    for blueprint in blueprints:
        blueprint.before_request(check_form_token)
