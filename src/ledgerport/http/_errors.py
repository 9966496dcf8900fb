"""Exceptions to HTTP answers, in one place: one table (:data:`ANSWERS`).

:data:`ANSWERS` maps every exception class (domain, storage, framework) to its status, envelope
``code`` and headers, and the words a page shows for it; the lookup walks the exception's class
hierarchy, most specific first. The blueprint that raised chooses the shape it is answered in
(``_envelopes.register_error_handlers``): the standard envelope, the OAuth envelope, or the
problem page (``pages/_problems``). The OpenAPI document reads the same table
(:func:`class_answer`), so it states the statuses the service answers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from http import HTTPStatus

from pydantic import ValidationError
from quart import request
from quart_schema import RequestSchemaValidationError
from werkzeug.exceptions import HTTPException

from ledgerport import access, apps, auth, books, catalog, ops, queues, storage
from ledgerport.errors import InvalidInput

from ._challenges import bearer_challenge, dpop_challenge
from ._developer_bounds import TooManyPulls, TooManyStreams
from ._error_answer import Answer, Rule, coded, oauth_answer


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


ANSWERS: Mapping[type[BaseException], Rule] = {
    # Validation: an array of sentences, no code.
    InvalidInput: Answer(400),
    RequestSchemaValidationError: Answer(400, message=_schema_messages),
    UnicodeDecodeError: Answer(400, message=["request body must be UTF-8 encoded JSON"]),
    UnicodeEncodeError: Answer(400, message=["request holds text that is not valid Unicode"]),
    RecursionError: Answer(400, message=["request body is nested too deeply"]),
    # books
    books.BusinessNotFound: coded(
        "BUSINESS_NOT_FOUND",
        page="That business could not be found. Check the link, or choose the business again.",
    ),
    books.UserNotFound: coded(
        "USER_NOT_FOUND", page="Your account could not be found. Sign in again."
    ),
    books.EmailTaken: coded("EMAIL_TAKEN"),
    books.UnknownCursor: coded("UNKNOWN_CURSOR"),
    books.UnknownEventTypes: coded("UNKNOWN_EVENT_TYPE_TYPES"),
    books.EventNotFound: coded("EVENT_NOT_FOUND"),
    books.RecordNotFound: coded("RECORD_NOT_FOUND"),
    books.RecordInWrongState: coded("INVALID_STATE"),
    books.InvoiceCeilingReached: coded("PLAN_INVOICE_LIMIT_REACHED"),
    books.AccountCodeTaken: coded("ACCOUNT_CODE_TAKEN"),
    # apps
    apps.AppNotFound: coded(
        "APP_NOT_FOUND",
        page="That app could not be found. Check the link, or find the app in the marketplace.",
    ),
    apps.InstallationNotFound: coded("INSTALLATION_NOT_FOUND"),
    apps.AppHasNoAccess: coded("INSTALLATION_NOT_FOUND"),
    apps.AppNotActive: coded(
        "APP_NOT_ACTIVE",
        page="This app is switched off for now, so it cannot be opened or installed. Try again"
        " later, or ask its developer.",
    ),
    apps.NotAMember: coded(
        "NOT_AN_ACTIVE_MEMBER",
        page="You are not an active member of that business: ask an owner of the business to"
        " add you.",
    ),
    apps.AppNotReviewed: coded(
        "APP_NOT_REVIEWED",
        page="Its developer has not finished the review of this app yet, so it can connect only"
        " to sandbox businesses. Choose a sandbox business, or ask the developer when the app"
        " will be available.",
        explains=True,
    ),
    apps.ScopesNotRegistered: coded(
        "SCOPES_NOT_REGISTERED",
        page="The app asked for access it has not registered. Choose among what is offered, or"
        " tell the app's developer.",
    ),
    apps.InstallNotPermitted: coded("INSTALL_NOT_PERMITTED"),
    apps.UnsupportedApiVersion: coded("UNSUPPORTED_API_VERSION"),
    apps.IdempotencyKeyReused: coded("IDEMPOTENCY_KEY_REUSED"),
    apps.AppDataForConnectedAppsOnly: coded("APP_DATA_API_AVAILABLE_CONNECTED_APPS_ONLY"),
    apps.UnknownAppDataField: coded("UNKNOWN_APP_DATA_FIELD"),
    apps.InvalidAppDataValue: coded("INVALID_APP_DATA_VALUE"),
    apps.AppCannotAccessType: coded("APP_CANNOT_ACCESS_TYPE_RECORD"),
    apps.ResourceIdsMissing: coded("PROVIDE_RESOURCEID_RESOURCEIDS"),
    apps.TooManyResourceIds: coded("RESOURCEIDS_ACCEPTS_MOST_50_IDS"),
    apps.AppDataValueNotFound: coded("APP_DATA_VALUE_NOT_FOUND"),
    apps.InvalidChoices: coded("INVALID_CHOICES"),
    apps.AppDataFieldExists: coded("APP_DATA_FIELD_EXISTS"),
    apps.AppDataFieldNotFound: coded("APP_DATA_FIELD_NOT_FOUND"),
    apps.WebhookNotFound: coded(
        "WEBHOOK_NOT_FOUND",
        page="That webhook no longer exists: it may have been deleted. Reload the webhooks page.",
    ),
    apps.FunctionNotFound: coded(
        "FUNCTION_NOT_FOUND",
        page="That function no longer exists: it may have been deleted. Reload the functions page.",
    ),
    apps.SecretNotFound: coded(
        "SECRET_NOT_FOUND",
        page="That secret no longer exists: it may have been deleted. Reload the app's page.",
    ),
    apps.ExtensionNotFound: coded("EXTENSION_NOT_FOUND"),
    apps.ExtensionNotGranted: Answer(403),
    apps.ListingExists: coded("LISTING_EXISTS"),
    apps.AssetNotFound: coded("ASSET_NOT_FOUND", page="That image is not available."),
    apps.AssetInUse: coded("ASSET_IN_USE"),
    apps.RatingNotAllowed: Answer(403),
    apps.SlugTaken: coded("SLUG_TAKEN"),
    apps.ListingNotFound: coded(
        "LISTING_NOT_FOUND",
        page="Nothing is listed here. The app may have left the marketplace: browse the"
        " marketplace for it.",
    ),
    apps.RevisionNotFound: coded("REVISION_NOT_FOUND"),
    apps.RevisionInWrongState: coded(
        "INVALID_STATE",
        page="The revision is {1} now, so it cannot be {2}. Reload the page to see where it"
        " stands.",
    ),
    apps.ExtensionPathInvalid: coded("EXTENSION_PATH_INVALID"),
    apps.ExtensionScopeRequired: coded("EXTENSION_SCOPE_REQUIRED"),
    apps.FunctionSourceNoHandler: coded("FUNCTION_SOURCE_NO_HANDLER"),
    apps.FunctionVersionNotFound: coded("FUNCTION_VERSION_NOT_FOUND"),
    # queues
    queues.DeliveryNotFound: coded("DELIVERY_NOT_FOUND"),
    queues.RunNotFound: coded("RUN_NOT_FOUND"),
    queues.RedeliveryRefused: coded("REDELIVERY_REFUSED"),
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
    auth.InvalidAdminToken: coded(
        "INVALID_ADMIN_TOKEN",
        headers=lambda _: {"WWW-Authenticate": 'Bearer realm="ledgerport admin"'},
    ),
    auth.InvalidMetricsToken: coded(
        "INVALID_METRICS_TOKEN",
        headers=lambda _: {"WWW-Authenticate": 'Bearer realm="ledgerport metrics"'},
    ),
    auth.InvalidAccessToken: coded("INVALID_TOKEN", headers=bearer_challenge),
    auth.DpopRefused: coded("INVALID_TOKEN", headers=dpop_challenge),
    auth.NotSignedIn: coded("NOT_SIGNED_IN", page="You are signed out. Sign in again to continue."),
    auth.EndpointNotExposed: coded("ENDPOINT_NOT_EXPOSED"),
    auth.CrossSiteRequest: coded("CROSS_SITE_REQUEST"),
    auth.CliLoginNotFound: coded("CLI_LOGIN_NOT_FOUND"),
    auth.InsufficientScope: coded("INSUFFICIENT_SCOPE"),
    auth.PermissionDenied: coded("PERMISSION_DENIED"),
    auth.RateLimited: coded(
        "APP_RATE_LIMITED", oauth_error="temporarily_unavailable", headers=_retry_after
    ),
    TooManyStreams: coded("APP_RATE_LIMITED", headers=_retry_after),
    TooManyPulls: coded("APP_RATE_LIMITED", headers=_retry_after),
    auth.NoActiveInstallation: coded(
        "NO_ACTIVE_INSTALLATION",
        page="This app is not installed in this business, or was uninstalled. Install it from"
        " the marketplace, or ask an owner of the business to.",
    ),
    auth.ConnectedAppsOnly: coded("EVENT_LOG_AVAILABLE_CONNECTED_APPS_ONLY"),
    # auth: the OAuth endpoints, one class per error value
    auth.OAuthError: oauth_answer("invalid_request"),
    auth.InvalidRequest: oauth_answer("invalid_request"),
    auth.InvalidClient: oauth_answer("invalid_client", headers=_basic_challenge),
    auth.InvalidGrant: oauth_answer("invalid_grant"),
    auth.UnsupportedGrantType: oauth_answer("unsupported_grant_type"),
    auth.InvalidScope: oauth_answer("invalid_scope"),
    auth.InvalidTarget: oauth_answer("invalid_target"),
    auth.AuthorizationPending: oauth_answer("authorization_pending"),
    auth.SlowDown: oauth_answer("slow_down"),
    auth.AccessDenied: oauth_answer("access_denied"),
    auth.ExpiredToken: oauth_answer("expired_token"),
    auth.InvalidRedirectUri: oauth_answer("invalid_redirect_uri"),
    auth.InvalidClientMetadata: oauth_answer("invalid_client_metadata"),
    auth.InvalidDpopProof: oauth_answer("invalid_dpop_proof"),
    auth.UseDpopNonce: oauth_answer(
        "use_dpop_nonce", headers=lambda error: {"DPoP-Nonce": error.nonce}
    ),
    auth.InvalidRegistrationToken: oauth_answer(
        "invalid_token", headers=lambda _: {"WWW-Authenticate": 'Bearer realm="ledgerport"'}
    ),
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
    storage.Conflict: coded(
        "CONFLICT",
        message="The request conflicted with a concurrent change; retry it",
        page="Something else changed this at the same moment. Try again.",
    ),
    storage.BadValue: Answer(400, message=["request holds a value that cannot be stored"]),
    ops.NotReady: coded("NOT_READY", headers=lambda _: {"Retry-After": "5"}),
    storage.StorageUnavailable: coded(
        "SERVICE_UNAVAILABLE",
        message="Service temporarily unavailable",
        headers=lambda _: {"Retry-After": "5"},
        page="The service is briefly unavailable. Try again in a moment.",
    ),
    # the framework, then anything else
    HTTPException: _http_answer,
    Exception: coded(
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
    return coded("INTERNAL_ERROR", message="Internal server error")


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
    return coded("INTERNAL_ERROR", message="Internal server error")


def oauth_error_of(error: BaseException) -> str:
    """The OAuth ``error`` value ``error`` is answered with."""
    return answer_for(error).oauth
