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
import stat

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


ROOT_KEY_MIN_LENGTH = 32


class KeyFileError(Exception):
    """The root key file cannot be used; the message says why and what to do."""


def read_key_file(path: str) -> str | None:
    """The root key in ``path``, or None when there is no such file.

    The file must be readable by its owner only (mode 0600): anyone who reads it can open every
    sealed secret and forge session tokens.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise KeyFileError(f"cannot read the root key file {path}: {exc.strerror}") from exc
    with os.fdopen(fd, encoding="utf-8") as key_file:
        if stat.S_IMODE(os.fstat(key_file.fileno()).st_mode) & 0o077:
            raise KeyFileError(f"the root key file {path} is readable by other users; chmod 600 it")
        key = key_file.read().strip()
    if len(key) < ROOT_KEY_MIN_LENGTH:
        raise KeyFileError(
            f"the root key file {path} must hold a key of at least {ROOT_KEY_MIN_LENGTH} characters"
        )
    return key


def create_key_file(path: str, key: str) -> str:
    """Write ``key`` to ``path`` (mode 0600) unless a key file is there; answers the key that
    stands, so two processes starting at once agree on one.

    The key is written to a temporary file first and linked into place, which fails if ``path``
    exists: a reader never sees a half-written key.
    """
    directory = os.path.dirname(os.path.abspath(path))
    temporary = os.path.join(directory, f".{os.path.basename(path)}.{secrets.token_hex(6)}")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as key_file:
                key_file.write(key + "\n")
                key_file.flush()
                os.fsync(key_file.fileno())
            os.link(temporary, path)
            _sync_directory(directory)
        except FileExistsError:
            pass  # another process wrote the key first: its key stands
        finally:
            os.unlink(temporary)
    except OSError as exc:
        raise KeyFileError(f"cannot write the root key file {path}: {exc.strerror}") from exc
    stored = read_key_file(path)
    assert stored is not None
    return stored


def _sync_directory(directory: str) -> None:
    """Make a new directory entry durable (the file's own data is synced already)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


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
        self._notice_key = _derive(root, b"ledgerport notice v1")
        self._check_key = _derive(root, b"ledgerport key check v1")
        self._nonce_key = _derive(root, b"ledgerport dpop nonce v1")

    def hash_token(self, raw: str) -> str:
        """Keyed hash of a token or secret: what is stored and looked up. Any text hashes, also
        text no real token holds (a lone surrogate from a JSON escape): it just matches nothing."""
        return hmac.new(self._hash_key, _utf8(raw), hashlib.sha256).hexdigest()

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

    def key_check(self) -> str:
        """A value that tells whether a root key is the one a database was set up with, and
        reveals nothing of the key (an HMAC under a key derived for this purpose only)."""
        return hmac.new(self._check_key, b"ledgerport root key", hashlib.sha256).hexdigest()

    def mac(self, message: str) -> str:
        return hmac.new(self.csrf_key, _utf8(message), hashlib.sha256).hexdigest()

    def nonce_mac(self, message: str) -> str:
        """The MAC of a DPoP server nonce (a key of its own: a nonce is handed to anyone)."""
        return hmac.new(self._nonce_key, _utf8(message), hashlib.sha256).hexdigest()

    def notice_mac(self, message: str) -> str:
        """The signature of a page notice the service sets (a key of its own, so no other
        signed value of the service passes for a notice)."""
        return hmac.new(self._notice_key, _utf8(message), hashlib.sha256).hexdigest()
