"""One use of each DPoP proof's ``jti`` (RFC 9449 section 11.1), across every process.

A proof is accepted once: its ``jti`` (with the key's thumbprint, so that one client's ids never
collide with another's) is recorded under its keyed hash until the proof could no longer be
fresh, where every process serving the service looks: in Redis when the service counts its
limits there (LEDGERPORT_REDIS_URL), else in the database (``dpop_proofs``, purged by the
cleanup). The record is one conditional write, so of two processes given the same proof at
once exactly one accepts it.

A record is kept for the proof's freshness, minutes, and it need outlive the processes, not
the machine: on SQLite it is committed without waiting for the disk (``Store.transaction``'s
``durable=False``), as Redis keeps it without writing it to disk. After a power cut, a proof
used in the last moments before it could be presented once more until it is no longer fresh.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol

import trio
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


@dataclass(eq=False)
class _Waiting:
    """A proof waiting to be recorded, and what became of it."""

    key: str
    fresh_until: float
    done: trio.Event = field(default_factory=trio.Event)
    first: bool | None = None
    """Whether it was its first use; None while not recorded (also when the write failed)."""
    lead: bool = False
    """Woken to write the next batch itself."""


class StoreProofLedger:
    """Used proofs in the database, shared by every process serving it.

    The proofs of concurrent calls are recorded together: one caller at a time writes, the
    proofs that arrive meanwhile wait, and the first of them then writes them all in one
    statement (PostgreSQL) or one transaction (SQLite), so that under load a call's record
    costs a fraction of a round trip and of a commit (a group commit of the process's own)."""

    def __init__(self, store: Store, keyring: Keyring) -> None:
        self._store = store
        self._keyring = keyring
        self._queue: list[_Waiting] = []
        self._writing = False

    async def first_use(self, proof: Proof) -> bool:
        waiting = _Waiting(proof_key(self._keyring, proof), proof.fresh_until)
        self._queue.append(waiting)
        if self._writing:
            try:
                await waiting.done.wait()
            except BaseException:
                self._abandon(waiting)
                raise
            if not waiting.lead:
                if waiting.first is None:
                    raise StorageUnavailable("the record of a DPoP proof failed")
                return waiting.first
        self._writing = True
        batch, self._queue = self._queue, []
        try:
            await self._record(batch)
        finally:
            for each in batch:
                each.done.set()
            self._pass_on()
        assert waiting.first is not None
        return waiting.first

    def _pass_on(self) -> None:
        """The next waiting proof's caller writes the next batch; none: nobody writes."""
        if self._queue:
            self._queue[0].lead = True
            self._queue[0].done.set()
        else:
            self._writing = False

    def _abandon(self, waiting: _Waiting) -> None:
        """A waiting caller is gone (cancelled): its proof is not recorded, and when it was to
        write the next batch, the next one in line writes it instead."""
        if waiting in self._queue:
            self._queue.remove(waiting)
            if waiting.lead:
                self._pass_on()

    async def _record(self, batch: list[_Waiting]) -> None:
        """Record ``batch``; a key given twice in it is a replay the second time."""
        first_of: dict[str, _Waiting] = {}
        for each in batch:
            if each.key in first_of:
                each.first = False
            else:
                first_of[each.key] = each
        keys = list(first_of)
        if self._store.kind == "postgresql":
            # One statement on its own: one round trip, no transaction around it.
            rows = await self._store.autocommit.fetch(
                "INSERT INTO dpop_proofs (proof_hash, expires_at)"
                " SELECT * FROM unnest($1::text[], $2::double precision[])"
                " ON CONFLICT (proof_hash) DO NOTHING RETURNING proof_hash",
                keys,
                [first_of[key].fresh_until for key in keys],
            )
            recorded = {row["proof_hash"] for row in rows}
            for key, each in first_of.items():
                each.first = key in recorded
            return
        # Not durable: a proof's record need outlive the process, not the machine (the proof
        # is fresh for minutes), so its commit waits for no sync of SQLite's WAL, nor do the
        # reads after it.
        async with self._store.transaction(durable=False) as tx:
            firsts = {
                key: bool(
                    await tx.execute(
                        "INSERT INTO dpop_proofs (proof_hash, expires_at) VALUES ($1, $2)"
                        " ON CONFLICT (proof_hash) DO NOTHING",
                        key,
                        each.fresh_until,
                    )
                )
                for key, each in first_of.items()
            }
        for key, each in first_of.items():
            each.first = firsts[key]


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
