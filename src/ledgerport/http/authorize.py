"""The authorization endpoint on the application host: consent page and decision.

Problems are shown on the page and never redirected to the app; only a checked request's
decision redirects (303) to its registered redirect URI with code (or error) and state.
"""

from __future__ import annotations

from urllib.parse import urlencode

from quart import Blueprint, Response, redirect, render_template, request
from quart.typing import ResponseReturnValue

from ledgerport import apps, auth, books
from ledgerport.errors import DomainError

from ._browser import apply_cookies, csrf_token, csrf_valid, current_user_id
from ._context import platform, unit_of_work

blueprint = Blueprint("authorize", __name__, template_folder="templates")


async def problem_page(message: str, status: int = 400) -> Response:
    html = await render_template("error.html", title="Authorization failed", message=message)
    response = Response(html, status=status, content_type="text/html; charset=utf-8")
    response.headers["Cache-Control"] = "no-store"
    return response


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
        return redirect(f"/login?{urlencode({'next': request.full_path})}", 303)
    async with unit_of_work() as tx:
        businesses = [b for b, _ in await books.businesses_of_user(tx, user_id)]
        if not params.app.reviewed:
            businesses = [b for b in businesses if b.sandbox]
        if not businesses:
            return await problem_page(
                auth.MSG_NOT_REVIEWED
                if not params.app.reviewed
                else "You are not an active member of any business"
            )
        request_id = await auth.hold_request(
            tx, p.keyring, now=p.now(), user_id=user_id, params=params
        )
    cookies: dict[str, str] = {}
    html = await render_template(
        "consent.html",
        action="/oauth/authorize",
        app_name=params.app.name,
        scopes=params.scopes,
        businesses=businesses,
        request_id=request_id,
        csrf_token=csrf_token(cookies),
    )
    response = Response(html, content_type="text/html; charset=utf-8")
    response.headers["Cache-Control"] = "no-store"
    return apply_cookies(response, cookies)


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
        business_id = form.get("business_id", "")
        membership = await books.get_membership(tx, business_id, user_id)
        if membership is None or not membership.active:
            return await problem_page("You are not an active member of that business", 403)
        business = await books.get_business(tx, business_id)
        if not params.app.reviewed and not business.sandbox:
            return await problem_page(auth.MSG_NOT_REVIEWED)
        try:
            installation = await apps.install(
                tx,
                now=now,
                app_id=params.app.id,
                business_id=business_id,
                user_id=user_id,
                scopes=params.scopes,
            )
        except DomainError as error:
            return await problem_page(error.rendered)
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
