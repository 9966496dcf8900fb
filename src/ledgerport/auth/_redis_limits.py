"""Rate limits and lockouts shared through Redis (``LEDGERPORT_REDIS_URL``).

The counting is the database counters' (``_shared_limits``: ``LIMIT_BUCKETS`` buckets per
window and the newest hit's time, a bucket counted for a window after the earlier of its end and
that newest hit; lockouts keep their failures' times), done by Lua scripts: Redis runs a script
whole, so a take reads every budget, decides and counts in one round trip that no other request
interleaves with. The times the scripts compare
come from the injected clock as arguments, never from Redis's clock; key expiry only collects
garbage and outlasts every bucket that can still count.

redis-py's asyncio client runs on the process's trio_asyncio loop, like asyncpg. The client is
owned by an asyncio task on that loop, which closes it when the loop shuts down (trio_asyncio
cancels the loop's tasks then, as ``asyncio.run`` does), so no connection outlives its loop.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import trio_asyncio
from redis.asyncio import BlockingConnectionPool, Redis
from redis.exceptions import RedisError

from ledgerport.clock import Clock
from ledgerport.config import ConfigError
from ledgerport.keys import Keyring
from ledgerport.storage import NoAsyncioLoop, StorageUnavailable

from ._limits import (
    Budget,
    InTurn,
    LockoutRule,
    Standing,
    Verdict,
    wait_within,
)
from ._shared_limits import LIMIT_BUCKETS, stored_key

_PREFIX = "ledgerport:"
_TIMEOUT = 5.0
"""Seconds allowed to connect, to get a pooled connection, and for one command."""
_MAX_CONNECTIONS = 20

_COUNT = """
-- KEYS: one hash per budget, field a bucket's index, value its hits, and field t the time of
-- the newest hit (absent in a count kept before it was kept).
-- ARGV: mode (take, peek or hit), now, buckets per window, then each budget's limit and window.
-- Answers the first budget without room (0 when none), the wait until all have room, then each
-- budget's remaining requests and seconds until it is whole again; no wait exceeds the window.
local mode, now, buckets = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local function ceil_seconds(seconds)
  return math.max(1, math.ceil(seconds))
end
local function wait_within(seconds, window)
  return math.min(ceil_seconds(seconds), ceil_seconds(window))
end
-- When the last of bucket index's hits was made at the latest: its end, or the newest hit.
local function last(c, index)
  if c.t == nil then return index * c.width end
  return math.min(index * c.width, c.t)
