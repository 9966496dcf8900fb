"""Shared fixtures: a migrated store on each backend, a platform and an HTTP test client.

The ``store`` fixture is parametrized over SQLite and PostgreSQL (see ``stores.py`` for where the
PostgreSQL databases come from, and how the tests skip, or fail in CI, without a server). Tests
marked ``redis`` or using ``redis_url`` skip with the reason where Redis does not answer.
"""

from __future__ import annotations

import compileall
import contextlib
import functools
import inspect
import os
import shutil
import tempfile
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio_asyncio
from hypothesis import settings

import ledgerport
from ledgerport.auth import Keyring
from ledgerport.clock import FrozenClock
from ledgerport.http import create_app, use_platform
from ledgerport.platform import Platform
from ledgerport.storage import Store, open_asyncio_loop

from .platforms import build_platform
from .stores import (
    REDIS_URL,
    REQUIRE_POSTGRES,
    drop_idle_databases,
    fresh_database,
    open_test_store,
    postgres_unusable,
    redis_unusable,
)

ADMIN_TOKEN = "lp_admin_test-token-0123456789abcdef"
SECRET_KEY = "test-secret-key-0123456789abcdef0123456789"

# Examples are bounded by their number, not by wall-clock time: beside the whole suite on two
# cores one example can take twice Hypothesis's default 200 ms deadline, and a test must not
# fail for how loaded the machine is.
settings.register_profile("ledgerport", deadline=None)
settings.load_profile("ledgerport")


def pytest_configure(config: pytest.Config) -> None:
    """The ``redis`` marker, declared here beside its fixture (markers are strict); and, in the
    process that starts the workers, ledgerport and the tests compiled to bytecode once.

    The suite starts ledgerport in many processes (served instances, sandboxes, commands). With
    ``PYTHONDONTWRITEBYTECODE`` set, as some machines and containers have it, none of them writes
    the bytecode it compiles, so each compiled every module again: about 0.15 s of CPU for a
    served process's imports alone (1.3 s instead of 1.15 s), several times that beside the rest
    of the suite on two cores. Files already compiled and unchanged are not compiled again."""
    config.addinivalue_line(
        "markers", "redis: needs the Redis server named by LEDGERPORT_TEST_REDIS"
    )
    _keep_keys_in_a_directory_of_the_suites_own()
    if not hasattr(config, "workerinput"):
        for package in (Path(ledgerport.__file__).parent, Path(__file__).parent):
            compileall.compile_dir(package, quiet=1)


_CONFIG_HOME: list[str] = []


def _keep_keys_in_a_directory_of_the_suites_own() -> None:
    """Root key files a start generates with no variable naming one go to the user's
    configuration directory (``$XDG_CONFIG_HOME/ledgerport/keys``): for this process and every
    process it starts (served instances, commands), that is a directory of the suite's own,
    removed when the session ends, never the home directory of whoever runs the tests."""
    _CONFIG_HOME.append(tempfile.mkdtemp(prefix="ledgerport-config-"))
    os.environ["XDG_CONFIG_HOME"] = _CONFIG_HOME[0]


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Drop the migrated PostgreSQL databases this process kept for reuse, and the suite's
    configuration directory."""
    if postgres_unusable() is None:
        drop_idle_databases()
    for directory in _CONFIG_HOME:
        shutil.rmtree(directory, ignore_errors=True)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """PostgreSQL tests skip with the reason when no server answers (fail when it is
    required), Redis tests skip likewise (never required). Decided here, outside the test's
    trio run, so the reason is reported."""
    needs_redis = item.get_closest_marker("redis") is not None or "redis_url" in getattr(
        item, "fixturenames", ()
    )
    if needs_redis:
        redis_reason = redis_unusable()
        if redis_reason is not None:
            pytest.skip(redis_reason)
    needs_postgres = item.get_closest_marker("postgres") is not None or "postgres_url" in getattr(
        item, "fixturenames", ()
    )
    if not needs_postgres:
        return
    reason = postgres_unusable()
    if reason is None:
        return
    if REQUIRE_POSTGRES:
        pytest.fail(f"{reason} (LEDGERPORT_REQUIRE_POSTGRES=1)", pytrace=False)
    pytest.skip(reason)


TEST_BOUND = 600.0
"""Seconds of real time any trio test may run: past it the test is cancelled and fails. Real
time, not trio's clock (which a mock clock moves at will): a hung test fails instead of holding
the run, on a machine as loaded as it may be."""


def _cancel_from_thread(token: trio.lowlevel.TrioToken, scope: trio.CancelScope) -> None:
    with contextlib.suppress(trio.RunFinishedError):
        token.run_sync_soon(scope.cancel)


def _bounded(test: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(test)
    async def bounded(*args: Any, **kwargs: Any) -> Any:
        token = trio.lowlevel.current_trio_token()
        with trio.CancelScope() as scope:
            timer = threading.Timer(TEST_BOUND, _cancel_from_thread, (token, scope))
            timer.daemon = True
            timer.start()
            try:
                return await test(*args, **kwargs)
            finally:
                timer.cancel()
        pytest.fail(f"the test ran past its bound of {TEST_BOUND:g} s of real time")

    return bounded


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every trio test runs within TEST_BOUND (hypothesis' tests bound their examples)."""
    for item in items:
        test = getattr(item, "obj", None)
        if inspect.iscoroutinefunction(test) and not hasattr(test, "hypothesis"):
            item.obj = _bounded(test)  # type: ignore[attr-defined]


