"""Authorization codes, token families, rotation, revocation and introspection.

Every state change is one conditional write inside the caller's transaction: a code is consumed
only where still unused, a refresh token is marked used only where still unused (the new pair is
issued in the same transaction), so concurrent redemptions cannot both succeed.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ledgerport import catalog
from ledgerport.apps import App, Installation, ordered_scopes
from ledgerport.books import get_membership
from ledgerport.ids import new_id
from ledgerport.keys import Keyring, new_token
from ledgerport.storage import Reader, Row, Store, Transaction

from ._errors import InvalidDpopProof, InvalidGrant, InvalidRequest, InvalidTarget, OAuthError
from ._limits import Lookup


@dataclass(frozen=True)
class TokenPair:
    access_token: str
    refresh_token: str
    expires_in: int
    scopes: tuple[str, ...]
    bound: bool = False
    """The access token is bound to a DPoP key (RFC 9449): its type is ``DPoP``."""

    def response(self) -> dict[str, Any]:
        return {
            "access_token": self.access_token,
            "token_type": "DPoP" if self.bound else "Bearer",
            "expires_in": self.expires_in,
            "refresh_token": self.refresh_token,
            "scope": " ".join(self.scopes),
        }


@dataclass(frozen=True)
class AccessGrant:
    """What a live access token proves: the (user, business, app) triple and its scopes."""

    family_id: str
    app_id: str
    client_id: str
    installation_id: str
    business_id: str
    user_id: str
    scopes: frozenset[str]
    expires_at: float
    pinned_version: str | None = None
    """The app's pinned API version, if any."""
    permissions: frozenset[str] | None = None
    """What the consenting user's current role in the business holds, read with the token at
    each call; None when they are no longer an active member there."""
    jkt: str | None = None
    """The thumbprint of the DPoP key the token is bound to (RFC 9449), None for a bearer
    token."""


@dataclass(frozen=True, slots=True)
class Binding:
    """The DPoP keys (their thumbprints) a grant's new tokens are bound to: the access token to
    the proof's key, and a public client's refresh token too (RFC 9449 section 5); a
    confidential client's refresh token is bound by its client authentication instead."""

    access: str | None = None
    refresh: str | None = None

    @classmethod
    def of(cls, app: App, jkt: str | None) -> Binding:
        return cls(jkt, jkt if app.type == "PUBLIC" else None)


UNBOUND = Binding()


def pkce_matches(verifier: str, challenge: str, method: str) -> bool:
    if method == "S256":
        digest = hashlib.sha256(verifier.encode("ascii", "replace")).digest()
        computed = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
    else:
        computed = verifier
    # As bytes: compare_digest refuses non-ASCII text, which a verifier may hold.
    return hmac.compare_digest(
        computed.encode("utf-8", "surrogatepass"), challenge.encode("utf-8", "surrogatepass")
    )


def is_valid_pkce_value(value: str) -> bool:
    """RFC 7636: 43 to 128 characters of [A-Z a-z 0-9 - . _ ~]."""
    allowed = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
    return 43 <= len(value) <= 128 and set(value) <= allowed


async def issue_code(
    tx: Transaction,
    keyring: Keyring,
    *,
    now: float,
    app: App,
    installation: Installation,
    user_id: str,
    redirect_uri: str,
    scopes: Sequence[str],
    code_challenge: str | None,
    code_challenge_method: str | None,
    resource: str | None,
) -> str:
    code = new_token(catalog.CODE_PREFIX)
    await tx.execute(
        "INSERT INTO authorization_codes (code_hash, app_id, installation_id, business_id,"
        " user_id, redirect_uri, scopes, code_challenge, code_challenge_method, resource,"
        " created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        keyring.hash_token(code),
        app.id,
        installation.id,
        installation.business_id,
        user_id,
        redirect_uri,
        json.dumps(list(scopes)),
        code_challenge,
        code_challenge_method,
        resource,
        now,
        now + catalog.AUTHORIZATION_CODE_TTL,
    )
    return code


async def _issue_pair(
    tx: Transaction,
    keyring: Keyring,
    *,
    now: float,
    family_id: str,
    scopes: tuple[str, ...],
    binding: Binding = UNBOUND,
) -> TokenPair:
    access, refresh = (
        new_token(catalog.ACCESS_TOKEN_PREFIX),
        new_token(catalog.REFRESH_TOKEN_PREFIX),
    )
    await _insert_pair(
        tx,
        now=now,
        family_id=family_id,
        access_hash=keyring.hash_token(access),
        refresh_hash=keyring.hash_token(refresh),
        binding=binding,
    )
    return TokenPair(
        access, refresh, catalog.ACCESS_TOKEN_TTL, scopes, bound=binding.access is not None
    )


