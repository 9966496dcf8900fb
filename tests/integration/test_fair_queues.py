"""The fair claims read the tenants with due work with their app's developer, on both stores:
the engine's shares are the developer's, and an app with none (a client registered
dynamically) is its own developer."""

from __future__ import annotations

from typing import Any

import trio

from ledgerport import apps, queues
from ledgerport.platform import Platform

from ..receiver import receiving
from .data_api import owner_api
from .oauth_helpers import REDIRECT_URI
from .webhook_world import console_for

TIMEOUT = 30
QUICK = "export function handler(event) { return event.type }"


async def test_the_tenants_with_due_work_come_with_their_apps_developer(
    platform: Platform, client: Any, admin_headers: dict[str, str]
) -> None:
    p = platform
    with trio.fail_after(TIMEOUT):
        api = await owner_api(client, admin_headers)
        console = await console_for(client, admin_headers, api)
        async with receiving() as receiver:
            await console.webhook(receiver.url, ["customer.created"])
            await console.ok(
                "PUT", "/functions/quick", {"source": QUICK, "events": ["customer.created"]}
            )
            await api.customer("Due")
            async with p.store.transaction() as tx:
                now = p.now()
                # The event fanned out into a queued delivery and run, none taken at once.
                pending = await queues.pending_events(tx, 10)
                fanned = queues.plan_fan_out(
                    pending,
                    keyring=p.keyring,
                    now=now,
                    lease="nobody",
                    lease_until=now,
                    take=lambda app_id, webhook_id: False,
                )
                await queues.write_fan_out(tx, fanned)
                registered, _ = await apps.create_app(
                    tx,
                    p.keyring,
                    now=now,
                    name="Registered client",
                    type="PUBLIC",
                    redirect_uris=[REDIRECT_URI],
                    scopes=["customers:read"],
                    developer_user_id=None,
                )
                webhook, _ = await apps.create_webhook(
                    tx,
                    p.keyring,
                    now=now,
                    app_id=registered.id,
                    url=receiver.url,
                    events=["customer.created"],
                    development=True,
                )
                await queues.create_test_delivery(tx, now=now, webhook=webhook, pinned_version=None)
            async with p.store.transaction() as tx:
                deliveries = await queues.delivery_due_times(tx)
                runs = await queues.run_due_times(tx)
    world = api.world
    assert sorted(deliveries, key=lambda tenant: tenant.app_id) == sorted(
        [
            queues.DueTenant(world.user_id, world.app_id, "", now),
            queues.DueTenant(registered.id, registered.id, "", now),
        ],
        key=lambda tenant: tenant.app_id,
    )
    assert runs == [queues.DueTenant(world.user_id, world.app_id, world.business_id, now)]
