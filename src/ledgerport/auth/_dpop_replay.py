"""One use of each DPoP proof's ``jti`` (RFC 9449 section 11.1), across every process.

A proof is accepted once: its ``jti`` (with the key's thumbprint, so that one client's ids never
collide with another's) is recorded under its keyed hash until the proof could no longer be
fresh, where every process serving the service looks: in Redis when the service counts its
limits there (LEDGERPORT_REDIS_URL), else in the database (``dpop_proofs``, purged by the
cleanup). The record is one conditional write, so of two processes given the same proof at
once exactly one accepts it.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import trio_asyncio
from redis.exceptions import RedisError

from ledgerport.clock import Clock
from ledgerport.keys import Keyring
from ledgerport.storage import StorageUnavailable, Store, Transaction

from ._dpop import Proof
from ._redis_limits import RedisConnection

_REDIS_PREFIX = "ledgerport:dpop:"


def proof_key(keyring: Keyring, proof: Proof) -> str:
    """What a proof is recorded under: the keyed hash of its key's thumbprint and jti."""
    return keyring.hash_token(f"dpop {proof.jkt} {proof.jti}")


class ProofLedger(Protocol):
    """Where used proofs are recorded."""

    async def first_use(self, proof: Proof) -> bool:
        """Record ``proof``; answers whether it was its first use (False: a replay)."""
        ...


class StoreProofLedger:
    """Used proofs in the database, shared by every process serving it."""

    def __init__(self, store: Store, keyring: Keyring) -> None:
        self._store = store
        self._keyring = keyring

    async def first_use(self, proof: Proof) -> bool:
        args = (proof_key(self._keyring, proof), proof.fresh_until)
        if self._store.kind == "postgresql":
            # One statement on its own: one round trip, no transaction around it.
            recorded = await self._store.autocommit.fetchval(
                "INSERT INTO dpop_proofs (proof_hash, expires_at) VALUES ($1, $2)"
                " ON CONFLICT (proof_hash) DO NOTHING RETURNING 1",
                *args,
            )
            return recorded is not None
        async with self._store.transaction() as tx:
            return bool(
                await tx.execute(
                    "INSERT INTO dpop_proofs (proof_hash, expires_at) VALUES ($1, $2)"
                    " ON CONFLICT (proof_hash) DO NOTHING",
                    *args,
                )
            )


class RedisProofLedger:
    """Used proofs in Redis: ``SET NX`` with an expiry at the proof's end of freshness."""

    def __init__(self, connection: RedisConnection, keyring: Keyring, clock: Clock) -> None:
        self._client = connection.client
        self._loop = connection.loop
        self._keyring = keyring
        self._clock = clock

    async def _call(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await trio_asyncio.aio_as_trio(self._client.set, loop=self._loop)(
                *args, **kwargs
            )
        except (RedisError, OSError) as exc:
            raise StorageUnavailable(f"redis: {type(exc).__name__}: {exc}") from exc

    async def first_use(self, proof: Proof) -> bool:
        ttl_ms = max(1, math.ceil(1000 * (proof.fresh_until - self._clock.now())) + 1000)
        key = f"{_REDIS_PREFIX}{proof_key(self._keyring, proof)}"
        return bool(await self._call(key, "1", nx=True, px=ttl_ms))


def proof_ledger(
    store: Store, keyring: Keyring, clock: Clock, redis: RedisConnection | None
) -> ProofLedger:
    """Where used proofs are recorded: Redis when the service has one, else the database."""
    if redis is not None:
        return RedisProofLedger(redis, keyring, clock)
    return StoreProofLedger(store, keyring)


async def purge_spent_proofs(tx: Transaction, *, now: float) -> int:
    """Delete the records of proofs that can no longer be fresh."""
    return await tx.execute("DELETE FROM dpop_proofs WHERE expires_at <= $1", now)