async def _insert_pair(
    tx: Transaction,
    *,
    now: float,
    family_id: str,
    access_hash: str,
    refresh_hash: str,
    binding: Binding = UNBOUND,
) -> None:
    await tx.execute(
        "INSERT INTO refresh_tokens (token_hash, family_id, created_at, expires_at, jkt)"
        " VALUES ($1, $2, $3, $4, $5)",
        refresh_hash,
        family_id,
        now,
        now + catalog.REFRESH_TOKEN_TTL,
        binding.refresh,
    )
    await tx.execute(
        "INSERT INTO access_tokens (token_hash, family_id, refresh_token_hash, created_at,"
        " expires_at, jkt) VALUES ($1, $2, $3, $4, $5, $6)",
        access_hash,
        family_id,
        refresh_hash,
        now,
        now + catalog.ACCESS_TOKEN_TTL,
        binding.access,
    )


async def _insert_family(
    tx: Transaction,
    *,
    now: float,
    app_id: str,
    installation_id: str,
    business_id: str,
    user_id: str,
    scopes: Sequence[str],
    resource: str | None,
    grant_type: str,
) -> str:
    family_id = new_id("fam")
    await tx.execute(
        "INSERT INTO token_families (id, app_id, installation_id, business_id, user_id, scopes,"
        " resource, grant_type, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        family_id,
        app_id,
        installation_id,
        business_id,
        user_id,
        json.dumps(list(scopes)),
        resource,
        grant_type,
        now,
    )
    return family_id


async def start_family(
    tx: Transaction,
    keyring: Keyring,
    *,
    now: float,
    app_id: str,
    installation_id: str,
    business_id: str,
    user_id: str,
    scopes: Sequence[str],
    resource: str | None,
    grant_type: str,
    binding: Binding = UNBOUND,
) -> tuple[str, TokenPair]:
    """A new token family (one consent) and its first access and refresh tokens, bound as
    ``binding`` says."""
    family_id = await _insert_family(
        tx,
        now=now,
        app_id=app_id,
        installation_id=installation_id,
        business_id=business_id,
        user_id=user_id,
        scopes=scopes,
        resource=resource,
        grant_type=grant_type,
    )
    pair = await _issue_pair(
        tx, keyring, now=now, family_id=family_id, scopes=tuple(scopes), binding=binding
    )
    return family_id, pair


async def start_family_from_grant(
    tx: Transaction,
    keyring: Keyring,
    *,
    now: float,
    row: Row,
    grant_type: str,
    binding: Binding = UNBOUND,
) -> tuple[str, TokenPair]:
    """The family of a redeemed code's row (authorization or approved device code): its app,
    installation, business, user, scopes and resource."""
    return await start_family(
        tx,
        keyring,
        now=now,
        app_id=row["app_id"],
        installation_id=row["installation_id"],
        business_id=row["business_id"],
        user_id=row["user_id"],
        scopes=json.loads(row["scopes"]),
        resource=row["resource"],
        grant_type=grant_type,
        binding=binding,
    )


RUN_GRANT_TYPE = "function_run"


@dataclass(frozen=True)
class RunGrant:
    """What one hosted-function run's token grants: the installation's scopes in its business,
    for its installing user, living ``ttl`` seconds."""

    app_id: str
    installation_id: str
    business_id: str
    user_id: str
    scopes: Sequence[str]
    ttl: float


async def mint_run_token(
    tx: Transaction,
    keyring: Keyring,
    *,
    now: float,
    app_id: str,
    installation_id: str,
    business_id: str,
    user_id: str,
    scopes: Sequence[str],
    ttl: float,
) -> tuple[str, str]:
    """The access token of one hosted-function run: the installation's granted scopes, for its
    installing user (whose role permissions every call reads afresh), living ``ttl`` seconds,
    with no refresh token. Answers its family's id (to revoke it when the run ends) and it."""
    grant = RunGrant(app_id, installation_id, business_id, user_id, tuple(scopes), ttl)
    (minted,) = await mint_run_tokens(tx, keyring, now=now, grants=[grant])
    return minted


