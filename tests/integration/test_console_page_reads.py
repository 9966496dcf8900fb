"""What the console's pages of a webhook and of a function read first, each in one statement on
both stores, answering what the separate reads would and refusing alike: the app (another
developer's, or none, is not found) with its webhook or function, with what it keeps, a webhook
with its health counts, and a function with its versions. Time is the frozen clock's."""

from __future__ import annotations

import pytest

from ledgerport import apps, books, queues
from ledgerport.clock import FrozenClock
from ledgerport.engine import record_health
from ledgerport.platform import Platform

from ..stores import CountingTransaction
from .test_console_health import DAY, T0, _app, _function, _outcome, _webhooks

SOURCES = [f"export async function handler() {{ return {n}; }}\n" for n in range(3)]


async def _other_developer(platform: Platform) -> str:
    async with platform.store.transaction() as tx:
        user = await books.create_user(
            tx, now=T0, email="someone-else@example.com", password_hash="x"
        )
    return user.id


async def test_an_app_is_read_with_its_webhook_in_one_statement_and_refused_alike(
    platform: Platform,
) -> None:
    app = await _app(platform)
    other = await _app(platform)
    hook, gone = await _webhooks(platform, app, 2)
    (theirs,) = await _webhooks(platform, other, 1)
    stranger = await _other_developer(platform)
    developer = app.developer_user_id
    assert developer is not None
    async with platform.store.transaction() as tx:
        await apps.delete_webhook(tx, now=T0, app_id=app.id, webhook_id=gone.id)
    async with platform.store.transaction(reads=True) as tx:
        counting = CountingTransaction(tx)
        answered = await apps.get_developed_webhook(counting, app.id, developer, hook.id)
        separately = (
            await apps.get_developed_app(tx, app.id, developer),
            await apps.get_webhook(tx, app.id, hook.id),
        )
        for app_id, user_id, webhook_id, refusal in (
            (app.id, stranger, hook.id, apps.AppNotFound),
            ("app_none", developer, hook.id, apps.AppNotFound),
            (app.id, developer, gone.id, apps.WebhookNotFound),
            (app.id, developer, theirs.id, apps.WebhookNotFound),
            (app.id, developer, "wh_none", apps.WebhookNotFound),
        ):
            with pytest.raises(refusal):
                await apps.get_developed_webhook(tx, app_id, user_id, webhook_id)
    assert counting.statements == 1
    assert answered == separately


async def test_an_app_is_read_with_its_function_in_one_statement_and_refused_alike(
    platform: Platform,
) -> None:
    app = await _app(platform)
    other = await _app(platform)
    stranger = await _other_developer(platform)
    developer = app.developer_user_id
    assert developer is not None
    async with platform.store.transaction() as tx:
        function = await _function(tx, app, "kept")
        await _function(tx, app, "deleted")
        await apps.delete_function(tx, now=T0, app_id=app.id, name="deleted")
        await _function(tx, other, "theirs")
    async with platform.store.transaction(reads=True) as tx:
        counting = CountingTransaction(tx)
        answered = await apps.get_developed_function(counting, app.id, developer, "kept")
        for app_id, user_id, name, refusal in (
            (app.id, stranger, "kept", apps.AppNotFound),
            ("app_none", developer, "kept", apps.AppNotFound),
            (app.id, developer, "deleted", apps.FunctionNotFound),
            (app.id, developer, "theirs", apps.FunctionNotFound),
        ):
            with pytest.raises(refusal):
                await apps.get_developed_function(tx, app_id, user_id, name)
    assert counting.statements == 1
    assert answered == (app, function)


async def test_an_app_is_read_with_what_it_keeps_in_one_statement(platform: Platform) -> None:
    keeping = await _app(platform)
    empty = await _app(platform)
    stranger = await _other_developer(platform)
    async with platform.store.transaction() as tx:
        await tx.execute(
            "INSERT INTO app_storage (app_id, kept_bytes, trimmed_bytes, trimmed_runs,"
            " trimmed_attempts, trimmed_at) VALUES ($1, 1234, 56, 2, 1, $2)",
            keeping.id,
            T0,
        )
    answers = []
    async with platform.store.transaction(reads=True) as tx:
        for app in (keeping, empty):
            assert app.developer_user_id is not None
            counting = CountingTransaction(tx)
            answered = await queues.developed_app_storage(counting, app.id, app.developer_user_id)
            assert counting.statements == 1
            assert answered == (app, await queues.app_storage(tx, app.id))
            answers.append(answered[1])
        with pytest.raises(apps.AppNotFound):
            await queues.developed_app_storage(tx, keeping.id, stranger)
        with pytest.raises(apps.AppNotFound):
            await queues.developed_app_storage(tx, "app_none", stranger)
    assert answers == [
        queues.AppStorage(
            kept_bytes=1234, trimmed_bytes=56, trimmed_runs=2, trimmed_attempts=1, trimmed_at=T0
        ),
        queues.AppStorage(),
    ]


async def test_a_webhook_is_read_with_its_health_counts_in_one_statement(
    platform: Platform, clock: FrozenClock
) -> None:
    clock.set(T0 + 30)
    app = await _app(platform)
    busy, quiet = await _webhooks(platform, app, 2)
    async with platform.store.transaction() as tx:
        await record_health(
            tx,
            [
                (busy.id, _outcome("d1", "delivered", T0)),
                (busy.id, _outcome("d2", "delivered", T0 + 1)),
                (busy.id, _outcome("f1", "failed", T0 + 2)),
                (busy.id, _outcome("old", "failed", T0 - DAY)),
            ],
            now=T0 + 10,
            disable_after=5 * DAY,
        )
    answers = []
    async with platform.store.transaction(reads=True) as tx:
        for hook in (busy, quiet):
            counting = CountingTransaction(tx)
            answered = await apps.get_webhook_health(counting, app.id, hook.id, now=clock.now())
            assert counting.statements == 1
            counts = await apps.health_counts(tx, [hook.id], now=clock.now())
            assert answered == apps.WebhookHealth(
                await apps.get_webhook(tx, app.id, hook.id), counts.get(hook.id, apps.Counts())
            )
            answers.append(answered.counts)
        with pytest.raises(apps.WebhookNotFound):
            await apps.get_webhook_health(tx, app.id, "wh_none", now=clock.now())
    assert answers == [apps.Counts(delivered=2, failed=1), apps.Counts()]


async def test_a_function_is_read_with_its_versions_in_one_statement(platform: Platform) -> None:
    app = await _app(platform)
    async with platform.store.transaction() as tx:
        for number, source in enumerate(SOURCES):
            upload = apps.FunctionUpload(
                "versioned", source, ("customer.created",), apps.compile_module(source)
            )
            await apps.put_function(tx, now=T0 + number, app=app, upload=upload)
        await apps.activate_version(tx, now=T0 + 10, app_id=app.id, name="versioned", version=2)
    async with platform.store.transaction(reads=True) as tx:
        counting = CountingTransaction(tx)
        function, versions = await apps.function_and_versions(counting, app.id, "versioned")
        assert counting.statements == 1
        assert function == await apps.get_function(tx, app.id, "versioned")
        assert versions == await apps.function_versions(tx, function)
        with pytest.raises(apps.FunctionNotFound):
            await apps.function_and_versions(tx, app.id, "none")
    assert [(v.version, v.active) for v in versions] == [(3, False), (2, True), (1, False)]
    assert [v.source_bytes for v in versions] == [len(s.encode()) for s in SOURCES[::-1]]
