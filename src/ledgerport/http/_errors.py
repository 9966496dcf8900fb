"""Exceptions to HTTP answers, in one place: one table, one renderer per answer shape.

:data:`ANSWERS` maps every exception class (domain, storage, framework) to its status, envelope
``code`` and headers; the lookup walks the exception's class hierarchy, most specific first. The
blueprint that raised chooses the shape (:func:`register_error_handlers`):

- the standard envelope ``{statusCode, message, error, code?, params?, details?}`` (every
  non-OAuth API route; validation failures carry an array message and no code; ``details`` is a
  domain error's own list, as INVALID_APP_DATA_VALUE's);
- the OAuth envelope ``{error, error_description?, message}`` with ``Cache-Control: no-store``
  (the OAuth endpoints: 400 for every error but invalid_client 401, 429 and 5xx);
- the problem page (the application host's HTML pages), which never redirects: the words a
  person reads (a row's ``page``: plain, no internal ids, with the way forward; beside the
  message when the message itself is fixed by the specification, as the consent page's are),
  or, when the handler of a form said which page it returns to (``_pages.returns_to``), a
  notice on that page (303) with the same words.

A browser that reaches no route at all (an unknown path) and prefers HTML (``Accept``) gets the
problem page too; API clients keep the envelope. :data:`NOTICES` is the notice table: what a
form's answer tells the page it returns to, by code.

Nothing answered here ever holds a traceback; 5xx answers are logged. The OpenAPI document
(``_openapi``) reads the same table and shapes (:func:`class_answer`, :class:`ErrorShape`), so
it states the statuses this module answers.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Literal, TypeAlias

from pydantic import ValidationError
from quart import Quart, Response, g, jsonify, request
from quart_schema import RequestSchemaValidationError
from werkzeug.exceptions import HTTPException

from ledgerport import access, apps, auth, books, catalog, ops, queues, storage
from ledgerport.errors import DomainError, InvalidInput

from ._pages import Way, current_user, form_back, problem_page, with_notice

log = logging.getLogger("ledgerport.http")

NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}
_OAUTH_STATUSES = (401, 429)
"""Statuses an OAuth error keeps; every other below 500 is answered 400 (spec: OAuth errors)."""

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


def _coded(code: str, **extra: Any) -> Answer:
    """An answer with an envelope code of the catalog, at the code's status."""
    return Answer(catalog.ERROR_CODES[code].status, code, **extra)


def _oauth(error: str, **extra: Any) -> Answer:
    """An answer with an OAuth error of the catalog, at the error's status."""
    return Answer(catalog.OAUTH_ERRORS[error].status, oauth_error=error, **extra)


def _retry_after(error: auth.RateLimited) -> dict[str, str]:
    """Retry-After, and the budget that refused the request in the form of the IETF's
    RateLimit-Policy header (``"name";q=limit;w=window``); a lockout names none."""
    headers = {"Retry-After": str(error.retry_after)}
    if error.limit is not None:
        headers["RateLimit-Policy"] = rate_limit_policy(error.limit)
    return headers


def rate_limit_policy(limit: catalog.RateLimit) -> str:
    """``limit`` as a RateLimit-Policy header's value."""
    return f'"{limit.name}";q={limit.limit};w={limit.window_seconds}'


def _basic_challenge(error: auth.InvalidClient) -> dict[str, str]:
    return {"WWW-Authenticate": 'Basic realm="ledgerport"'} if error.basic else {}


def _field_path(location: Iterable[object]) -> str:
    return ".".join(str(part) for part in location)


def validation_messages(error: ValidationError) -> list[str]:
    """Pydantic errors as the envelope's per-field sentences, e.g. ``name Field required``."""
    messages = []
    for item in error.errors():
        path = _field_path(item.get("loc", ()))
        text = item.get("msg", "is invalid")
        messages.append(f"{path} {text}" if path else text)
    return messages or ["request body is invalid"]


