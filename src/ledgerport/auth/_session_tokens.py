"""Session tokens of embedded apps and their exchange for OAuth tokens (RFC 8693).

A session token is a short JWT (ES256) the app bridge hands an embedded page: ``iss`` the
service, ``aud`` the app's client_id, ``sub`` the viewing user, ``bid`` the business, ``typ``
``session``, a single-use ``jti``, ``iat``/``nbf``/``exp`` (50 s), and a ``kid`` header naming the
signing key. App backends verify it with the published JWKS; the service verifies it again on
exchange and spends its ``jti`` whatever the outcome.

Signing keys rotate: a key signs for ``catalog.SIGNING_KEY_PERIOD``, its successor is published
``catalog.SIGNING_KEY_PREPUBLISH`` before it starts signing (so JWKS caches learn it in time), and
a retired key stays published and accepted for ``catalog.SIGNING_KEY_RETIRED_GRACE``, far beyond
any token it signed.
Private keys are stored encrypted under the root key.
"""

from __future__ import annotations

import functools
import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from jwt.algorithms import ECAlgorithm

from ledgerport import catalog
from ledgerport.apps import App, AppNotActive, NotAMember, active_installation
from ledgerport.books import get_business, get_membership, get_user
from ledgerport.keys import DecryptionError, Keyring
from ledgerport.storage import Row, Transaction

from ._errors import InvalidGrant, InvalidScope, NoActiveInstallation, OAuthError
from ._grants import Binding, Outcome, start_family

SIGNING_ALGORITHM = "ES256"
SESSION_TOKEN_TYP = "session"
_JTI_MAX_LENGTH = 128


