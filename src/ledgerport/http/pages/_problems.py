"""Problems answered as pages: the problem page of a blueprint (its title and ways forward),
never a redirect, but for a form that said which page it returns to (a notice there) or how it
is rendered again (the form as sent, its words beside it).

The rows of ``http.ANSWERS`` say the words (a row's ``page``: plain, no internal ids, with the
way forward; beside the message when the message itself is fixed by the specification, as the
consent page's are); :func:`page_shape` is the renderer ``register_error_handlers`` is given for
each page blueprint.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import TypeAlias

from quart import Response, g

from ledgerport import storage
from ledgerport.errors import InvalidInput

from .._envelopes import ErrorShape, Renderer
from .._error_answer import Answer
from .._errors import answer_for
from ._frame import Way, form_back, leave_viewer_unasked, problem_page
from ._notices import Notice, notice_of, notice_text, with_notice

log = logging.getLogger("ledgerport.http")


def render_page(title: str, ways: Sequence[Way] = ()) -> Renderer:
    """Problems shown as the application host's page titled ``title``, offering ``ways``
    forward; never a redirect, but for a form that said which page it returns to: a problem a
    person can correct there (below 500, not a missing page) goes back to it as a notice."""

    async def render(error: BaseException, answer: Answer) -> Response:
        correctable = answer.status < 500 and answer.status != 404
        again = form_again()
        if again is not None and correctable:
            shown = await _form_again(again, error, answer)
            if shown is not None:
                return shown
        back = form_back()
        if back is not None and correctable:
            path, query = back
            return with_notice(path, *notice_of(error, answer), query=query)
        message, explanation = answer.page_words(error)
        shown_title = title if title else _STATUS_TITLES.get(answer.status, _OTHER_TITLE)
        _look_up_viewer(error)
        response = await problem_page(
            message, answer.status, title=shown_title, explanation=explanation, ways=ways
        )
        for name, value in answer.header_values(error).items():
            response.headers[name] = value
        return response

    return render


FormAgain: TypeAlias = Callable[["Notice", int], Awaitable[Response]]
"""Renders a form again as it was sent, with a notice beside it, at a status."""
_FORM_AGAIN = "ledgerport_form_again"
"""Where a form's handler keeps how its form is rendered again (``g``)."""


def answers_again(render: FormAgain) -> None:
    """Say how this request's form is rendered again, as the person sent it: a problem the
    handler raises from here on that they can correct there (below 500, not a missing page) is
    answered with the form again, at the problem's status, its words beside the form, instead
    of a problem page or a redirect. For forms whose input cannot ride in a redirect's query (a
    function's source) or should not (a webhook's URL may hold a token of the receiver's)."""
    setattr(g, _FORM_AGAIN, render)


def form_again() -> FormAgain | None:
    """How this request's form is rendered again (:func:`answers_again`), if it said."""
    again: FormAgain | None = g.get(_FORM_AGAIN)
    return again


async def _form_again(again: FormAgain, error: BaseException, answer: Answer) -> Response | None:
    """The form again with the problem's notice, or None when the form cannot be rendered
    (the store failing meanwhile): the problem page then says what went wrong."""
    code, *values = notice_of(error, answer)
    notice = notice_text(code, values) or Notice(answer.page_words(error)[0], "problem", code)
    if isinstance(error, InvalidInput):
        notice = replace(notice, messages=tuple(error.messages))
    try:
        response = await again(notice, answer.status)
    except Exception:
        log.debug("the form could not be rendered again", exc_info=True)
        return None
    for name, value in answer.header_values(error).items():
        response.headers[name] = value
    return response


def _look_up_viewer(error: BaseException) -> None:
    """The problem page's header names who is signed in, but never asks the store after a
    storage error or a failure of the service's own."""
    if isinstance(error, storage.StorageError) or answer_for(error).status >= 500:
        leave_viewer_unasked()


_STATUS_TITLES = {404: "Page not found", 405: "Not available here", 413: "Too large"}
_OTHER_TITLE = "Something went wrong"


def page_shape(title: str, ways: Sequence[Way] = ()) -> ErrorShape:
    """Problems shown as the application host's page titled ``title``, offering ``ways``."""
    return ErrorShape("page", render_page(title, ways))


BROWSER_PAGE = page_shape(
    "", (Way("Go to the home page", "/"), Way("Browse the marketplace", "/marketplace"))
)
"""How a browser's request that reached no route is answered: a page titled by its status."""
