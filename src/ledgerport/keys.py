"""Tokens, keyed hashes and encryption under the root secret key.

Raw tokens are 256 random bits with a kind prefix (``lp_at_``, ``lp_rt_``, ...) so secret scanners
recognise them; only their HMAC-SHA256 under a key derived from the root key is stored. Secrets
the service must read back (webhook signing secrets, session-token signing keys) are encrypted
with AES-GCM under another derived key.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

TOKEN_BYTES = 32


def new_token(prefix: str) -> str:
    """A fresh random token, ``<prefix><base64url of 32 random bytes>``."""
    return prefix + secrets.token_urlsafe(TOKEN_BYTES)


def new_root_key() -> str:
    return secrets.token_urlsafe(48)


class DecryptionError(Exception):
    """A ciphertext was not made under this key or was altered."""


def _derive(root: bytes, purpose: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=purpose).derive(root)


class Keyring:
    """Keys derived from the root secret key, one per purpose."""

    def __init__(self, root_key: str) -> None:
        root = root_key.encode()
        self._hash_key = _derive(root, b"ledgerport token hash v1")
        self._aead = AESGCM(_derive(root, b"ledgerport encryption v1"))
        self.csrf_key = _derive(root, b"ledgerport csrf v1")

    def hash_token(self, raw: str) -> str:
        """Keyed hash of a token or secret: what is stored and looked up."""
        return hmac.new(self._hash_key, raw.encode(), hashlib.sha256).hexdigest()

    def verify_token(self, raw: str, stored_hash: str) -> bool:
        return hmac.compare_digest(self.hash_token(raw), stored_hash)

    def encrypt(self, plaintext: str, *, context: str) -> str:
        nonce = os.urandom(12)
        sealed = self._aead.encrypt(nonce, plaintext.encode(), context.encode())
        return base64.urlsafe_b64encode(nonce + sealed).decode()

    def decrypt(self, token: str, *, context: str) -> str:
        try:
            blob = base64.urlsafe_b64decode(token.encode())
            return self._aead.decrypt(blob[:12], blob[12:], context.encode()).decode()
        except (InvalidTag, ValueError) as exc:
            raise DecryptionError("ciphertext does not open under this key") from exc

    def mac(self, message: str) -> str:
        return hmac.new(self.csrf_key, message.encode(), hashlib.sha256).hexdigest()
