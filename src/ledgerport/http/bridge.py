"""The app bridge on the application host: session tokens for embedded app pages.

The service's page that frames an embedded app fetches a session token here with the signed-in
user's cookie and hands it to the app's frame. The answer is same-origin JSON (no CORS), never
cached, and only for an app ACTIVE-installed in a business where the user is an active member.
"""

from __future__ import annotations

from typing import Any

from quart import Blueprint, request

from ledgerport import apps, auth

from ._browser import current_user_id
from ._context import platform, unit_of_work
from ._errors import ApiError

blueprint = Blueprint("bridge", __name__)


@blueprint.get("/bridge/session-token")
async def session_token() -> tuple[dict[str, Any], int, dict[str, str]]:
    """A session token for the signed-in user viewing ``app_id`` in ``business_id``."""
    user_id = await current_user_id()
    if user_id is None:
        raise ApiError(401, "Sign in to view apps", code="NOT_SIGNED_IN")
    app_id = request.args.get("app_id", "")
    business_id = request.args.get("business_id", "")
    missing = [
        f"{name} is required" for name in ("app_id", "business_id") if not request.args.get(name)
    ]
    if missing:
        raise ApiError(400, missing)
    p = platform()
    async with unit_of_work() as tx:
        app = await apps.get_app(tx, app_id)
        issued = await auth.issue_session_token(
            tx,
            p.keyring,
            now=p.now(),
            issuer=p.config.base_url,
            app=app,
            business_id=business_id,
            user_id=user_id,
        )
    p.metrics.session_tokens.labels("bridge").inc()
    body = {"sessionToken": issued.token, "expiresAt": issued.expires_at}
    return body, 200, {"Cache-Control": "no-store", "Pragma": "no-cache"}
