"""DPoP proofs (RFC 9449): what a proof proves, checked without the store.

A proof is a JWT of type ``dpop+jwt`` signed with an asymmetric key whose public JWK is in its
header. :func:`check_proof` checks its form, its signature by that key, the request it names
(``htm`` and ``htu``), its freshness (``iat`` within :data:`catalog.DPOP_PROOF_MAX_AGE` seconds
before the service's clock and :data:`catalog.DPOP_PROOF_MAX_SKEW` after), the access token it
goes with (``ath``) and, when the service asks for them, the server nonce. What it answers
(:class:`Proof`) names the key by its JWK SHA-256 thumbprint (RFC 7638), which is what a token
is bound to. That its ``jti`` is used once is the replay ledger's business (``_dpop_replay``).

Keys are read (``jwt.PyJWK``) and signatures verified (the algorithm's ``verify``) by pyjwt on
``cryptography``; nothing here is cryptography of its own. The compact serialization is split
and decoded here, strictly (base64url without padding, JSON objects), which costs a fraction of
``jwt.decode``'s way (it tests each character of each segment in Python: half the time of a
proof whose header carries a key). A key parsed once is kept by its header's encoding
(:data:`KEYS_KEPT` of them), so a client presenting the same key again pays for its payload and
its signature check only.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import json
import math
import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import jwt
import orjson

from ledgerport import catalog
from ledgerport.keys import Keyring

from ._errors import InvalidDpopProof, UseDpopNonce

PROOF_TYPE = "dpop+jwt"
KEYS_KEPT = 1024
"""Parsed proof keys kept by their header's encoding (the most recently used)."""

_PRIVATE_MEMBERS = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k"})
"""JWK members that hold private (or symmetric) key material: a proof's key must have none."""
_KEY_TYPES = {"ES256": ("EC", "P-256"), "RS256": ("RSA", None), "EdDSA": ("OKP", "Ed25519")}
"""The key type (and curve) each accepted algorithm signs with."""
_THUMBPRINT_MEMBERS = {
    "EC": ("crv", "kty", "x", "y"),
    "RSA": ("e", "kty", "n"),
    "OKP": ("crv", "kty", "x"),
}
"""RFC 7638 section 3.2: the required members of each key type, in lexicographic order."""
_SEGMENT = re.compile(r"[A-Za-z0-9_-]+")
"""A base64url segment without padding (RFC 7515 section 2)."""
_RSA_MIN_BITS = 2048
_JTI_MAX_LENGTH = 256
_REQUIRED_CLAIMS = ("jti", "htm", "htu", "iat")


@dataclass(frozen=True, slots=True)
class Proof:
    """A checked proof: its key's thumbprint (``jkt``), its ``jti`` and when it stops being
    fresh (what the replay ledger keeps the ``jti`` until)."""

    jkt: str
    jti: str
    fresh_until: float


@dataclass(frozen=True, slots=True)
class _Key:
    algorithm: Any
    """pyjwt's algorithm (``jwt.algorithms.Algorithm``) that verifies with :attr:`key`."""
    key: Any
    jkt: str


def b64url_sha256(text: str) -> str:
    """base64url (no padding) of the SHA-256 of ``text``: a token's ``ath``."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def jwk_thumbprint(jwk: dict[str, Any]) -> str:
    """RFC 7638: the base64url SHA-256 of the key's required members as compact JSON."""
    members = _THUMBPRINT_MEMBERS[jwk["kty"]]
    canonical = json.dumps({m: jwk[m] for m in members}, separators=(",", ":"), sort_keys=True)
    return b64url_sha256(canonical)


