"""The consent page's messages: every reason an authorization stops on the page.

None of them redirects to the app (spec: Authentication, Consent page messages).
"""

from __future__ import annotations

from typing import Final

CONSENT_INVALID_CLIENT: Final = "Invalid client_id"
"""Unknown client, or a suspended or deactivated app."""
CONSENT_REDIRECT_MISMATCH: Final = "redirect_uri does not match any registered URI"
CONSENT_SCOPES_NOT_PERMITTED: Final = "Requested scopes not permitted for this client"
CONSENT_PKCE_REQUIRED: Final = "PKCE is required for public clients"
CONSENT_INVALID_TARGET: Final = "invalid_target"
"""The short form; a resource sent more than once or over 512 characters adds the reason."""
CONSENT_NOT_REVIEWED: Final = "app has not completed review"
"""An unreviewed app and a business that is not a sandbox."""
CONSENT_REQUEST_EXPIRED: Final = "invalid_request: authorization request not found or expired"
"""The consent outlived its five minutes (or was already decided)."""

CONSENT_MESSAGES: Final[tuple[str, ...]] = (
    CONSENT_INVALID_CLIENT,
    CONSENT_REDIRECT_MISMATCH,
    CONSENT_SCOPES_NOT_PERMITTED,
    CONSENT_PKCE_REQUIRED,
    CONSENT_INVALID_TARGET,
    CONSENT_NOT_REVIEWED,
    CONSENT_REQUEST_EXPIRED,
)
"""The spec's table, in its order."""
