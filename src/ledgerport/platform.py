"""The running platform's shared parts, built once at start by :func:`bootstrap`.

:class:`Platform` is what every request handler and engine task reaches the store, the clock, the
keys, the password hasher, the rate limiter and the metrics through. The server, the tests and the
benchmarks all get theirs from :func:`bootstrap`, which also settles the root key and the admin
token.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ledgerport import catalog
from ledgerport.apps import AppDirectory
from ledgerport.auth import (
    DocumentFetch,
    DpopNonces,
    Keyring,
    MemoryRateLimiter,
    Passwords,
    ProofLedger,
    RateLimiter,
    RedisConnection,
    ScaledRateLimiter,
    SettlingRateLimiter,
    StoreRateLimiter,
    connect_redis,
    connect_redis_limiter,
    new_root_key,
    new_token,
    proof_ledger,
)
from ledgerport.clock import Clock, SystemClock
from ledgerport.config import Config, ConfigError
from ledgerport.keys import KeyFileError, create_key_file, read_key_file
from ledgerport.ops import Metrics, Services
from ledgerport.queues import StreamDesk
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
    proofs: ProofLedger | None = None
    """Where DPoP proofs' ids are recorded to be used once (Redis when configured, else the
    store: :func:`bootstrap` chooses)."""
    document_fetch: DocumentFetch | None = None
    """How client ID metadata documents are fetched (the webhook engine's client, which checks
    each address it connects to: ``serve`` sets it); None refuses such clients."""
    dpop_nonces: DpopNonces | None = field(init=False)
    """The server nonces DPoP proofs must carry (LEDGERPORT_DPOP_NONCE=on), else None."""
    stream_desk: StreamDesk | None = None
    """The delivery engine's half of stream endpoints (``engine.StreamDesk``), set by whoever
    runs the engine (``serve``): the console API's stream routes lease and record through it."""
    app_directory: AppDirectory = field(init=False)
    """Apps by client_id for client authentication: kept while the server listens for their
    changes (``serve``), read from the store otherwise."""

    def __post_init__(self) -> None:
        self.metrics.watch_store(self.store.statistics)
        settling = self.settling_limiter()
        if settling is not None:
            self.metrics.watch_limiter(settling.statistics)
        self.app_directory = AppDirectory(self.clock)
        if self.proofs is None:
            self.proofs = proof_ledger(self.store, self.keyring, self.clock, None)
        self.dpop_nonces = DpopNonces(self.keyring) if self.config.dpop_nonce else None

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


def check_root_key(config: Config) -> None:
    """Raise RootKeyError unless the root key can be had without surprises: a key file that is
    there must be one the service may use, and one that is not must be possible to create.
    A start checks this before it writes anything (``serve``)."""
    path = config.secret_key_file
    if config.secret_key is not None or path is None:
        return
    try:
        if read_key_file(path) is not None:
            return
    except KeyFileError as exc:
        raise RootKeyError(str(exc)) from exc
    existing = os.path.dirname(os.path.abspath(path))
    while not os.path.isdir(existing):
        existing = os.path.dirname(existing)
    if not os.access(existing, os.W_OK | os.X_OK):
        raise RootKeyError(
            f"LEDGERPORT_SECRET_KEY_FILE: cannot create the root key file {path}: {existing}"
            " is not writable by this user; choose a file in a directory of the service's own"
        )


@dataclass(frozen=True)
class _RootKey:
    key: str
    create: bool
    """The key file is to be written with it (it does not exist yet)."""


def _root_key(config: Config, legacy: str | None, *, set_up: bool) -> _RootKey:
    """The root key: LEDGERPORT_SECRET_KEY, else the key file's, else the key the database held
    or a new one, to be written to the key file; never from the database alone. ``set_up``:
    the database keeps a check value, so it was set up with a key already, and a new one would
    open none of its tokens and secrets: a missing key file is then refused, never replaced."""
    if config.secret_key is not None:
        if legacy is not None and legacy != config.secret_key:
            raise RootKeyError(
                "LEDGERPORT_SECRET_KEY is not the root key this database was set up with"
            )
        return _RootKey(config.secret_key, create=False)
    path = config.secret_key_file
    assert path is not None, "a configuration without LEDGERPORT_SECRET_KEY names a key file"
    try:
        key = read_key_file(path)
    except KeyFileError as exc:
        raise RootKeyError(str(exc)) from exc
    if key is not None:
        if legacy is not None and legacy != key:
            raise RootKeyError(f"{path} holds another root key than this database was set up with")
        return _RootKey(key, create=False)
    if legacy is not None:
        return _RootKey(legacy, create=True)
    if set_up:
        raise RootKeyError(
            f"the root key file {path} does not exist, and this database was set up with a root"
            " key: put the file with that key back there (or name it with"
            " LEDGERPORT_SECRET_KEY_FILE, or set LEDGERPORT_SECRET_KEY); a new key would open"
            " none of its tokens and secrets"
        )
    return _RootKey(new_root_key(), create=True)


