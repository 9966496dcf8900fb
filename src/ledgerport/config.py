"""Configuration from LEDGERPORT_* environment variables, validated at start.

A bad value raises :class:`ConfigError` with a message naming the variable; the command line turns
it into exit code 2.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

from ledgerport import catalog

VARIABLES: tuple[tuple[str, str, str], ...] = (
    (
        "LEDGERPORT_DATABASE_URL",
        "sqlite:///./ledgerport.db",
        "sqlite:///path.db or postgresql://...",
    ),
    ("LEDGERPORT_BIND", "127.0.0.1:8080", "listen address host:port (--bind overrides it)"),
    ("LEDGERPORT_BASE_URL", "http://<bind>", "the API host as clients reach it"),
    ("LEDGERPORT_AUTH_URL", "the base URL", "the host of the sign-in and consent pages"),
    ("LEDGERPORT_ADMIN_TOKEN", "generated, shown once", "bearer token of /admin/*"),
    ("LEDGERPORT_SECRET_KEY", "generated, in the key file", "the root key (32+ characters)"),
    ("LEDGERPORT_SECRET_KEY_FILE", "~/.config/ledgerport/keys/..", "file holding the root key"),
    ("LEDGERPORT_ENV", "production", "development allows http:// loopback webhooks"),
    ("LEDGERPORT_WEBHOOK_RETRY_DELAYS", "0,60,300,1800,7200,21600", "delays before attempts 1-6"),
    ("LEDGERPORT_WEBHOOK_TIMEOUT", "10", "seconds allowed for one webhook attempt"),
    (
        "LEDGERPORT_WEBHOOK_DISABLE_AFTER",
        "432000",
        "seconds of failure that switch an endpoint off",
    ),
    ("LEDGERPORT_FUNCTION_WORKERS", "2", "sandbox workers kept warm (0: no functions here)"),
    ("LEDGERPORT_FUNCTION_WALL_LIMIT", "10", "seconds a hosted-function run may last"),
    ("LEDGERPORT_TRUSTED_PROXIES", "empty", "networks whose X-Forwarded-For is believed"),
    (
        "LEDGERPORT_MANAGEMENT_BIND",
        "unset",
        "own listener: /healthz, /readyz, /metrics",
    ),
    ("LEDGERPORT_LOG_FORMAT", "text", "text or json"),
    ("LEDGERPORT_SHUTDOWN_GRACE", "10", "seconds in-flight work gets after SIGTERM"),
    ("LEDGERPORT_PASSWORD_HASHING", "standard", "standard, or fast for test suites"),
    ("LEDGERPORT_REDIS_URL", "unset", "count rate limits in Redis"),
    ("LEDGERPORT_RATE_LIMIT_FACTOR", "1", "multiplies every limit (development only)"),
    ("LEDGERPORT_METRICS_TOKEN", "unset", "bearer token /metrics asks scrapes for"),
    (
        "LEDGERPORT_APP_STORAGE_QUOTA_MB",
        "100",
        "run output and attempt bodies one app keeps (MiB)",
    ),
    ("LEDGERPORT_DPOP_NONCE", "off", "on: DPoP proofs carry a server nonce"),
    ("LEDGERPORT_CIMD", "on", "off: refuse client ID metadata document clients"),
    (
        "LEDGERPORT_CIMD_SCOPES",
        "every :read scope",
        "scopes a metadata document client may ask for",
    ),
)
"""Every variable the configuration reads: (name, default, meaning), for ``--help``; README.md
says more of each."""

CIMD_DEFAULT_SCOPES = tuple(scope for scope in catalog.SCOPES if scope.endswith(":read"))
"""The scopes a client ID metadata document client may ask for unless LEDGERPORT_CIMD_SCOPES
says otherwise: every ``:read`` scope."""


class ConfigError(Exception):
    """A configuration value cannot be used."""


class AddressUnavailable(ConfigError):
    """The listen address cannot be taken (in use, not this host's, not allowed): the start
    stops with one line naming it, before anything is created."""


@dataclass(frozen=True)
class DatabaseURL:
    kind: Literal["sqlite", "postgresql"]
    url: str
    path: str = ""  # sqlite only: the file path (":memory:" is refused)

    def redacted(self) -> str:
        """The URL with any password masked, for log lines."""
        return self.url if self.kind == "sqlite" else mask_url_password(self.url)


# user:password@ in the authority (the password runs to the last "@" before the path), and a
# password= query parameter: masked in anything shown, also in URLs too malformed to parse.
MAX_FUNCTION_WORKERS = 64
MIB = 1024 * 1024
APP_STORAGE_QUOTA_MB = 100
"""The default of LEDGERPORT_APP_STORAGE_QUOTA_MB (docs/operations.md says why)."""
APP_STORAGE_QUOTA_MAX_MB = 1024 * 1024
_AUTHORITY_PASSWORD = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*://[^/?#:@]*:)([^/?#]*)@")
_QUERY_PASSWORD = re.compile(r"(?i)([?&]password=)[^&#]*")


def mask_url_password(url: str) -> str:
    """``url`` with any password replaced by ``***``; works on malformed URLs too."""
    masked = _AUTHORITY_PASSWORD.sub(r"\1***@", url, count=1)
    return _QUERY_PASSWORD.sub(r"\1***", masked)


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
    secret_key_file: str | None = None
    """Where the root key is kept when LEDGERPORT_SECRET_KEY is not set (None only when it is):
    the variable LEDGERPORT_SECRET_KEY_FILE, else :func:`default_key_file`."""
    webhook_retry_delays: tuple[int, ...] = catalog.WEBHOOK_RETRY_DELAYS
    webhook_timeout: float = float(catalog.WEBHOOK_TIMEOUT)
    webhook_disable_after: float = float(catalog.WEBHOOK_DISABLE_AFTER)
    """LEDGERPORT_WEBHOOK_DISABLE_AFTER: an endpoint with no delivered attempt for this many
    seconds while at least 3 of its deliveries failed for good in that time is switched off."""
    trusted_proxies: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = field(
        default_factory=tuple
    )
    shutdown_grace: float = 10.0
    management: tuple[str, int] | None = None
    """LEDGERPORT_MANAGEMENT_BIND: a second listener for /healthz, /readyz and /metrics, which
    the main listener then no longer answers; None (unset) serves them on the main listener."""
    log_format: Literal["text", "json"] = "text"
    """How log lines are written (LEDGERPORT_LOG_FORMAT): ``text``, or ``json``, an object a
    line for log shippers."""
    function_workers: int = 2
    """Sandbox worker processes the hosted-function pool keeps warm
    (LEDGERPORT_FUNCTION_WORKERS, 0 to run no functions in this process)."""
    function_wall_limit: float = 10.0
    """Seconds a hosted-function run may last (LEDGERPORT_FUNCTION_WALL_LIMIT)."""
    password_hashing: Literal["standard", "fast"] = "standard"
    redis_url: str | None = None
    """Where the rate limits and lockouts are counted when set (LEDGERPORT_REDIS_URL); else
    through the PostgreSQL database (the large budgets in each process, settled there), or in
    the process on SQLite."""
    rate_limit_factor: int = 1
    """Every rate limit's allowance is multiplied by it (1, the spec's limits, in production)."""
    metrics_token: str | None = None
    """LEDGERPORT_METRICS_TOKEN: the bearer token a scrape of /metrics presents wherever it is
    answered; in production, unset, /metrics is answered on the management listener only."""
    app_storage_quota: int = APP_STORAGE_QUOTA_MB * MIB
    """Bytes of run output and attempt bodies one app keeps at most
    (LEDGERPORT_APP_STORAGE_QUOTA_MB, in MiB): past it its oldest are dropped."""
    dpop_nonce: bool = False
    """LEDGERPORT_DPOP_NONCE=on: every DPoP proof must carry a server nonce (RFC 9449 section
    8, ``DPoP-Nonce``); off (the default) accepts proofs without one."""
    cimd: bool = True
    """LEDGERPORT_CIMD: on (the default), a ``client_id`` that is an ``https://`` URL names a
    client whose metadata document is fetched from it; off refuses such clients."""
    cimd_scopes: tuple[str, ...] = CIMD_DEFAULT_SCOPES
    """LEDGERPORT_CIMD_SCOPES: the scopes a metadata document client may ask for, in any
    business (default: every ``:read`` scope)."""

    @property
    def development(self) -> bool:
        return self.env == "development"

    @property
    def loopback_webhooks(self) -> bool:
        """Whether webhooks may be delivered to this machine (``http://`` on a loopback host,
        and loopback addresses) in production: when the service is reached only on a loopback
        address (its API host and its application host, LEDGERPORT_BASE_URL and
        LEDGERPORT_AUTH_URL), every client of it is on this machine, so a webhook reaching the
        machine reaches no one's services but theirs. Behind a proxy the public URLs are set,
        and this does not hold."""
        return _loopback_url(self.base_url) and _loopback_url(self.auth_url)


def _loopback_url(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_database_url(value: str) -> DatabaseURL:
    value = value.strip()
    shown = repr(mask_url_password(value))
    if value.startswith("sqlite:///"):
        path = value[len("sqlite:///") :]
        if not path or path == ":memory:":
            raise ConfigError(
                f"LEDGERPORT_DATABASE_URL: {shown} names no file; "
                "use sqlite:///relative/path.db or sqlite:////absolute/path.db"
            )
        return DatabaseURL("sqlite", value, path)
    parts = urlsplit(value)
    if parts.scheme in ("postgresql", "postgres"):
        try:
            parts.port  # noqa: B018 - raises ValueError for a malformed or out-of-range port
        except ValueError as exc:
            raise ConfigError(f"LEDGERPORT_DATABASE_URL: bad port in {shown}") from exc
        if not parts.hostname and "host=" not in parts.query:
            raise ConfigError(f"LEDGERPORT_DATABASE_URL: no host in {shown}")
        if not parts.path.strip("/"):
            raise ConfigError(f"LEDGERPORT_DATABASE_URL: no database name in {shown}")
        return DatabaseURL("postgresql", value)
    raise ConfigError(
        f"LEDGERPORT_DATABASE_URL: unsupported URL {shown}; "
        "expected sqlite:///path.db or postgresql://user:password@host:port/database"
    )


def parse_redis_url(value: str) -> str | None:
    """``redis://[[user]:password@]host[:port][/database]`` (``rediss://`` for TLS), or None when
    empty."""
    value = value.strip()
    if not value:
        return None
    shown = repr(mask_url_password(value))
    parts = urlsplit(value)
    if parts.scheme not in ("redis", "rediss"):
        raise ConfigError(
            f"LEDGERPORT_REDIS_URL: unsupported URL {shown}; "
            "expected redis://[:password@]host[:port][/database] or rediss:// for TLS"
        )
    try:
        parts.port  # noqa: B018 - raises ValueError for a malformed or out-of-range port
    except ValueError as exc:
        raise ConfigError(f"LEDGERPORT_REDIS_URL: bad port in {shown}") from exc
    if not parts.hostname:
        raise ConfigError(f"LEDGERPORT_REDIS_URL: no host in {shown}")
    database = parts.path.strip("/")
    if database and not (database.isascii() and database.isdigit()):
        raise ConfigError(
            f"LEDGERPORT_REDIS_URL: the path of {shown} must be a database number, like /0"
        )
    return value


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


def _parse_log_format(value: str) -> Literal["text", "json"]:
    chosen = value.strip().lower()
    if chosen == "text":
        return "text"
    if chosen == "json":
        return "json"
    raise ConfigError(f"LEDGERPORT_LOG_FORMAT: expected text or json, got {value!r}")


def _parse_positive(value: str, name: str) -> float:
    try:
        number = float(value)
    except ValueError as exc:
        raise ConfigError(f"{name}: expected a number of seconds, got {value!r}") from exc
    if not number > 0:
        raise ConfigError(f"{name}: must be positive, got {value!r}")
    return number


def _parse_workers(value: str) -> int:
    try:
        workers = int(value)
    except ValueError:
        workers = -1
    if not 0 <= workers <= MAX_FUNCTION_WORKERS:
        raise ConfigError(
            f"LEDGERPORT_FUNCTION_WORKERS must be a whole number from 0 to {MAX_FUNCTION_WORKERS}"
        )
    return workers


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


def _parse_key_file(value: str | None, database: DatabaseURL, env: Mapping[str, str]) -> str:
    """The root key file: the variable's path, else :func:`default_key_file`."""
    if value is None:
        return default_key_file(database, env)
    path = value.strip()
    directory = os.path.dirname(os.path.abspath(path))
    if not path or not os.path.isdir(directory):
        raise ConfigError(
            f"LEDGERPORT_SECRET_KEY_FILE: directory {directory} does not exist; create it first"
        )
    return path


