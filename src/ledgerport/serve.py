"""The process's top: ``ledgerport serve`` wires the store, the engine, the hosted-function pool
and HTTP under one nursery.

Start order: the listen addresses bound, the process's one asyncio loop (asyncpg and Redis run
on it), Redis reached and the root key file checked, the SQLite file locked, storage (migrated),
bootstrap (the Platform: the key file, the admin token), the engine's workers, the sandbox pool
(its workers warm) and the function runner, then HTTP last, so no request arrives before the
rest can take its work. What the start depends on is checked before anything is written, and
what it cannot reach or use is a configuration error (exit code 2) naming the variable.
SIGINT/SIGTERM stop intake (new connections, new claims), then give what is in flight
(requests, webhook attempts, function runs) a bounded grace to end and be recorded before
cancelling the rest, whose claims are given back. A crashing child cancels its siblings and the
process exits non-zero.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import logging
import signal
import sys
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.config import Sockets
from hypercorn.trio.run import worker_serve
from hypercorn.utils import wrap_app
from quart_trio import QuartTrio

from ledgerport.auth import RedisConnection, connect_redis
from ledgerport.clock import Clock
from ledgerport.config import AddressUnavailable, Config, ConfigError, mask_url_password
from ledgerport.engine import (
    DeliveryEngine,
    FunctionRunner,
    Node,
    Scheduler,
    StreamDesk,
    fetch_client_document,
)
from ledgerport.http import create_app, end_live_streams, in_process_api, prepare_document
from ledgerport.ops import MemoryTrimmer, supervise, timing_collections
from ledgerport.platform import Platform, bootstrap, check_root_key
from ledgerport.runtime import RunLimits
from ledgerport.server import (
    AccessLog,
    ConnectionGuard,
    ManagementListener,
    RequestTracker,
    lean_connections,
)
from ledgerport.storage import StorageUnavailable, open_asyncio_loop, open_store, serving

log = logging.getLogger("ledgerport.supervisor")


class _NotRunningOn(logging.Filter):
    """Drops hypercorn's "Running on ..." line: the service says where it serves once, with
    its database, when every part has started."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Running on")


def _hypercorn_config(config: Config, address: tuple[str, int] | None = None) -> HypercornConfig:
    """hypercorn's configuration of the main listener, or of ``address``'s."""
    hc = HypercornConfig()
    host, port = address if address is not None else (config.host, config.port)
    hc.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    # Off: server.AccessLog writes the access log, one line per request (hypercorn's can write a
    # request twice).
    hc.accesslog = None
    hc.errorlog = logging.getLogger("ledgerport.http.server")
    if not any(isinstance(each, _NotRunningOn) for each in hc.errorlog.filters):
        hc.errorlog.addFilter(_NotRunningOn())
    hc.graceful_timeout = config.shutdown_grace
    hc.include_server_header = False
    return hc


async def _watch_signals(stop: trio.Event) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            log.info("received %s: shutting down", signal.Signals(signum).name)
            stop.set()
            return


async def serve(
    config: Config,
    *,
    clock: Clock | None = None,
    on_ready: Callable[[list[str]], None] | None = None,
    stop: trio.Event | None = None,
) -> None:
    """Run the whole service until a signal (or ``stop``) asks it to end."""
    if stop is None:
        stop = trio.Event()
    with contextlib.ExitStack() as owned:
        # Everything the start depends on is checked before anything is written: the listen
        # addresses, Redis, the root key file, the database. A start that fails on the way
        # creates nothing that would keep the next one from working (no admin token used up
        # without being shown, no key file of a key the database was not set up with).
        sockets = owned.enter_context(_listening(config))
        management = None
        if config.management is not None:
            management = owned.enter_context(_listening(config, config.management))
        async with open_asyncio_loop():
            redis = await _reach_redis(config)
            check_root_key(config)
            if config.database.kind == "sqlite":
                owned.enter_context(serving(config.database.path))
            listeners = _Listeners(sockets, management)
            await _serve_store(config, clock, on_ready, stop, listeners, redis)


