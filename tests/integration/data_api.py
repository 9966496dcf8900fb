"""Shared steps of the data API tests: a business whose app holds every area scope, and a
client that calls the API with a member's access token."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from ledgerport import catalog

from .oauth_helpers import World, add_member, full_grant, install, make_world

ALL_SCOPES = tuple(s for s in catalog.SCOPES if s != "profile:read")
LINE = {"description": "Consulting", "quantity": "2", "unitPrice": "150.50"}


@dataclass
class Api:
    """Calls the data API as one member of the business, through the test client."""

    client: Any
    token: str
    world: World

    def headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", **(extra or {})}

    async def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
        query: dict[str, str] | None = None,
    ) -> Any:
        return await self.client.open(
            path,
            method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers=self.headers({"Content-Type": "application/json", **(headers or {})}),
            query_string=query,
        )

    async def ok(self, method: str, path: str, body: Any = None, status: int = 200) -> Any:
        """Call and expect ``status``; answers the JSON body."""
        response = await self.call(method, path, body)
        text = await response.get_data(as_text=True)
        assert response.status_code == status, (method, path, text)
        return json.loads(text) if text else None

    async def customer(self, name: str = "Acme Trading") -> dict[str, Any]:
        return await self.ok("POST", "/customers", {"name": name}, 201)  # type: ignore[no-any-return]

    async def invoice(self, customer_id: str, **extra: Any) -> dict[str, Any]:
        body = {"customerId": customer_id, "lines": [LINE], **extra}
        return await self.ok("POST", "/invoices", body, 201)  # type: ignore[no-any-return]


async def owner_api(client: Any, admin_headers: dict[str, str], **world: Any) -> Api:
    """The owner of a new business, its app installed with every area scope."""
    made = await make_world(client, admin_headers, scopes=ALL_SCOPES, **world)
    tokens = await full_grant(client, made, scope=" ".join(ALL_SCOPES))
    return Api(client, tokens["access_token"], made)


async def member_api(client: Any, admin_headers: dict[str, str], owner: Api, role: str) -> Api:
    """A member with ``role`` in the owner's business, consenting within the installation."""
    await install(client, admin_headers, owner.world, ALL_SCOPES)
    user_id, email, password = await add_member(client, admin_headers, owner.world, role)
    member = replace(owner.world, user_id=user_id, email=email, password=password)
    tokens = await full_grant(client, member, scope=" ".join(ALL_SCOPES))
    return Api(client, tokens["access_token"], member)
