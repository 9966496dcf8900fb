"""Calls to the server on the developer's behalf: its address, the developer token from
``login``, and the server's refusals turned into one line each (``Refused``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._credentials import CredentialsUnreadable, load_credentials, normal_server
from ._output import Refused

if TYPE_CHECKING:
    import httpx


def default_timeout() -> httpx.Timeout:
    """30 s for an answer, 10 s to connect. httpx is imported when a command calls the server
    first, so that ``functions run`` starts without it."""
    import httpx

    return httpx.Timeout(30.0, connect=10.0)


def server_message(response: httpx.Response) -> str:
    """What the server said about a refusal: the envelope's message (its code in front), the
    OAuth envelope's description, or the status line."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        message = body.get("message") or body.get("error_description") or body.get("error")
        if isinstance(message, list):
            message = "; ".join(str(part) for part in message)
        if message:
            code = body.get("code")
            return f"{message} ({code}, {response.status_code})" if code else str(message)
    return f"{response.status_code} {response.reason_phrase}"


@dataclass
class Session:
    """Where the commands send their calls, as whom, and how they print."""

    server: str
    token: str | None
    as_json: bool

    def client(self, *, timeout: httpx.Timeout | None = None) -> httpx.Client:
        import httpx

        headers = {"User-Agent": "ledgerport-cli"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return httpx.Client(
            base_url=self.server, headers=headers, timeout=timeout or default_timeout()
        )

    def signed_in(self) -> Session:
        if not self.token:
            raise Refused(f"not signed in to {self.server}: run ledgerport login first")
        return self

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        """One call; its JSON answer (None for an empty one), or Refused with the server's
        message."""
        import httpx

        self.signed_in()
        try:
            with self.client() as client:
                response = client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise Refused(f"cannot reach {self.server}: {exc}") from exc
        if response.status_code >= 400:
            raise Refused(server_message(response))
        return response.json() if response.content else None


def open_session(server: str | None, *, as_json: bool) -> Session:
    """The session for ``--server`` (else the current server of the credentials file)."""
    try:
        credentials = load_credentials()
    except CredentialsUnreadable as exc:
        raise Refused(str(exc)) from exc
    chosen = normal_server(server) if server else credentials.current
    if chosen is None:
        raise Refused("not signed in: run ledgerport login --server URL first")
    return Session(chosen, credentials.token(chosen), as_json)