async def _reach_redis(config: Config) -> RedisConnection | None:
    """The Redis the limits are counted in, when configured, checked to answer: one that does
    not is the configuration's to fix (exit code 2, naming the variable)."""
    if config.redis_url is None:
        return None
    try:
        return await connect_redis(config.redis_url)
    except StorageUnavailable as exc:
        raise ConfigError(
            f"LEDGERPORT_REDIS_URL: cannot reach {mask_url_password(config.redis_url)}: {exc};"
            " the rate limits are counted there, so the service does not start without it"
        ) from exc


@dataclass(frozen=True)
class _Listeners:
    main: Sockets
    management: Sockets | None
    """LEDGERPORT_MANAGEMENT_BIND's, when set."""


@contextlib.contextmanager
def _listening(config: Config, address: tuple[str, int] | None = None) -> Iterator[Sockets]:
    """The sockets of the main address (or ``address``), bound (listening comes when HTTP
    starts), closed when the block ends."""
    hc = _hypercorn_config(config, address)
    try:
        sockets = hc.create_sockets()
    except OSError as exc:
        choose = "LEDGERPORT_MANAGEMENT_BIND" if address else "--bind or LEDGERPORT_BIND"
        raise AddressUnavailable(
            f"cannot listen on {hc.bind[0]}: {exc.strerror or exc};"
            f" choose another address with {choose}"
        ) from exc
    try:
        yield sockets
    finally:
        for sock in (*sockets.secure_sockets, *sockets.insecure_sockets, *sockets.quic_sockets):
            sock.close()


async def _serve_store(
    config: Config,
    clock: Clock | None,
    on_ready: Callable[[list[str]], None] | None,
    stop: trio.Event,
    listeners: _Listeners,
    redis: RedisConnection | None,
) -> None:
    async with open_store(config.database) as store:
        boot = await bootstrap(store, config, clock=clock, redis=redis)
        boot.platform.document_fetch = functools.partial(fetch_client_document, config=config)
        if boot.new_admin_token is not None:
            print(  # noqa: T201 - shown once, on purpose, to the operator's terminal
                f"ledgerport: generated admin token (shown once, store it now): "
                f"{boot.new_admin_token}",
                file=sys.stdout,
                flush=True,
            )
        elif config.admin_token is None:
            log.info(
                "admin token: the one generated at the first start (stored hashed, shown only"
                " then); lost, set LEDGERPORT_ADMIN_TOKEN (16 characters or more) to use"
                " another while it is set"
            )
        platform = boot.platform
        platform.stream_desk = StreamDesk(platform)
        app = create_app(platform)
        with timing_collections(platform.metrics):
            await _supervise(config, platform, app, stop, on_ready, listeners)


async def _prepare_document(app: QuartTrio) -> None:
    """The OpenAPI document, built in a worker thread as the server starts. A failure is
    logged and left to the first request for the document (its 500), never the process's end."""
    try:
        await prepare_document(app)
    except Exception:
        log.exception("building the OpenAPI document failed")


