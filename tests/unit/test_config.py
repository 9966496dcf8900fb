"""Configuration: the contract's defaults, overrides, URL forms, and named errors for bad values."""

from __future__ import annotations

import ipaddress
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import ledgerport.config as config_module
from ledgerport import catalog
from ledgerport.config import VARIABLES, ConfigError, load, parse_database_url

DEFAULT_RETRY_DELAYS = (0, 60, 300, 1800, 7200, 21600)


def test_defaults_match_the_contract() -> None:
    config = load({})

    assert config.database.kind == "sqlite"
    assert config.database.url == "sqlite:///./ledgerport.db"
    assert config.database.path == "./ledgerport.db"
    assert (config.host, config.port) == ("127.0.0.1", 8080)
    assert config.base_url == "http://127.0.0.1:8080"
    assert config.auth_url == config.base_url
    assert config.env == "production"
    assert config.development is False
    assert config.admin_token is None
    assert config.secret_key is None
    assert config.webhook_retry_delays == DEFAULT_RETRY_DELAYS
    assert config.webhook_timeout == 10
    assert config.trusted_proxies == ()
    assert config.log_format == "text"
    assert config.management is None
    assert config.app_storage_quota == 100 * 1024 * 1024


def test_the_management_listener_is_an_address_of_its_own() -> None:
    config = load({"LEDGERPORT_MANAGEMENT_BIND": "127.0.0.1:9090"})
    assert config.management == ("127.0.0.1", 9090)
    assert (config.host, config.port) == ("127.0.0.1", 8080)


@pytest.mark.parametrize(
    ("value", "chosen"), [("text", "text"), ("json", "json"), (" JSON ", "json")]
)
def test_the_log_format_is_text_or_json(value: str, chosen: str) -> None:
    assert load({"LEDGERPORT_LOG_FORMAT": value}).log_format == chosen


def test_default_retry_schedule_is_the_catalogs() -> None:
    assert catalog.WEBHOOK_RETRY_DELAYS == DEFAULT_RETRY_DELAYS
    assert catalog.WEBHOOK_MAX_ATTEMPTS == len(DEFAULT_RETRY_DELAYS)
    assert catalog.WEBHOOK_TIMEOUT == 10


def test_every_variable_is_read() -> None:
    config = load(
        {
            "LEDGERPORT_DATABASE_URL": "postgresql://lp:pw@db.internal:5433/ledger",
            "LEDGERPORT_BIND": "0.0.0.0:9000",
            "LEDGERPORT_BASE_URL": "https://api.example.com/",
            "LEDGERPORT_AUTH_URL": "https://app.example.com",
            "LEDGERPORT_ADMIN_TOKEN": "a" * 16,
            "LEDGERPORT_SECRET_KEY": "k" * 32,
            "LEDGERPORT_ENV": "development",
            "LEDGERPORT_WEBHOOK_RETRY_DELAYS": "0, 1, 2, 3, 4, 5",
            "LEDGERPORT_WEBHOOK_TIMEOUT": "2.5",
            "LEDGERPORT_FUNCTION_WORKERS": "4",
            "LEDGERPORT_FUNCTION_WALL_LIMIT": "1.5",
            "LEDGERPORT_TRUSTED_PROXIES": "10.0.0.1, 192.168.0.0/16,::1",
            "LEDGERPORT_APP_STORAGE_QUOTA_MB": " 250 ",
        }
    )

    assert config.database.kind == "postgresql"
    assert config.database.url == "postgresql://lp:pw@db.internal:5433/ledger"
    assert (config.host, config.port) == ("0.0.0.0", 9000)
    assert config.base_url == "https://api.example.com"
    assert config.auth_url == "https://app.example.com"
    assert config.admin_token == "a" * 16
    assert config.secret_key == "k" * 32
    assert config.env == "development"
    assert config.development is True
    assert config.webhook_retry_delays == (0, 1, 2, 3, 4, 5)
    assert config.webhook_timeout == 2.5
    assert (config.function_workers, config.function_wall_limit) == (4, 1.5)
    assert config.app_storage_quota == 250 * 1024 * 1024
    assert config.trusted_proxies == (
        ipaddress.ip_network("10.0.0.1/32"),
        ipaddress.ip_network("192.168.0.0/16"),
        ipaddress.ip_network("::1/128"),
    )


