"""Shared steps of the webhook tests: a business whose app holds every area scope, its
developer's console client, a real receiver, and a delivery engine driven one step at a time."""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from ledgerport import apps
from ledgerport.engine import DeliveryEngine
from ledgerport.platform import Platform
from ledgerport.storage import Store

from ..receiver import Receiver, receiving
from .data_api import Api, owner_api


@dataclass
class Console:
    """Calls ``/developer/*`` as the app's developer."""

    client: Any
    token: str
    app_id: str

    async def call(self, method: str, path: str, body: Any = None) -> Any:
        return await self.client.open(
            f"/developer/apps/{self.app_id}{path}",
            method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )

    async def ok(self, method: str, path: str, body: Any = None, status: int = 200) -> Any:
        response = await self.call(method, path, body)
        text = await response.get_data(as_text=True)
        assert response.status_code == status, (method, path, text)
        return json.loads(text) if text else None

    async def webhook(self, url: str, events: list[str], **extra: Any) -> dict[str, Any]:
        body = {"url": url, "events": events, **extra}
        return await self.ok("POST", "/webhooks", body, 201)  # type: ignore[no-any-return]

    async def deliveries(self, webhook_id: str) -> list[dict[str, Any]]:
        page = await self.ok("GET", f"/webhooks/{webhook_id}/deliveries")
        return page["data"]  # type: ignore[no-any-return]


async def console_for(client: Any, admin_headers: dict[str, str], api: Api) -> Console:
    response = await client.post(
        "/admin/developer-tokens", json={"userId": api.world.user_id}, headers=admin_headers
    )
    assert response.status_code == 201
    token = (await response.get_json())["token"]
    return Console(client, token, api.world.app_id)


@dataclass
class Hooked:
    """A business, its app with every scope installed, the app's console, a receiver and a
    webhook of the app subscribed to ``events`` that points at it."""

    api: Api
    console: Console
    receiver: Receiver
    webhook: dict[str, Any]


@asynccontextmanager
async def hooked(
    client: Any, admin_headers: dict[str, str], events: list[str], tls: ssl.SSLContext | None = None
) -> AsyncIterator[Hooked]:
    """``tls``: the receiver serves HTTPS with this server context."""
    api = await owner_api(client, admin_headers)
    console = await console_for(client, admin_headers, api)
    async with receiving(tls) as receiver:
        webhook = await console.webhook(receiver.url, events)
        yield Hooked(api, console, receiver, webhook)


@asynccontextmanager
async def engine_for(platform: Platform, **options: Any) -> AsyncIterator[DeliveryEngine]:
    """An engine running on ``platform``; its retries follow the schedule exactly (no jitter)
    unless ``spread`` is given, so that tests can step the clock through it."""
    options.setdefault("spread", None)
    engine = DeliveryEngine(platform, **options)
    async with engine.running():
        yield engine


async def deliver(engine: DeliveryEngine) -> None:
    """Fan out what was committed, attempt what is due, and wait for the outcomes."""
    await engine.dispatch_once()
    await engine.claim_once()
    await engine.settle()


# --- Endpoints' lifecycle (contract.md, third round) ---------------------------------------------


def configured(platform: Platform, **changes: Any) -> Platform:
    """``platform`` with its configuration changed (``webhook_retry_delays=(0,)``, a shorter
    ``webhook_disable_after``): for an engine or a scheduler, beside the served platform."""
    return replace(platform, config=replace(platform.config, **changes))


def iso(moment: float) -> str:
    """A moment as the console answers it: ISO 8601 in UTC, to the millisecond, ``Z``."""
    text = datetime.fromtimestamp(moment, UTC).isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")


async def endpoint(hook: Hooked) -> dict[str, Any]:
    """The hook's webhook as ``GET .../webhooks/{id}`` answers it now."""
    return await hook.console.ok("GET", f"/webhooks/{hook.webhook['id']}")  # type: ignore[no-any-return]


async def operational_events(store: Store, app_id: str) -> list[tuple[str, dict[str, Any]]]:
    """The app's operational events recorded, oldest first, as (type, data)."""
    async with store.transaction() as tx:
        events = await apps.operational_events(tx, app_id)
    return [(event.type, event.data) for event in reversed(events)]
