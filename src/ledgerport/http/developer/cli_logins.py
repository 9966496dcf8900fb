"""The developer's side of signing the command line in: approving (or denying) the user code
the ``ledgerport`` command shows (``http/cli_login.py`` starts and redeems it), and revoking the
developer token a request carries (``ledgerport logout``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from quart import Response
from quart_schema import validate_request

from ledgerport import auth, storage

from .._context import bearer_token, client_ip, platform, unit_of_work
from .._oauth_guard import oauth_guard
from .._openapi import JSON_BODY_ERRORS, Reply, operation
from ._blueprint import blueprint, developer_id


class CliLoginDecision(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    userCode: str = Field(
        min_length=1, max_length=32, description="The code the command shows, as BCDF-GHJK"
    )
    decision: Literal["approve", "deny"] = Field(
        default="approve", description="approve: the command gets a developer token"
    )


@blueprint.post("/cli-logins")
@validate_request(CliLoginDecision)
@operation(
    Reply(204, "Decided: the command's next poll gets the token, or access_denied"),
    raises=(*JSON_BODY_ERRORS, auth.CliLoginNotFound, auth.RateLimited, storage.BadValue),
)
async def decide_cli_login(data: CliLoginDecision) -> Response:
    """Approve (or deny) the ``ledgerport login`` showing ``userCode``: approved, the command
    gets a developer token acting as the caller. Wrong codes count against the address and the
    developer as on the device page, so codes cannot be guessed at any useful rate."""
    guard, ip, user_id = oauth_guard(), client_ip(), developer_id()
    wait = await guard.user_code_wait(ip, user_id)
    if wait is not None:
        raise auth.RateLimited(wait)
    p = platform()
    async with unit_of_work() as tx:
        decided = await auth.decide_cli_login(
            tx,
            p.keyring,
            now=p.now(),
            user_code=data.userCode,
            user_id=user_id,
            approve=data.decision == "approve",
        )
    if not decided:
        await guard.wrong_user_code(ip, user_id)
        raise auth.CliLoginNotFound()
    return Response("", status=204)


@blueprint.delete("/token")
@operation(
    Reply(204, "The developer token this request carries no longer works"),
    raises=(auth.NotSignedIn,),
)
async def revoke_developer_token() -> Response:
    """Revoke the developer token the request is authenticated by (``ledgerport logout``);
    a session cookie has no token to revoke."""
    token = bearer_token()
    if token is None:
        raise auth.NotSignedIn("Only a developer token can be revoked here")
    p = platform()
    async with unit_of_work() as tx:
        await auth.revoke_developer_token(tx, p.keyring, token)
    return Response("", status=204)
