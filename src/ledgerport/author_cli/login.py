"""``ledgerport login`` and ``ledgerport logout``: a developer token by the device flow.

``login`` starts a login at the server (``POST /cli/device/authorize``), prints the code and the
console address where the developer approves it, and polls (``POST /cli/device/token``) at the
interval the server asks, slower after ``slow_down``, until it gets the token, is denied, or the
code expires. ``logout`` revokes the token at the server (``DELETE /developer/token``) and
forgets it.
"""

from __future__ import annotations

import time

import click
import httpx

from ._client import default_timeout, server_message
from ._credentials import (
    DEFAULT_SERVER,
    CredentialsUnreadable,
    credentials_path,
    load_credentials,
    normal_server,
    save_credentials,
)
from ._group import CONTEXT, common
from ._output import Refused, console, emit_json

GRANT = "urn:ietf:params:oauth:grant-type:device_code"
SLOW_DOWN_STEP = 5


@click.command(context_settings=CONTEXT)
@common
def login(server: str | None, as_json: bool) -> None:
    """Sign in to a server by the device flow and keep a developer token.

    Prints a code and an address: open it signed in as the app's developer and approve the code.
    The token is kept in the credentials file (mode 0600); several servers are remembered, the
    last one signed in to is current.

    \b
    Example:
      ledgerport login --server http://127.0.0.1:8080
    """
    try:
        credentials = load_credentials()
    except CredentialsUnreadable as exc:
        raise Refused(str(exc)) from exc
    chosen = normal_server(server or credentials.current or DEFAULT_SERVER)
    with httpx.Client(base_url=chosen, timeout=default_timeout()) as client:
        started = _start(client, chosen)
        if as_json:
            emit_json({key: started[key] for key in _SHOWN})
        else:
            console().print(
                f"Open [bold]{started['verification_uri_complete']}[/bold]\n"
                f"and approve the code [bold]{started['user_code']}[/bold]"
                f" (valid {int(str(started['expires_in'])) // 60} minutes). Waiting..."
            )
        token = _wait_for_token(client, started)
    credentials.remember(chosen, token)
    path = save_credentials(credentials)
    if as_json:
        emit_json({"server": chosen, "credentials": str(path)})
    else:
        console().print(f"Signed in to {chosen}; the token is kept in {path}")


_SHOWN = ("user_code", "verification_uri", "verification_uri_complete", "expires_in")


def _start(client: httpx.Client, server: str) -> dict[str, object]:
    try:
        response = client.post("/cli/device/authorize")
    except httpx.HTTPError as exc:
        raise Refused(f"cannot reach {server}: {exc}") from exc
    if response.status_code != 200:
        raise Refused(server_message(response))
    started: dict[str, object] = response.json()
    return started


def _wait_for_token(client: httpx.Client, started: dict[str, object]) -> str:
    interval = float(str(started["interval"]))
    deadline = time.monotonic() + float(str(started["expires_in"]))
    form = {"grant_type": GRANT, "device_code": str(started["device_code"])}
    while time.monotonic() < deadline:
        time.sleep(interval)
        try:
            response = client.post("/cli/device/token", data=form)
        except httpx.HTTPError:
            continue  # a dropped connection: poll again at the next interval
        if response.status_code == 200:
            token: str = response.json()["access_token"]
            return token
        error = _oauth_error(response)
        if error == "authorization_pending":
            continue
        if error == "slow_down":
            interval += SLOW_DOWN_STEP
            continue
        if error == "access_denied":
            raise Refused("the login was denied in the console")
        if error == "expired_token":
            break
        raise Refused(server_message(response))
    raise Refused("the code expired before it was approved: run ledgerport login again")


def _oauth_error(response: httpx.Response) -> str | None:
    try:
        body = response.json()
    except ValueError:
        return None
    error = body.get("error") if isinstance(body, dict) else None
    return error if isinstance(error, str) else None


@click.command(context_settings=CONTEXT)
@common
def logout(server: str | None, as_json: bool) -> None:
    """Revoke the developer token at the server and forget it.

    \b
    Example:
      ledgerport logout --server http://127.0.0.1:8080
    """
    try:
        credentials = load_credentials()
    except CredentialsUnreadable as exc:
        raise Refused(str(exc)) from exc
    chosen = normal_server(server) if server else credentials.current
    token = credentials.token(chosen) if chosen else None
    if chosen is None or token is None:
        raise Refused(f"not signed in to {chosen or 'any server'}")
    revoked = True
    try:
        with httpx.Client(base_url=chosen, timeout=default_timeout()) as client:
            response = client.delete(
                "/developer/token", headers={"Authorization": f"Bearer {token}"}
            )
        # 401: the server no longer knows the token, which is what logout wants.
        if response.status_code not in (204, 401):
            raise Refused(server_message(response))
    except httpx.HTTPError:
        revoked = False
    credentials.forget(chosen)
    save_credentials(credentials)
    if as_json and revoked:
        emit_json({"server": chosen, "revoked": revoked, "credentials": str(credentials_path())})
    elif revoked:
        console().print(f"Signed out of {chosen}: the token is revoked and forgotten")
    else:
        raise Refused(
            f"the token is forgotten here, but {chosen} could not be reached to revoke it"
        )
