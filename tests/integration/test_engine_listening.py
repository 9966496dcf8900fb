"""Two nodes on one PostgreSQL database: the delivery engine of one hears the other's commits
through LISTEN, and still does, within seconds, after its listening connection was lost (as when
PostgreSQL restarts): without listening again it would find them only at its slow poll."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio

from ledgerport import books
from ledgerport.engine import DeliveryEngine
from ledgerport.platform import Platform
from ledgerport.storage import Store, open_postgres

from ..stores import end_listening_backends, migrated_database
from .webhook_world import hooked

pytestmark = pytest.mark.postgres

TIMEOUT = 30
POLL = 120.0
"""The engine's safety-net poll: far beyond what the test waits for a delivery."""
HEARD_WITHIN = 10.0


@pytest.fixture
def backend() -> str:
    return "postgresql"


@pytest.fixture
async def database(asyncio_loop: object) -> AsyncIterator[str]:
    async with migrated_database() as url:
        yield url


@pytest.fixture
async def store(database: str) -> AsyncIterator[Store]:
    """This node's store (the platform's, the engine's and the test client's)."""
    async with open_postgres(database, max_size=5) as opened:
        yield opened


async def test_an_engine_hears_another_nodes_events_after_its_listening_connection_was_lost(
    platform: Platform, store: Store, database: str, client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"]) as hook,
            open_postgres(database, max_size=2) as other_node,
            trio.open_nursery() as nursery,
        ):
            engine = DeliveryEngine(platform, poll=POLL)
            await nursery.start(engine.run)
            business_id = hook.api.world.business_id

            async def customer_from_the_other_node(name: str) -> None:
                async with other_node.transaction() as tx:
                    await books.create_party(
                        tx,
                        now=platform.now(),
                        business_id=business_id,
                        kind="customer",
                        name=name,
                        email=None,
                    )

            await customer_from_the_other_node("Before")
            await hook.receiver.wait_for(1, within=HEARD_WITHIN)

            assert await end_listening_backends(other_node) == 1
            # Committed before or after this node noticed the loss: heard through the new
            # connection, or looked for when every listener is woken on listening again.
            await customer_from_the_other_node("After")
            await hook.receiver.wait_for(2, within=HEARD_WITHIN)
            nursery.cancel_scope.cancel()
    before, after = (request.body for request in hook.receiver.received)
    assert b'"Before"' in before
    assert b'"After"' in after
    assert store.statistics().listens_lost == 1
