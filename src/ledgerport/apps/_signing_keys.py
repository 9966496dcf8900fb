"""The keys a webhook's deliveries are signed with, one kind per signature scheme (contract.md:
Webhook endpoints beyond the spec, the ``signature`` field).

- ``stripe`` (the spec's scheme, the default): ``whsec_`` and 256 random bits in base64url, as
  every secret so far (``keys.new_token``). The HMAC key is the whole string, prefix included.
- ``standard`` (Standard Webhooks): ``whsec_`` and 32 random bytes in standard base64 (with its
  padding). The HMAC key is the decoded bytes: that is what the ``standardwebhooks`` and ``svix``
  libraries take from the string a developer pastes in, so the secret must be standard base64
  (a base64url ``-`` or ``_`` would be dropped by their lenient decoding, giving another key).
- ``standard-asymmetric`` (Standard Webhooks, Ed25519): the kept key is ``whsk_`` and the
  32-byte Ed25519 seed in standard base64, the spec's serialisation of a secret key (the
  reference Go implementation reads it as a seed too). The developer is shown only the public
  key, ``whpk_`` and the 32-byte raw public key in standard base64.

The two ``whsec_`` forms never pass for each other: a stripe secret is 43 characters of
base64url, which standard base64 refuses for its length, and a standard secret's 44 characters
end in ``=``, which base64url tokens never hold. So an endpoint that changes scheme needs a new
key of the new kind, and :func:`signing_key_problem` says when a kept key is of another kind.

Like the stripe secrets, the ``whsec_`` and ``whsk_`` strings are kept sealed (``Keyring``) and
shown once; the public key is no secret and may be answered on every read. Nothing here logs,
and no problem message quotes a key.
"""

from __future__ import annotations

import base64
import binascii
import re
import secrets
from typing import Final, Literal, get_args

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ledgerport import catalog
from ledgerport.keys import new_token

Scheme = Literal["stripe", "standard", "standard-asymmetric"]
"""A webhook's signature scheme, as the API's ``signature`` field names it."""

SCHEMES: Final[tuple[Scheme, ...]] = get_args(Scheme)
"""Every scheme, the default (``stripe``, the spec's) first."""

DEFAULT_SCHEME: Final[Scheme] = "stripe"

STANDARD_SECRET_BYTES: Final = 32
"""Random bytes of a new ``standard`` secret (the Standard Webhooks spec asks for 24 to 64)."""

STANDARD_SECRET_MIN_BYTES: Final = 24
STANDARD_SECRET_MAX_BYTES: Final = 64
"""The Standard Webhooks spec's bounds on an HMAC secret's length."""

ED25519_KEY_BYTES: Final = 32
"""An Ed25519 seed (private key) and a raw public key are both 32 bytes."""

PRIVATE_KEY_PREFIX: Final = catalog.WEBHOOK_PRIVATE_KEY_PREFIX
"""The Standard Webhooks spec's prefix of an asymmetric secret key."""

PUBLIC_KEY_PREFIX: Final = "whpk_"
"""The Standard Webhooks spec's prefix of an asymmetric public key."""

_STRIPE_SECRET = re.compile(
    re.escape(catalog.WEBHOOK_SECRET_PREFIX) + r"[A-Za-z0-9_-]{43}", re.ASCII
)
"""What ``keys.new_token(WEBHOOK_SECRET_PREFIX)`` makes: the prefix and 43 base64url digits."""


def new_signing_key(scheme: Scheme) -> str:
    """A fresh key for ``scheme``: what is kept sealed and signs the endpoint's deliveries.

    For ``stripe`` and ``standard`` it is also what the developer is shown once; for
    ``standard-asymmetric`` the developer is shown :func:`public_key` of it instead.
    """
    if scheme == "stripe":
        return new_token(catalog.WEBHOOK_SECRET_PREFIX)
    if scheme == "standard":
        return catalog.WEBHOOK_SECRET_PREFIX + _b64(secrets.token_bytes(STANDARD_SECRET_BYTES))
    if scheme == "standard-asymmetric":
        return PRIVATE_KEY_PREFIX + _b64(secrets.token_bytes(ED25519_KEY_BYTES))
    raise ValueError(f"unknown signature scheme {scheme!r}")


def public_key(private_key: str) -> str:
    """The ``whpk_`` public key of a ``standard-asymmetric`` key: what the endpoint answers as
    ``publicKey`` and receivers verify with."""
    raw = ed25519_private_key(private_key).public_key().public_bytes_raw()
    return PUBLIC_KEY_PREFIX + _b64(raw)


def signing_key_problem(scheme: Scheme, key: str) -> str | None:
    """Why ``key`` cannot sign deliveries of ``scheme``, or None when it can.

    The message names the scheme and what its keys look like, never the key itself.
    """
    if scheme == "stripe":
        if _STRIPE_SECRET.fullmatch(key):
            return None
        return "a stripe signing secret is whsec_ and 43 base64url characters"
    if scheme == "standard":
        try:
            standard_secret_bytes(key)
        except ValueError as exc:
            return str(exc)
        return None
    if scheme == "standard-asymmetric":
        try:
            ed25519_private_key(key)
        except ValueError as exc:
            return str(exc)
        return None
    return f"unknown signature scheme {scheme!r}"


def standard_secret_bytes(secret: str) -> bytes:
    """The HMAC key of a ``standard`` secret: the bytes its base64 stands for.

    Raises ValueError (not quoting the secret) unless it is ``whsec_`` and 24 to 64 bytes in
    standard base64.
    """
    raw = _decode(secret, catalog.WEBHOOK_SECRET_PREFIX)
    if raw is None or not STANDARD_SECRET_MIN_BYTES <= len(raw) <= STANDARD_SECRET_MAX_BYTES:
        raise ValueError(
            "a standard signing secret is whsec_ and "
            f"{STANDARD_SECRET_MIN_BYTES} to {STANDARD_SECRET_MAX_BYTES} bytes in standard base64"
        )
    return raw


def ed25519_private_key(private_key: str) -> Ed25519PrivateKey:
    """The Ed25519 key of a ``whsk_`` string. Raises ValueError (not quoting it) unless it is
    ``whsk_`` and a 32-byte seed in standard base64."""
    raw = _decode(private_key, PRIVATE_KEY_PREFIX)
    if raw is None or len(raw) != ED25519_KEY_BYTES:
        raise ValueError(
            "a standard-asymmetric signing key is whsk_ and a 32-byte Ed25519 seed in base64"
        )
    return Ed25519PrivateKey.from_private_bytes(raw)


def ed25519_public_key(public: str) -> Ed25519PublicKey:
    """The Ed25519 key of a ``whpk_`` string. Raises ValueError unless it is ``whpk_`` and a
    32-byte raw public key in standard base64."""
    raw = _decode(public, PUBLIC_KEY_PREFIX)
    if raw is None or len(raw) != ED25519_KEY_BYTES:
        raise ValueError("a public key is whpk_ and a 32-byte Ed25519 public key in base64")
    return Ed25519PublicKey.from_public_bytes(raw)


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _decode(value: str, prefix: str) -> bytes | None:
    """The bytes of ``prefix`` + canonical standard base64, or None when ``value`` is not that
    (strict: no other character, padding as base64 writes it)."""
    if not value.startswith(prefix):
        return None
    text = value[len(prefix) :]
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if _b64(raw) == text else None
