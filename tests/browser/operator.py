"""What the browser tests set up before a person opens a page: businesses, people, apps, their
listings, webhooks and extensions, through the operator API and the developer console API of
the served instance."""

from __future__ import annotations

import base64
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx

from ledgerport import catalog

PASSWORD = "correct horse battery staple"


@dataclass(frozen=True)
class Person:
    id: str
    email: str
    password: str = PASSWORD


@dataclass(frozen=True)
class MadeApp:
    id: str
    client_id: str
    client_secret: str
    developer: Person


@dataclass
class Operator:
    http: httpx.Client
    base: str

    @classmethod
    @contextmanager
    def for_server(cls, base: str, admin_token: str) -> Iterator[Operator]:
        with httpx.Client(
            base_url=base,
            timeout=10.0,
            trust_env=False,
            headers={"Authorization": f"Bearer {admin_token}"},
        ) as http:
            yield cls(http, base)

    def ok(self, method: str, path: str, body: Any = None, **headers: str) -> Any:
        response = self.http.request(method, path, json=body, headers=headers or None)
        assert response.status_code in (200, 201, 202, 204), (method, path, response.text)
        return response.json() if response.content else None

    def business(self, name: str, *, sandbox: bool = False) -> str:
        return str(self.ok("POST", "/admin/businesses", {"name": name, "sandbox": sandbox})["id"])

    def person(self, name: str, business_id: str | None = None, role: str = "owner") -> Person:
        email = f"{name.lower().replace(' ', '.')}.{secrets.token_hex(3)}@example.com"
        user = self.ok("POST", "/admin/users", {"email": email, "password": PASSWORD, "name": name})
        if business_id is not None:
            self.member(business_id, user["id"], role)
        return Person(user["id"], email)

    def member(self, business_id: str, user_id: str, role: str = "owner") -> None:
        self.ok("PUT", f"/admin/businesses/{business_id}/members/{user_id}", {"role": role})

    def app(
        self,
        developer: Person,
        *,
        name: str = "Books Sync",
        scopes: list[str],
        redirect_uri: str,
        app_url: str | None = None,
    ) -> MadeApp:
        body: dict[str, Any] = {
            "name": name,
            "type": "CONFIDENTIAL",
            "redirectUris": [redirect_uri],
            "scopes": scopes,
            "developerUserId": developer.id,
            "reviewed": True,
        }
        if app_url is not None:
            body["appUrl"] = app_url
        made = self.ok("POST", "/admin/apps", body)
        return MadeApp(made["id"], made["clientId"], made["clientSecret"], developer)

    def install(self, app: MadeApp, business_id: str, user: Person, scopes: list[str]) -> None:
        self.ok(
            "POST",
            "/admin/installations",
            {"appId": app.id, "businessId": business_id, "userId": user.id, "scopes": scopes},
        )

    def access_token(self, app: MadeApp, business_id: str, user: Person) -> str:
        """The app's access token for the business, from the exchange of a session token."""
        session = self.ok(
            "POST",
            "/admin/session-tokens",
            {"appId": app.id, "businessId": business_id, "userId": user.id},
        )
        basic = base64.b64encode(f"{app.client_id}:{app.client_secret}".encode()).decode()
        response = httpx.post(
            f"{self.base}/oauth/token",
            data={
                "grant_type": catalog.GRANT_TOKEN_EXCHANGE,
                "subject_token": session["sessionToken"],
                "subject_token_type": catalog.TOKEN_TYPE_JWT,
            },
            headers={"Authorization": f"Basic {basic}"},
            timeout=10.0,
            trust_env=False,
        )
        assert response.status_code == 200, response.text
        return str(response.json()["access_token"])

    def console(self, app: MadeApp) -> Console:
        token = self.ok("POST", "/admin/developer-tokens", {"userId": app.developer.id})["token"]
        return Console(self, app.id, token)

    def list_live(self, app: MadeApp, listing: dict[str, Any]) -> None:
        """Save the app's listing, submit it and have it approved: it goes live."""
        console = self.console(app)
        saved = console.ok("PUT", "/listing", listing)
        console.ok("POST", "/listing/submit")
        for action in ("start", "approve"):
            self.ok(
                "POST",
                f"/admin/listing-revisions/{saved['draft']['id']}/review",
                {"action": action},
            )


@dataclass
class Console:
    """The developer console API, as the app's developer."""

    operator: Operator
    app_id: str
    token: str

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        return self.operator.ok(
            method,
            f"/developer/apps/{self.app_id}{path}",
            body,
            Authorization=f"Bearer {self.token}",
        )
