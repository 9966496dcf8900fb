"""An app's access to a business, at the domain level on both stores.

Ending an installation is one explicit call that ends its state, its token families, its codes
and device codes and records ``app.uninstalled`` in the caller's transaction: all of it or none.
The consent decision offers the user's businesses and installs in the chosen one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
import trio

from ledgerport import access, apps, auth, books, catalog
from ledgerport.platform import Platform

TIMEOUT = 30
REDIRECT_URI = "https://app.example/callback"
SCOPES = ("invoices:read", "customers:read")


@dataclass(frozen=True)
class Setup:
    app: apps.App
    business: books.Business
    user_id: str
    installation: apps.Installation
    family_id: str
    access_token: str
    code: str
    user_code: str


async def _member(platform: Platform, tx: Any, business_id: str, role: str = "owner") -> str:
    user = await books.create_user(
        tx, now=platform.now(), email=f"{role}-{business_id}@example.com", password_hash="x"
    )
    await books.set_membership(
        tx, now=platform.now(), business_id=business_id, user_id=user.id, role=role, active=True
    )
    return user.id


async def _setup(platform: Platform, *, reviewed: bool = True, sandbox: bool = False) -> Setup:
    now, keyring = platform.now(), platform.keyring
    async with platform.store.transaction() as tx:
        business = await books.create_business(tx, now=now, name="Acme", sandbox=sandbox)
        user_id = await _member(platform, tx, business.id)
        app, _ = await apps.create_app(
            tx,
            keyring,
            now=now,
            name="Books Sync",
            type="CONFIDENTIAL",
            redirect_uris=[REDIRECT_URI],
            scopes=SCOPES,
            developer_user_id=user_id,
            reviewed=reviewed,
        )
        installation = await apps.install(
            tx, now=now, app_id=app.id, business_id=business.id, user_id=user_id, scopes=SCOPES
        )
        family_id, pair = await auth.start_family(
            tx,
            keyring,
            now=now,
            app_id=app.id,
            installation_id=installation.id,
            business_id=business.id,
            user_id=user_id,
            scopes=SCOPES,
            resource=None,
            grant_type=catalog.GRANT_AUTHORIZATION_CODE,
        )
        code = await auth.issue_code(
            tx,
            keyring,
            now=now,
            app=app,
            installation=installation,
            user_id=user_id,
            redirect_uri=REDIRECT_URI,
            scopes=SCOPES,
            code_challenge=None,
            code_challenge_method=None,
            resource=None,
        )
        device = await auth.start_device_authorization(
            tx, keyring, now=now, app=app, scopes=SCOPES, resource=None
        )
        pending = await auth.find_pending_device_request(
            tx, keyring, now=now, user_code=device.user_code
        )
        assert pending is not None
        assert await auth.approve_device_request(
            tx, now=now, request=pending, user_id=user_id, installation=installation
        )
    return Setup(
        app, business, user_id, installation, family_id, pair.access_token, code, device.user_code
    )


async def _state(platform: Platform, setup: Setup) -> dict[str, Any]:
    async with platform.store.transaction() as tx:
        grant = await auth.resolve_access_token(
            tx, platform.keyring, now=platform.now(), token=setup.access_token
        )
        return {
            "installation": await tx.fetchval(
                "SELECT state FROM installations WHERE id = $1", setup.installation.id
            ),
            "token_live": grant is not None,
            "family_revoked": await tx.fetchval(
                "SELECT revoked_at IS NOT NULL FROM token_families WHERE id = $1",
                setup.family_id,
            ),
            "code_cancelled": await tx.fetchval(
                "SELECT cancelled_at IS NOT NULL FROM authorization_codes"
                " WHERE installation_id = $1",
                setup.installation.id,
            ),
            "device_code": await tx.fetchval(
                "SELECT status FROM device_codes WHERE installation_id = $1",
                setup.installation.id,
            ),
            "events": [
                (row["type"], json.loads(row["data"]))
                for row in await tx.fetch(
                    "SELECT type, data FROM events WHERE app_id = $1 ORDER BY seq", setup.app.id
                )
            ],
        }


async def test_uninstall_ends_state_tokens_codes_and_device_codes_at_once(
    platform: Platform,
) -> None:
    with trio.fail_after(TIMEOUT):
        setup = await _setup(platform)
        async with platform.store.transaction() as tx:
            await access.uninstall(tx, now=platform.now(), installation_id=setup.installation.id)
        state = await _state(platform, setup)

    assert state["installation"] == "UNINSTALLED"
    assert not state["token_live"]
    assert state["family_revoked"]
    assert state["code_cancelled"]
    assert state["device_code"] == "cancelled"
    kind, data = state["events"][-1]
    assert kind == "app.uninstalled"
    assert data["installationId"] == setup.installation.id
    assert data["reason"] == "uninstalled"


async def test_revoke_access_ends_the_installation_as_revoked(platform: Platform) -> None:
    with trio.fail_after(TIMEOUT):
        setup = await _setup(platform)
        async with platform.store.transaction() as tx:
            await access.revoke_access(
                tx, now=platform.now(), business_id=setup.business.id, app_id=setup.app.id
            )
        state = await _state(platform, setup)

    assert state["installation"] == "REVOKED"
    assert (state["token_live"], state["device_code"]) == (False, "cancelled")
    assert state["events"][-1][1]["reason"] == "access_revoked"


async def test_an_ending_rolled_back_leaves_everything_alive(platform: Platform) -> None:
    class Interrupted(Exception):
        pass

    async def uninstall_then_fail(setup: Setup) -> None:
        async with platform.store.transaction() as tx:
            await access.uninstall(tx, now=platform.now(), installation_id=setup.installation.id)
            raise Interrupted

    with trio.fail_after(TIMEOUT):
        setup = await _setup(platform)
        with pytest.raises(Interrupted):
            await uninstall_then_fail(setup)
        state = await _state(platform, setup)

    assert state["installation"] == "ACTIVE"
    assert state["token_live"]
    assert not state["family_revoked"]
    assert not state["code_cancelled"]
    assert state["device_code"] == "approved"
    assert "app.uninstalled" not in [kind for kind, _ in state["events"]]


async def test_an_ended_installation_cannot_end_twice(platform: Platform) -> None:
    with trio.fail_after(TIMEOUT):
        setup = await _setup(platform)
        async with platform.store.transaction() as tx:
            await access.uninstall(tx, now=platform.now(), installation_id=setup.installation.id)
        with pytest.raises(apps.InstallationNotFound):
            async with platform.store.transaction() as tx:
                await access.uninstall(
                    tx, now=platform.now(), installation_id=setup.installation.id
                )
        with pytest.raises(apps.AppHasNoAccess):
            async with platform.store.transaction() as tx:
                await access.revoke_access(
                    tx, now=platform.now(), business_id=setup.business.id, app_id=setup.app.id
                )


async def test_apps_cannot_end_an_installation_alone() -> None:
    # Ending is the access package's: apps offers the state change only, so tokens cannot
    # outlive an installation whatever was imported first.
    assert not hasattr(apps, "uninstall")
    assert not hasattr(apps, "revoke_access")
    assert not [name for name in vars(apps) if "END_HOOK" in name.upper()]


async def test_consent_offers_active_memberships_and_installs_in_the_chosen_one(
    platform: Platform,
) -> None:
    with trio.fail_after(TIMEOUT):
        setup = await _setup(platform)
        async with platform.store.transaction() as tx:
            other = await books.create_business(tx, now=platform.now(), name="Other")
            await books.set_membership(
                tx,
                now=platform.now(),
                business_id=other.id,
                user_id=setup.user_id,
                role="admin",
                active=True,
            )
            offered = await access.consent_businesses(
                tx, setup.app, setup.user_id, ["invoices:read"]
            )
            installation = await access.approve(
                tx,
                now=platform.now(),
                app=setup.app,
                business_id=other.id,
                user_id=setup.user_id,
                scopes=["invoices:read"],
            )

    assert {offer.business.id for offer in offered} == {setup.business.id, other.id}
    assert {offer.business.id: offer.granted for offer in offered} == {
        setup.business.id: setup.installation.scopes,
        other.id: None,
    }
    assert (installation.business_id, installation.scopes) == (other.id, ("invoices:read",))


async def test_consent_refuses_a_business_the_user_is_not_in(platform: Platform) -> None:
    with trio.fail_after(TIMEOUT):
        setup = await _setup(platform)
        async with platform.store.transaction() as tx:
            stranger = await books.create_business(tx, now=platform.now(), name="Stranger")
        with pytest.raises(access.BusinessNotOffered):
            async with platform.store.transaction() as tx:
                await access.approve(
                    tx,
                    now=platform.now(),
                    app=setup.app,
                    business_id=stranger.id,
                    user_id=setup.user_id,
                    scopes=["invoices:read"],
                )


async def test_unreviewed_app_is_offered_sandboxes_only(platform: Platform) -> None:
    with trio.fail_after(TIMEOUT):
        setup = await _setup(platform, reviewed=True, sandbox=True)
        async with platform.store.transaction() as tx:
            unreviewed = await apps.set_app_reviewed(tx, setup.app.id, False)
            real = await books.create_business(tx, now=platform.now(), name="Real")
            await books.set_membership(
                tx,
                now=platform.now(),
                business_id=real.id,
                user_id=setup.user_id,
                role="owner",
                active=True,
            )
            offered = await access.consent_businesses(
                tx, unreviewed, setup.user_id, ["invoices:read"]
            )
        with pytest.raises(apps.AppNotReviewed):
            async with platform.store.transaction() as tx:
                await access.approve(
                    tx,
                    now=platform.now(),
                    app=unreviewed,
                    business_id=real.id,
                    user_id=setup.user_id,
                    scopes=["invoices:read"],
                )

    assert [offer.business.id for offer in offered] == [setup.business.id]


async def test_user_in_no_business_is_told_so(platform: Platform) -> None:
    with trio.fail_after(TIMEOUT):
        setup = await _setup(platform)
        async with platform.store.transaction() as tx:
            loner = await books.create_user(
                tx, now=platform.now(), email="loner@example.com", password_hash="x"
            )
        with pytest.raises(access.NoBusinessToConnect):
            async with platform.store.transaction() as tx:
                await access.consent_businesses(tx, setup.app, loner.id, ["invoices:read"])


async def test_a_member_whose_roles_may_not_install_is_told_so(platform: Platform) -> None:
    with trio.fail_after(TIMEOUT):
        setup = await _setup(platform)
        async with platform.store.transaction() as tx:
            viewer = await books.create_user(
                tx, now=platform.now(), email="viewer@example.com", password_hash="x"
            )
            await books.set_membership(
                tx,
                now=platform.now(),
                business_id=setup.business.id,
                user_id=viewer.id,
                role="viewer",
                active=True,
            )
        with pytest.raises(access.NoBusinessToInstallIn):
            async with platform.store.transaction() as tx:
                # Wider than the installation: only a role with apps:install may approve it.
                await access.consent_businesses(tx, setup.app, viewer.id, ["invoices:write"])
