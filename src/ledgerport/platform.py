"""The running platform's shared parts, and their first-start bootstrap.

:class:`Platform` is what every request handler and engine task reaches the store, the clock, the
keys and the metrics through; it is built once by the supervisor (or by a test).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ledgerport.auth import ADMIN_TOKEN_PREFIX, Keyring, new_root_key, new_token
from ledgerport.clock import Clock, SystemClock
from ledgerport.config import Config
from ledgerport.ops import Metrics
from ledgerport.storage import Store, Transaction


@dataclass
class Platform:
    config: Config
    store: Store
    keyring: Keyring
    admin_token_hash: str
    clock: Clock = field(default_factory=SystemClock)
    metrics: Metrics = field(default_factory=Metrics)

    def now(self) -> float:
        return self.clock.now()


async def _setting_once(tx: Transaction, key: str, value: str) -> str:
    """Store ``value`` under ``key`` unless one is there; answers the value that stands."""
    await tx.execute(
        "INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
        key,
        value,
    )
    stored: str = await tx.fetchval("SELECT value FROM settings WHERE key = $1", key)
    return stored


@dataclass(frozen=True)
class Bootstrap:
    keyring: Keyring
    admin_token_hash: str
    new_admin_token: str | None  # generated now: to be printed once, never stored in clear


async def bootstrap(store: Store, config: Config) -> Bootstrap:
    """The root key and the admin token: from the environment, else generated once and stored."""
    async with store.transaction() as tx:
        root_key = config.secret_key or await _setting_once(tx, "secret_key", new_root_key())
        keyring = Keyring(root_key)
        if config.admin_token is not None:
            return Bootstrap(keyring, keyring.hash_token(config.admin_token), None)
        candidate = new_token(ADMIN_TOKEN_PREFIX)
        candidate_hash = keyring.hash_token(candidate)
        # Keyed by the root key's fingerprint: a new root key makes a new admin token.
        slot = f"admin_token_hash:{keyring.hash_token('')[:16]}"
        stored_hash = await _setting_once(tx, slot, candidate_hash)
    return Bootstrap(keyring, stored_hash, candidate if stored_hash == candidate_hash else None)
