"""Notices: what a form's answer tells the page it returns to, and the pages with forms that
show them.

A notice (what a form did, or why not) is a code of the notice table (:data:`NOTICES`, or an
exception's row of ``http.ANSWERS``) with the values its words are filled with. It rides in a
cookie only the service can set: signed under the keyring's notice key, naming the page it is
for and the moment it stops counting, scoped to that page's path. The page looks the code up and
shows its words once; an unknown code shows nothing. A notice never comes from the query string:
a crafted link would otherwise put anyone's words on a trusted page.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal
from urllib.parse import quote

from quart import Response, redirect, request
from werkzeug.sansio.response import Response as BaseResponse

from ledgerport import catalog

from .._browser import cookie_flags
from .._context import platform
from .._error_answer import Answer
from .._errors import ANSWERS
from ._frame import html_page

NOTICE_COOKIE = "lp_notice"
_NOTICE_PARAM_MAX = 300
"""Characters of each value a notice's words are filled with: a cookie holds about 4 KB."""


@dataclass(frozen=True)
class NoticeWords:
    """An entry of the notice table: its words (``{0}``... filled from the notice's values)
    and its tone."""

    words: str
    tone: Literal["success", "problem"] = "success"


@dataclass(frozen=True)
class Notice:
    """A notice as a page shows it."""

    text: str
    tone: Literal["success", "problem"]
    code: str = ""
    """Its code in the table, or its exception's (``problem:...``): which problem it is."""
    messages: tuple[str, ...] = ()
    """A refused input's sentences, each naming its field (``InvalidInput.messages``), when the
    form is shown again from the exception itself; empty for a notice from a cookie."""

    @property
    def sentences(self) -> tuple[str, ...]:
        """The problem's sentences, each naming the field it is about: the input's own, or
        those the notice's words join with "; "."""
        return self.messages or tuple(self.text.split("; "))


NOTICES: Mapping[str, NoticeWords] = {
    "form-expired": NoticeWords("The form expired: try again", "problem"),
    "rating-saved": NoticeWords("Thank you: your rating is saved"),
    "installed": NoticeWords("{0} is installed in {1}"),
    "recovered": NoticeWords(
        "Failed deliveries since {0}: {1} queued again, {2} skipped (the redelivery rules"
        " refuse them)"
    ),
    "recovered-partly": NoticeWords(
        "Failed deliveries since {0}: {1} queued again, {2} skipped (the redelivery rules"
        " refuse them). More are left: go on with the next ones under Recover failed deliveries"
    ),
    "recovered-nothing": NoticeWords("No failed delivery since {0}: nothing to recover"),
    "version-activated": NoticeWords("Version {0} is active: runs that start from now on run it"),
    "replay-queued": NoticeWords(
        "Replay of run {0} queued: it runs on the version active when it starts"
    ),
    "test-queued": NoticeWords("Test delivery {0} queued"),
    "redelivered": NoticeWords("Delivery {0} queued again"),
    "listing-saved": NoticeWords("Saved as draft revision {0}: submit it for review when ready"),
    "revision-submitted": NoticeWords("Revision {0} submitted for review"),
    "image-uploaded": NoticeWords("Image uploaded: choose it as the icon or a screenshot"),
    "webhook-created": NoticeWords("Endpoint added: copy its signing secret now"),
    "secret-rotated": NoticeWords(
        "Secret rotated: the previous one keeps signing beside it until {0}"
    ),
    "webhook-saved": NoticeWords("Endpoint {0} saved"),
    "webhook-enabled": NoticeWords("Endpoint {0} switched on: new events are delivered to it"),
    "webhook-disabled": NoticeWords(
        "Endpoint {0} switched off: it gets no new deliveries, and those waiting for it fail"
        " without being sent"
    ),
    "webhook-deleted": NoticeWords("Endpoint {0} deleted"),
    "function-saved": NoticeWords("Function {0} saved: version {1} runs from now on"),
    "function-deleted": NoticeWords("Function {0} deleted: it runs no more"),
    "secret-saved": NoticeWords("Secret {0} saved: runs that start from now on send its new value"),
    "secret-deleted": NoticeWords("Secret {0} deleted: runs that start from now on lack it"),
    "test-run-queued": NoticeWords("Test run {0} of {1} queued"),
}
"""The notices a form's answer may leave, by code. A problem's notice has the code of its
exception's row in :data:`ANSWERS` instead (:func:`notice_of`)."""

_PROBLEM_PREFIX = "problem:"