async def mint_run_tokens(
    tx: Transaction, keyring: Keyring, *, now: float, grants: Sequence[RunGrant]
) -> list[tuple[str, str]]:
    """:func:`mint_run_token` of each of ``grants``, in order, written in two statements for
    all of them: each token's family id and the token."""
    if not grants:
        return []
    minted = [(new_id("fam"), new_token(catalog.ACCESS_TOKEN_PREFIX)) for _ in grants]
    await tx.executemany(
        "INSERT INTO token_families (id, app_id, installation_id, business_id, user_id, scopes,"
        " resource, grant_type, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        [
            (
                family_id,
                grant.app_id,
                grant.installation_id,
                grant.business_id,
                grant.user_id,
                json.dumps(list(grant.scopes)),
                None,
                RUN_GRANT_TYPE,
                now,
            )
            for (family_id, _), grant in zip(minted, grants, strict=True)
        ],
    )
    await tx.executemany(
        "INSERT INTO access_tokens (token_hash, family_id, refresh_token_hash, created_at,"
        " expires_at) VALUES ($1, $2, NULL, $3, $4)",
        [
            (keyring.hash_token(token), family_id, now, now + grant.ttl)
            for (family_id, token), grant in zip(minted, grants, strict=True)
        ],
    )
    return minted


async def revoke_families(
    tx: Transaction, *, now: float, family_ids: Sequence[str], reason: str
) -> None:
    """:func:`revoke_family` of each of ``family_ids``, in one statement for all of them."""
    if family_ids:
        await tx.executemany(
            "UPDATE token_families SET revoked_at = $1, revoked_reason = $2"
            " WHERE id = $3 AND revoked_at IS NULL",
            [(now, reason, family_id) for family_id in family_ids],
        )


async def revoke_family(tx: Transaction, *, now: float, family_id: str, reason: str) -> None:
    await tx.execute(
        "UPDATE token_families SET revoked_at = $1, revoked_reason = $2"
        " WHERE id = $3 AND revoked_at IS NULL",
        now,
        reason,
        family_id,
    )
    await tx.execute(
        "UPDATE refresh_tokens SET revoked_at = $1 WHERE family_id = $2 AND revoked_at IS NULL",
        now,
        family_id,
    )
    await tx.execute(
        "UPDATE access_tokens SET revoked_at = $1 WHERE family_id = $2 AND revoked_at IS NULL",
        now,
        family_id,
    )


async def authorization_stands(
    tx: Transaction, *, installation_id: str, business_id: str, user_id: str
) -> bool:
    """Does the consent behind a code, device code or token family still stand: its
    installation ACTIVE and its consenting user still an active member of the business?

    Every grant that issues tokens for a (user, business) asks this before issuing: the data API
    would refuse a deactivated member's tokens anyway, and a grant that issued them would tell
    the app the authorization lives on. When it does not stand the grant answers invalid_grant
    with no description (the spec's "authorization gone").
    """
    state = await tx.fetchval("SELECT state FROM installations WHERE id = $1", installation_id)
    if state != "ACTIVE":
        return False
    membership = await get_membership(tx, business_id, user_id)
    return membership is not None and membership.active


@dataclass(frozen=True)
class Outcome:
    """A grant's result: tokens, or an error to answer after the transaction commits.

    Some failures must still write (a replayed code or refresh token burns its family), so the
    grant functions return the error instead of raising, and the caller raises after commit.
    """

    pair: TokenPair | None = None
    error: OAuthError | None = None

    def unwrap(self) -> TokenPair:
        if self.error is not None:
            raise self.error
        assert self.pair is not None
        return self.pair


async def redeem_code(
    tx: Transaction,
    keyring: Keyring,
    *,
    now: float,
    app: App,
    code: str,
    redirect_uri: str,
    code_verifier: str | None,
    resource: str | None,
    jkt: str | None = None,
) -> Outcome:
    """Redeem an authorization code for a new family's tokens, bound to the DPoP key ``jkt``
    when the request carried a proof."""
    row = await tx.fetchrow(
        "SELECT * FROM authorization_codes WHERE code_hash = $1", keyring.hash_token(code)
    )
    if row is None or row["app_id"] != app.id:
        return Outcome(error=InvalidGrant())
    if row["used_at"] is not None:
        # RFC 6749 10.5 / RFC 9700: a replayed code revokes what it issued.
        if row["family_id"]:
            await revoke_family(tx, now=now, family_id=row["family_id"], reason="code_replayed")
        return Outcome(error=InvalidGrant(catalog.GRANT_CODE_USED))
    if row["cancelled_at"] is not None:
        return Outcome(error=InvalidGrant())
    if now >= row["expires_at"]:
        return Outcome(error=InvalidGrant(catalog.GRANT_EXPIRED))
    if redirect_uri != row["redirect_uri"]:
        return Outcome(error=InvalidGrant(catalog.GRANT_REDIRECT_MISMATCH))
    challenge = row["code_challenge"]
    if challenge is not None:
        if not code_verifier:
            return Outcome(error=InvalidRequest("code_verifier is required for this code"))
        if not pkce_matches(code_verifier, challenge, row["code_challenge_method"]):
            return Outcome(error=InvalidGrant(catalog.GRANT_PKCE_FAILED))
    elif code_verifier:
        # Downgrade protection: a verifier for a code issued without a challenge is refused.
        return Outcome(error=InvalidGrant(catalog.GRANT_PKCE_FAILED))
    if resource is not None and row["resource"] is not None and resource != row["resource"]:
        return Outcome(error=InvalidTarget("resource differs from the authorization"))
    if not await authorization_stands(
        tx,
        installation_id=row["installation_id"],
        business_id=row["business_id"],
        user_id=row["user_id"],
    ):
        return Outcome(error=InvalidGrant())
    claimed = await tx.execute(
        "UPDATE authorization_codes SET used_at = $1 WHERE code_hash = $2 AND used_at IS NULL",
        now,
        row["code_hash"],
    )
    if not claimed:
        return Outcome(error=InvalidGrant(catalog.GRANT_CODE_USED))
    family_id, pair = await start_family_from_grant(
        tx,
        keyring,
        now=now,
        row=row,
        grant_type=catalog.GRANT_AUTHORIZATION_CODE,
        binding=Binding.of(app, jkt),
    )
    await tx.execute(
        "UPDATE authorization_codes SET family_id = $1 WHERE code_hash = $2",
        family_id,
        row["code_hash"],
    )
    return Outcome(pair=pair)


