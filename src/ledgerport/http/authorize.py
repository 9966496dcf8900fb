"""The authorization endpoint on the application host: consent page and decision.

Problems are shown on the page and never redirected to the app; only a checked request's
decision redirects (303) to its registered redirect URI with code (or error) and state.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlencode

from quart import Blueprint, Response, redirect, render_template, request
from quart.typing import ResponseReturnValue

from ledgerport import apps, auth, books
from ledgerport.errors import DomainError
from ledgerport.storage import Transaction

from ._browser import apply_cookies, csrf_token, csrf_valid, current_user_id
from ._context import platform, unit_of_work
from ._pages import login_redirect, problem_page

blueprint = Blueprint("authorize", __name__, template_folder="templates")


async def consent_businesses(
    tx: Transaction, app: apps.App, user_id: str
) -> list[books.Business] | str:
    """The businesses the user may connect the app to, or the problem to show instead."""
    businesses = [b for b, _ in await books.businesses_of_user(tx, user_id)]
    if not app.reviewed:
        businesses = [b for b in businesses if b.sandbox]
    if businesses:
        return businesses
    if not app.reviewed:
        return auth.MSG_NOT_REVIEWED
    return "You are not an active member of any business"


async def consent_page(
    *,
    action: str,
    app: apps.App,
    scopes: Sequence[str],
    businesses: Sequence[books.Business],
    hidden: dict[str, str],
) -> Response:
    cookies: dict[str, str] = {}
    html = await render_template(
        "consent.html",
        action=action,
        app_name=app.name,
        scopes=scopes,
        businesses=businesses,
        hidden=hidden,
        csrf_token=csrf_token(cookies),
    )
    response = Response(html, content_type="text/html; charset=utf-8")
    response.headers["Cache-Control"] = "no-store"
    return apply_cookies(response, cookies)


async def install_on_approval(
    tx: Transaction,
    *,
    now: float,
    app: apps.App,
    business_id: str,
    user_id: str,
    scopes: Sequence[str],
) -> apps.Installation | Response:
    """Install the app (or widen its installation) in the business the user picked.

    Answers the problem page when the user may not: not an active member there, or an
    unreviewed app and a business that is not a sandbox.
    """
    membership = await books.get_membership(tx, business_id, user_id)
    if membership is None or not membership.active:
        return await problem_page("You are not an active member of that business", 403)
    business = await books.get_business(tx, business_id)
    if not app.reviewed and not business.sandbox:
        return await problem_page(auth.MSG_NOT_REVIEWED)
    try:
        return await apps.install(
            tx, now=now, app_id=app.id, business_id=business_id, user_id=user_id, scopes=scopes
        )
    except DomainError as error:
        return await problem_page(error.rendered)


def _callback(redirect_uri: str, params: dict[str, str | None]) -> Response:
    query = urlencode({k: v for k, v in params.items() if v is not None})
    response = redirect(f"{redirect_uri}?{query}", 303)
    response.headers["Cache-Control"] = "no-store"
    return response  # type: ignore[return-value]


@blueprint.get("/oauth/authorize")
async def authorize() -> ResponseReturnValue:
    """Check the request, ask an anonymous visitor to sign in, then show the consent form."""
    p = platform()
    args = {key: request.args.getlist(key) for key in request.args}
    try:
        async with unit_of_work() as tx:
            params = await auth.check_authorize_request(tx, args, api_base_url=p.config.base_url)
    except auth.AuthorizeProblem as problem:
        return await problem_page(problem.message)
    user_id = await current_user_id()
    if user_id is None:
        return login_redirect()
    async with unit_of_work() as tx:
        businesses = await consent_businesses(tx, params.app, user_id)
        if isinstance(businesses, str):
            return await problem_page(businesses)
        request_id = await auth.hold_request(
            tx, p.keyring, now=p.now(), user_id=user_id, params=params
        )
    return await consent_page(
        action="/oauth/authorize",
        app=params.app,
        scopes=params.scopes,
        businesses=businesses,
        hidden={"request_id": request_id},
    )


@blueprint.post("/oauth/authorize")
async def decide() -> ResponseReturnValue:
    """Approve (install or widen, then a code) or deny; either way back to the app (303)."""
    form = await request.form
    if not csrf_valid(form.get("csrf_token")):
        return await problem_page("invalid_request: the form expired, start again")
    user_id = await current_user_id()
    if user_id is None:
        return await problem_page(auth.MSG_REQUEST_EXPIRED)
    p = platform()
    now = p.now()
    decision = form.get("decision")
    async with unit_of_work() as tx:
        try:
            params = await auth.take_request(
                tx, p.keyring, now=now, request_id=form.get("request_id", ""), user_id=user_id
            )
        except auth.AuthorizeProblem as problem:
            return await problem_page(problem.message)
        issuer = p.config.base_url
        if decision != "approve":
            return _callback(
                params.redirect_uri,
                {"error": "access_denied", "state": params.state, "iss": issuer},
            )
        installation = await install_on_approval(
            tx,
            now=now,
            app=params.app,
            business_id=form.get("business_id", ""),
            user_id=user_id,
            scopes=params.scopes,
        )
        if isinstance(installation, Response):
            return installation
        code = await auth.issue_code(
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
    return _callback(params.redirect_uri, {"code": code, "state": params.state, "iss": issuer})
