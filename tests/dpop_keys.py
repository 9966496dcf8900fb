"""A DPoP client's side (RFC 9449): a key pair and the proofs it signs, with pyjwt and
cryptography, for the tests and the benchmarks. Every claim and header member can be changed
or dropped to make the faulty proofs the tests refuse."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from dataclasses import dataclass, field
from typing import Any

import jwt
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

DROP: Any = object()
"""A value that removes its claim or header member."""


def ath(token: str) -> str:
    digest = hashlib.sha256(token.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


@dataclass
class DpopKey:
    """A client's DPoP key pair."""

    algorithm: str = "ES256"
    rsa_bits: int = 2048
    private: Any = field(init=False)
    public_jwk: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        if self.algorithm == "ES256":
            self.private = ec.generate_private_key(ec.SECP256R1())
            jwk = ECAlgorithm.to_jwk(self.private.public_key(), as_dict=True)
        elif self.algorithm == "RS256":
            self.private = rsa.generate_private_key(public_exponent=65537, key_size=self.rsa_bits)
            jwk = RSAAlgorithm.to_jwk(self.private.public_key(), as_dict=True)
        else:
            self.private = ed25519.Ed25519PrivateKey.generate()
            jwk = OKPAlgorithm.to_jwk(self.private.public_key(), as_dict=True)
        self.public_jwk = dict(jwk)

    @property
    def private_jwk(self) -> dict[str, Any]:
        algorithm = {"ES256": ECAlgorithm, "RS256": RSAAlgorithm, "EdDSA": OKPAlgorithm}
        return dict(algorithm[self.algorithm].to_jwk(self.private, as_dict=True))  # type: ignore[attr-defined]

    @property
    def thumbprint(self) -> str:
        members = {
            "EC": ("crv", "kty", "x", "y"),
            "RSA": ("e", "kty", "n"),
            "OKP": ("crv", "kty", "x"),
        }
        jwk = self.public_jwk
        canonical = json.dumps(
            {m: jwk[m] for m in members[jwk["kty"]]}, separators=(",", ":"), sort_keys=True
        )
        return (
            base64.urlsafe_b64encode(hashlib.sha256(canonical.encode()).digest())
            .rstrip(b"=")
            .decode()
        )

    def proof(
        self,
        method: str,
        url: str,
        *,
        iat: float,
        token: str | None = None,
        nonce: str | None = None,
        header: dict[str, Any] | None = None,
        claims: dict[str, Any] | None = None,
        signer: Any = DROP,
    ) -> str:
        """A proof for ``method`` ``url`` made at ``iat`` (with ``ath`` of ``token`` and
        ``nonce`` when given); ``header`` and ``claims`` change members (DROP removes one),
        ``signer`` signs with another key (None: no key, for ``alg: none``)."""
        body: dict[str, Any] = {
            "jti": secrets.token_urlsafe(16),
            "htm": method,
            "htu": url,
            "iat": int(iat),
        }
        if token is not None:
            body["ath"] = ath(token)
        if nonce is not None:
            body["nonce"] = nonce
        head: dict[str, Any] = {"typ": "dpop+jwt", "jwk": self.public_jwk}
        for target, changes in ((body, claims), (head, header)):
            for name, value in (changes or {}).items():
                if value is DROP:
                    target.pop(name, None)
                else:
                    target[name] = value
        algorithm = head.pop("alg", self.algorithm)
        key = self.private if signer is DROP else signer
        if algorithm == "RS256" and key.key_size < 2048:
            return _hand_signed_rs256(key, {"alg": algorithm, **head}, body)
        return jwt.encode(body, key, algorithm=algorithm, headers=head)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _hand_signed_rs256(key: Any, header: dict[str, Any], body: dict[str, Any]) -> str:
    """An RS256 JWT signed with a key too short for pyjwt to sign with (to be refused)."""
    signing_input = ".".join(
        _b64(json.dumps(part, separators=(",", ":")).encode()) for part in (header, body)
    )
    signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input}.{_b64(signature)}"