async def rotate_refresh_token(
    tx: Transaction,
    keyring: Keyring,
    *,
    now: float,
    app: App,
    refresh_token: str,
    resource: str | None,
    jkt: str | None = None,
) -> Outcome:
    """Rotate a refresh token: a new pair, bound to the DPoP key ``jkt`` when the request
    carried a proof. A refresh token bound to a key is refreshed only with a proof of it."""
    token_hash = keyring.hash_token(refresh_token)
    # With what authorization_stands reads, in the same statement.
    row = await tx.fetchrow(
        "SELECT r.*, f.app_id, f.installation_id, f.business_id, f.user_id, f.scopes,"
        " f.resource AS family_resource, f.revoked_at AS family_revoked_at,"
        " i.state AS installation_state, m.active AS member_active"
        " FROM refresh_tokens r JOIN token_families f ON f.id = r.family_id"
        " LEFT JOIN installations i ON i.id = f.installation_id"
        " LEFT JOIN memberships m ON m.business_id = f.business_id AND m.user_id = f.user_id"
        " WHERE r.token_hash = $1",
        token_hash,
    )
    if row is None or row["app_id"] != app.id:
        return Outcome(error=InvalidGrant())
    # Authorization gone (uninstalled, access revoked, the user no longer an active member)
    # answers with no description, and leaves the token as it is: a member made active again
    # refreshes again.
    if row["installation_state"] != "ACTIVE" or not row["member_active"]:
        return Outcome(error=InvalidGrant())
    if row["revoked_at"] is not None or row["family_revoked_at"] is not None:
        return Outcome(error=InvalidGrant(catalog.GRANT_REVOKED))
    if row["used_at"] is not None:
        await revoke_family(tx, now=now, family_id=row["family_id"], reason="refresh_reuse")
        return Outcome(error=InvalidGrant(catalog.GRANT_REFRESH_REUSE))
    if now >= row["expires_at"]:
        return Outcome(error=InvalidGrant(catalog.GRANT_EXPIRED))
    family_resource = row["family_resource"]
    if resource is not None and family_resource is not None and resource != family_resource:
        return Outcome(error=InvalidTarget("resource differs from the grant"))
    if row["jkt"] is not None and jkt != row["jkt"]:
        return Outcome(error=InvalidDpopProof(REFRESH_BOUND))
    binding = Binding.of(app, jkt)
    access, refresh = (
        new_token(catalog.ACCESS_TOKEN_PREFIX),
        new_token(catalog.REFRESH_TOKEN_PREFIX),
    )
    claimed = await _claim_and_issue(
        tx,
        now=now,
        spent=token_hash,
        family_id=row["family_id"],
        access_hash=keyring.hash_token(access),
        refresh_hash=keyring.hash_token(refresh),
        binding=binding,
    )
    if not claimed:
        await revoke_family(tx, now=now, family_id=row["family_id"], reason="refresh_reuse")
        return Outcome(error=InvalidGrant(catalog.GRANT_REFRESH_REUSE))
    scopes = tuple(json.loads(row["scopes"]))
    bound = binding.access is not None
    return Outcome(pair=TokenPair(access, refresh, catalog.ACCESS_TOKEN_TTL, scopes, bound))


