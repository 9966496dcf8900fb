"""The running platform's shared parts, built once at start by :func:`bootstrap`.

:class:`Platform` is what every request handler and engine task reaches the store, the clock, the
keys, the password hasher, the rate limiter and the metrics through. The server, the tests and the
benchmarks all get theirs from :func:`bootstrap`, which also settles the root key and the admin
token.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ledgerport import catalog
from ledgerport.apps import AppDirectory
from ledgerport.auth import (
    Keyring,
    MemoryRateLimiter,
    Passwords,
    RateLimiter,
    ScaledRateLimiter,
    SettlingRateLimiter,
    StoreRateLimiter,
    connect_redis_limiter,
    new_root_key,
    new_token,
)
from ledgerport.clock import Clock, SystemClock
from ledgerport.config import Config, ConfigError
from ledgerport.keys import KeyFileError, create_key_file, read_key_file
from ledgerport.ops import Metrics, Services
from ledgerport.storage import Store, Transaction


@dataclass
class Platform:
    config: Config
    store: Store
    keyring: Keyring
    admin_token_hash: str
    passwords: Passwords
    limiter: RateLimiter
    clock: Clock = field(default_factory=SystemClock)
    metrics: Metrics = field(default_factory=Metrics)
    services: Services = field(default_factory=Services)
    """The long-lived services this process runs, and whether each runs now (``/readyz``)."""
    app_directory: AppDirectory = field(init=False)
    """Apps by client_id for client authentication: kept while the server listens for their
    changes (``serve``), read from the store otherwise."""

    def __post_init__(self) -> None:
        self.metrics.watch_store(self.store.statistics)
        settling = self.settling_limiter()
        if settling is not None:
            self.metrics.watch_limiter(settling.statistics)
        self.app_directory = AppDirectory(self.clock)

    def now(self) -> float:
        return self.clock.now()

    def settling_limiter(self) -> SettlingRateLimiter | None:
        """The limiter whose counts are settled in the background (``serve`` runs it), if
        the limits are counted so."""
        limiter = self.limiter
        if isinstance(limiter, ScaledRateLimiter):
            limiter = limiter.inner
        return limiter if isinstance(limiter, SettlingRateLimiter) else None


async def _setting_once(tx: Transaction, key: str, value: str) -> str:
    """Store ``value`` under ``key`` unless one is there; answers the value that stands."""
    await tx.execute(
        "INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
        key,
        value,
    )
    stored: str = await tx.fetchval("SELECT value FROM settings WHERE key = $1", key)
    return stored


class RootKeyError(ConfigError):
    """The root key is missing, unusable, or not the one the database was set up with."""


_LEGACY_KEY_SETTING = "secret_key"
"""Where the generated root key used to be kept, inside the database; moved out at start."""
_KEY_CHECK_SETTING = "root_key_check"


def _root_key(config: Config, legacy: str | None) -> str:
    """The root key: LEDGERPORT_SECRET_KEY, else the key file (created with the key the
    database held, or a new one); never from the database alone."""
    try:
        if config.secret_key is not None:
            if legacy is not None and legacy != config.secret_key:
                raise RootKeyError(
                    "LEDGERPORT_SECRET_KEY is not the root key this database was set up with"
                )
            return config.secret_key
        if config.secret_key_file is None:
            config.require_root_key()
        assert config.secret_key_file is not None
        key = read_key_file(config.secret_key_file)
        if key is None:
            return create_key_file(config.secret_key_file, legacy or new_root_key())
        if legacy is not None and legacy != key:
            raise RootKeyError(
                f"{config.secret_key_file} holds another root key than this database was set"
                " up with"
            )
        return key
    except KeyFileError as exc:
        raise RootKeyError(str(exc)) from exc
    except RootKeyError:
        raise
    except ConfigError as exc:
        hint = (
            "; this database still holds its root key: set LEDGERPORT_SECRET_KEY_FILE to a new"
            " file and it is moved there"
            if legacy is not None
            else ""
        )
        raise RootKeyError(f"{exc}{hint}") from exc


async def _limiter(store: Store, config: Config, clock: Clock, keyring: Keyring) -> RateLimiter:
    """Where the rate limits and lockouts are counted: Redis when configured, else the database
    on PostgreSQL (every process serving it shares the counts; the large budgets counted in the
    process and settled in batches, see ``SettlingRateLimiter``), else this process (SQLite)."""
    limiter: RateLimiter
    if config.redis_url is not None:
        limiter = await connect_redis_limiter(config.redis_url, clock, keyring)
    elif store.kind == "postgresql":
        limiter = SettlingRateLimiter(StoreRateLimiter(store, clock, keyring), clock)
    else:
        limiter = MemoryRateLimiter(clock)
    if config.rate_limit_factor != 1:
        limiter = ScaledRateLimiter(limiter, config.rate_limit_factor)
    return limiter


@dataclass(frozen=True)
class Bootstrap:
    platform: Platform
    new_admin_token: str | None  # generated now: to be printed once, never stored in clear


async def bootstrap(store: Store, config: Config, *, clock: Clock | None = None) -> Bootstrap:
    """The Platform over ``store``.

    The root key comes from LEDGERPORT_SECRET_KEY or the key file (generated once, mode 0600);
    a key an earlier version kept in the database is moved to the key file and deleted there.
    The database keeps only a check value of the key: a start with another key fails with
    RootKeyError instead of silently invalidating every stored token and secret. The admin token
    comes from LEDGERPORT_ADMIN_TOKEN, else is generated once and only its keyed hash stored.
    The rate limiter is chosen by the store and the configuration (``_limiter``); Redis must
    answer at start (StorageUnavailable otherwise).
    """
    async with store.transaction() as tx:
        legacy = await tx.fetchval("SELECT value FROM settings WHERE key = $1", _LEGACY_KEY_SETTING)
    keyring = Keyring(_root_key(config, legacy))
    async with store.transaction() as tx:
        check = await _setting_once(tx, _KEY_CHECK_SETTING, keyring.key_check())
        if check != keyring.key_check():
            raise RootKeyError(
                "the root key is not the one this database was set up with: every stored token"
                " and secret would fail to open; start with the original key"
            )
        await tx.execute("DELETE FROM settings WHERE key = $1", _LEGACY_KEY_SETTING)
        new_admin_token = None
        if config.admin_token is not None:
            admin_token_hash = keyring.hash_token(config.admin_token)
        else:
            candidate = new_token(catalog.ADMIN_TOKEN_PREFIX)
            candidate_hash = keyring.hash_token(candidate)
            # The slot is named by the root key's fingerprint, as the database has always had it.
            slot = f"admin_token_hash:{keyring.hash_token('')[:16]}"
            admin_token_hash = await _setting_once(tx, slot, candidate_hash)
            if admin_token_hash == candidate_hash:
                new_admin_token = candidate
    clock = clock or SystemClock()
    platform = Platform(
        config=config,
        store=store,
        keyring=keyring,
        admin_token_hash=admin_token_hash,
        passwords=Passwords(config.password_hashing),
        limiter=await _limiter(store, config, clock, keyring),
        clock=clock,
    )
    return Bootstrap(platform, new_admin_token)
