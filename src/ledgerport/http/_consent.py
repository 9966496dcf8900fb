"""The consent form shared by the authorization page and the device verification page."""

from __future__ import annotations

from collections.abc import Sequence

from quart import Response, render_template

from ledgerport import apps, books

from ._browser import apply_cookies, csrf_token


async def consent_page(
    *,
    action: str,
    app: apps.App,
    scopes: Sequence[str],
    businesses: Sequence[books.Business],
    hidden: dict[str, str],
) -> Response:
    """The app's name, the requested scopes, a ``business_id`` select and approve/deny buttons;
    the form posts back to ``action`` with ``hidden`` fields and a CSRF token."""
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