REFRESH_BOUND = "the refresh token is bound to another DPoP key: present a proof of that key"


def _rotation_writes(refresh_jkt: str, access_jkt: str) -> str:
    """A rotation's writes after its claim (the CTE ``claimed``, the spent token's family):
    the spent token's access token revoked and the new pair inserted, only where the claim was
    made. Parameters: $1 now, $2 the spent token's hash, $3 and $4 the new refresh and access
    tokens' hashes, $5 and $6 their expiries; ``refresh_jkt`` and ``access_jkt`` name the
    parameters of the DPoP keys they are bound to."""
    return (
        " spent AS ("
        " UPDATE access_tokens SET revoked_at = $1"
        " WHERE refresh_token_hash = $2 AND revoked_at IS NULL"
        " AND EXISTS (SELECT 1 FROM claimed)),"
        " refreshed AS ("
        " INSERT INTO refresh_tokens (token_hash, family_id, created_at, expires_at, jkt)"
        f" SELECT $3, family_id, $1, $5, {refresh_jkt}::text FROM claimed),"
        " issued AS ("
        " INSERT INTO access_tokens (token_hash, family_id, refresh_token_hash, created_at,"
        f" expires_at, jkt) SELECT $4, family_id, $3, $1, $6, {access_jkt}::text FROM claimed)"
    )


_NOT_BY_INDEX = "({}) IS TRUE"
"""A token's app (and business) compared so that no index can serve the comparison: a token
is found by its hash and its family by id, one row each. Compared plainly, PostgreSQL may plan
the family's read by the index on (app_id, business_id) when its statistics show few families
an app (a prepared statement keeps the plan) and then read every family of the app for each
request, a read that grows with every token exchange and authorization (docs/performance.md,
"Rate limits counted in the process, and a token family read by id")."""

_ROTATE_AT_ONCE_POSTGRES = (
    " claimed AS ("
    " UPDATE refresh_tokens r SET used_at = $1"
    " FROM token_families f JOIN installations i ON i.id = f.installation_id"
    " JOIN memberships m ON m.business_id = f.business_id AND m.user_id = f.user_id"
    " WHERE r.token_hash = $2 AND f.id = r.family_id AND r.used_at IS NULL"
    " AND r.revoked_at IS NULL AND $1 < r.expires_at AND f.revoked_at IS NULL"
    f" AND {_NOT_BY_INDEX.format('f.app_id = $7')} AND i.state = 'ACTIVE' AND m.active"
    " AND ($8::text IS NULL OR f.resource IS NULL OR f.resource = $8)"
    " AND r.jkt IS NULL AND EXISTS (SELECT FROM ledgerport_allowed)"
    " RETURNING r.family_id, f.scopes)," + _rotation_writes("NULL", "NULL")
)
"""A whole rotation as PostgreSQL WITH queries, gated on ``ledgerport_allowed`` (the request
counted, see ``auth.Lookup``): the token claimed only where every condition under which
``rotate_refresh_token`` issues a pair holds (the same ones, in SQL), then
``_rotation_writes``."""


@dataclass(frozen=True, slots=True)
class RefreshRotation:
    """The rotation of a refresh token that is good, made in the statement that counts the
    request (``RateLimiter.take_unless_locked_then_read``, :meth:`lookup`) on PostgreSQL: one
    round trip for the limits and the rotation, where the count's statement and a transaction
    would take four.

    Its row (:meth:`outcome`) is found only when the token was rotated; nothing is written
    otherwise (unknown, another app's, used, revoked, expired, its authorization gone, another
    resource, claimed meanwhile, bound to a DPoP key, or the request refused), and
    :func:`rotate_refresh_token` in a transaction finds out which and answers it (burning the
    family of a replayed token). A request with a DPoP proof is never rotated so: its proof is
    recorded first, once the client is known (``http/_dpop``)."""

    spent_hash: str
    access: str
    refresh: str
    access_hash: str
    refresh_hash: str
    now: float
    resource: str | None

    @classmethod
    def of(
        cls, store: Store, keyring: Keyring, *, now: float, refresh_token: str, resource: str | None
    ) -> RefreshRotation | None:
        """The rotation of ``refresh_token``, with a new pair; None on SQLite, whose
        transaction makes no round trip."""
        if store.kind != "postgresql":
            return None
        access = new_token(catalog.ACCESS_TOKEN_PREFIX)
        refresh = new_token(catalog.REFRESH_TOKEN_PREFIX)
        return cls(
            keyring.hash_token(refresh_token),
            access,
            refresh,
            keyring.hash_token(access),
            keyring.hash_token(refresh),
            now,
            resource,
        )

    def lookup(self, app: App) -> Lookup:
        """The rotation for ``app`` (the authenticated client), answering the family's scopes."""
        return Lookup(
            "SELECT scopes FROM claimed",
            (
                self.now,
                self.spent_hash,
                self.refresh_hash,
                self.access_hash,
                self.now + catalog.REFRESH_TOKEN_TTL,
                self.now + catalog.ACCESS_TOKEN_TTL,
                app.id,
                self.resource,
            ),
            writes=_ROTATE_AT_ONCE_POSTGRES,
        )

    def outcome(self, row: Row) -> Outcome:
        """The new pair, from the row :meth:`lookup` found."""
        scopes = tuple(json.loads(row["scopes"]))
        return Outcome(pair=TokenPair(self.access, self.refresh, catalog.ACCESS_TOKEN_TTL, scopes))