def key_directory(env: Mapping[str, str]) -> str:
    """Where root key files are kept when no variable names one: ``ledgerport/keys`` in the
    user's configuration directory (``$XDG_CONFIG_HOME``, by default ``~/.config``)."""
    base = env.get("XDG_CONFIG_HOME") or ""
    if not os.path.isabs(base):  # the XDG rule: a relative value is ignored
        home = env.get("HOME") or os.path.expanduser("~")
        if not os.path.isabs(home):
            raise ConfigError(
                "LEDGERPORT_SECRET_KEY_FILE: no home directory to keep the root key in; set the"
                " variable to a file in a directory of the service's own"
            )
        base = os.path.join(home, ".config")
    return os.path.join(base, "ledgerport", "keys")


def default_key_file(database: DatabaseURL, env: Mapping[str, str]) -> str:
    """The root key file when LEDGERPORT_SECRET_KEY_FILE is not set: a file named for the
    database in :func:`key_directory`, outside any checkout or data directory, so that neither
    ``git add -A`` in a checkout nor a copy of the database's directory takes the key along. A
    SQLite database that has ``<database>.key`` beside it, where earlier versions kept the key,
    keeps using that file."""
    if database.kind == "sqlite":
        path = os.path.abspath(database.path)
        beside = f"{database.path}.key"
        if os.path.exists(beside):
            return beside
        digest = hashlib.sha256(path.encode()).hexdigest()[:12]
        name = f"sqlite-{os.path.basename(path)}-{digest}"
    else:
        parts = urlsplit(database.url)
        where = f"{parts.hostname or 'localhost'}-{parts.port or 5432}"
        name = f"postgresql-{where}-{parts.path.lstrip('/') or 'postgres'}"
    return os.path.join(key_directory(env), re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".key")