def test_base_url_follows_the_bind_address() -> None:
    config = load({"LEDGERPORT_BIND": "0.0.0.0:9000"})

    assert config.base_url == "http://0.0.0.0:9000"
    assert config.auth_url == "http://0.0.0.0:9000"


def test_auth_url_defaults_to_an_explicit_base_url() -> None:
    config = load({"LEDGERPORT_BASE_URL": "https://api.example.com"})

    assert config.auth_url == "https://api.example.com"


def test_bind_option_overrides_the_variable() -> None:
    config = load({"LEDGERPORT_BIND": "127.0.0.1:8080"}, bind="0.0.0.0:9999")

    assert (config.host, config.port) == ("0.0.0.0", 9999)
    assert config.base_url == "http://0.0.0.0:9999"


def test_bind_option_applies_without_the_variable() -> None:
    config = load({}, bind="127.0.0.2:7000")

    assert (config.host, config.port) == ("127.0.0.2", 7000)


def test_ipv6_bind_is_bracketed_in_the_base_url() -> None:
    config = load({"LEDGERPORT_BIND": "[::1]:8080"})

    assert (config.host, config.port) == ("::1", 8080)
    assert config.base_url == "http://[::1]:8080"


def test_bad_bind_option_names_the_option() -> None:
    with pytest.raises(ConfigError, match="--bind"):
        load({"LEDGERPORT_BIND": "127.0.0.1:8080"}, bind="nonsense")


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:///x.db", "x.db"),
        ("sqlite:///./data/x.db", "./data/x.db"),
        ("sqlite:////abs/x.db", "/abs/x.db"),
        ("sqlite:////var/lib/ledgerport/ledger.db", "/var/lib/ledgerport/ledger.db"),
    ],
)
def test_sqlite_url_forms(url: str, path: str) -> None:
    database = parse_database_url(url)

    assert database.kind == "sqlite"
    assert database.path == path
    assert database.redacted() == url


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://postgres@127.0.0.1:5432/postgres",
        "postgresql://lp:secret@db.example.com/ledger",
        "postgres://lp@db.example.com:6543/ledger",
    ],
)
def test_postgresql_urls_are_accepted(url: str) -> None:
    database = load({"LEDGERPORT_DATABASE_URL": url}).database

    assert database.kind == "postgresql"
    assert database.url == url


def test_redacted_masks_the_password() -> None:
    database = parse_database_url("postgresql://ledger:s3cr3t-pw@db.example.com:5432/books")

    redacted = database.redacted()

    assert "s3cr3t-pw" not in redacted
    assert redacted == "postgresql://ledger:***@db.example.com:5432/books"
    assert database.url.endswith("s3cr3t-pw@db.example.com:5432/books")


def test_redacted_masks_a_password_equal_to_the_user_name() -> None:
    redacted = parse_database_url("postgresql://ledger:ledger@db/books").redacted()

    assert redacted == "postgresql://ledger:***@db/books"


def test_redacted_leaves_a_url_without_password_alone() -> None:
    url = "postgresql://ledger@db.example.com/books"

    assert parse_database_url(url).redacted() == url