_ROTATE_POSTGRES = (
    "WITH claimed AS ("
    " UPDATE refresh_tokens SET used_at = $1"
    " WHERE token_hash = $2 AND used_at IS NULL AND revoked_at IS NULL RETURNING family_id),"
    + _rotation_writes("$7", "$8")
    + " SELECT count(*) FROM claimed"
)
"""The rotation's writes as one PostgreSQL statement (one round trip): the spent token marked
used where still unused and unrevoked, and only then its access token revoked and the new pair
inserted."""


async def _claim_and_issue(
    tx: Transaction,
    *,
    now: float,
    spent: str,
    family_id: str,
    access_hash: str,
    refresh_hash: str,
    binding: Binding,
) -> bool:
    """The one atomic step of a rotation: mark the refresh token ``spent`` used, only where it
    is still unused and unrevoked; then revoke the access token issued with it and insert the
    new pair. Answers whether the token was claimed (nothing else is written when not)."""
    if tx.kind == "postgresql":
        claimed = await tx.fetchval(
            _ROTATE_POSTGRES,
            now,
            spent,
            refresh_hash,
            access_hash,
            now + catalog.REFRESH_TOKEN_TTL,
            now + catalog.ACCESS_TOKEN_TTL,
            binding.refresh,
            binding.access,
        )
        return bool(claimed)
    if not await tx.execute(
        "UPDATE refresh_tokens SET used_at = $1"
        " WHERE token_hash = $2 AND used_at IS NULL AND revoked_at IS NULL",
        now,
        spent,
    ):
        return False
    await tx.execute(
        "UPDATE access_tokens SET revoked_at = $1"
        " WHERE refresh_token_hash = $2 AND revoked_at IS NULL",
        now,
        spent,
    )
    await _insert_pair(
        tx,
        now=now,
        family_id=family_id,
        access_hash=access_hash,
        refresh_hash=refresh_hash,
        binding=binding,
    )
    return True


_GRANT_FAMILY_COLUMNS = (
    "f.id AS family_id, f.app_id, a.client_id, a.status AS app_status, f.installation_id,"
    " i.state AS installation_state, f.business_id, f.user_id, f.scopes,"
    " f.revoked_at AS family_revoked_at, a.pinned_version"
)
_GRANT_FAMILY_JOINS = (
    " JOIN token_families f ON f.id = t.family_id"
    " JOIN apps a ON a.id = f.app_id JOIN installations i ON i.id = f.installation_id"
)
_GRANT_COLUMNS = (
    _GRANT_FAMILY_COLUMNS
    + ", m.active AS member_active, m.role AS member_role, r.permissions AS role_override"
)
_GRANT_JOINS = (
    _GRANT_FAMILY_JOINS
    + " LEFT JOIN memberships m ON m.business_id = f.business_id AND m.user_id = f.user_id"
    " LEFT JOIN role_permissions r ON r.business_id = f.business_id AND r.role = m.role"
)
_GRANT_COLUMNS_ALONE = (
    _GRANT_FAMILY_COLUMNS + ", NULL AS member_active, NULL AS member_role, NULL AS role_override"
)
"""The grant's columns without the user's standing in the business (what introspection needs),
read from ``_GRANT_FAMILY_JOINS`` alone."""


def _member_permissions(row: Row) -> frozenset[str] | None:
    """What the member's role holds (its override in the business, else the catalog's
    default), or None for no active member."""
    if row["member_role"] is None or not row["member_active"]:
        return None
    if row["role_override"] is None:
        return catalog.ROLE_DEFAULTS[row["member_role"]]
    return frozenset(orjson.loads(row["role_override"]))


