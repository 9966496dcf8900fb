"""A Platform over a test store, configured the way a test needs it."""

from __future__ import annotations

import functools

from ledgerport.clock import Clock
from ledgerport.config import load
from ledgerport.engine import StreamDesk, fetch_client_document
from ledgerport.platform import Platform, bootstrap
from ledgerport.storage import Store


async def build_platform(store: Store, clock: Clock, env: dict[str, str]) -> Platform:
    """Load ``env`` as the configuration and bootstrap the Platform over the store, with the
    delivery engine's half of stream endpoints, as a server has it."""
    config = load({"LEDGERPORT_DATABASE_URL": "sqlite:///unused.db", **env})
    platform = (await bootstrap(store, config, clock=clock)).platform
    platform.stream_desk = StreamDesk(platform)
    platform.document_fetch = functools.partial(fetch_client_document, config=config)
    return platform
