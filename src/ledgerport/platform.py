"""The running platform's shared parts, built once at start by :func:`bootstrap`.

:class:`Platform` is what every request handler and engine task reaches the store, the clock, the
keys, the password hasher and the metrics through. The server, the tests and the benchmarks all
get theirs from :func:`bootstrap`, which also settles the root key and the admin token.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ledgerport import catalog
from ledgerport.auth import Keyring, Passwords, new_root_key, new_token
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
    passwords: Passwords
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
    platform: Platform
    new_admin_token: str | None  # generated now: to be printed once, never stored in clear


async def bootstrap(store: Store, config: Config, *, clock: Clock | None = None) -> Bootstrap:
    """The Platform over ``store``: the root key and the admin token come from the
    environment, else are generated once and stored."""
    async with store.transaction() as tx:
        root_key = config.secret_key or await _setting_once(tx, "secret_key", new_root_key())
        keyring = Keyring(root_key)
        new_admin_token = None
        if config.admin_token is not None:
            admin_token_hash = keyring.hash_token(config.admin_token)
        else:
            candidate = new_token(catalog.ADMIN_TOKEN_PREFIX)
            candidate_hash = keyring.hash_token(candidate)
            # Keyed by the root key's fingerprint: a new root key makes a new admin token.
            slot = f"admin_token_hash:{keyring.hash_token('')[:16]}"
            admin_token_hash = await _setting_once(tx, slot, candidate_hash)
            if admin_token_hash == candidate_hash:
                new_admin_token = candidate
    platform = Platform(
        config=config,
        store=store,
        keyring=keyring,
        admin_token_hash=admin_token_hash,
        passwords=Passwords(config.password_hashing),
        clock=clock or SystemClock(),
    )
    return Bootstrap(platform, new_admin_token)
