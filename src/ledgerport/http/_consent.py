"""The consent form shared by the authorization page and the device verification page."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit

from quart import Response, render_template, request

from ledgerport import apps, books, catalog

from ._browser import apply_cookies, csrf_token, current_user_id, page_csp
from ._context import unit_of_work


async def consent_page(
    *,
    action: str,
    app: apps.App,
    scopes: Sequence[str],
    businesses: Sequence[books.Business],
    hidden: dict[str, str],
    redirects_to: str | None = None,
) -> Response:
    """Who is signed in (with a way to switch account), the app's name and developer (with a
    link to its marketplace listing when it has a live one), the requested scopes in plain
    words, a ``business_id`` select and approve/deny buttons; the form posts back to
    ``action`` with ``hidden`` fields and a CSRF token. ``redirects_to`` is the URI the form's
    answer redirects to, when it leaves this origin (the page's form-action allows its
    origin)."""
    cookies: dict[str, str] = {}
    user_id = await current_user_id()
    async with unit_of_work() as tx:
        user = await books.get_user(tx, user_id) if user_id else None
        developer = (
            await books.get_user(tx, app.developer_user_id) if app.developer_user_id else None
        )
        listing = await apps.find_listing(tx, app.id)
    here = request.full_path.rstrip("?") if request.method == "GET" else "/"
    html = await render_template(
        "consent.html",
        action=action,
        app_name=app.name,
        developer=(developer.name or developer.email) if developer else None,
        listing_slug=listing.slug if listing is not None and listing.live is not None else None,
        user=user,
        switch_next=here,
        scopes=[(scope, catalog.SCOPE_DESCRIPTIONS.get(scope, scope)) for scope in scopes],
        businesses=businesses,
        hidden=hidden,
        csrf_token=csrf_token(cookies),
    )
    response = Response(html, content_type="text/html; charset=utf-8")
    response.headers["Cache-Control"] = "no-store"
    if redirects_to is not None:
        response.headers["Content-Security-Policy"] = page_csp(_source(redirects_to))
    return apply_cookies(response, cookies)


def _source(uri: str) -> str:
    """The CSP source that allows ``uri``'s origin. CSP has no form for an IPv6 literal (a
    loopback redirect URI such as ``http://[::1]:8080/cb``): its scheme stands in there; the
    form itself still posts only here, and the service redirects only to registered URIs."""
    parts = urlsplit(uri)
    if parts.netloc.startswith("["):
        return f"{parts.scheme}:"
    return f"{parts.scheme}://{parts.netloc}"