def test_redacted_masks_a_password_in_the_query() -> None:
    redacted = parse_database_url("postgresql://ledger@db/books?password=s3cr3t-pw").redacted()

    assert "s3cr3t-pw" not in redacted


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        pytest.param("LEDGERPORT_DATABASE_URL", "mysql://user:pw@host/db", id="db-mysql"),
        pytest.param("LEDGERPORT_DATABASE_URL", "sqlite:///", id="db-sqlite-no-path"),
        pytest.param("LEDGERPORT_DATABASE_URL", "sqlite:///:memory:", id="db-sqlite-memory"),
        pytest.param("LEDGERPORT_DATABASE_URL", "sqlite://x.db", id="db-sqlite-two-slashes"),
        pytest.param("LEDGERPORT_DATABASE_URL", "postgresql://host", id="db-pg-no-database"),
        pytest.param("LEDGERPORT_DATABASE_URL", "postgresql://host/", id="db-pg-empty-database"),
        pytest.param("LEDGERPORT_DATABASE_URL", "postgresql:///books", id="db-pg-no-host"),
        pytest.param(
            "LEDGERPORT_DATABASE_URL", "postgresql://u:p@host:port/db", id="db-pg-word-port"
        ),
        pytest.param(
            "LEDGERPORT_DATABASE_URL", "postgresql://u@host:99999/db", id="db-pg-port-range"
        ),
        pytest.param("LEDGERPORT_DATABASE_URL", "", id="db-empty"),
        pytest.param("LEDGERPORT_DATABASE_URL", "ledgerport.db", id="db-bare-path"),
        pytest.param("LEDGERPORT_BIND", "localhost", id="bind-no-port"),
        pytest.param("LEDGERPORT_BIND", "127.0.0.1:", id="bind-empty-port"),
        pytest.param("LEDGERPORT_BIND", ":8080", id="bind-no-host"),
        pytest.param("LEDGERPORT_BIND", "127.0.0.1:http", id="bind-word-port"),
        pytest.param("LEDGERPORT_BIND", "127.0.0.1:70000", id="bind-port-range"),
        pytest.param("LEDGERPORT_BIND", "127.0.0.1:-1", id="bind-negative-port"),
        pytest.param("LEDGERPORT_BASE_URL", "ftp://api.example.com", id="base-scheme"),
        pytest.param("LEDGERPORT_BASE_URL", "api.example.com", id="base-relative"),
        pytest.param("LEDGERPORT_BASE_URL", "http://", id="base-no-host"),
        pytest.param("LEDGERPORT_BASE_URL", "https://api.example.com/?a=1", id="base-query"),
        pytest.param("LEDGERPORT_BASE_URL", "https://api.example.com/#top", id="base-fragment"),
        pytest.param("LEDGERPORT_AUTH_URL", "not a url", id="auth-not-url"),
        pytest.param("LEDGERPORT_ENV", "staging", id="env-staging"),
        pytest.param("LEDGERPORT_ENV", "prod", id="env-prod"),
        pytest.param("LEDGERPORT_ADMIN_TOKEN", "short", id="admin-short"),
        pytest.param("LEDGERPORT_ADMIN_TOKEN", "a" * 15, id="admin-15"),
        pytest.param("LEDGERPORT_SECRET_KEY", "k", id="secret-short"),
        pytest.param("LEDGERPORT_SECRET_KEY", "k" * 31, id="secret-31"),
        pytest.param("LEDGERPORT_WEBHOOK_RETRY_DELAYS", "0,60,300", id="delays-too-few"),
        pytest.param(
            "LEDGERPORT_WEBHOOK_RETRY_DELAYS", "0,60,300,1800,7200,21600,1", id="delays-too-many"
        ),
        pytest.param(
            "LEDGERPORT_WEBHOOK_RETRY_DELAYS", "0,-60,300,1800,7200,21600", id="delays-negative"
        ),
        pytest.param(
            "LEDGERPORT_WEBHOOK_RETRY_DELAYS", "0,60,abc,1800,7200,21600", id="delays-word"
        ),
        pytest.param(
            "LEDGERPORT_WEBHOOK_RETRY_DELAYS", "0;60;300;1800;7200;21600", id="delays-separator"
        ),
        pytest.param("LEDGERPORT_WEBHOOK_RETRY_DELAYS", "", id="delays-empty"),
        pytest.param("LEDGERPORT_LOG_FORMAT", "xml", id="log-format-xml"),
        pytest.param("LEDGERPORT_MANAGEMENT_BIND", "nonsense", id="management-nonsense"),
        pytest.param("LEDGERPORT_MANAGEMENT_BIND", "127.0.0.1:8080", id="management-same"),
        pytest.param("LEDGERPORT_WEBHOOK_TIMEOUT", "0", id="timeout-zero"),
        pytest.param("LEDGERPORT_WEBHOOK_TIMEOUT", "-1", id="timeout-negative"),
        pytest.param("LEDGERPORT_WEBHOOK_TIMEOUT", "ten", id="timeout-word"),
        pytest.param("LEDGERPORT_WEBHOOK_TIMEOUT", "nan", id="timeout-nan"),
        pytest.param("LEDGERPORT_FUNCTION_WORKERS", "-1", id="workers-negative"),
        pytest.param("LEDGERPORT_FUNCTION_WORKERS", "65", id="workers-too-many"),
        pytest.param("LEDGERPORT_FUNCTION_WORKERS", "two", id="workers-word"),
        pytest.param("LEDGERPORT_FUNCTION_WALL_LIMIT", "0", id="wall-zero"),
        pytest.param("LEDGERPORT_TRUSTED_PROXIES", "not-an-ip", id="proxies-word"),
        pytest.param("LEDGERPORT_TRUSTED_PROXIES", "10.0.0.0/33", id="proxies-prefix"),
        pytest.param("LEDGERPORT_TRUSTED_PROXIES", "10.0.0.1,bogus", id="proxies-second"),
        pytest.param("LEDGERPORT_TRUSTED_PROXIES", "300.1.1.1", id="proxies-octet"),
        pytest.param("LEDGERPORT_APP_STORAGE_QUOTA_MB", "0", id="quota-zero"),
        pytest.param("LEDGERPORT_APP_STORAGE_QUOTA_MB", "-5", id="quota-negative"),
        pytest.param("LEDGERPORT_APP_STORAGE_QUOTA_MB", "1.5", id="quota-fraction"),
        pytest.param("LEDGERPORT_APP_STORAGE_QUOTA_MB", "100MB", id="quota-unit"),
        pytest.param("LEDGERPORT_APP_STORAGE_QUOTA_MB", "1048577", id="quota-past-1-tib"),
        pytest.param("LEDGERPORT_APP_STORAGE_QUOTA_MB", "", id="quota-empty"),
        pytest.param("LEDGERPORT_APP_STORAGE_QUOTA_MB", "\u0661\u0660", id="quota-arabic-digits"),
    ],
)
def test_bad_value_raises_config_error_naming_the_variable(variable: str, value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load({variable: value})

    assert variable in str(caught.value)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("LEDGERPORT_ADMIN_TOKEN", "a" * 16),
        ("LEDGERPORT_SECRET_KEY", "k" * 32),
        ("LEDGERPORT_WEBHOOK_RETRY_DELAYS", "0,0,0,0,0,0"),
        ("LEDGERPORT_WEBHOOK_TIMEOUT", "0.5"),
        ("LEDGERPORT_TRUSTED_PROXIES", ""),
        ("LEDGERPORT_BIND", "127.0.0.1:0"),
        ("LEDGERPORT_APP_STORAGE_QUOTA_MB", "1"),
        ("LEDGERPORT_APP_STORAGE_QUOTA_MB", "1048576"),
    ],
)
def test_boundary_values_are_accepted(variable: str, value: str) -> None:
    load({variable: value})


