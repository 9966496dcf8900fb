"""Where ``ledgerport login`` keeps its developer tokens: one JSON file, mode 0600.

``LEDGERPORT_CLI_CONFIG`` names the file; otherwise it is ``credentials.json`` under
``$XDG_CONFIG_HOME/ledgerport/`` (``~/.config`` when unset). It remembers a token for each
server signed in to and which server is current: ``{"current": URL, "servers": {URL: {"token":
..., "savedAt": ...}}}``. The file is written whole to a sibling created 0600, then renamed over
the old one, so a reader never sees half of it and the token is never readable by others.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_SERVER = "http://127.0.0.1:8080"
"""The address ``ledgerport serve`` listens on by default (LEDGERPORT_BIND)."""


def credentials_path() -> Path:
    named = os.environ.get("LEDGERPORT_CLI_CONFIG")
    if named:
        return Path(named)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "ledgerport" / "credentials.json"


def normal_server(url: str) -> str:
    """A server's address as it is remembered: without a trailing slash."""
    return url.rstrip("/")


@dataclass
class Credentials:
    current: str | None = None
    servers: dict[str, dict[str, Any]] = field(default_factory=dict)

    def token(self, server: str) -> str | None:
        entry = self.servers.get(normal_server(server))
        token = entry.get("token") if entry else None
        return token if isinstance(token, str) else None

    def remember(self, server: str, token: str) -> None:
        server = normal_server(server)
        self.servers[server] = {"token": token, "savedAt": int(time.time())}
        self.current = server

    def forget(self, server: str) -> None:
        server = normal_server(server)
        self.servers.pop(server, None)
        if self.current == server:
            self.current = next(iter(self.servers), None)


def load_credentials(path: Path | None = None) -> Credentials:
    path = path or credentials_path()
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Credentials()
    except (OSError, ValueError) as exc:
        raise CredentialsUnreadable(f"{path}: {exc}") from exc
    if not isinstance(document, dict) or not isinstance(document.get("servers", {}), dict):
        raise CredentialsUnreadable(f"{path}: not a ledgerport credentials file")
    current = document.get("current")
    return Credentials(
        current if isinstance(current, str) else None, dict(document.get("servers", {}))
    )


def save_credentials(credentials: Credentials, path: Path | None = None) -> Path:
    path = path or credentials_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    text = json.dumps({"current": credentials.current, "servers": credentials.servers}, indent=2)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            out.write(text + "\n")
        os.chmod(partial, 0o600)  # whatever the umask left
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return path


class CredentialsUnreadable(Exception):
    """The credentials file exists but is not one this command wrote."""