def _grant_from_row(row: Row, expires_at: float) -> AccessGrant | None:
    if (
        row["revoked_at"] is not None
        or row["family_revoked_at"] is not None
        or row["app_status"] != "ACTIVE"
        or row["installation_state"] != "ACTIVE"
    ):
        return None
    return AccessGrant(
        family_id=row["family_id"],
        app_id=row["app_id"],
        client_id=row["client_id"],
        installation_id=row["installation_id"],
        business_id=row["business_id"],
        user_id=row["user_id"],
        scopes=frozenset(orjson.loads(row["scopes"])),
        expires_at=expires_at,
        pinned_version=row["pinned_version"],
        permissions=_member_permissions(row),
        jkt=row["jkt"],
    )


def _grant_lookup(keyring: Keyring, token: str, table: str, *, standing: bool = True) -> Lookup:
    """The statement reading the grant behind a token of ``table`` (access_tokens or
    refresh_tokens), with the user's standing in the business (without ``standing``, none: its
    columns NULL, two tables fewer to read); :func:`_live` decides."""
    used = "t.used_at" if table == "refresh_tokens" else "NULL AS used_at"
    columns, joins = (
        (_GRANT_COLUMNS, _GRANT_JOINS) if standing else (_GRANT_COLUMNS_ALONE, _GRANT_FAMILY_JOINS)
    )
    return Lookup(
        f"SELECT t.revoked_at, {used}, t.expires_at, t.jkt, {columns}"
        f" FROM {table} t{joins} WHERE t.token_hash = $1",
        (keyring.hash_token(token),),
    )


def _live(row: Row | None, now: float) -> AccessGrant | None:
    """The live grant in a row of :func:`_grant_lookup`: known, unexpired, unrevoked, not yet
    used (refresh), its app and installation ACTIVE."""
    if row is None or now >= row["expires_at"] or row["used_at"] is not None:
        return None
    return _grant_from_row(row, float(row["expires_at"]))


async def _live_grant(
    reader: Reader, keyring: Keyring, *, now: float, token: str, table: str
) -> AccessGrant | None:
    """The live grant behind a token of ``table``, read in one statement."""
    lookup = _grant_lookup(keyring, token, table)
    return _live(await reader.fetchrow(lookup.sql, *lookup.args), now)


async def resolve_access_token(
    reader: Reader, keyring: Keyring, *, now: float, token: str
) -> AccessGrant | None:
    """The live grant behind a bearer token, or None (unknown, expired, revoked, app stopped).

    One statement: outside a transaction (``Store.autocommit``) it is one round trip."""
    return await _live_grant(reader, keyring, now=now, token=token, table="access_tokens")


TOKEN_OWNERS_KEPT = 10_000
"""Access tokens whose app and business a process keeps (the most recently used)."""


class TokenOwners:
    """The app and business of the access tokens this process saw last, by the token's keyed
    hash: what a token is of never changes, so a call whose token is known here counts its
    budgets and reads its grant in one statement. Whether the token is live is never kept: it
    is read at every call, in that statement, so a revoked token is refused on the next call."""

    def __init__(self, size: int = TOKEN_OWNERS_KEPT) -> None:
        self._size = size
        self._owners: OrderedDict[str, tuple[str, str]] = OrderedDict()

    def get(self, key: str) -> tuple[str, str] | None:
        owner = self._owners.get(key)
        if owner is not None:
            self._owners.move_to_end(key)
        return owner

    def keep(self, key: str, owner: tuple[str, str]) -> None:
        self._owners[key] = owner
        self._owners.move_to_end(key)
        if len(self._owners) > self._size:
            self._owners.popitem(last=False)

    def forget(self, key: str) -> None:
        self._owners.pop(key, None)

    def __len__(self) -> int:
        return len(self._owners)


def live_access_token_lookup(
    keyring: Keyring, *, token: str, now: float, app_id: str, business_id: str
) -> Lookup:
    """The statement reading the grant behind a bearer token only when it is live and of
    ``app_id`` in ``business_id`` (no row otherwise): the conditions of
    :func:`resolve_access_token`, in SQL, so that a count can wait for them
    (``RateLimiter.take_then_if_found``). Its row makes a grant with :func:`live_grant`."""
    lookup = _grant_lookup(keyring, token, "access_tokens")
    return Lookup(
        f"{lookup.sql} AND t.revoked_at IS NULL AND t.expires_at > $2"
        " AND f.revoked_at IS NULL AND a.status = 'ACTIVE' AND i.state = 'ACTIVE'"
        f" AND {_NOT_BY_INDEX.format('f.app_id = $3 AND f.business_id = $4')}",
        (*lookup.args, now, app_id, business_id),
    )


