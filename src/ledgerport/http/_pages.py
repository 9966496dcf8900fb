"""Shared answers of the application host's HTML pages: problems, notices, the sign-in detour."""

from __future__ import annotations

from urllib.parse import urlencode

from quart import Response, redirect, render_template, request

PROBLEM_TITLE = "Authorization failed"
"""Title of the authorization and device pages' problem pages."""


async def html_page(
    template: str, *, status: int = 200, csp: str | None = None, **values: object
) -> Response:
    """``template`` rendered with ``values``: a page never cached; ``csp`` replaces the
    application's page policy."""
    html = await render_template(template, **values)
    response = Response(html, status=status, content_type="text/html; charset=utf-8")
    response.headers["Cache-Control"] = "no-store"
    if csp is not None:
        response.headers["Content-Security-Policy"] = csp
    return response


async def problem_page(message: str, status: int = 400, *, title: str = PROBLEM_TITLE) -> Response:
    """A page that shows what went wrong; it never redirects anywhere."""
    return await html_page("error.html", status=status, title=title, message=message)


async def notice_page(title: str, message: str, status: int = 200) -> Response:
    return await html_page("notice.html", status=status, title=title, message=message)


def login_redirect() -> Response:
    """To the sign-in form (303), returning to this page afterwards."""
    return redirect(f"/login?{urlencode({'next': request.full_path})}", 303)  # type: ignore[return-value]
