"""The OAuth vocabulary: grant, token and authentication types, error codes and descriptions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

# --- OAuth vocabulary ----------------------------------------------------------------------------

GRANT_AUTHORIZATION_CODE: Final = "authorization_code"
GRANT_REFRESH_TOKEN: Final = "refresh_token"
GRANT_DEVICE_CODE: Final = "urn:ietf:params:oauth:grant-type:device_code"
GRANT_TOKEN_EXCHANGE: Final = "urn:ietf:params:oauth:grant-type:token-exchange"
GRANT_TYPES: Final[tuple[str, ...]] = (
    GRANT_AUTHORIZATION_CODE,
    GRANT_REFRESH_TOKEN,
    GRANT_DEVICE_CODE,
    GRANT_TOKEN_EXCHANGE,
)
"""Every grant the token endpoint accepts; anything else is unsupported_grant_type."""

RESPONSE_TYPES: Final[tuple[str, ...]] = ("code",)

TOKEN_TYPE_ACCESS: Final = "urn:ietf:params:oauth:token-type:access_token"
TOKEN_TYPE_JWT: Final = "urn:ietf:params:oauth:token-type:jwt"
TOKEN_TYPE_ID_TOKEN: Final = "urn:ietf:params:oauth:token-type:id_token"
SUBJECT_TOKEN_TYPES: Final[tuple[str, ...]] = (TOKEN_TYPE_JWT, TOKEN_TYPE_ID_TOKEN)
"""Accepted subject_token_type values of a token exchange; both are handled identically."""

TOKEN_TYPE_HINTS: Final[tuple[str, ...]] = ("access_token", "refresh_token")
"""token_type_hint values that revocation and introspection honour; others are ignored."""

CODE_CHALLENGE_METHODS: Final[tuple[str, ...]] = ("S256", "plain")
TOKEN_ENDPOINT_AUTH_METHODS: Final[tuple[str, ...]] = (
    "client_secret_basic",
    "client_secret_post",
    "none",
)

DPOP_SIGNING_ALGS: Final[tuple[str, ...]] = ("ES256", "RS256", "EdDSA")
"""The JWS algorithms a DPoP proof (RFC 9449) may be signed with: asymmetric ones only
(``none`` and the HMAC ones are refused), named by discovery's
``dpop_signing_alg_values_supported`` and by every DPoP challenge's ``algs``."""
DPOP_PROOF_MAX_AGE: Final = 60.0
"""Seconds a DPoP proof is accepted after its ``iat``; its ``jti`` is kept as long."""
DPOP_PROOF_MAX_SKEW: Final = 5.0
"""Seconds a DPoP proof's ``iat`` may be ahead of the service's clock (the client's runs fast)."""
DPOP_NONCE_WINDOW: Final = 300.0
"""Seconds each server nonce (``DPoP-Nonce``, when LEDGERPORT_DPOP_NONCE=on) is handed out for;
a proof may carry the current one or the one before, so a nonce is accepted 5 to 10 minutes."""
DPOP_PROOF_MAX_LENGTH: Final = 8192
"""Characters of a ``DPoP`` header accepted at most (an RSA key of 4096 bits fits well)."""

USER_CODE_ALPHABET: Final = "BCDFGHJKLMNPQRSTVWXZ"
"""Consonants only (RFC 8628 section 6.1): no vowels to spell words, no 0/O or 1/I to confuse."""
USER_CODE_LENGTH: Final = 8

# --- OAuth endpoint errors -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OAuthErrorCode:
    """One ``error`` value of the OAuth endpoints, the status it is answered with, and why."""

    error: str
    status: int
    cause: str


OAUTH_ERRORS: Final[Mapping[str, OAuthErrorCode]] = MappingProxyType(
    {
        code.error: code
        for code in (
            OAuthErrorCode("invalid_request", 400, "a required parameter is missing or malformed"),
            OAuthErrorCode("invalid_client", 401, "client authentication failed"),
            OAuthErrorCode("invalid_grant", 400, "the code or token cannot be redeemed"),
            OAuthErrorCode("unsupported_grant_type", 400, "the grant type is not available"),
            OAuthErrorCode("invalid_scope", 400, "a scope is not registered or not granted"),
            OAuthErrorCode("invalid_target", 400, "resource is not one URI on the API origin"),
            OAuthErrorCode("authorization_pending", 400, "device flow: not yet approved"),
            OAuthErrorCode("slow_down", 400, "device flow: polled faster than the interval"),
            OAuthErrorCode("access_denied", 400, "device flow: the user denied"),
            OAuthErrorCode("expired_token", 400, "device flow: the code's 10 minutes elapsed"),
            OAuthErrorCode("invalid_redirect_uri", 400, "registration: redirect_uris refused"),
            OAuthErrorCode("invalid_client_metadata", 400, "registration: metadata refused"),
            OAuthErrorCode(
                "invalid_token", 401, "client configuration: registration access token refused"
            ),
            OAuthErrorCode("invalid_dpop_proof", 400, "the DPoP proof is missing or refused"),
            OAuthErrorCode("use_dpop_nonce", 400, "the DPoP proof must carry the server's nonce"),
            OAuthErrorCode("temporarily_unavailable", 429, "rate limited or locked out"),
            OAuthErrorCode("server_error", 500, "failure on the service side"),
        )
    }
)
"""Every ``error`` the OAuth endpoints answer. Statuses other than 400 are 401 (invalid_client,
and invalid_token at a client's configuration endpoint),
429 (temporarily_unavailable, with Retry-After) and 5xx (server_error)."""

# invalid_grant's error_description values (absent where the spec says so).
GRANT_CODE_USED: Final = "code already used"
GRANT_EXPIRED: Final = "expired"
GRANT_REDIRECT_MISMATCH: Final = "redirect_uri mismatch"
GRANT_PKCE_FAILED: Final = "PKCE verification failed"
GRANT_REVOKED: Final = "revoked"
GRANT_REFRESH_REUSE: Final = "refresh token reuse detected"
INVALID_GRANT_DESCRIPTIONS: Final[tuple[str, ...]] = (
    GRANT_CODE_USED,
    GRANT_EXPIRED,
    GRANT_REDIRECT_MISMATCH,
    GRANT_PKCE_FAILED,
    GRANT_REVOKED,
    GRANT_REFRESH_REUSE,
)
"""The spec's invalid_grant descriptions; every other invalid_grant has no description."""
