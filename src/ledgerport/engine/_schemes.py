"""The headers that sign one delivery attempt, in each of a webhook's signature schemes
(contract.md: Webhook endpoints beyond the spec, the ``signature`` field). Pure: no I/O.

- ``stripe``: the spec's ``X-Webhook-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>]``,
  exactly as ``_signing.signature_header`` writes it.
- ``standard`` (Standard Webhooks): ``webhook-id`` (the delivery id), ``webhook-timestamp``
  (unix seconds) and ``webhook-signature: v1,<base64 HMAC-SHA256>``, the HMAC of
  ``{id}.{timestamp}.{body}`` keyed by the bytes the ``whsec_`` secret's base64 stands for.
- ``standard-asymmetric``: the same three headers, with ``v1a,<base64 Ed25519 signature>`` of
  the same text under the ``whsk_`` key.

During a rotation's overlap the keys are the current one then the previous one, and each signs:
a second ``v1`` in the stripe header, a second space-separated ``v1,``/``v1a,`` in
``webhook-signature`` (how the Standard Webhooks spec lists several signatures). A receiver
accepts the attempt when any one verifies.

Speed: the key strings are turned into key objects once, by two process-wide ``lru_cache``s
keyed by the key string (:func:`hmac_key_cached`, :func:`signing_key_cached`, bounded to
:data:`KEYS_CACHED` each), rather than by a prepared signer kept with the engine's plan. A
``SendPlan`` is read again from the store at least every 30 seconds (``PLAN_FRESH``) and after
every change of entitlements, so a signer made with it would be made again as often, while a
cache keyed by the string lasts across those reads and rotations (only the new key is derived)
and asks nothing of the plan's shape. The strings of a plan are the same objects from one
attempt to the next, so a lookup hashes nothing new. Deriving an Ed25519 key costs about as
much as a signature; the ``standard`` HMAC key is a base64 decoding, cached alike so that the
``standard`` path costs what ``stripe`` costs (``bench/signing_schemes.py``). The caches hold
decrypted keys of the endpoints signed with lately, as the plans do, in memory only; a key
rotated out leaves them as newer ones push it out.
"""

from __future__ import annotations

import base64
import hmac
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledgerport.apps._signing_keys import SCHEMES as SCHEMES
from ledgerport.apps._signing_keys import Scheme as Scheme
from ledgerport.apps._signing_keys import (
    ed25519_private_key,
    ed25519_public_key,
    standard_secret_bytes,
)

from ._signing import signature_header

KEYS_CACHED: Final = 4096
"""Key objects each cache keeps: more than one process's endpoints sign with at once (the
engine holds at most 4,096 deliveries), so a busy process derives each key about once."""

STRIPE_HEADER: Final = b"X-Webhook-Signature"
ID_HEADER: Final = b"webhook-id"
TIMESTAMP_HEADER: Final = b"webhook-timestamp"
SIGNATURE_HEADER: Final = b"webhook-signature"
"""The Standard Webhooks headers, named in lower case as its spec writes them."""

STANDARD_VERSION: Final = "v1"
ASYMMETRIC_VERSION: Final = "v1a"


@lru_cache(maxsize=KEYS_CACHED)
def hmac_key_cached(secret: str) -> bytes:
    """The HMAC key of a ``standard`` secret, decoded once a secret (``cache_info()`` tells)."""
    return standard_secret_bytes(secret)


@lru_cache(maxsize=KEYS_CACHED)
def signing_key_cached(private_key: str) -> Ed25519PrivateKey:
    """The Ed25519 key of a ``whsk_`` key, derived once a key (``cache_info()`` tells)."""
    return ed25519_private_key(private_key)


def signed_text(delivery_id: str, timestamp: int, body: bytes) -> bytes:
    """What both Standard Webhooks schemes sign: ``{id}.{timestamp}.{body}``."""
    return f"{delivery_id}.{timestamp}.".encode() + body


