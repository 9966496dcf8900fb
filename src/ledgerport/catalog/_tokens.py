"""Prefixes of every kind of token and secret, so secret scanners and log redaction know them.

A token is its prefix and 256 random bits (base64url); only a keyed hash of it is stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

ADMIN_TOKEN_PREFIX: Final = "lp_admin_"
DEVELOPER_TOKEN_PREFIX: Final = "lp_dev_"
LOGIN_SESSION_PREFIX: Final = "lp_ses_"
CLIENT_SECRET_PREFIX: Final = "lp_cs_"
AUTHORIZATION_REQUEST_PREFIX: Final = "lp_ar_"
CODE_PREFIX: Final = "lp_code_"
ACCESS_TOKEN_PREFIX: Final = "lp_at_"
REFRESH_TOKEN_PREFIX: Final = "lp_rt_"
DEVICE_CODE_PREFIX: Final = "lp_dc_"
REGISTRATION_TOKEN_PREFIX: Final = "lp_reg_"
WEBHOOK_SECRET_PREFIX: Final = "whsec_"
WEBHOOK_PRIVATE_KEY_PREFIX: Final = "whsk_"
"""A standard-asymmetric endpoint's Ed25519 key, kept sealed and never shown."""
"""Fixed by the spec: a webhook signing secret begins with it."""

TOKEN_PREFIXES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "admin token": ADMIN_TOKEN_PREFIX,
        "developer token": DEVELOPER_TOKEN_PREFIX,
        "login session": LOGIN_SESSION_PREFIX,
        "client secret": CLIENT_SECRET_PREFIX,
        "authorization request": AUTHORIZATION_REQUEST_PREFIX,
        "authorization code": CODE_PREFIX,
        "access token": ACCESS_TOKEN_PREFIX,
        "refresh token": REFRESH_TOKEN_PREFIX,
        "device code": DEVICE_CODE_PREFIX,
        "registration access token": REGISTRATION_TOKEN_PREFIX,
        "webhook signing secret": WEBHOOK_SECRET_PREFIX,
        "webhook private key": WEBHOOK_PRIVATE_KEY_PREFIX,
    }
)
"""Every kind of secret the service hands out, by name."""

PROTECTED_RESOURCE_PATH: Final = "/.well-known/oauth-protected-resource"
"""Where the data API's RFC 9728 protected resource metadata is, under the base URL
(contract.md: Agents as partner apps); a 401 of the data API names it."""