@pytest.fixture
async def asyncio_loop() -> AsyncIterator[trio_asyncio.TrioEventLoop]:
    """The test's one asyncio loop, as ``ledgerport serve`` enters one at its top: asyncpg runs
    on it. pytest-trio shares one context between fixtures and the test, so all see it."""
    async with open_asyncio_loop() as loop:
        yield loop


@pytest.fixture
async def postgres_url(asyncio_loop: object) -> AsyncIterator[str]:
    """The URL of a fresh, empty PostgreSQL database, dropped after the test."""
    async with fresh_database() as url:
        yield url


@pytest.fixture
def redis_url() -> str:
    """The URL of the test Redis (shared: count under a root key of the test's own)."""
    return REDIS_URL


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> str:
    """The storage backend of the test (a module narrows it with an indirect parametrize)."""
    name: str = request.param
    return name


@pytest.fixture
async def empty_store(backend: str, asyncio_loop: object) -> AsyncIterator[Store]:
    """An unmigrated store."""
    async with open_test_store(backend, migrate=False) as store:
        yield store


@pytest.fixture
async def store(backend: str, asyncio_loop: object) -> AsyncIterator[Store]:
    """A migrated store."""
    async with open_test_store(backend) as store:
        yield store


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
def keyring() -> Keyring:
    return Keyring(SECRET_KEY)


PLATFORM_ENV = {
    "LEDGERPORT_ADMIN_TOKEN": ADMIN_TOKEN,
    "LEDGERPORT_SECRET_KEY": SECRET_KEY,
    "LEDGERPORT_ENV": "development",
    "LEDGERPORT_BASE_URL": "http://api.ledgerport.test",
    "LEDGERPORT_AUTH_URL": "http://app.ledgerport.test",
    # Users are created and signed in by the hundred: cheap Argon2 parameters (the standard
    # profile costs about 0.4 s a hash). Served processes keep the standard.
    "LEDGERPORT_PASSWORD_HASHING": "fast",
}
"""The configuration of the ``platform`` fixture; a module adds to it for a platform of its own."""


@pytest.fixture
async def platform(store: Store, clock: FrozenClock) -> AsyncIterator[Platform]:
    """The test's platform, its apps kept between their changes as a server keeps them."""
    platform = await build_platform(store, clock, PLATFORM_ENV)
    async with platform.app_directory.listening(store):
        yield platform


_SHARED_APPS: list[Any] = []
"""The one application of this process (see ``http.use_platform``)."""


@pytest.fixture
def app(platform: Platform):  # type: ignore[no-untyped-def]
    """The application, serving the test's platform."""
    if not _SHARED_APPS:
        _SHARED_APPS.append(create_app(platform))
    use_platform(_SHARED_APPS[0], platform)
    return _SHARED_APPS[0]


@pytest.fixture
async def nonce_client(store: Store, clock: FrozenClock) -> AsyncIterator[Any]:
    """A client of an application whose platform asks DPoP proofs for server nonces."""
    platform = await build_platform(store, clock, {**PLATFORM_ENV, "LEDGERPORT_DPOP_NONCE": "on"})
    async with platform.app_directory.listening(store):
        yield create_app(platform).test_client()


@pytest.fixture
def fresh_app(platform: Platform):  # type: ignore[no-untyped-def]
    """An application of the test's own, for a test that adds routes to it."""
    return create_app(platform)


@pytest.fixture
def client(app):  # type: ignore[no-untyped-def]
    return app.test_client()


@pytest.fixture
def admin_headers() -> dict[str, str]:
    return {"Authorization": f"Bearer {ADMIN_TOKEN}"}