NOT_JSON = "request body must be JSON: send it with Content-Type: application/json"


def _schema_messages(error: RequestSchemaValidationError) -> list[str]:
    if request.mimetype != "application/json" and not request.is_json:
        # quart-schema reads a body of another type as a form: what it would name (an input
        # that is no instance of some class) is not the problem.
        return [NOT_JSON]
    cause = error.validation_error
    if isinstance(cause, ValidationError):
        return validation_messages(cause)
    return ["request body must be a JSON object"]


_HTTP_MESSAGES = {
    404: "Cannot {0} {1}",
    405: "Method {0} not allowed on {1}",
    413: "Request body too large",
    400: "Bad request",
}
_HTTP_PAGES = {
    404: "There is no page at this address. Check the address, or start again from the home page.",
    405: "This page cannot be used that way. Go back and use its links and buttons.",
    413: "What was sent is too large. Send something smaller.",
}


def _http_answer(error: HTTPException) -> Answer:
    """Routing and body errors of the framework: 404 and 405 name the method and path."""
    status = error.code or 500
    template = _HTTP_MESSAGES.get(status, HTTPStatus(status).phrase)
    params: tuple[object, ...] = ()
    if status in (404, 405):
        params = (request.method, request.path)
    allow = {k: v for k, v in error.get_headers() if k.lower() == "allow"} if status == 405 else {}
    return Answer(
        status,
        message=template.format(*params),
        params=params,
        headers=lambda _: allow,
        page=_HTTP_PAGES.get(status),
    )


Rule: TypeAlias = Answer | Callable[[Any], Answer]

