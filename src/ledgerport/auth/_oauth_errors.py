"""OAuth endpoint errors (RFC 6749 section 5.2 shape), raised by the grants and endpoints."""

from __future__ import annotations


class OAuthError(Exception):
    """``{error, error_description?}`` with an HTTP status; see the spec's OAuth tables."""

    def __init__(
        self,
        error: str,
        description: str | None = None,
        *,
        status: int = 400,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(f"{error}: {description}" if description else error)
        self.error = error
        self.description = description
        self.status = status
        self.headers = headers or {}


def invalid_request(description: str) -> OAuthError:
    return OAuthError("invalid_request", description)


def invalid_grant(description: str | None = None) -> OAuthError:
    return OAuthError("invalid_grant", description)


class InvalidClient(OAuthError):
    """Client authentication failed (401); carries whether HTTP Basic was used."""

    def __init__(self, description: str, *, basic: bool) -> None:
        headers = {"WWW-Authenticate": 'Basic realm="ledgerport"'} if basic else {}
        super().__init__("invalid_client", description, status=401, headers=headers)


def too_many_requests(retry_after: int) -> OAuthError:
    return OAuthError(
        "temporarily_unavailable",
        f"Too many requests: retry after {retry_after} seconds",
        status=429,
        headers={"Retry-After": str(retry_after)},
    )
