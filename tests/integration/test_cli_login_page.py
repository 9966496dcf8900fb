"""The page that signs the ``ledgerport`` command in (``/console/cli-login``): the address
``ledgerport login`` prints. A signed-in developer approves or denies the code there, with the
form's CSRF token, and the command's next poll learns which."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

import pytest
import trio

from .oauth_helpers import login, make_world

GRANT = "urn:ietf:params:oauth:grant-type:device_code"
TIMEOUT = 60


async def start(client: Any) -> dict[str, Any]:
    response = await client.post("/cli/device/authorize")
    assert response.status_code == 200
    started: dict[str, Any] = await response.get_json()
    return started


async def poll(client: Any, device_code: str) -> Any:
    return await client.post(
        "/cli/device/token", form={"grant_type": GRANT, "device_code": device_code}
    )


def page_path(started: dict[str, Any]) -> str:
    parts = urlsplit(started["verification_uri_complete"])
    return f"{parts.path}?{parts.query}"


async def open_form(client: Any, path: str) -> tuple[str, str]:
    """The form's page and its CSRF token."""
    response = await client.get(path)
    page = await response.get_data(as_text=True)
    assert response.status_code == 200, page
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert csrf is not None
    return page, csrf[1]


async def test_a_visitor_is_sent_to_sign_in_and_back(client: Any) -> None:
    started = await start(client)
    response = await client.get(page_path(started))
    assert response.status_code == 303
    location = response.headers["Location"]
    assert location.startswith("/login?")
    assert "cli-login" in location


@pytest.mark.parametrize(("decision", "title"), [("approve", "signed in"), ("deny", "denied")])
async def test_the_developer_decides_and_the_command_learns_it(
    client: Any, admin_headers: dict[str, str], clock: Any, decision: str, title: str
) -> None:
    with trio.fail_after(TIMEOUT):
        world = await make_world(client, admin_headers)
        started = await start(client)
        await login(client, world)
        page, csrf = await open_form(client, page_path(started))
        decided = await client.post(
            "/console/cli-login",
            form={"csrf_token": csrf, "user_code": started["user_code"], "decision": decision},
        )
        answer = await decided.get_data(as_text=True)
        clock.advance(started["interval"] + 1)
        polled = await poll(client, started["device_code"])
    assert f'value="{started["user_code"]}"' in page
    assert world.email in page
    assert "ledgerport logout" in page
    assert decided.status_code == 200, answer
    assert title in answer.lower()
    body = await polled.get_json()
    if decision == "approve":
        assert polled.status_code == 200, body
        assert body["access_token"].startswith("lp_dev_")
    else:
        assert body["error"] == "access_denied"


async def test_a_wrong_code_is_the_form_again_and_counts(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        world = await make_world(client, admin_headers)
        await login(client, world)
        _, csrf = await open_form(client, "/console/cli-login")
        answers = []
        for _ in range(11):
            response = await client.post(
                "/console/cli-login",
                form={"csrf_token": csrf, "user_code": "BCDF-GHJK", "decision": "approve"},
            )
            answers.append(response)
    first = await answers[0].get_data(as_text=True)
    assert answers[0].status_code == 400
    assert "not waiting for approval" in first
    assert 'aria-invalid="true"' in first
    assert answers[-1].status_code == 429
    assert int(answers[-1].headers["Retry-After"]) > 0


async def test_without_the_forms_token_nothing_is_decided(
    client: Any, admin_headers: dict[str, str], clock: Any
) -> None:
    with trio.fail_after(TIMEOUT):
        world = await make_world(client, admin_headers)
        started = await start(client)
        await login(client, world)
        refused = await client.post(
            "/console/cli-login",
            form={"user_code": started["user_code"], "decision": "approve"},
            headers={"Sec-Fetch-Site": "cross-site"},
        )
        clock.advance(started["interval"] + 1)
        polled = await poll(client, started["device_code"])
    assert refused.status_code == 400
    assert (await polled.get_json())["error"] == "authorization_pending"