ANSWERS: Mapping[type[BaseException], Rule] = {
    # Validation: an array of sentences, no code.
    InvalidInput: Answer(400),
    RequestSchemaValidationError: Answer(400, message=_schema_messages),
    UnicodeDecodeError: Answer(400, message=["request body must be UTF-8 encoded JSON"]),
    UnicodeEncodeError: Answer(400, message=["request holds text that is not valid Unicode"]),
    RecursionError: Answer(400, message=["request body is nested too deeply"]),
    # books
    books.BusinessNotFound: _coded(
        "BUSINESS_NOT_FOUND",
        page="That business could not be found. Check the link, or choose the business again.",
    ),
    books.UserNotFound: _coded(
        "USER_NOT_FOUND", page="Your account could not be found. Sign in again."
    ),
    books.EmailTaken: _coded("EMAIL_TAKEN"),
    books.UnknownCursor: _coded("UNKNOWN_CURSOR"),
    books.UnknownEventTypes: _coded("UNKNOWN_EVENT_TYPE_TYPES"),
    books.EventNotFound: _coded("EVENT_NOT_FOUND"),
    books.RecordNotFound: _coded("RECORD_NOT_FOUND"),
    books.RecordInWrongState: _coded("INVALID_STATE"),
    books.InvoiceCeilingReached: _coded("PLAN_INVOICE_LIMIT_REACHED"),
    books.AccountCodeTaken: _coded("ACCOUNT_CODE_TAKEN"),
    # apps
    apps.AppNotFound: _coded(
        "APP_NOT_FOUND",
        page="That app could not be found. Check the link, or find the app in the marketplace.",
    ),
    apps.InstallationNotFound: _coded("INSTALLATION_NOT_FOUND"),
    apps.AppHasNoAccess: _coded("INSTALLATION_NOT_FOUND"),
    apps.AppNotActive: _coded(
        "APP_NOT_ACTIVE",
        page="This app is switched off for now, so it cannot be opened or installed. Try again"
        " later, or ask its developer.",
    ),
    apps.NotAMember: _coded(
        "NOT_AN_ACTIVE_MEMBER",
        page="You are not an active member of that business: ask an owner of the business to"
        " add you.",
    ),
    apps.AppNotReviewed: _coded(
        "APP_NOT_REVIEWED",
        page="Its developer has not finished the review of this app yet, so it can connect only"
        " to sandbox businesses. Choose a sandbox business, or ask the developer when the app"
        " will be available.",
        explains=True,
    ),
    apps.ScopesNotRegistered: _coded(
        "SCOPES_NOT_REGISTERED",
        page="The app asked for access it has not registered. Choose among what is offered, or"
        " tell the app's developer.",
    ),
    apps.InstallNotPermitted: _coded("INSTALL_NOT_PERMITTED"),
    apps.UnsupportedApiVersion: _coded("UNSUPPORTED_API_VERSION"),
    apps.IdempotencyKeyReused: _coded("IDEMPOTENCY_KEY_REUSED"),
    apps.AppDataForConnectedAppsOnly: _coded("APP_DATA_API_AVAILABLE_CONNECTED_APPS_ONLY"),
    apps.UnknownAppDataField: _coded("UNKNOWN_APP_DATA_FIELD"),
    apps.InvalidAppDataValue: _coded("INVALID_APP_DATA_VALUE"),
    apps.AppCannotAccessType: _coded("APP_CANNOT_ACCESS_TYPE_RECORD"),
    apps.ResourceIdsMissing: _coded("PROVIDE_RESOURCEID_RESOURCEIDS"),
    apps.TooManyResourceIds: _coded("RESOURCEIDS_ACCEPTS_MOST_50_IDS"),
    apps.AppDataValueNotFound: _coded("APP_DATA_VALUE_NOT_FOUND"),
    apps.InvalidChoices: _coded("INVALID_CHOICES"),
    apps.AppDataFieldExists: _coded("APP_DATA_FIELD_EXISTS"),
    apps.AppDataFieldNotFound: _coded("APP_DATA_FIELD_NOT_FOUND"),
    apps.WebhookNotFound: _coded(
        "WEBHOOK_NOT_FOUND",
        page="That webhook no longer exists: it may have been deleted. Reload the webhooks page.",
    ),
    apps.FunctionNotFound: _coded(
        "FUNCTION_NOT_FOUND",
        page="That function no longer exists: it may have been deleted. Reload the functions page.",
    ),
    apps.ExtensionNotFound: _coded("EXTENSION_NOT_FOUND"),
    apps.ExtensionNotGranted: Answer(403),
    apps.ListingExists: _coded("LISTING_EXISTS"),
    apps.AssetNotFound: _coded("ASSET_NOT_FOUND", page="That image is not available."),
    apps.AssetInUse: _coded("ASSET_IN_USE"),
    apps.RatingNotAllowed: Answer(403),
    apps.SlugTaken: _coded("SLUG_TAKEN"),
    apps.ListingNotFound: _coded(
        "LISTING_NOT_FOUND",
        page="Nothing is listed here. The app may have left the marketplace: browse the"
        " marketplace for it.",
    ),
    apps.RevisionNotFound: _coded("REVISION_NOT_FOUND"),
    apps.RevisionInWrongState: _coded(
        "INVALID_STATE",
        page="The revision is {1} now, so it cannot be {2}. Reload the page to see where it"
        " stands.",
    ),
    apps.ExtensionPathInvalid: _coded("EXTENSION_PATH_INVALID"),
    apps.ExtensionScopeRequired: _coded("EXTENSION_SCOPE_REQUIRED"),
    apps.FunctionSourceNoHandler: _coded("FUNCTION_SOURCE_NO_HANDLER"),
    apps.FunctionVersionNotFound: _coded("FUNCTION_VERSION_NOT_FOUND"),
    # queues
    queues.DeliveryNotFound: _coded("DELIVERY_NOT_FOUND"),
    queues.RunNotFound: _coded("RUN_NOT_FOUND"),
    queues.RedeliveryRefused: _coded("REDELIVERY_REFUSED"),
    # access (consent pages)
    access.NoBusinessToConnect: Answer(
        400,
        page="You are not an active member of any business, so there is nowhere to connect the"
        " app. Ask an owner of your business to add you, then start again.",
    ),
    access.NoBusinessToInstallIn: Answer(403),
    access.NoScopeChosen: Answer(400),
    access.BusinessNotOffered: Answer(
        403, page="That business cannot be chosen here. Choose one of the businesses offered."
    ),
    # auth: who is calling
    auth.InvalidAdminToken: _coded(
        "INVALID_ADMIN_TOKEN",
        headers=lambda _: {"WWW-Authenticate": 'Bearer realm="ledgerport admin"'},
    ),
    auth.InvalidMetricsToken: _coded(
        "INVALID_METRICS_TOKEN",
        headers=lambda _: {"WWW-Authenticate": 'Bearer realm="ledgerport metrics"'},
    ),
    auth.InvalidAccessToken: _coded(
        "INVALID_TOKEN", headers=lambda _: {"WWW-Authenticate": 'Bearer realm="ledgerport"'}
    ),
    auth.NotSignedIn: _coded(
        "NOT_SIGNED_IN", page="You are signed out. Sign in again to continue."
    ),
    auth.EndpointNotExposed: _coded("ENDPOINT_NOT_EXPOSED"),
    auth.CrossSiteRequest: _coded("CROSS_SITE_REQUEST"),
    auth.InsufficientScope: _coded("INSUFFICIENT_SCOPE"),
    auth.PermissionDenied: _coded("PERMISSION_DENIED"),
    auth.RateLimited: _coded(
        "APP_RATE_LIMITED", oauth_error="temporarily_unavailable", headers=_retry_after
    ),
    auth.NoActiveInstallation: _coded(
        "NO_ACTIVE_INSTALLATION",
        page="This app is not installed in this business, or was uninstalled. Install it from"
        " the marketplace, or ask an owner of the business to.",
    ),
    auth.ConnectedAppsOnly: _coded("EVENT_LOG_AVAILABLE_CONNECTED_APPS_ONLY"),
    # auth: the OAuth endpoints, one class per error value
    auth.OAuthError: _oauth("invalid_request"),
    auth.InvalidRequest: _oauth("invalid_request"),
    auth.InvalidClient: _oauth("invalid_client", headers=_basic_challenge),
    auth.InvalidGrant: _oauth("invalid_grant"),
    auth.UnsupportedGrantType: _oauth("unsupported_grant_type"),
    auth.InvalidScope: _oauth("invalid_scope"),
    auth.InvalidTarget: _oauth("invalid_target"),
    auth.AuthorizationPending: _oauth("authorization_pending"),
    auth.SlowDown: _oauth("slow_down"),
    auth.AccessDenied: _oauth("access_denied"),
    auth.ExpiredToken: _oauth("expired_token"),
    auth.InvalidRedirectUri: _oauth("invalid_redirect_uri"),
    auth.InvalidClientMetadata: _oauth("invalid_client_metadata"),
    # auth: the consent page's problems, the specification's words and plain ones beside them
    auth.AuthorizeProblem: Answer(400, page="Go back to the app and start again.", explains=True),
    auth.UnknownClient: Answer(
        400,
        page="The link that brought you here names an app that does not exist or is switched"
        " off. Go back to the app and start again, or ask its developer.",
        explains=True,
    ),
    auth.RedirectUriMismatch: Answer(
        400,
        page="The app asked to send you back to an address it has not registered, so this stops"
        " here to keep your books safe. Go back to the app and start again; if it happens"
        " again, tell the app's developer.",
        explains=True,
    ),
    auth.ScopesNotPermitted: Answer(
        400,
        page="The app asked for access it has not registered. Go back to the app and start"
        " again; if it happens again, tell the app's developer.",
        explains=True,
    ),
    auth.PkceRequired: Answer(
        400,
        page="The app did not send the security check that apps of its kind must send."
        " Go back to the app and start again; if it happens again, tell the app's developer.",
        explains=True,
    ),
    auth.TargetRefused: Answer(
        400,
        page="The app asked for access to an address that is not this service's API."
        " Go back to the app and start again; if it happens again, tell the app's developer.",
        explains=True,
    ),
    auth.RequestExpired: Answer(
        400,
        page="This page was open for more than five minutes, or its request was already"
        " answered. Go back to the app and start again.",
        explains=True,
    ),
    auth.MalformedAuthorizeRequest: Answer(
        400,
        page="The link that brought you here is incomplete or malformed. Go back to the app and"
        " start again; if it happens again, tell the app's developer.",
        explains=True,
    ),
    # storage
    storage.Conflict: _coded(
        "CONFLICT",
        message="The request conflicted with a concurrent change; retry it",
        page="Something else changed this at the same moment. Try again.",
    ),
    storage.BadValue: Answer(400, message=["request holds a value that cannot be stored"]),
    ops.NotReady: _coded("NOT_READY", headers=lambda _: {"Retry-After": "5"}),
    storage.StorageUnavailable: _coded(
        "SERVICE_UNAVAILABLE",
        message="Service temporarily unavailable",
        headers=lambda _: {"Retry-After": "5"},
        page="The service is briefly unavailable. Try again in a moment.",
    ),
    # the framework, then anything else
    HTTPException: _http_answer,
    Exception: _coded(
        "INTERNAL_ERROR",
        message="Internal server error",
        page="Something went wrong on our side. Try again in a moment.",
    ),
}
"""Every exception class the service answers, by the most specific class that has a row."""


