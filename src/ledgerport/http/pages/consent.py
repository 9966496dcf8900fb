"""The authorization endpoint on the application host: consent page and decision.

Problems are shown on the page and never redirected to the app (the blueprint answers errors
with the problem page); only a checked request's decision redirects (303) to its registered
redirect URI with code (or error) and state.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode

from pydantic import WithJsonSchema
from quart import Blueprint, Response, redirect, request
from quart.typing import ResponseReturnValue
from quart_schema import security_scheme
from werkzeug.exceptions import RequestEntityTooLarge

from ledgerport import access, apps, auth, catalog, storage
from ledgerport.storage import Transaction

from .._browser import current_user_id
from .._client_documents import prepare_document_client
from .._context import platform, unit_of_work
from .._ids import BUSINESS, CLIENT, token_schema
from .._openapi import (
    FORM,
    SIGNED_IN,
    SIGNED_IN_OR_SENT_TO_SIGN_IN,
    Body,
    Param,
    one_of,
    operation,
    page,
    redirect_reply,
)
from ._consent import REFUSED_APPROVALS, consent_page, consent_problems
from ._csrf import CSRF_COOKIE_PARAM, form_guard
from ._form_models import PageForm, read_form
from ._frame import login_redirect, problem_page

blueprint = Blueprint("authorize", __name__, template_folder="templates")

_AUTHORIZE_QUERY = (
    Param("response_type", "query", "Always code", one_of(catalog.RESPONSE_TYPES), required=True),
    Param(
        "client_id",
        "query",
        "The app's client id",
        CLIENT.looked_up("the page's Invalid client_id (400)"),
        required=True,
    ),
    Param("redirect_uri", "query", "Exactly one of the app's registered URIs", required=True),
    Param("scope", "query", "Space-separated scopes the app registered", required=True),
    Param("state", "query", "Echoed on the callback; the client checks it"),
    Param("code_challenge", "query", "PKCE challenge (RFC 7636); required for PUBLIC apps"),
    Param(
        "code_challenge_method",
        "query",
        "How the challenge was made (plain when absent)",
        one_of(catalog.CODE_CHALLENGE_METHODS),
    ),
    Param("resource", "query", "RFC 8707: one absolute URI on the API's origin"),
    Param(
        "request_uri",
        "query",
        "RFC 9126: what /oauth/par answered; the pushed parameters stand for every other but"
        " client_id, once, within 60 s",
        {"type": "string", "pattern": "^urn:ietf:params:oauth:request_uri:"},
    ),
)


class ConsentDecision(PageForm):
    """The consent form: approve (for the chosen business) or anything else to deny."""

    stated_required = ("request_id",)
    request_id: Annotated[
        str,
        WithJsonSchema(
            token_schema(
                catalog.AUTHORIZATION_REQUEST_PREFIX, "The held request the consent page names"
            )
        ),
    ] = ""
    decision: str = ""
    business_id: Annotated[str, BUSINESS.document] = ""


def _callback(redirect_uri: str, params: dict[str, str | None]) -> Response:
    query = urlencode({k: v for k, v in params.items() if v is not None})
    response = redirect(f"{redirect_uri}?{query}", 303)
    response.headers["Cache-Control"] = "no-store"
    return response  # type: ignore[return-value]


@blueprint.get("/oauth/authorize")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The consent form: the app, the scopes and the user's businesses"),
    redirect_reply("Not signed in: to the sign-in page, returning here"),
    raises=(
        auth.AuthorizeProblem,
        auth.ClientDocumentRefused,
        auth.ScopeBeyondPolicy,
        auth.RateLimited,
        apps.AppNotReviewed,
        access.NoBusinessToConnect,
        access.NoBusinessToInstallIn,
        storage.BadValue,
        storage.StorageUnavailable,
    ),
    params=_AUTHORIZE_QUERY,
)
async def authorize() -> ResponseReturnValue:
    """Check the request, ask an anonymous visitor to sign in, then show the consent form. With
    a ``request_uri`` (RFC 9126), the pushed request's parameters stand for the query's, used
    up by the signed-in user's visit (a visitor sent to sign in comes back to the same
    address); a client registered to push its requests may start one in no other way."""
    p = platform()
    args = {key: request.args.getlist(key) for key in request.args}
    request_uri = args.get("request_uri")
    user_id = await current_user_id()
    await prepare_document_client(args)
    async with unit_of_work() as tx:
        if request_uri is not None:
            client_ids = args.get("client_id") or []
            if len(request_uri) > 1 or len(client_ids) != 1:
                raise auth.RequestExpired()
            args = await auth.pushed_request(
                tx,
                p.keyring,
                now=p.now(),
                client_id=client_ids[0],
                request_uri=request_uri[0],
                use=user_id is not None,
            )
        params = await auth.check_authorize_request(tx, args, api_base_url=p.config.base_url)
        if request_uri is None:
            auth.refuse_unpushed(params.app)
    if user_id is None:
        return login_redirect()
    async with unit_of_work() as tx:
        offers = await access.consent_businesses(tx, params.app, user_id, params.scopes)
        request_id = await auth.hold_request(
            tx, p.keyring, now=p.now(), user_id=user_id, params=params
        )
    return await consent_page(
        action="/oauth/authorize",
        app=params.app,
        scopes=params.scopes,
        offers=offers,
        hidden={"request_id": request_id},
        redirects_to=params.redirect_uri,
    )


async def _expired_consent() -> Response:
    return await problem_page(
        "invalid_request: the form expired, start again",
        explanation="The page was open too long or came from somewhere else. Go back to the"
        " app and start again.",
    )


@blueprint.post("/oauth/authorize")
@form_guard(_expired_consent, token_required=False)
@security_scheme(SIGNED_IN)
@operation(
    redirect_reply("To the app's redirect URI with code (or error=access_denied), state and iss"),
    page(400, "The form expired (CSRF check failed)"),
    page(
        400,
        "The consent form again, the refusal beside the business (one the user may not"
        " choose, or may not install the app in); the request is held still",
    ),
    raises=(
        auth.AuthorizeProblem,
        apps.AppNotReviewed,
        storage.Conflict,
        RequestEntityTooLarge,
        storage.BadValue,
        storage.StorageUnavailable,
    ),
    bodies=(Body(FORM, ConsentDecision),),
    params=(CSRF_COOKIE_PARAM,),
)
async def decide() -> ResponseReturnValue:
    """Approve (install or widen, then a code) or deny; either way back to the app (303). An
    approval refused for the business chosen (not offered, or the user's role may not install
    the app there) shows the form again with the refusal beside the business, the request
    still held: nothing was used up."""
    form = await read_form(ConsentDecision)
    user_id = await current_user_id()
    if user_id is None:
        raise auth.RequestExpired()
    p = platform()
    now = p.now()
    issuer = p.config.base_url
    try:
        async with unit_of_work() as tx:
            params = await auth.take_request(
                tx, p.keyring, now=now, request_id=form.request_id, user_id=user_id
            )
            if form.decision != "approve":
                return _callback(
                    params.redirect_uri,
                    {"error": "access_denied", "state": params.state, "iss": issuer},
                )
            installation = await access.approve(
                tx,
                now=now,
                app=params.app,
                business_id=form.business_id,
                user_id=user_id,
                scopes=params.scopes,
            )
            code = await _issue_code(tx, now, params, installation, user_id)
    except REFUSED_APPROVALS as refused:
        # Rolled back: the request is held still, and the form comes back to choose again.
        async with unit_of_work() as tx:
            offers = await access.consent_businesses(tx, params.app, user_id, params.scopes)
        return await consent_page(
            action="/oauth/authorize",
            app=params.app,
            scopes=params.scopes,
            offers=offers,
            hidden={"request_id": form.request_id},
            redirects_to=params.redirect_uri,
            problems=consent_problems(refused),
        )
    return _callback(params.redirect_uri, {"code": code, "state": params.state, "iss": issuer})


async def _issue_code(
    tx: Transaction,
    now: float,
    params: auth.AuthorizeParams,
    installation: apps.Installation,
    user_id: str,
) -> str:
    p = platform()
    return await auth.issue_code(
        tx,
        p.keyring,
        now=now,
        app=params.app,
        installation=installation,
        user_id=user_id,
        redirect_uri=params.redirect_uri,
        scopes=params.scopes,
        code_challenge=params.code_challenge,
        code_challenge_method=params.code_challenge_method,
        resource=params.resource,
    )