def _row_class(error: BaseException) -> type[BaseException]:
    for cls in type(error).__mro__:
        if cls in ANSWERS:
            return cls
    return Exception


def problem_code(cls: type[BaseException]) -> str:
    """The notice code of a problem of the exception class ``cls`` (its row's class)."""
    return _problem_code(cls)


def _problem_code(cls: type[BaseException]) -> str:
    return f"{_PROBLEM_PREFIX}{cls.__module__}.{cls.__qualname__}"


_PROBLEM_CLASSES = {_problem_code(cls): cls for cls in ANSWERS}


def notice_of(error: BaseException, answer: Answer) -> tuple[str, ...]:
    """The notice code and values a form's page shows for ``error``: the code of its row, the
    words the row gives it (and the explanation beside them, for a message the specification
    fixes)."""
    message, explanation = answer.page_words(error)
    words = (message, explanation) if explanation else (message,)
    return (_problem_code(_row_class(error)), *words)


def notice_text(code: str, values: Sequence[str] = ()) -> Notice | None:
    """The notice ``code`` with ``values`` in words, as the page shows it; None for a code the
    table does not hold (or values that do not fit it), so nothing else is ever shown."""
    if code.startswith(_PROBLEM_PREFIX):
        if code not in _PROBLEM_CLASSES or not 1 <= len(values) <= 2:
            return None
        return Notice(" ".join(values), "problem", code)
    entry = NOTICES.get(code)
    if entry is None:
        return None
    try:
        return Notice(entry.words.format(*values), entry.tone, code)
    except (IndexError, KeyError):
        return None


def with_notice(path: str, code: str, *params: object, query: str = "") -> Response:
    """Back to the page at ``path`` (303; ``query`` added, as a form's choices), which shows
    the notice ``code`` with ``params`` once. The notice cookie is signed, names ``path``, lives
    NOTICE_TTL seconds and is sent to that page only."""
    p = platform()
    expires = p.now() + catalog.NOTICE_TTL
    values = [str(value)[:_NOTICE_PARAM_MAX] for value in params]
    text = json.dumps([path, expires, code, values])
    payload = base64.urlsafe_b64encode(text.encode()).decode()
    # Quoted: a path holds what the request's URL held, control characters included, and a
    # Location header may not.
    location = quote(path) + (f"?{query}" if query else "")
    response: Response = redirect(location, 303)  # type: ignore[assignment]
    response.set_cookie(
        NOTICE_COOKIE,
        f"{payload}.{p.keyring.notice_mac(payload)}",
        max_age=catalog.NOTICE_TTL,
        **{**cookie_flags(), "path": quote(path)},  # type: ignore[arg-type]
    )
    return response


def notice_for_this_page() -> tuple[str, tuple[str, ...]] | None:
    """The notice code and values the service left for this page, if one came with the request:
    its signature holds, it names this page's path and it is still fresh. Anything else is
    nothing."""
    p = platform()
    for value in request.cookies.getlist(NOTICE_COOKIE):
        payload, _, signature = value.rpartition(".")
        expected = p.keyring.notice_mac(payload)
        # compare_digest refuses non-ASCII text, which a forged cookie may hold.
        if not signature.isascii() or not hmac.compare_digest(signature, expected):
            continue
        try:
            path, expires, code, values = json.loads(base64.urlsafe_b64decode(payload))
        except (ValueError, binascii.Error):
            continue  # signed, but not in this version's shape
        if path == request.path and p.now() < expires:
            return str(code), tuple(str(v) for v in values)
    return None


def this_page_notice() -> Notice | None:
    """The notice the last form's answer left for this page, in words; None when none."""
    left = notice_for_this_page()
    return notice_text(*left) if left is not None else None


def clear_notice(response: BaseResponse) -> None:
    """A page that shows its notice clears it, so a reload shows none."""
    if NOTICE_COOKIE in request.cookies:
        flags = {**cookie_flags(), "path": quote(request.path)}
        response.delete_cookie(NOTICE_COOKIE, **flags)  # type: ignore[arg-type]


async def form_page(
    template: str, *, status: int = 200, csp: str | None = None, **values: object
) -> Response:
    """A page with forms: rendered with a CSRF token (its cookie set when absent) and the
    notice the last form's answer left for it (:func:`with_notice`), which it clears, so a
    reload shows none; never cached. ``csp`` replaces the application's page policy."""
    notice = this_page_notice()
    response = await html_page(template, status=status, csp=csp, notice=notice, **values)
    clear_notice(response)
    return response
