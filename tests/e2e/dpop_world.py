"""What the DPoP end-to-end tests set up through a served instance's operator API: a business,
its owner and a confidential app installed there with ``invoices:read``, and a session token to
exchange for the app's tokens."""

from __future__ import annotations

from typing import Any

import httpx


def answer(response: httpx.Response) -> dict[str, Any]:
    """The JSON of a 200 or 201 answer (the test fails on any other, showing the answer)."""
    assert response.status_code in (200, 201), response.text
    body: dict[str, Any] = response.json()
    return body


def provision(http: httpx.Client, admin_token: str, name: str) -> tuple[dict[str, Any], str]:
    """A business called ``name``, its owner, an app installed there; answers the app and a
    session token."""
    admin = {"Authorization": f"Bearer {admin_token}"}
    business = answer(http.post("/admin/businesses", json={"name": name}, headers=admin))
    email = f"{name.split()[0].lower()}@example.com"
    user = answer(
        http.post("/admin/users", json={"email": email, "password": "pw-12345678"}, headers=admin)
    )
    member = http.put(
        f"/admin/businesses/{business['id']}/members/{user['id']}",
        json={"role": "owner"},
        headers=admin,
    )
    assert member.status_code == 200, member.text
    app = answer(
        http.post(
            "/admin/apps",
            json={
                "name": "Agent",
                "type": "CONFIDENTIAL",
                "redirectUris": ["https://app.example/callback"],
                "scopes": ["invoices:read"],
                "developerUserId": user["id"],
                "reviewed": True,
            },
            headers=admin,
        )
    )
    ids = {"appId": app["id"], "businessId": business["id"], "userId": user["id"]}
    answer(
        http.post("/admin/installations", json={**ids, "scopes": ["invoices:read"]}, headers=admin)
    )
    session = answer(http.post("/admin/session-tokens", json=ids, headers=admin))
    return app, session["sessionToken"]