@dataclass(frozen=True)
class SigningKey:
    kid: str
    public_jwk: dict[str, Any]
    activates_at: float
    retires_at: float
    expires_at: float
    sealed_private_key: str

    @classmethod
    def from_row(cls, row: Row) -> SigningKey:
        return cls(
            kid=row["kid"],
            public_jwk=json.loads(row["public_jwk"]),
            activates_at=float(row["activates_at"]),
            retires_at=float(row["retires_at"]),
            expires_at=float(row["expires_at"]),
            sealed_private_key=row["private_key"],
        )

    def private_key(self, keyring: Keyring) -> ec.EllipticCurvePrivateKey:
        pem = keyring.decrypt(self.sealed_private_key, context=f"signing-key:{self.kid}")
        key = serialization.load_pem_private_key(pem.encode(), password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        return key


async def _create_key(
    tx: Transaction, keyring: Keyring, *, now: float, activates_at: float
) -> None:
    kid = secrets.token_urlsafe(12)
    private = ec.generate_private_key(ec.SECP256R1())
    pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    public_jwk = ECAlgorithm.to_jwk(private.public_key(), as_dict=True)
    public_jwk.update({"kid": kid, "alg": SIGNING_ALGORITHM, "use": "sig"})
    retires_at = activates_at + catalog.SIGNING_KEY_PERIOD
    await tx.execute(
        "INSERT INTO signing_keys (kid, algorithm, private_key, public_jwk, created_at,"
        " activates_at, retires_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        kid,
        SIGNING_ALGORITHM,
        keyring.encrypt(pem, context=f"signing-key:{kid}"),
        json.dumps(public_jwk),
        now,
        activates_at,
        retires_at,
        retires_at + catalog.SIGNING_KEY_RETIRED_GRACE,
    )


async def published_keys(tx: Transaction, *, now: float) -> list[SigningKey]:
    """Keys a verifier must know now: the signing one, its successor, and recently retired ones."""
    rows = await tx.fetch(
        "SELECT * FROM signing_keys WHERE expires_at > $1 ORDER BY activates_at, kid", now
    )
    return [SigningKey.from_row(row) for row in rows]


def _signing_key(keys: Sequence[SigningKey], now: float) -> SigningKey | None:
    live = [k for k in keys if k.activates_at <= now < k.retires_at]
    return max(live, key=lambda k: (k.activates_at, k.kid)) if live else None


async def rotate_signing_keys(tx: Transaction, keyring: Keyring, *, now: float) -> SigningKey:
    """Make sure a key signs now and its successor is published in time; answers the signer."""
    keys = await published_keys(tx, now=now)
    if _signing_key(keys, now) is None:
        await _create_key(tx, keyring, now=now, activates_at=now)
        keys = await published_keys(tx, now=now)
    # Retired keys (also one retired early because it no longer opens) have no successor to plan.
    unretired = [k for k in keys if k.retires_at > now]
    newest = max(unretired, key=lambda k: (k.activates_at, k.kid))
    if newest.retires_at - now <= catalog.SIGNING_KEY_PREPUBLISH:
        await _create_key(tx, keyring, now=now, activates_at=newest.retires_at)
        keys = await published_keys(tx, now=now)
    signer = _signing_key(keys, now)
    assert signer is not None
    return signer


def jwks(keys: Sequence[SigningKey]) -> dict[str, Any]:
    """The JSON Web Key Set (RFC 7517) of the published public keys."""
    return {"keys": [k.public_jwk for k in keys]}


async def _signing_private_key(
    tx: Transaction, keyring: Keyring, *, now: float
) -> tuple[str, ec.EllipticCurvePrivateKey]:
    """The signer's kid and private key. A key sealed under an earlier root key (the secret key
    was replaced) cannot sign: it is retired at once and a fresh key takes over."""
    while True:
        signer = await rotate_signing_keys(tx, keyring, now=now)
        try:
            return signer.kid, signer.private_key(keyring)
        except DecryptionError:
            await tx.execute(
                "UPDATE signing_keys SET retires_at = $1 WHERE kid = $2", now, signer.kid
            )


@dataclass(frozen=True)
class SessionToken:
    token: str
    expires_at: int


async def check_embedded_access(
    tx: Transaction, *, app: App, business_id: str, user_id: str
) -> None:
    """May the user view the app embedded in the business? Raises the reason when not.

    BusinessNotFound or UserNotFound for an unknown business or user; AppNotActive,
    NoActiveInstallation or NotAMember when the app is stopped, has no ACTIVE installation
    there, or the user is not an active member.
    """
    await get_business(tx, business_id)
    await get_user(tx, user_id)
    if not app.active:
        raise AppNotActive(app.id)
    if await active_installation(tx, app.id, business_id) is None:
        raise NoActiveInstallation(app.id, business_id)
    membership = await get_membership(tx, business_id, user_id)
    if membership is None or not membership.active:
        raise NotAMember(user_id, business_id)


async def issue_session_token(
    tx: Transaction,
    keyring: Keyring,
    *,
    now: float,
    issuer: str,
    app: App,
    business_id: str,
    user_id: str,
) -> SessionToken:
    """A session token for an active member viewing an app ACTIVE-installed in the business.

    Raises as :func:`check_embedded_access` does when the user may not view the app there.
    """
    await check_embedded_access(tx, app=app, business_id=business_id, user_id=user_id)
    private_key = await _signing_private_key(tx, keyring, now=now)
    issued_at = int(now)
    expires_at = issued_at + catalog.SESSION_TOKEN_TTL
    claims = {
        "iss": issuer,
        "aud": app.client_id,
        "sub": user_id,
        "bid": business_id,
        "typ": SESSION_TOKEN_TYP,
        "jti": secrets.token_urlsafe(18),
        "iat": issued_at,
        "nbf": issued_at,
        "exp": expires_at,
    }
    token = jwt.encode(
        claims,
        private_key[1],
        algorithm=SIGNING_ALGORITHM,
        headers={"kid": private_key[0]},
    )
    return SessionToken(token, expires_at)


@functools.lru_cache(maxsize=16)
def _public_key(jwk: str) -> ec.EllipticCurvePublicKey | None:
    """The key object of a public JWK (JSON text): loaded once, kept for the next tokens (a
    handful of keys are live at a time)."""
    public_key = ECAlgorithm.from_jwk(jwk)
    return public_key if isinstance(public_key, ec.EllipticCurvePublicKey) else None


def _verified_claims(token: str, keys: Sequence[SigningKey]) -> dict[str, Any] | None:
    """The token's claims when its signature verifies under the key its kid names."""
    try:
        header = jwt.get_unverified_header(token)
    except jwt.InvalidTokenError:
        return None
    kid = header.get("kid")
    if header.get("alg") != SIGNING_ALGORITHM or not isinstance(kid, str):
        return None
    key = next((k for k in keys if k.kid == kid), None)
    if key is None:
        return None
    public_key = _public_key(json.dumps(key.public_jwk, sort_keys=True))
    if public_key is None:
        return None
    try:
        claims = jwt.decode(
            token,
            public_key,
            algorithms=[SIGNING_ALGORITHM],
            # Times, audience and issuer are checked below against the service's clock.
            options={
                "verify_exp": False,
                "verify_nbf": False,
                "verify_iat": False,
                "verify_aud": False,
                "verify_iss": False,
            },
        )
    except (jwt.InvalidTokenError, ValueError):
        return None
    return claims if isinstance(claims, dict) else None


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _claims_problem(claims: dict[str, Any], *, now: float, issuer: str, app: App) -> bool:
    skew = catalog.SESSION_TOKEN_SKEW
    audience = claims.get("aud")
    audiences = audience if isinstance(audience, list) else [audience]
    expires, not_before = _number(claims.get("exp")), _number(claims.get("nbf"))
    return (
        claims.get("iss") != issuer
        or app.client_id not in audiences
        or claims.get("typ") != SESSION_TOKEN_TYP
        or expires is None
        or now > expires + skew
        or (not_before is not None and now < not_before - skew)
        or not isinstance(claims.get("bid"), str)
        or not isinstance(claims.get("sub"), str)
    )


async def _spend(tx: Transaction, *, now: float, app: App, jti: str, expires: float | None) -> bool:
    """Record the jti as spent; False when it was spent before (also by a concurrent exchange)."""
    spent = await tx.execute(
        "INSERT INTO spent_session_tokens (jti, app_id, spent_at, expires_at)"
        " VALUES ($1, $2, $3, $4) ON CONFLICT (jti) DO NOTHING",
        jti,
        app.id,
        now,
        max(expires or now, now) + catalog.SESSION_TOKEN_SKEW,
    )
    return spent == 1


async def exchange_session_token(
    tx: Transaction,
    keyring: Keyring,
    *,
    now: float,
    issuer: str,
    app: App,
    subject_token: str,
    scopes: Sequence[str] | None,
    resource: str | None,
    request_error: OAuthError | None = None,
    jkt: str | None = None,
) -> Outcome:
    """RFC 8693: a session token for a fresh token family of (viewing user, business, app).

    Every failure after client authentication is ``invalid_grant`` without a description, except
    ``request_error`` (a malformed request, answered as such). The jti of a token whose signature
    verifies is spent in the caller's transaction whatever the outcome, also when the request
    was malformed: the caller commits before raising the Outcome's error, so retrying the same
    token never succeeds. The access token is bound to the DPoP key ``jkt`` when the request
    carried a proof.
    """
    claims = _verified_claims(subject_token, await published_keys(tx, now=now))
    spent = False
    if claims is not None:
        jti = claims.get("jti")
        if isinstance(jti, str) and 0 < len(jti) <= _JTI_MAX_LENGTH:
            expires = _number(claims.get("exp"))
            spent = await _spend(tx, now=now, app=app, jti=jti, expires=expires)
    if request_error is not None:
        return Outcome(error=request_error)
    if claims is None or not spent:
        return Outcome(error=InvalidGrant())
    if _claims_problem(claims, now=now, issuer=issuer, app=app):
        return Outcome(error=InvalidGrant())
    business_id, user_id = claims["bid"], claims["sub"]
    installation = await active_installation(tx, app.id, business_id)
    membership = await get_membership(tx, business_id, user_id)
    if installation is None or membership is None or not membership.active:
        return Outcome(error=InvalidGrant())
    granted = installation.scopes
    if scopes is not None:
        refused = [s for s in scopes if s not in granted]
        if refused:
            return Outcome(error=InvalidScope(f"not granted to the installation: {refused[0]}"))
        granted = tuple(s for s in granted if s in scopes)
    _, pair = await start_family(
        tx,
        keyring,
        now=now,
        app_id=app.id,
        installation_id=installation.id,
        business_id=business_id,
        user_id=user_id,
        scopes=granted,
        resource=resource,
        grant_type=catalog.GRANT_TOKEN_EXCHANGE,
        binding=Binding.of(app, jkt),
    )
    return Outcome(pair=pair)


async def purge_spent_session_tokens(tx: Transaction, *, now: float) -> int:
    """A spent jti is kept a day past the last moment its token could pass the expiry check."""
    return await tx.execute(
        "DELETE FROM spent_session_tokens WHERE expires_at <= $1", now - catalog.EXPIRED_ROW_GRACE
    )


async def purge_expired_signing_keys(tx: Transaction, *, now: float) -> int:
    return await tx.execute("DELETE FROM signing_keys WHERE expires_at <= $1", now)