@functools.lru_cache(maxsize=1024)
def normalized_url(url: str) -> str:
    """``url`` as an ``htu`` is compared (RFC 9449 section 4.3): without query and fragment,
    scheme and host in lower case, a default port dropped. ValueError when it is not a URL
    (a port out of range or not a number, a bracketed host left open). Kept: a client sends
    the same few, and the server's own URLs are fewer still."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    netloc = (
        host
        if port is None or (scheme, port) in (("http", 80), ("https", 443))
        else (f"{host}:{port}")
    )
    return f"{scheme}://{netloc}{parts.path or '/'}"


class DpopNonces:
    """Server nonces without state: a nonce is a time window's number and its MAC under a key of
    the service's, so every process serving it hands out and accepts the same ones. The current
    window's nonce and the one before are accepted."""

    def __init__(self, keyring: Keyring, window: float = catalog.DPOP_NONCE_WINDOW) -> None:
        self._keyring = keyring
        self._window = window

    def _of(self, index: int) -> str:
        return f"{index:x}.{self._keyring.nonce_mac(str(index))[:32]}"

    def current(self, now: float) -> str:
        return self._of(math.floor(now / self._window))

    def accepts(self, nonce: str, now: float) -> bool:
        index_text, _, _ = nonce.partition(".")
        try:
            index = int(index_text, 16)
        except ValueError:
            return False
        current = math.floor(now / self._window)
        if index not in (current, current - 1):
            return False
        return hmac.compare_digest(self._of(index).encode(), nonce.encode("utf-8", "replace"))


class _KeptKeys:
    def __init__(self, size: int = KEYS_KEPT) -> None:
        self._size = size
        self._keys: OrderedDict[str, _Key] = OrderedDict()

    def get(self, encoded_header: str) -> _Key | None:
        key = self._keys.get(encoded_header)
        if key is not None:
            self._keys.move_to_end(encoded_header)
        return key

    def keep(self, encoded_header: str, key: _Key) -> None:
        self._keys[encoded_header] = key
        if len(self._keys) > self._size:
            self._keys.popitem(last=False)


_KEPT = _KeptKeys()


def _decoded(segment: str) -> bytes:
    """A base64url segment's bytes; InvalidDpopProof unless it is one."""
    if not _SEGMENT.fullmatch(segment) or len(segment) % 4 == 1:
        raise InvalidDpopProof("the proof is not a JWT")
    try:
        return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
    except (binascii.Error, ValueError) as exc:
        raise InvalidDpopProof("the proof is not a JWT") from exc


def _json_object(raw: bytes) -> dict[str, Any]:
    try:
        value = orjson.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise InvalidDpopProof("the proof is not a JWT") from exc
    if not isinstance(value, dict):
        raise InvalidDpopProof("the proof is not a JWT")
    return value


def _parsed_key(encoded_header: str) -> _Key:
    """The proof's key from its header: refused unless the header is a DPoP proof's with an
    accepted algorithm and a public key of that algorithm."""
    header = _json_object(_decoded(encoded_header))
    if "crit" in header:
        raise InvalidDpopProof("the proof's header names extensions (crit) not understood here")
    if header.get("typ") != PROOF_TYPE:
        raise InvalidDpopProof(f"the proof's typ must be {PROOF_TYPE}")
    algorithm = header.get("alg")
    if algorithm not in _KEY_TYPES:
        accepted = ", ".join(catalog.DPOP_SIGNING_ALGS)
        raise InvalidDpopProof(f"the proof's alg must be one of {accepted}")
    jwk = header.get("jwk")
    if not isinstance(jwk, dict):
        raise InvalidDpopProof("the proof's header must carry its public key as jwk")
    if _PRIVATE_MEMBERS & jwk.keys():
        raise InvalidDpopProof("the proof's jwk must hold no private key material")
    kty, curve = _KEY_TYPES[algorithm]
    if jwk.get("kty") != kty or (curve is not None and jwk.get("crv") != curve):
        raise InvalidDpopProof(f"the proof's jwk is not a key for {algorithm}")
    try:
        key = jwt.PyJWK(jwk, algorithm=algorithm).key
        jkt = jwk_thumbprint(jwk)
    except (jwt.PyJWTError, KeyError, TypeError, ValueError) as exc:
        raise InvalidDpopProof("the proof's jwk is not a valid public key") from exc
    if kty == "RSA" and key.key_size < _RSA_MIN_BITS:
        raise InvalidDpopProof(f"the proof's RSA key must have at least {_RSA_MIN_BITS} bits")
    parsed = _Key(jwt.get_algorithm_by_name(algorithm), key, jkt)
    _KEPT.keep(encoded_header, parsed)
    return parsed


