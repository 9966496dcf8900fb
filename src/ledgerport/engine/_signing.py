"""Signing a webhook delivery (spec: Delivery, signature rules).

``X-Webhook-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>[,v1=<hex>]``: the HMAC key is the
whole secret string (``whsec_`` prefix included) as UTF-8, the message is ``t`` in decimal, a
dot, and the raw body. Each attempt is signed again with its own timestamp; during a rotation's
overlap the previous secret signs as the second ``v1``.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The lowercase hex HMAC-SHA256 of ``t.body`` under ``secret``."""
    message = str(timestamp).encode() + b"." + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def signature_header(secrets: Sequence[str], timestamp: int, body: bytes) -> str:
    """The header value: the timestamp, then one ``v1`` per secret (current first), no spaces."""
    if not secrets:
        raise ValueError("a delivery is signed with at least one secret")
    parts = [f"t={timestamp}", *(f"v1={signature(s, timestamp, body)}" for s in secrets)]
    return ",".join(parts)


def verify_header(header: str, body: bytes, secret: str, *, now: float, tolerance: float) -> bool:
    """Whether ``header`` signs ``body`` under ``secret`` with a timestamp within ``tolerance``
    seconds of ``now``: what a receiver does (constant-time comparison, any ``v1`` may match)."""
    timestamp: int | None = None
    candidates: list[str] = []
    for part in header.split(","):
        name, _, value = part.partition("=")
        if name == "t" and value.isdigit():
            timestamp = int(value)
        elif name == "v1":
            candidates.append(value)
    if timestamp is None or abs(now - timestamp) > tolerance:
        return False
    expected = signature(secret, timestamp, body)
    return any(hmac.compare_digest(expected, candidate) for candidate in candidates)