end
local counts, refused, wait = {}, 0, 0
for k = 1, #KEYS do
  local c = {limit = tonumber(ARGV[2 + 2 * k]), window = tonumber(ARGV[3 + 2 * k])}
  c.width = c.window / buckets
  c.t = tonumber(redis.call('HGET', KEYS[k], 't'))
  local flat = redis.call('HGETALL', KEYS[k])
  local hits, stale, total, newest = {}, {}, 0, nil
  for j = 1, #flat, 2 do
    if flat[j] ~= 't' then
      local index, n = tonumber(flat[j]), tonumber(flat[j + 1])
      if last(c, index) > now - c.window then
        hits[#hits + 1] = {index, n}
        total = total + n
        if newest == nil or index > newest then newest = index end
      else
        stale[#stale + 1] = flat[j]
      end
    end
  end
  if #stale > 0 then
    redis.call('HDEL', KEYS[k], unpack(stale))
  end
  local excess = total - c.limit + 1
  if mode ~= 'hit' and excess > 0 then
    table.sort(hits, function(a, b) return a[1] < b[1] end)
    for _, bucket in ipairs(hits) do
      excess = excess - bucket[2]
      if excess <= 0 then
        wait = math.max(wait, wait_within(last(c, bucket[1]) + c.window - now, c.window))
        break
      end
    end
    if refused == 0 then refused = k end
  end
  c.total, c.newest = total, newest
  counts[k] = c
end
if refused == 0 and mode ~= 'peek' then
  for k = 1, #KEYS do
    local c = counts[k]
    local index = math.ceil(now / c.width)
    redis.call('HINCRBY', KEYS[k], string.format('%d', index), 1)
    if c.t == nil or now > c.t then
      -- now as the caller wrote it: a number Lua prints keeps 14 digits only.
      redis.call('HSET', KEYS[k], 't', ARGV[2])
      c.t = now
    end
    redis.call('PEXPIRE', KEYS[k], math.ceil(2000 * (c.window + c.width)))
    c.total = c.total + 1
    if c.newest == nil or index > c.newest then c.newest = index end
  end
end
local answer = {refused, wait}
for k = 1, #KEYS do
  local c = counts[k]
  answer[#answer + 1] = math.max(0, c.limit - c.total)
  if c.newest == nil then
    answer[#answer + 1] = 0
  else
    answer[#answer + 1] = wait_within(last(c, c.newest) + c.window - now, c.window)
  end
end
return answer
"""

_FAIL = """
-- KEYS[1]: the times of the last failures (a list), KEYS[2]: the end of the lock.
-- ARGV: now, the lock's end should this failure lock, failures, window, expiry in ms.
-- Answers 1 when this failure locks the key, else 0.
local now, failures, window = tonumber(ARGV[1]), tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('LTRIM', KEYS[1], -failures, -1)
redis.call('PEXPIRE', KEYS[1], ARGV[5])
local recent = 0
for _, at in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
  if tonumber(at) > now - window then recent = recent + 1 end
end
if recent >= failures then
  redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[5])
  return 1
end
return 0
"""

_CLOSERS: set[asyncio.Task[None]] = set()
"""The tasks owning open clients: the loop keeps only weak references to its tasks."""


async def _close_with_loop(client: Redis) -> None:
    try:
        await asyncio.Event().wait()
    finally:
        await client.aclose()


class RedisRateLimiter(InTurn):
    """Counts in Redis, shared by every process configured with the same Redis database.

    Build it with :func:`connect_redis_limiter`.
    """

    def __init__(self, client: Redis, loop: Any, clock: Clock, keyring: Keyring) -> None:
        self._client = client
        self._loop = loop
        self._clock = clock
        self._keyring = keyring
        self._count = client.register_script(_COUNT)
        self._fail = client.register_script(_FAIL)

    async def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return await trio_asyncio.aio_as_trio(fn, loop=self._loop)(*args, **kwargs)
        except (RedisError, OSError) as exc:
            raise StorageUnavailable(f"redis: {type(exc).__name__}: {exc}") from exc

    async def ping(self) -> None:
        """Raise StorageUnavailable unless Redis answers."""
        await self._call(self._client.ping)

    def _key(self, name: str, key: tuple[str, ...]) -> str:
        return f"{_PREFIX}{stored_key(self._keyring, name, key)}"

    async def _run(self, mode: str, budgets: tuple[Budget, ...]) -> Verdict:
        args: list[Any] = [mode, repr(self._clock.now()), LIMIT_BUCKETS]
        for budget in budgets:
            args += [budget.limit.limit, budget.limit.window_seconds]
        answer = await self._call(
            self._count, keys=[self._key(b.limit.name, b.key) for b in budgets], args=args
        )
        refused, wait, *standings = (int(value) for value in answer)
        return Verdict(
            budgets[refused - 1].limit if refused else None,
            wait,
            tuple(
                Standing(budget.limit.limit, standings[2 * i], standings[2 * i + 1])
                for i, budget in enumerate(budgets)
            ),
        )

    async def take(self, *budgets: Budget) -> Verdict:
        return await self._run("take", budgets)

    async def retry_after(self, *budgets: Budget) -> int | None:
        verdict = await self._run("peek", budgets)
        return None if verdict.allowed else verdict.retry_after

    async def hit(self, *budgets: Budget) -> None:
        await self._run("hit", budgets)

    async def locked_for(self, rule: LockoutRule, key: tuple[str, ...]) -> int | None:
        until = await self._call(self._client.get, f"{self._key(rule.name, key)}:until")
        if until is None:
            return None
        remaining = float(until) - self._clock.now()
        return wait_within(remaining, rule.duration) if remaining > 0 else None

    async def failed(self, rule: LockoutRule, key: tuple[str, ...]) -> bool:
        now = self._clock.now()
        stored = self._key(rule.name, key)
        expiry_ms = math.ceil(2000 * max(rule.window, rule.duration))
        locked = await self._call(
            self._fail,
            keys=[f"{stored}:failures", f"{stored}:until"],
            args=[repr(now), repr(now + rule.duration), rule.failures, rule.window, expiry_ms],
        )
        return bool(locked)


@dataclass(frozen=True)
class RedisConnection:
    """A client of the Redis the limits are counted in, on the process's asyncio loop, which
    answered when it was made (:func:`connect_redis`)."""

    client: Redis
    loop: Any


async def connect_redis(url: str) -> RedisConnection:
    """A client of the Redis at ``url``, checked to answer (StorageUnavailable otherwise): a
    start reaches it before it writes anything. Must run inside the process's trio_asyncio
    loop; the client is closed when that loop ends."""
    loop = trio_asyncio.current_loop.get()
    if loop is None:
        raise NoAsyncioLoop("Redis needs the process's trio_asyncio loop; enter it first")
    try:
        pool = BlockingConnectionPool.from_url(
            url,
            max_connections=_MAX_CONNECTIONS,
            timeout=_TIMEOUT,
            socket_timeout=_TIMEOUT,
            socket_connect_timeout=_TIMEOUT,
        )
    except ValueError as exc:  # an option of the URL's query that redis-py cannot use
        raise ConfigError(f"LEDGERPORT_REDIS_URL: {exc}") from exc
    client = Redis.from_pool(pool)
    closer = loop.create_task(_close_with_loop(client))
    _CLOSERS.add(closer)
    closer.add_done_callback(_CLOSERS.discard)
    try:
        await trio_asyncio.aio_as_trio(client.ping, loop=loop)()
    except (RedisError, OSError) as exc:
        raise StorageUnavailable(f"redis: {type(exc).__name__}: {exc}") from exc
    return RedisConnection(client, loop)


async def connect_redis_limiter(
    url: str, clock: Clock, keyring: Keyring, *, connection: RedisConnection | None = None
) -> RedisRateLimiter:
    """A limiter on the Redis at ``url`` (through ``connection`` when one was made already),
    checked to answer (StorageUnavailable otherwise)."""
    if connection is None:
        connection = await connect_redis(url)
    return RedisRateLimiter(connection.client, connection.loop, clock, keyring)