def _write_key_file(path: str, key: str) -> str:
    """Write the new root key file (its directory made owner-only when it is new); answers the
    key that stands (another process starting at once may have written one first)."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        return create_key_file(path, key)
    except KeyFileError as exc:
        raise RootKeyError(str(exc)) from exc
    except OSError as exc:
        raise RootKeyError(
            f"LEDGERPORT_SECRET_KEY_FILE: cannot create {directory}: {exc.strerror or exc}"
        ) from exc


async def _limiter(
    store: Store,
    config: Config,
    clock: Clock,
    keyring: Keyring,
    redis: RedisConnection | None = None,
) -> RateLimiter:
    """Where the rate limits and lockouts are counted: Redis when configured (through
    ``redis`` when the start reached it already), else the database on PostgreSQL (every
    process serving it shares the counts; the large budgets counted in the process and settled
    in batches, see ``SettlingRateLimiter``), else this process (SQLite)."""
    limiter: RateLimiter
    if config.redis_url is not None:
        limiter = await connect_redis_limiter(config.redis_url, clock, keyring, connection=redis)
    elif store.kind == "postgresql":
        limiter = SettlingRateLimiter(StoreRateLimiter(store, clock, keyring), clock)
    else:
        limiter = MemoryRateLimiter(clock)
    if config.rate_limit_factor != 1:
        limiter = ScaledRateLimiter(limiter, config.rate_limit_factor)
    return limiter


def _key_mismatch() -> RootKeyError:
    return RootKeyError(
        "the root key is not the one this database was set up with: every stored token"
        " and secret would fail to open; start with the original key"
    )


@dataclass(frozen=True)
class Bootstrap:
    platform: Platform
    new_admin_token: str | None  # generated now: to be printed once, never stored in clear


async def bootstrap(
    store: Store,
    config: Config,
    *,
    clock: Clock | None = None,
    redis: RedisConnection | None = None,
) -> Bootstrap:
    """The Platform over ``store``.

    The root key comes from LEDGERPORT_SECRET_KEY or the key file (generated once, mode 0600);
    a key an earlier version kept in the database is moved to the key file and deleted there.
    The database keeps only a check value of the key: a start with another key fails with
    RootKeyError instead of silently invalidating every stored token and secret. The admin token
    comes from LEDGERPORT_ADMIN_TOKEN, else is generated once and only its keyed hash stored.
    The rate limiter is chosen by the store and the configuration (``_limiter``); Redis must
    answer at start (StorageUnavailable otherwise; ``redis``, when the start reached it first).

    Nothing is written until everything it depends on is known to work: the key is read or made
    and checked against the database, and Redis answered, before the key file, the check value
    or the admin token's hash is written. A start that fails on the way leaves nothing that
    would keep the next one from showing a new admin token.
    """
    async with store.transaction() as tx:
        legacy = await tx.fetchval("SELECT value FROM settings WHERE key = $1", _LEGACY_KEY_SETTING)
        stored_check = await tx.fetchval(
            "SELECT value FROM settings WHERE key = $1", _KEY_CHECK_SETTING
        )
    root = _root_key(config, legacy, set_up=stored_check is not None)
    keyring = Keyring(root.key)
    if stored_check is not None and stored_check != keyring.key_check():
        raise _key_mismatch()
    if config.redis_url is not None and redis is None:
        redis = await connect_redis(config.redis_url)
    if root.create:
        assert config.secret_key_file is not None
        keyring = Keyring(_write_key_file(config.secret_key_file, root.key))
    clock = clock or SystemClock()
    limiter = await _limiter(store, config, clock, keyring, redis)
    async with store.transaction() as tx:
        check = await _setting_once(tx, _KEY_CHECK_SETTING, keyring.key_check())
        if check != keyring.key_check():
            raise _key_mismatch()
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
    platform = Platform(
        config=config,
        store=store,
        keyring=keyring,
        admin_token_hash=admin_token_hash,
        passwords=Passwords(config.password_hashing),
        limiter=limiter,
        clock=clock,
        proofs=proof_ledger(store, keyring, clock, redis),
    )
    return Bootstrap(platform, new_admin_token)