def answer_for(error: BaseException) -> Answer:
    for cls in type(error).__mro__:
        rule = ANSWERS.get(cls)
        if rule is not None:
            return rule if isinstance(rule, Answer) else rule(error)
    return _coded("INTERNAL_ERROR", message="Internal server error")


def class_answer(cls: type[BaseException]) -> Answer:
    """How exceptions of class ``cls`` are answered, as far as the class tells: the row
    :func:`answer_for` uses, with the framework's HTTP errors at their class's status (their
    message and headers depend on the request)."""
    for klass in cls.__mro__:
        rule = ANSWERS.get(klass)
        if isinstance(rule, Answer):
            return rule
        if rule is not None:
            status = getattr(cls, "code", None)
            return Answer(status if isinstance(status, int) else 500)
    return _coded("INTERNAL_ERROR", message="Internal server error")


def oauth_error_of(error: BaseException) -> str:
    """The OAuth ``error`` value ``error`` is answered with."""
    return answer_for(error).oauth


def oauth_status(status: int) -> int:
    """The status an OAuth endpoint answers for an answer of ``status``: 401, 429 and 5xx
    stay, every other error is 400 (spec: OAuth errors)."""
    return status if status >= 500 or status in _OAUTH_STATUSES else 400


def envelope(
    status: int,
    message: Message,
    *,
    code: str | None = None,
    params: Sequence[object] = (),
    details: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "statusCode": status,
        "message": message,
        "error": HTTPStatus(status).phrase,
    }
    if code is not None:
        body["code"] = code
    if params:
        body["params"] = {f"p{i}": value for i, value in enumerate(params)}
    if details is not None:
        body["details"] = details
    return body