def _env_without_ledgerport(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGERPORT_")}
    env.update(extra)
    return env


@pytest.mark.parametrize(
    "url",
    ["mysql://x", "sqlite:///missing/dir/ledger.db", "postgresql://u:s3cretpw@db:99999/x"],
    ids=["unsupported", "missing-directory", "bad-port"],
)
def test_serve_with_a_bad_database_url_exits_2_with_one_line(tmp_path: Path, url: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ledgerport", "serve"],
        env=_env_without_ledgerport(LEDGERPORT_DATABASE_URL=url),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "LEDGERPORT_DATABASE_URL" in lines[0]
    assert "Traceback" not in result.stderr
    assert "s3cretpw" not in result.stderr
    assert result.stdout == ""
    assert list(tmp_path.iterdir()) == []


def test_serve_with_a_bad_storage_quota_exits_2_with_one_line(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ledgerport", "serve"],
        env=_env_without_ledgerport(LEDGERPORT_APP_STORAGE_QUOTA_MB="0"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        "ledgerport: configuration error: LEDGERPORT_APP_STORAGE_QUOTA_MB: expected a whole"
        " number of MiB from 1 to 1048576, got '0'"
    ]
    assert list(tmp_path.iterdir()) == []


def test_missing_sqlite_directory_is_a_configuration_error(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "ledger.db"
    with pytest.raises(ConfigError, match=r"^LEDGERPORT_DATABASE_URL: directory .*nowhere"):
        load({"LEDGERPORT_DATABASE_URL": f"sqlite:///{missing}"})


def test_existing_sqlite_directory_loads(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    assert load({"LEDGERPORT_DATABASE_URL": url}).database.path == str(tmp_path / "ledger.db")


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://postgres:s3cretpw@db.example.com:99999/books",
        "postgresql://postgres:s3cretpw@/books",
        "postgresql://postgres:s3cretpw@db.example.com",
        "mysql://postgres:s3cretpw@db.example.com/books",
        "postgresql://postgres:s3cret@pw@db.example.com:x/books",
        "postgresql://postgres@db.example.com:x/books?password=s3cretpw",
    ],
    ids=["bad-port", "no-host", "no-database", "unsupported", "at-in-password", "query"],
)
def test_configuration_errors_never_show_the_password(url: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load({"LEDGERPORT_DATABASE_URL": url})
    assert "s3cret" not in str(raised.value)
    assert "***" in str(raised.value)


def test_rate_limit_factor_is_one_unless_development() -> None:
    assert load({}).rate_limit_factor == 1
    with pytest.raises(ConfigError, match="LEDGERPORT_RATE_LIMIT_FACTOR"):
        load({"LEDGERPORT_RATE_LIMIT_FACTOR": "10"})
    development = {"LEDGERPORT_ENV": "development", "LEDGERPORT_RATE_LIMIT_FACTOR": "10"}
    assert load(development).rate_limit_factor == 10


@pytest.mark.parametrize("value", ["0", "-1", "1.5", "many", ""])
def test_rate_limit_factor_must_be_a_whole_number(value: str) -> None:
    with pytest.raises(ConfigError, match="LEDGERPORT_RATE_LIMIT_FACTOR"):
        load({"LEDGERPORT_ENV": "development", "LEDGERPORT_RATE_LIMIT_FACTOR": value})


def test_every_variable_read_is_listed_in_help_and_in_the_readme() -> None:
    read = set(re.findall(r'"(LEDGERPORT_[A-Z_]+)"', Path(config_module.__file__).read_text()))
    listed = {name for name, _, _ in VARIABLES}
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    help_text = subprocess.run(
        [sys.executable, "-m", "ledgerport", "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout

    assert read == listed
    for name in listed:
        assert f"| `{name}` |" in readme, name
        assert name in help_text, name


@pytest.mark.parametrize(
    ("value", "on"), [("on", True), ("OFF", False), (" On ", True), ("", False)]
)
def test_dpop_nonce_is_on_or_off(value: str, on: bool) -> None:
    assert load({"LEDGERPORT_DPOP_NONCE": value}).dpop_nonce is on
    assert load({}).dpop_nonce is False


@pytest.mark.parametrize("value", ["yes", "1", "true"])
def test_dpop_nonce_refuses_anything_else(value: str) -> None:
    with pytest.raises(ConfigError, match="LEDGERPORT_DPOP_NONCE: expected on or off"):
        load({"LEDGERPORT_DPOP_NONCE": value})
