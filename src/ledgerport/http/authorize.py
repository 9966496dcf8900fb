"""The authorization endpoint on the application host: consent page and decision.

Problems are shown on the page and never redirected to the app (the blueprint answers errors
with the problem page); only a checked request's decision redirects (303) to its registered
redirect URI with code (or error) and state.
"""

from __future__ import annotations

from urllib.parse import urlencode

from quart import Blueprint, Response, redirect, request
from quart.typing import ResponseReturnValue

from ledgerport import access, auth

from ._browser import csrf_valid, current_user_id
from ._consent import consent_page
from ._context import platform, unit_of_work
from ._pages import login_redirect, problem_page

blueprint = Blueprint("authorize", __name__, template_folder="templates")


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
    async with unit_of_work() as tx:
        params = await auth.check_authorize_request(tx, args, api_base_url=p.config.base_url)
    user_id = await current_user_id()
    if user_id is None:
        return login_redirect()
    async with unit_of_work() as tx:
        businesses = await access.consent_businesses(tx, params.app, user_id)
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
        raise auth.RequestExpired()
    p = platform()
    now = p.now()
    issuer = p.config.base_url
    async with unit_of_work() as tx:
        params = await auth.take_request(
            tx, p.keyring, now=now, request_id=form.get("request_id", ""), user_id=user_id
        )
        if form.get("decision") != "approve":
            return _callback(
                params.redirect_uri,
                {"error": "access_denied", "state": params.state, "iss": issuer},
            )
        installation = await access.approve(
            tx,
            now=now,
            app=params.app,
            business_id=form.get("business_id", ""),
            user_id=user_id,
            scopes=params.scopes,
        )
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