def _json_response(body: Mapping[str, Any], status: int, headers: Mapping[str, str]) -> Response:
    response = jsonify(body)
    response.status_code = status
    for name, value in headers.items():
        response.headers[name] = value
    return response


def oauth_response(
    body: Mapping[str, Any], status: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    """An OAuth endpoint's JSON answer, never cached."""
    return _json_response(body, status, {**NO_STORE, **(headers or {})})


Renderer: TypeAlias = Callable[[BaseException, Answer], Awaitable[Response]]


async def render_envelope(error: BaseException, answer: Answer) -> Response:
    body = envelope(
        answer.status,
        answer.text(error),
        code=answer.code,
        params=answer.arguments(error),
        details=answer.details(error),
    )
    return _json_response(body, answer.status, answer.header_values(error))


async def render_oauth(error: BaseException, answer: Answer) -> Response:
    """RFC 6749 section 5.2, plus the deprecated ``message`` member."""
    status = oauth_status(answer.status)
    if isinstance(error, auth.OAuthError):
        description = error.description
    else:
        text = answer.text(error)
        description = "; ".join(text) if isinstance(text, list) else text
    body: dict[str, Any] = {"error": answer.oauth}
    if description:
        body["error_description"] = description
    body["message"] = description or answer.oauth
    return oauth_response(body, status, answer.header_values(error))


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
        await _look_up_viewer(error)
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
    notice = notice_text(code, values) or Notice(answer.page_words(error)[0], "problem")
    try:
        response = await again(notice, answer.status)
    except Exception:
        log.debug("the form could not be rendered again", exc_info=True)
        return None
    for name, value in answer.header_values(error).items():
        response.headers[name] = value
    return response


async def _look_up_viewer(error: BaseException) -> None:
    """Who is signed in, for the problem page's header, when the handler had not asked yet and
    the store can be asked (never after a storage error); nothing when it cannot."""
    if isinstance(error, storage.StorageError) or answer_for(error).status >= 500:
        return
    try:
        await current_user()
    except Exception:  # the page goes on without the name: "Sign in" shows instead
        log.debug("the problem page's viewer could not be looked up", exc_info=True)


_STATUS_TITLES = {404: "Page not found", 405: "Not available here", 413: "Too large"}
_OTHER_TITLE = "Something went wrong"


# --- Notices: what a form's answer tells the page it returns to ---------------------------------


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
        return Notice(" ".join(values), "problem")
    entry = NOTICES.get(code)
    if entry is None:
        return None
    try:
        return Notice(entry.words.format(*values), entry.tone)
    except (IndexError, KeyError):
        return None


@dataclass(frozen=True)
class ErrorShape:
    """How a blueprint answers the exceptions its routes raise: the standard envelope, the OAuth
    envelope or an HTML page (``kind``, which the OpenAPI document states), and the renderer."""

    kind: Literal["envelope", "oauth", "page"]
    render: Renderer


ENVELOPE = ErrorShape("envelope", render_envelope)
OAUTH = ErrorShape("oauth", render_oauth)


def page_shape(title: str, ways: Sequence[Way] = ()) -> ErrorShape:
    """Problems shown as the application host's page titled ``title``, offering ``ways``."""
    return ErrorShape("page", render_page(title, ways))


BROWSER_PAGE = page_shape(
    "", (Way("Go to the home page", "/"), Way("Browse the marketplace", "/marketplace"))
)
"""How a browser's request that reached no route is answered: a page titled by its status."""


def _prefers_html() -> bool:
    best = request.accept_mimetypes.best_match(["application/json", "text/html"])
    return best == "text/html"


def _log(error: BaseException, answer: Answer) -> None:
    if answer.status < 500:
        return
    if isinstance(error, storage.StorageUnavailable):
        log.error("storage unavailable: %s", error)
    else:
        log.error("unhandled error", exc_info=error)


def register_error_handlers(app: Quart, shapes: Mapping[str, ErrorShape]) -> None:
    """Answer every exception by :data:`ANSWERS`, in the shape of the blueprint that raised it
    (``shapes`` by blueprint name; the standard envelope for the rest, but the problem page for
    a browser's request that no route took)."""

    async def handle(error: Exception) -> Response:
        answer = answer_for(error)
        _log(error, answer)
        shape = shapes.get(request.blueprint or "")
        if shape is None:
            # No route: a browser asking for a page gets one; API clients the envelope.
            unrouted = request.url_rule is None
            shape = BROWSER_PAGE if unrouted and _prefers_html() else ENVELOPE
        return await shape.render(error, answer)

    app.register_error_handler(HTTPException, handle)
    app.register_error_handler(Exception, handle)