def signature_headers(
    scheme: Scheme, keys: Sequence[str], *, delivery_id: str, timestamp: int, body: bytes
) -> list[tuple[bytes, bytes]]:
    """The headers that sign one attempt of ``body`` in ``scheme``, as (name, value) pairs.

    ``keys`` are the endpoint's kept keys, current first, then the previous one during a
    rotation's overlap; each adds a signature. ``timestamp`` is the attempt's, in unix seconds.
    Raises ValueError without keys, for an unknown scheme, a Standard Webhooks key not of the
    scheme (the message never quotes it; a ``stripe`` secret is any string, its whole text the
    HMAC key, as ``_signing`` takes it), or a delivery id with a dot (the Standard Webhooks
    spec forbids one: the signed text would be ambiguous).
    """
    if not keys:
        raise ValueError("a delivery is signed with at least one key")
    if scheme == "stripe":
        return [(STRIPE_HEADER, signature_header(keys, timestamp, body).encode())]
    if scheme != "standard" and scheme != "standard-asymmetric":
        raise ValueError(f"unknown signature scheme {scheme!r}")
    if "." in delivery_id:
        raise ValueError("a Standard Webhooks message id holds no dot")
    text = signed_text(delivery_id, timestamp, body)
    if scheme == "standard":
        signatures = [
            b"v1," + base64.b64encode(hmac.digest(hmac_key_cached(key), text, "sha256"))
            for key in keys
        ]
    else:
        signatures = [
            b"v1a," + base64.b64encode(signing_key_cached(key).sign(text)) for key in keys
        ]
    return [
        (ID_HEADER, delivery_id.encode()),
        (TIMESTAMP_HEADER, str(timestamp).encode()),
        (SIGNATURE_HEADER, b" ".join(signatures)),
    ]


def verify_standard(
    headers: Mapping[str, str],
    body: bytes,
    secret: str,
    *,
    now: float,
    tolerance: float,
) -> bool:
    """Whether ``headers`` (any case) sign ``body`` under the ``standard`` ``secret`` with a
    timestamp within ``tolerance`` seconds of ``now``: what a receiver does, any ``v1`` may
    match, compared in constant time."""
    parsed = _standard_headers(headers, body, now=now, tolerance=tolerance)
    if parsed is None:
        return False
    text, candidates = parsed
    expected = base64.b64encode(hmac.digest(standard_secret_bytes(secret), text, "sha256"))
    return any(
        hmac.compare_digest(expected, value.encode())
        for version, value in candidates
        if version == STANDARD_VERSION
    )


def verify_asymmetric(
    headers: Mapping[str, str],
    body: bytes,
    public_key: str,
    *,
    now: float,
    tolerance: float,
) -> bool:
    """Whether ``headers`` (any case) sign ``body`` under the private key of the ``whpk_``
    ``public_key`` with a timestamp within ``tolerance`` seconds of ``now``; any ``v1a`` may
    match."""
    parsed = _standard_headers(headers, body, now=now, tolerance=tolerance)
    if parsed is None:
        return False
    text, candidates = parsed
    key = ed25519_public_key(public_key)
    for version, value in candidates:
        if version != ASYMMETRIC_VERSION:
            continue
        try:
            key.verify(base64.b64decode(value, validate=True), text)
        except (InvalidSignature, ValueError):
            continue
        return True
    return False


def _standard_headers(
    headers: Mapping[str, str], body: bytes, *, now: float, tolerance: float
) -> tuple[bytes, list[tuple[str, str]]] | None:
    """The signed text and the (version, signature) pairs of Standard Webhooks headers, or None
    when one is missing, the timestamp is no integer or out of tolerance."""
    lowered = {name.lower(): value for name, value in headers.items()}
    delivery_id = lowered.get(ID_HEADER.decode())
    timestamp = lowered.get(TIMESTAMP_HEADER.decode())
    signatures = lowered.get(SIGNATURE_HEADER.decode())
    if not delivery_id or not signatures or timestamp is None:
        return None
    if not (timestamp.isascii() and timestamp.isdigit()):
        return None
    if abs(now - int(timestamp)) > tolerance:
        return None
    candidates = [
        (version, value)
        for version, _, value in (part.partition(",") for part in signatures.split(" "))
    ]
    return signed_text(delivery_id, int(timestamp), body), candidates