def live_grant(row: Row, now: float) -> AccessGrant | None:
    """The live grant in a row of :func:`live_access_token_lookup` (None only when ``now`` has
    moved past its expiry since)."""
    return _live(row, now)


_INTROSPECTED = {"access_tokens": "Bearer", "refresh_tokens": "refresh_token"}
"""The tables introspection looks in, and the ``token_type`` it names for each."""


def _introspected_tables(hint: str | None) -> list[str]:
    tables = list(_INTROSPECTED)
    if hint == "refresh_token":
        tables.reverse()
    return tables


def introspection_lookup(keyring: Keyring, *, token: str, hint: str | None) -> Lookup:
    """The first statement :func:`introspect` would make (for the kind of token ``hint``
    names, else an access token): a caller may make it beside its own (the client's limits,
    in one round trip) and pass its row to :func:`introspect` as ``first``."""
    return _grant_lookup(keyring, token, _introspected_tables(hint)[0], standing=False)


_NOT_READ: Any = object()


async def introspect(
    reader: Reader,
    keyring: Keyring,
    *,
    now: float,
    app: App,
    token: str,
    hint: str | None,
    first: Row | None = _NOT_READ,
) -> dict[str, Any]:
    """RFC 7662: the caller's own live token is described; anything else is inactive.

    Reads only, a statement for each kind of token tried: outside a transaction
    (``Store.autocommit``) each is one round trip. ``first``, when given, is the row the
    caller read for :func:`introspection_lookup` (None: it found none)."""
    for index, table in enumerate(_introspected_tables(hint)):
        if index == 0 and first is not _NOT_READ:
            row = first
        else:
            lookup = _grant_lookup(keyring, token, table, standing=False)
            row = await reader.fetchrow(lookup.sql, *lookup.args)
        grant = _live(row, now)
        if grant is not None:
            if grant.app_id != app.id:
                return {"active": False}
            token_type = _INTROSPECTED[table]
            answer: dict[str, Any] = {
                "active": True,
                "scope": " ".join(ordered_scopes(grant.scopes)),
                "exp": int(grant.expires_at),
                "client_id": grant.client_id,
                "sub": grant.user_id,
                "token_type": "DPoP" if grant.jkt and token_type == "Bearer" else token_type,
            }
            if grant.jkt is not None:
                answer["cnf"] = {"jkt": grant.jkt}
            return answer
    return {"active": False}


async def revoke_token(
    tx: Transaction, keyring: Keyring, *, now: float, app: App, token: str, hint: str | None
) -> None:
    """RFC 7009: revoke the caller's token; a refresh token takes its whole family with it."""
    token_hash = keyring.hash_token(token)
    lookups = ["access_tokens", "refresh_tokens"]
    if hint == "refresh_token":
        lookups.reverse()
    for table in lookups:
        row = await tx.fetchrow(
            f"SELECT t.family_id, f.app_id FROM {table} t"
            " JOIN token_families f ON f.id = t.family_id WHERE t.token_hash = $1",
            token_hash,
        )
        if row is None:
            continue
        if row["app_id"] != app.id:
            return
        if table == "refresh_tokens":
            await revoke_family(tx, now=now, family_id=row["family_id"], reason="client_revoked")
        else:
            await tx.execute(
                "UPDATE access_tokens SET revoked_at = $1 WHERE token_hash = $2"
                " AND revoked_at IS NULL",
                now,
                token_hash,
            )
        return


async def end_installation_grants(tx: Transaction, *, now: float, installation_id: str) -> None:
    """Uninstall or revoked access: every token family dies and unredeemed codes are cancelled."""
    families = await tx.fetch(
        "SELECT id FROM token_families WHERE installation_id = $1 AND revoked_at IS NULL",
        installation_id,
    )
    for family in families:
        await revoke_family(tx, now=now, family_id=family["id"], reason="installation_ended")
    await tx.execute(
        "UPDATE authorization_codes SET cancelled_at = $1"
        " WHERE installation_id = $2 AND used_at IS NULL AND cancelled_at IS NULL",
        now,
        installation_id,
    )


async def purge_expired_grants(tx: Transaction, *, now: float) -> dict[str, int]:
    """Delete codes and tokens that expired more than a day ago; answers counts by kind."""
    cutoff = now - catalog.EXPIRED_ROW_GRACE
    return {
        "authorization_code": await tx.execute(
            "DELETE FROM authorization_codes WHERE expires_at <= $1", cutoff
        ),
        "access_token": await tx.execute(
            "DELETE FROM access_tokens WHERE expires_at <= $1", cutoff
        ),
        "refresh_token": await tx.execute(
            "DELETE FROM refresh_tokens WHERE expires_at <= $1", cutoff
        ),
    }
