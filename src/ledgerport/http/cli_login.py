"""Signing the ``ledgerport`` command in by the device flow (RFC 8628), for a developer token.

The command starts a login here without credentials, shows the user code, and polls until the
developer approves it in the console (``POST /developer/cli-logins``, ``developer/cli_logins``).
Answers and errors are RFC 8628's (the OAuth envelope), so that any device-flow client reads
them; the codes name no app, since the token acts as the developer (``auth/_cli_logins.py``).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field, with_config
from quart import Blueprint, Response
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12

from ledgerport import auth, catalog, storage

from ._context import client_ip, platform, unit_of_work
from ._envelopes import oauth_response
from ._oauth_client import read_form, required_param
from ._oauth_guard import oauth_guard
from ._oauth_shapes import DeviceAuthorization
from ._openapi import FORM, NO_STORE, Body, json_reply, operation

blueprint = Blueprint("cli_login", __name__)

VERIFICATION_PATH = "/console/cli-login"
"""Where, on the application host, the developer enters the user code (the console)."""


@with_config(ConfigDict(extra="forbid"))
class DeveloperTokenIssued(TypedDict):
    """The developer token: it acts as the developer on ``/developer/*`` until revoked."""

    access_token: str
    token_type: str


class CliLoginPoll(TypedDict):
    grant_type: Annotated[str, Field(description=catalog.GRANT_DEVICE_CODE)]
    device_code: Annotated[str, Field(min_length=1)]


_REFUSALS = (auth.InvalidRequest, auth.RateLimited, storage.StorageUnavailable)


@blueprint.post("/cli/device/authorize")
@operation(
    json_reply(
        200, DeviceAuthorization, "A device code to poll, a user code to approve", *NO_STORE
    ),
    raises=_REFUSALS,
)
async def start() -> Response:
    """Start signing the command line in: no credentials; limited per address."""
    await oauth_guard().unauthenticated("device", client_ip())
    p = platform()
    async with unit_of_work() as tx:
        login = await auth.start_cli_login(tx, p.keyring, now=p.now())
    verification_uri = f"{p.config.auth_url}{VERIFICATION_PATH}"
    answer: DeviceAuthorization = {
        "device_code": login.device_code,
        "user_code": login.user_code,
        "verification_uri": verification_uri,
        "verification_uri_complete": f"{verification_uri}?user_code={login.user_code}",
        "expires_in": login.expires_in,
        "interval": login.interval,
    }
    return oauth_response(answer)


@blueprint.post("/cli/device/token")
@operation(
    json_reply(200, DeveloperTokenIssued, "The developer token", *NO_STORE),
    raises=(
        *_REFUSALS,
        auth.AuthorizationPending,
        auth.SlowDown,
        auth.AccessDenied,
        auth.ExpiredToken,
        auth.InvalidGrant,
        auth.UnsupportedGrantType,
    ),
    bodies=(Body(FORM, CliLoginPoll),),
)
async def poll() -> Response:
    """Poll a started login: the developer token once approved (once), else RFC 8628's
    ``authorization_pending``, ``slow_down``, ``access_denied`` or ``expired_token``."""
    await oauth_guard().unauthenticated("token", client_ip())
    form = await read_form()
    if required_param(form, "grant_type") != catalog.GRANT_DEVICE_CODE:
        raise auth.UnsupportedGrantType(f"grant_type must be {catalog.GRANT_DEVICE_CODE}")
    device_code = required_param(form, "device_code")
    p = platform()
    async with unit_of_work() as tx:
        outcome = await auth.redeem_cli_login(tx, p.keyring, now=p.now(), device_code=device_code)
    if outcome.error is not None:
        raise outcome.error
    assert outcome.token is not None
    return oauth_response({"access_token": outcome.token, "token_type": "Bearer"})