def _parse_rate_limit_factor(value: str, *, development: bool) -> int:
    """How many times the spec's rate limits a development instance allows (contract tests and
    load tests on one machine send far more than one client would); production keeps 1."""
    name = "LEDGERPORT_RATE_LIMIT_FACTOR"
    if not value.strip().isdigit() or not 1 <= int(value) <= 1_000_000:
        raise ConfigError(f"{name}: expected a whole number from 1, got {value!r}")
    factor = int(value)
    if factor != 1 and not development:
        raise ConfigError(f"{name}: only 1 (the spec's limits) outside LEDGERPORT_ENV=development")
    return factor


def _parse_metrics_token(value: str | None) -> str | None:
    """A scrape's bearer token: at least 16 visible ASCII characters (it goes in a header)."""
    if value is None:
        return None
    if len(value) < 16 or not all("!" <= c <= "~" for c in value):
        raise ConfigError(
            "LEDGERPORT_METRICS_TOKEN: must be at least 16 visible ASCII characters, no spaces"
        )
    return value


def _parse_storage_quota(value: str) -> int:
    """LEDGERPORT_APP_STORAGE_QUOTA_MB in bytes: a whole number of MiB from 1 to 1 TiB's."""
    text = value.strip()
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= APP_STORAGE_QUOTA_MAX_MB:
        raise ConfigError(
            "LEDGERPORT_APP_STORAGE_QUOTA_MB: expected a whole number of MiB from 1 to"
            f" {APP_STORAGE_QUOTA_MAX_MB}, got {value!r}"
        )
    return int(text) * MIB