def _proof_key(encoded_header: str) -> _Key:
    kept = _KEPT.get(encoded_header)
    return kept if kept is not None else _parsed_key(encoded_header)


def check_proof(
    values: list[str],
    *,
    method: str,
    url: str,
    now: float,
    access_token: str | None = None,
    nonces: DpopNonces | None = None,
) -> Proof:
    """The proof in a request's ``DPoP`` header ``values`` (exactly one), checked for a request
    of ``method`` to ``url`` at ``now``; with ``access_token``, one that goes with that token
    (``ath``); with ``nonces``, one carrying a current server nonce (UseDpopNonce, with the
    nonce to use, otherwise). InvalidDpopProof names what is wrong."""
    if len(values) != 1:
        raise InvalidDpopProof(
            "a DPoP proof is required" if not values else "send one DPoP header only"
        )
    proof = values[0].strip()
    if not proof or len(proof) > catalog.DPOP_PROOF_MAX_LENGTH or proof.count(".") != 2:
        raise InvalidDpopProof("the proof is not a JWT")
    encoded_header, encoded_claims, encoded_signature = proof.split(".")
    key = _proof_key(encoded_header)
    raw_claims, signature = _decoded(encoded_claims), _decoded(encoded_signature)
    signing_input = f"{encoded_header}.{encoded_claims}".encode("ascii")
    if not key.algorithm.verify(signing_input, key.key, signature):
        raise InvalidDpopProof("the proof's signature does not verify")
    claims = _json_object(raw_claims)
    missing = [name for name in _REQUIRED_CLAIMS if name not in claims]
    if missing:
        raise InvalidDpopProof(f"the proof must carry {missing[0]}")
    jti, htm, htu, iat = (claims[name] for name in _REQUIRED_CLAIMS)
    if not isinstance(jti, str) or not 0 < len(jti) <= _JTI_MAX_LENGTH:
        raise InvalidDpopProof(f"the proof's jti must be a string of 1 to {_JTI_MAX_LENGTH}")
    if htm != method:
        raise InvalidDpopProof("the proof's htm is not this request's method")
    if not isinstance(htu, str):
        raise InvalidDpopProof("the proof's htu is not this request's URL")
    try:
        presented = normalized_url(htu)
    except ValueError:
        raise InvalidDpopProof("the proof's htu is not a URL") from None
    if presented != normalized_url(url):
        raise InvalidDpopProof("the proof's htu is not this request's URL")
    if not isinstance(iat, int | float) or isinstance(iat, bool) or not math.isfinite(iat):
        raise InvalidDpopProof("the proof's iat must be a number")
    if iat < now - catalog.DPOP_PROOF_MAX_AGE or iat > now + catalog.DPOP_PROOF_MAX_SKEW:
        raise InvalidDpopProof("the proof's iat is not recent")
    if access_token is not None:
        ath = claims.get("ath")
        if not isinstance(ath, str) or not hmac.compare_digest(
            ath.encode("utf-8", "replace"), b64url_sha256(access_token).encode()
        ):
            raise InvalidDpopProof("the proof's ath does not match the access token")
    if nonces is not None:
        nonce = claims.get("nonce")
        if not isinstance(nonce, str) or not nonces.accepts(nonce, now):
            raise UseDpopNonce(nonces.current(now))
    return Proof(key.jkt, jti, float(iat) + catalog.DPOP_PROOF_MAX_AGE)
