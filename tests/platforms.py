"""A Platform over a test store, configured the way a test needs it."""

from __future__ import annotations

from ledgerport.clock import Clock
from ledgerport.config import load
from ledgerport.platform import Platform, bootstrap
from ledgerport.storage import Store


async def build_platform(store: Store, clock: Clock, env: dict[str, str]) -> Platform:
    """Load ``env`` as the configuration, bootstrap the store's keys and build the Platform."""
    config = load({"LEDGERPORT_DATABASE_URL": "sqlite:///unused.db", **env})
    boot = await bootstrap(store, config)
    return Platform(
        config=config,
        store=store,
        keyring=boot.keyring,
        admin_token_hash=boot.admin_token_hash,
        clock=clock,
    )
