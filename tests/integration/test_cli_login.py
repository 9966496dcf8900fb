"""Signing the ``ledgerport`` command in by the device flow: a developer token, minted once the
developer approves the user code in the console, acting as that developer on ``/developer/*``,
revoked by ``DELETE /developer/token``. Time moves only through the frozen clock."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from .oauth_helpers import login, make_world

GRANT = "urn:ietf:params:oauth:grant-type:device_code"
APP_HOST = "http://app.ledgerport.test"
SAME_ORIGIN = {"Sec-Fetch-Site": "same-origin"}
TIMEOUT = 60


async def _start(client: Any) -> dict[str, Any]:
    response = await client.post("/cli/device/authorize")
    assert response.status_code == 200
    assert response.headers["Cache-Control"] == "no-store"
    started: dict[str, Any] = await response.get_json()
    return started


async def _poll(client: Any, device_code: str) -> Any:
    return await client.post(
        "/cli/device/token", form={"grant_type": GRANT, "device_code": device_code}
    )


async def test_an_approved_login_gets_a_developer_token_once_and_logout_revokes_it(
    client: Any, admin_headers: dict[str, str], clock: Any
) -> None:
    with trio.fail_after(TIMEOUT):
        world = await make_world(client, admin_headers)
        started = await _start(client)
        pending = await _poll(client, started["device_code"])
        too_fast = await _poll(client, started["device_code"])
        await login(client, world)
        decided = await client.post(
            "/developer/cli-logins", json={"userCode": started["user_code"]}, headers=SAME_ORIGIN
        )
        clock.advance(started["interval"] + 6)
        issued = await _poll(client, started["device_code"])
        again = await _poll(client, started["device_code"])
        token = (await issued.get_json())["access_token"]
        await client.get("/logout")
        bearer = {"Authorization": f"Bearer {token}"}
        apps = await client.get("/developer/apps", headers=bearer)
        revoked = await client.delete("/developer/token", headers=bearer)
        after = await client.get("/developer/apps", headers=bearer)

    assert started["verification_uri"] == f"{APP_HOST}/console/cli-login"
    assert started["verification_uri_complete"].endswith(f"?user_code={started['user_code']}")
    assert (started["expires_in"], started["interval"]) == (600, 5)
    assert pending.status_code == 400
    assert (await pending.get_json())["error"] == "authorization_pending"
    assert (await too_fast.get_json())["error"] == "slow_down"
    assert decided.status_code == 204
    assert issued.status_code == 200
    assert token.startswith("lp_dev_")
    assert (await again.get_json())["error"] == "invalid_grant"
    assert apps.status_code == 200
    assert [app["id"] for app in (await apps.get_json())["data"]] == [world.app_id]
    assert revoked.status_code == 204
    assert after.status_code == 401


async def test_a_denied_login_is_told_once_and_an_expired_one_is_expired(
    client: Any, admin_headers: dict[str, str], clock: Any
) -> None:
    with trio.fail_after(TIMEOUT):
        world = await make_world(client, admin_headers)
        denied, expired = await _start(client), await _start(client)
        await login(client, world)
        decided = await client.post(
            "/developer/cli-logins",
            json={"userCode": denied["user_code"].lower(), "decision": "deny"},
            headers=SAME_ORIGIN,
        )
        refused = await _poll(client, denied["device_code"])
        clock.advance(601)
        late = await _poll(client, expired["device_code"])
        too_late = await client.post(
            "/developer/cli-logins", json={"userCode": expired["user_code"]}, headers=SAME_ORIGIN
        )

    assert decided.status_code == 204
    assert (await refused.get_json())["error"] == "access_denied"
    assert (await late.get_json())["error"] == "expired_token"
    assert too_late.status_code == 404
    assert (await too_late.get_json())["code"] == "CLI_LOGIN_NOT_FOUND"


@pytest.mark.parametrize(
    ("form", "error"),
    [
        ({}, "invalid_request"),
        ({"grant_type": "password", "device_code": "x"}, "unsupported_grant_type"),
        ({"grant_type": GRANT, "device_code": "lp_dc_unknown"}, "invalid_grant"),
    ],
)
async def test_a_bad_poll_is_an_oauth_error(client: Any, form: dict[str, str], error: str) -> None:
    response = await client.post("/cli/device/token", form=form)

    assert response.status_code == 400
    assert (await response.get_json())["error"] == error


async def test_approving_needs_a_signed_in_developer_from_the_service(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        world = await make_world(client, admin_headers)
        started = await _start(client)
        anonymous = await client.post(
            "/developer/cli-logins", json={"userCode": started["user_code"]}, headers=SAME_ORIGIN
        )
        await login(client, world)
        cross_site = await client.post(
            "/developer/cli-logins",
            json={"userCode": started["user_code"]},
            headers={"Origin": "https://attacker.example"},
        )
        cookie_logout = await client.delete("/developer/token", headers=SAME_ORIGIN)

    assert anonymous.status_code == 401
    assert cross_site.status_code == 403
    assert cookie_logout.status_code == 401