async def _supervise(
    config: Config,
    platform: Platform,
    app: QuartTrio,
    stop: trio.Event,
    on_ready: Callable[[list[str]], None] | None,
    listeners: _Listeners,
) -> None:
    """The engine's workers, the pool and HTTP under one nursery, until ``stop``; then the
    drain within the grace period, and the rest cancelled."""
    async with (
        in_process_api(app, config.base_url) as api,
        platform.app_directory.listening(platform.store),
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(_watch_signals, stop)
        node = Node(platform)
        services, metrics = platform.services, platform.metrics
        await nursery.start(supervise, "node", node.run, services, metrics)
        await nursery.start(supervise, "scheduler", Scheduler(platform).run, services, metrics)
        settling = platform.settling_limiter()
        if settling is not None:
            await nursery.start(supervise, "rate-limits", settling.run, services, metrics)
        engine = DeliveryEngine(platform, holder=node.id)
        await nursery.start(supervise, "delivery-engine", engine.run, services, metrics)
        runner: FunctionRunner | None = None
        if config.function_workers:
            runner = FunctionRunner(
                platform,
                workers=config.function_workers,
                limits=RunLimits(wall=config.function_wall_limit),
                api=api,
                holder=node.id,
            )
            await nursery.start(supervise, "function-runner", runner.run, services, metrics)
        http_done = trio.Event()
        tracker = RequestTracker(AccessLog(ConnectionGuard(app)))
        binds = await nursery.start(
            _serve_http, tracker, _hypercorn_config(config), listeners.main, stop, http_done
        )
        if listeners.management is not None:
            binds += await nursery.start(
                _serve_http,
                ManagementListener(tracker),
                _hypercorn_config(config, config.management),
                listeners.management,
                stop,
                trio.Event(),
            )
        nursery.start_soon(_prepare_document, app)
        # What start-up built (modules, routes, the application) lives as long as the
        # process: kept out of the collector's full passes, which would otherwise walk it
        # every time and pause every request for tens of milliseconds.
        gc.collect()
        gc.freeze()
        nursery.start_soon(MemoryTrimmer(platform.metrics).run)
        log.info("serving on %s (database: %s)", ", ".join(binds), config.database.redacted())
        if config.loopback_webhooks and not config.development:
            log.info(
                "webhooks may be delivered to this machine's loopback addresses: the service is"
                " reached only on a loopback address (behind a proxy, set LEDGERPORT_BASE_URL"
                " and LEDGERPORT_AUTH_URL to the public URLs)"
            )
        if on_ready is not None:
            on_ready(binds)
        await stop.wait()
        end_live_streams(app)  # clients resume on another process with Last-Event-ID
        # Intake stops (hypercorn closes its listeners, the engine and the runner take no
        # more work); what is in flight gets the grace period to end and be recorded.
        stopping = trio.current_time()
        deadline = stopping + config.shutdown_grace
        nursery.cancel_scope.deadline = deadline + 1.0
        with trio.move_on_at(deadline) as grace:
            async with trio.open_nursery() as draining:
                draining.start_soon(_drained, tracker, http_done)
                draining.start_soon(engine.drain)
                if runner is not None:
                    draining.start_soon(runner.drain)
        if grace.cancelled_caught:
            log.warning(
                "shutdown grace (%gs) ran out: cancelling what is still in flight",
                config.shutdown_grace,
            )
        else:
            log.info("in-flight work finished: stopping")
        nursery.cancel_scope.cancel()
    log.info("stopped cleanly in %.1f s", trio.current_time() - stopping)


async def _drained(tracker: RequestTracker, http_done: trio.Event) -> None:
    """Hypercorn has finished, or no request is left inside the application.

    Waiting for hypercorn alone can take the whole grace period: a connection whose response
    went out during the drain may linger open until the deadline. Every response has been handed
    to its socket once the application holds no request, so the rest can be cut short.
    """
    async with trio.open_nursery() as waiters:

        async def first(wait: Callable[[], Awaitable[object]]) -> None:
            await wait()
            waiters.cancel_scope.cancel()

        waiters.start_soon(first, http_done.wait)
        waiters.start_soon(first, tracker.wait_idle)


async def _serve_http(
    app: RequestTracker,
    hc: HypercornConfig,
    sockets: Sockets,
    stop: trio.Event,
    done: trio.Event,
    *,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """hypercorn's ``serve`` on the sockets bound at start (:func:`_listening`), which listen
    from now on."""
    for sock in (*sockets.secure_sockets, *sockets.insecure_sockets):
        sock.listen(hc.backlog)
    lean_connections()
    try:
        await worker_serve(
            wrap_app(app, hc.wsgi_max_body_size, "asgi"),
            hc,
            sockets=sockets,
            shutdown_trigger=stop.wait,
            task_status=task_status,
        )
    finally:
        done.set()
