"""Issuing a session token, as the operator API and the app bridge both do."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12

from ledgerport import apps, auth

from ._context import platform, unit_of_work


@with_config(ConfigDict(extra="forbid"))
class SessionToken(TypedDict):
    """A session token (a JWT) for an embedded page, and when it expires (unix seconds)."""

    sessionToken: str
    expiresAt: int


async def session_token_answer(
    *, app_id: str, business_id: str, user_id: str, source: Literal["admin", "bridge"]
) -> SessionToken:
    """``{sessionToken, expiresAt}`` for the user viewing the app in the business; counted in
    the metrics by ``source``. Raises as ``auth.issue_session_token`` does."""
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
    p.metrics.session_tokens.labels(source).inc()
    return {"sessionToken": issued.token, "expiresAt": issued.expires_at}
