"""Configuration from LEDGERPORT_* environment variables, validated at start.

A bad value raises :class:`ConfigError` with a message naming the variable; the command line turns
it into exit code 2.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

from ledgerport import catalog


class ConfigError(Exception):
    """A configuration value cannot be used."""


@dataclass(frozen=True)
class DatabaseURL:
    kind: Literal["sqlite", "postgresql"]
    url: str
    path: str = ""  # sqlite only: the file path (":memory:" is refused)

    def redacted(self) -> str:
        """The URL with any password masked, for log lines."""
        if self.kind == "sqlite":
            return self.url
        parts = urlsplit(self.url)
        netloc = parts.netloc
        if parts.password is not None:
            netloc = netloc.replace(f":{parts.password}@", ":***@", 1)
        query = re.sub(r"(?i)(^|&)(password=)[^&]*", r"\1\2***", parts.query)
        return parts._replace(netloc=netloc, query=query).geturl()


@dataclass(frozen=True)
class Config:
    database: DatabaseURL
    host: str
    port: int
    base_url: str
    auth_url: str
    env: Literal["production", "development"]
    admin_token: str | None = None
    secret_key: str | None = None
    webhook_retry_delays: tuple[int, ...] = catalog.WEBHOOK_RETRY_DELAYS
    webhook_timeout: float = float(catalog.WEBHOOK_TIMEOUT)
    trusted_proxies: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = field(
        default_factory=tuple
    )
    shutdown_grace: float = 10.0
    password_hashing: Literal["standard", "fast"] = "standard"

    @property
    def development(self) -> bool:
        return self.env == "development"


def parse_database_url(value: str) -> DatabaseURL:
    value = value.strip()
    if value.startswith("sqlite:///"):
        path = value[len("sqlite:///") :]
        if not path or path == ":memory:":
            raise ConfigError(
                f"LEDGERPORT_DATABASE_URL: {value!r} names no file; "
                "use sqlite:///relative/path.db or sqlite:////absolute/path.db"
            )
        return DatabaseURL("sqlite", value, path)
    parts = urlsplit(value)
    if parts.scheme in ("postgresql", "postgres"):
        try:
            port = parts.port
        except ValueError as exc:
            raise ConfigError(f"LEDGERPORT_DATABASE_URL: bad port in {value!r}") from exc
        if not parts.hostname and "host=" not in parts.query:
            raise ConfigError(f"LEDGERPORT_DATABASE_URL: no host in {value!r}")
        if not parts.path.strip("/"):
            raise ConfigError(f"LEDGERPORT_DATABASE_URL: no database name in {value!r}")
        del port
        return DatabaseURL("postgresql", value)
    raise ConfigError(
        f"LEDGERPORT_DATABASE_URL: unsupported URL {value!r}; "
        "expected sqlite:///path.db or postgresql://user:password@host:port/database"
    )


def parse_bind(value: str, name: str = "LEDGERPORT_BIND") -> tuple[str, int]:
    host, sep, port_text = value.strip().rpartition(":")
    if not sep or not host or not port_text.isdigit():
        raise ConfigError(f"{name}: expected host:port, got {value!r}")
    port = int(port_text)
    if not 0 <= port <= 65535:
        raise ConfigError(f"{name}: port {port} is out of range")
    return host.strip("[]"), port


def _parse_url(value: str, name: str) -> str:
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"{name}: expected an absolute http(s) URL, got {value!r}")
    if parts.query or parts.fragment:
        raise ConfigError(f"{name}: must not carry a query or fragment: {value!r}")
    return value.strip().rstrip("/")


def _parse_delays(value: str) -> tuple[int, ...]:
    try:
        delays = tuple(int(item) for item in value.split(","))
    except ValueError as exc:
        raise ConfigError(
            f"LEDGERPORT_WEBHOOK_RETRY_DELAYS: expected comma-separated seconds, got {value!r}"
        ) from exc
    if len(delays) != catalog.WEBHOOK_MAX_ATTEMPTS or any(d < 0 for d in delays):
        raise ConfigError(
            "LEDGERPORT_WEBHOOK_RETRY_DELAYS: expected "
            f"{catalog.WEBHOOK_MAX_ATTEMPTS} non-negative delays, got {value!r}"
        )
    return delays


def _parse_positive(value: str, name: str) -> float:
    try:
        number = float(value)
    except ValueError as exc:
        raise ConfigError(f"{name}: expected a number of seconds, got {value!r}") from exc
    if not number > 0:
        raise ConfigError(f"{name}: must be positive, got {value!r}")
    return number


def _parse_proxies(
    value: str,
) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    networks = []
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError as exc:
            raise ConfigError(
                f"LEDGERPORT_TRUSTED_PROXIES: {item!r} is not an address or network"
            ) from exc
    return tuple(networks)


def load(env: Mapping[str, str] | None = None, *, bind: str | None = None) -> Config:
    """Read and validate the configuration; ``bind`` (from --bind) overrides LEDGERPORT_BIND."""
    env = os.environ if env is None else env
    database = parse_database_url(env.get("LEDGERPORT_DATABASE_URL", "sqlite:///./ledgerport.db"))
    bind_value = bind if bind is not None else env.get("LEDGERPORT_BIND", "127.0.0.1:8080")
    host, port = parse_bind(bind_value, "--bind" if bind is not None else "LEDGERPORT_BIND")
    host_for_url = f"[{host}]" if ":" in host else host
    base_url = _parse_url(
        env.get("LEDGERPORT_BASE_URL") or f"http://{host_for_url}:{port}", "LEDGERPORT_BASE_URL"
    )
    auth_url = _parse_url(env.get("LEDGERPORT_AUTH_URL") or base_url, "LEDGERPORT_AUTH_URL")
    environment = env.get("LEDGERPORT_ENV", "production").strip().lower()
    if environment not in ("production", "development"):
        raise ConfigError(
            f"LEDGERPORT_ENV: expected production or development, got {environment!r}"
        )
    admin_token = env.get("LEDGERPORT_ADMIN_TOKEN") or None
    if admin_token is not None and len(admin_token) < 16:
        raise ConfigError("LEDGERPORT_ADMIN_TOKEN: must be at least 16 characters")
    password_hashing = env.get("LEDGERPORT_PASSWORD_HASHING", "standard").strip().lower()
    if password_hashing not in ("standard", "fast"):
        raise ConfigError(
            f"LEDGERPORT_PASSWORD_HASHING: expected standard or fast, got {password_hashing!r}"
        )
    if password_hashing == "fast" and environment != "development":
        raise ConfigError(
            "LEDGERPORT_PASSWORD_HASHING: fast is for test suites only and needs "
            "LEDGERPORT_ENV=development"
        )
    secret_key = env.get("LEDGERPORT_SECRET_KEY") or None
    if secret_key is not None and len(secret_key) < 32:
        raise ConfigError("LEDGERPORT_SECRET_KEY: must be at least 32 characters")
    return Config(
        database=database,
        host=host,
        port=port,
        base_url=base_url,
        auth_url=auth_url,
        env="development" if environment == "development" else "production",
        admin_token=admin_token,
        secret_key=secret_key,
        webhook_retry_delays=_parse_delays(
            env.get("LEDGERPORT_WEBHOOK_RETRY_DELAYS", "0,60,300,1800,7200,21600")
        ),
        webhook_timeout=_parse_positive(
            env.get("LEDGERPORT_WEBHOOK_TIMEOUT", "10"), "LEDGERPORT_WEBHOOK_TIMEOUT"
        ),
        trusted_proxies=_parse_proxies(env.get("LEDGERPORT_TRUSTED_PROXIES", "")),
        shutdown_grace=_parse_positive(
            env.get("LEDGERPORT_SHUTDOWN_GRACE", "10"), "LEDGERPORT_SHUTDOWN_GRACE"
        ),
        password_hashing="fast" if password_hashing == "fast" else "standard",
    )