def _parse_switch(value: str, name: str) -> bool:
    """An on/off variable: ``on`` or ``off`` (any case; unset is its default)."""
    text = value.strip().lower()
    if text not in ("on", "off"):
        raise ConfigError(f"{name}: expected on or off, got {value!r}")
    return text == "on"


def _parse_cimd_scopes(value: str) -> tuple[str, ...]:
    """LEDGERPORT_CIMD_SCOPES: scopes separated by spaces or commas, each a known scope;
    empty or unset is every ``:read`` scope."""
    names = [name for name in re.split(r"[\s,]+", value.strip()) if name]
    if not names:
        return CIMD_DEFAULT_SCOPES
    unknown = [name for name in names if not catalog.is_scope(name)]
    if unknown:
        raise ConfigError(f"LEDGERPORT_CIMD_SCOPES: unknown scope {unknown[0]!r}")
    return tuple(scope for scope in catalog.SCOPES if scope in names)


def load(env: Mapping[str, str] | None = None, *, bind: str | None = None) -> Config:
    """Read and validate the configuration; ``bind`` (from --bind) overrides LEDGERPORT_BIND."""
    env = os.environ if env is None else env
    database = parse_database_url(env.get("LEDGERPORT_DATABASE_URL", "sqlite:///./ledgerport.db"))
    if database.kind == "sqlite":
        directory = os.path.dirname(os.path.abspath(database.path))
        if not os.path.isdir(directory):
            raise ConfigError(
                f"LEDGERPORT_DATABASE_URL: directory {directory} does not exist; create it first"
            )
    bind_value = bind if bind is not None else env.get("LEDGERPORT_BIND", "127.0.0.1:8080")
    host, port = parse_bind(bind_value, "--bind" if bind is not None else "LEDGERPORT_BIND")
    management = None
    if env.get("LEDGERPORT_MANAGEMENT_BIND"):
        management = parse_bind(env["LEDGERPORT_MANAGEMENT_BIND"], "LEDGERPORT_MANAGEMENT_BIND")
        if management == (host, port):
            raise ConfigError(
                "LEDGERPORT_MANAGEMENT_BIND: must differ from the main listen address"
            )
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
    secret_key_file = _parse_key_file(env.get("LEDGERPORT_SECRET_KEY_FILE") or None, database, env)
    if secret_key is not None and env.get("LEDGERPORT_SECRET_KEY_FILE"):
        raise ConfigError(
            "LEDGERPORT_SECRET_KEY_FILE: set either it or LEDGERPORT_SECRET_KEY, not both"
        )
    return Config(
        database=database,
        host=host,
        port=port,
        base_url=base_url,
        auth_url=auth_url,
        env="development" if environment == "development" else "production",
        admin_token=admin_token,
        secret_key=secret_key,
        secret_key_file=None if secret_key is not None else secret_key_file,
        webhook_retry_delays=_parse_delays(
            env.get("LEDGERPORT_WEBHOOK_RETRY_DELAYS", "0,60,300,1800,7200,21600")
        ),
        webhook_timeout=_parse_positive(
            env.get("LEDGERPORT_WEBHOOK_TIMEOUT", "10"), "LEDGERPORT_WEBHOOK_TIMEOUT"
        ),
        webhook_disable_after=_parse_positive(
            env.get("LEDGERPORT_WEBHOOK_DISABLE_AFTER", str(catalog.WEBHOOK_DISABLE_AFTER)),
            "LEDGERPORT_WEBHOOK_DISABLE_AFTER",
        ),
        trusted_proxies=_parse_proxies(env.get("LEDGERPORT_TRUSTED_PROXIES", "")),
        shutdown_grace=_parse_positive(
            env.get("LEDGERPORT_SHUTDOWN_GRACE", "10"), "LEDGERPORT_SHUTDOWN_GRACE"
        ),
        management=management,
        log_format=_parse_log_format(env.get("LEDGERPORT_LOG_FORMAT", "text")),
        function_workers=_parse_workers(env.get("LEDGERPORT_FUNCTION_WORKERS", "2")),
        function_wall_limit=_parse_positive(
            env.get("LEDGERPORT_FUNCTION_WALL_LIMIT", "10"), "LEDGERPORT_FUNCTION_WALL_LIMIT"
        ),
        password_hashing="fast" if password_hashing == "fast" else "standard",
        redis_url=parse_redis_url(env.get("LEDGERPORT_REDIS_URL", "")),
        metrics_token=_parse_metrics_token(env.get("LEDGERPORT_METRICS_TOKEN") or None),
        rate_limit_factor=_parse_rate_limit_factor(
            env.get("LEDGERPORT_RATE_LIMIT_FACTOR", "1"), development=environment == "development"
        ),
        app_storage_quota=_parse_storage_quota(
            env.get("LEDGERPORT_APP_STORAGE_QUOTA_MB", str(APP_STORAGE_QUOTA_MB))
        ),
        dpop_nonce=_parse_switch(
            env.get("LEDGERPORT_DPOP_NONCE") or "off", "LEDGERPORT_DPOP_NONCE"
        ),
        cimd=_parse_switch(env.get("LEDGERPORT_CIMD") or "on", "LEDGERPORT_CIMD"),
        cimd_scopes=_parse_cimd_scopes(env.get("LEDGERPORT_CIMD_SCOPES", "")),
    )
