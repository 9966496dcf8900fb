"""The root key lives outside the database it protects.

A copy of the database alone must not open the sealed secrets or let anyone forge session
tokens: the generated key is kept in a file (mode 0600), by default in the user's configuration
directory (outside any checkout, where ``git add -A`` would take it along, and apart from the
database's directory), an older database's stored key is moved there, and a start with another
key, or without the key a database was set up with, fails clearly instead of silently
invalidating every stored token and secret.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from ledgerport.auth import Keyring
from ledgerport.config import load, parse_database_url
from ledgerport.keys import create_key_file, read_key_file
from ledgerport.platform import RootKeyError, bootstrap
from ledgerport.storage import Store, open_store

from ..stores import POSTGRES_ADMIN_URL

TIMEOUT = 30
LEGACY_KEY = "legacy-root-key-0123456789abcdef0123456789"
ADMIN_TOKEN = "lp_admin_root-key-test-token-0123"


def _config(**env: str):  # type: ignore[no-untyped-def]
    return load({"LEDGERPORT_ADMIN_TOKEN": ADMIN_TOKEN, **env})


def _file_config(path: Path):  # type: ignore[no-untyped-def]
    return _config(LEDGERPORT_SECRET_KEY_FILE=str(path))


async def _settings(store: Store) -> dict[str, str]:
    async with store.transaction() as tx:
        rows = await tx.fetch("SELECT key, value FROM settings")
    return {row["key"]: row["value"] for row in rows}


async def _store_legacy_key(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.execute("INSERT INTO settings (key, value) VALUES ('secret_key', $1)", LEGACY_KEY)


async def test_generated_key_is_a_private_file_and_never_in_the_database(
    store: Store, tmp_path: Path
) -> None:
    path = tmp_path / "ledger.key"
    with trio.fail_after(TIMEOUT):
        first = await bootstrap(store, _file_config(path))
        again = await bootstrap(store, _file_config(path))
        settings = await _settings(store)

    key = path.read_text().strip()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(key) >= 32
    assert key not in settings.values()
    assert "secret_key" not in settings
    assert first.platform.keyring.hash_token("t") == Keyring(key).hash_token("t")
    assert again.platform.keyring.hash_token("t") == first.platform.keyring.hash_token("t")


async def test_a_stored_key_is_moved_out_of_the_database(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "moved.key"
    with trio.fail_after(TIMEOUT):
        await _store_legacy_key(store)
        boot = await bootstrap(store, _file_config(path))
        settings = await _settings(store)

    assert path.read_text().strip() == LEGACY_KEY
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "secret_key" not in settings
    assert LEGACY_KEY not in settings.values()
    # Tokens hashed under the old key still verify.
    assert boot.platform.keyring.hash_token("t") == Keyring(LEGACY_KEY).hash_token("t")


async def test_a_stored_key_equal_to_the_configured_one_is_dropped(store: Store) -> None:
    with trio.fail_after(TIMEOUT):
        await _store_legacy_key(store)
        await bootstrap(store, _config(LEDGERPORT_SECRET_KEY=LEGACY_KEY))
        settings = await _settings(store)

    assert "secret_key" not in settings


async def test_a_configured_key_other_than_the_stored_one_is_refused(store: Store) -> None:
    with trio.fail_after(TIMEOUT):
        await _store_legacy_key(store)
        with pytest.raises(RootKeyError, match="not the root key this database was set up with"):
            await bootstrap(store, _config(LEDGERPORT_SECRET_KEY="x" * 40))
        settings = await _settings(store)

    assert settings["secret_key"] == LEGACY_KEY  # nothing was lost


async def test_another_key_later_is_refused(store: Store, tmp_path: Path) -> None:
    with trio.fail_after(TIMEOUT):
        await bootstrap(store, _config(LEDGERPORT_SECRET_KEY="a" * 40))
        with pytest.raises(RootKeyError, match="this database was set up with"):
            await bootstrap(store, _config(LEDGERPORT_SECRET_KEY="b" * 40))
        other_file = tmp_path / "other.key"
        with pytest.raises(RootKeyError, match="this database was set up with"):
            await bootstrap(store, _file_config(other_file))


async def test_a_key_file_others_can_read_is_refused(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "open.key"
    path.write_text("k" * 40)
    os.chmod(path, 0o644)
    with trio.fail_after(TIMEOUT), pytest.raises(RootKeyError, match="chmod 600"):
        await bootstrap(store, _file_config(path))


async def test_with_no_key_named_one_is_generated_in_the_users_configuration_directory(
    store: Store, tmp_path: Path
) -> None:
    config = load({"XDG_CONFIG_HOME": str(tmp_path), "LEDGERPORT_DATABASE_URL": POSTGRES_ADMIN_URL})
    path = Path(str(config.secret_key_file))
    assert path.parent == tmp_path / "ledgerport" / "keys"
    with trio.fail_after(TIMEOUT):
        boot = await bootstrap(store, config)

    mode, directory_mode, key = _kept(path)
    assert mode == 0o600
    assert directory_mode == 0o700
    assert boot.platform.keyring.hash_token("t") == Keyring(key).hash_token("t")


def _kept(path: Path) -> tuple[int, int, str]:
    """The key file's mode, its directory's mode, and the key it holds."""
    return (
        stat.S_IMODE(path.stat().st_mode),
        stat.S_IMODE(path.parent.stat().st_mode),
        path.read_text().strip(),
    )


async def test_a_missing_key_file_of_a_database_set_up_with_a_key_is_refused_not_replaced(
    store: Store, tmp_path: Path
) -> None:
    path = tmp_path / "lost.key"
    with trio.fail_after(TIMEOUT):
        await bootstrap(store, _file_config(path))
        path.unlink()
        with pytest.raises(RootKeyError, match="this database was set up with a root key"):
            await bootstrap(store, _file_config(path))

    assert not path.exists()  # no other key put in its place


async def test_a_stored_key_is_moved_to_the_default_key_file(store: Store, tmp_path: Path) -> None:
    config = load({"XDG_CONFIG_HOME": str(tmp_path), "LEDGERPORT_DATABASE_URL": POSTGRES_ADMIN_URL})
    with trio.fail_after(TIMEOUT):
        await _store_legacy_key(store)
        await bootstrap(store, config)
        settings = await _settings(store)

    assert _kept(Path(str(config.secret_key_file)))[2] == LEGACY_KEY
    assert "secret_key" not in settings


@pytest.mark.parametrize("xdg", [None, "", "relative/dir"])
def test_the_default_key_file_follows_xdg_config_home(tmp_path: Path, xdg: str | None) -> None:
    env = {"HOME": str(tmp_path / "home"), "LEDGERPORT_DATABASE_URL": POSTGRES_ADMIN_URL}
    if xdg is not None:
        env["XDG_CONFIG_HOME"] = xdg
    path = load(env).secret_key_file

    assert path == str(
        tmp_path / "home/.config/ledgerport/keys/postgresql-127.0.0.1-5432-postgres.key"
    )


def test_sqlite_keeps_its_key_outside_the_databases_directory(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    one = load({**env, "LEDGERPORT_DATABASE_URL": f"sqlite:///{tmp_path}/a/books.db"})
    other = load({**env, "LEDGERPORT_DATABASE_URL": f"sqlite:///{tmp_path}/b/books.db"})

    assert one.secret_key_file is not None
    assert one.secret_key_file.startswith(f"{tmp_path}/config/ledgerport/keys/sqlite-books.db-")
    assert one.secret_key_file != other.secret_key_file  # one key file a database


def test_sqlite_keeps_using_a_key_beside_the_database(tmp_path: Path) -> None:
    (tmp_path / "books.db.key").write_text("k" * 40)
    config = load({"LEDGERPORT_DATABASE_URL": f"sqlite:///{tmp_path}/books.db"})
    assert config.secret_key_file == f"{tmp_path}/books.db.key"


def test_a_named_key_file_is_used(tmp_path: Path) -> None:
    told = load(
        {
            "LEDGERPORT_DATABASE_URL": POSTGRES_ADMIN_URL,
            "LEDGERPORT_SECRET_KEY_FILE": str(tmp_path / "pg.key"),
        }
    )
    assert told.secret_key_file == str(tmp_path / "pg.key")


def test_two_writers_of_one_key_file_agree(tmp_path: Path) -> None:
    path = str(tmp_path / "race.key")
    first = create_key_file(path, "1" * 40)
    second = create_key_file(path, "2" * 40)

    assert first == second == "1" * 40
    assert read_key_file(path) == "1" * 40
    assert sorted(os.listdir(tmp_path)) == ["race.key"]  # no temporary file left behind


async def test_serve_without_the_key_file_its_database_was_set_up_with_exits_2_in_one_line(
    postgres_url: str, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGERPORT_")}
    env.update(
        LEDGERPORT_DATABASE_URL=postgres_url,
        LEDGERPORT_SECRET_KEY_FILE=str(tmp_path / "root.key"),
        LEDGERPORT_ADMIN_TOKEN=ADMIN_TOKEN,
    )

    def serve() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "ledgerport", "serve", "--bind", "127.0.0.1:0"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    async with open_store(parse_database_url(postgres_url)) as store:
        await bootstrap(store, load(env))
    (tmp_path / "root.key").unlink()
    result = await trio.to_thread.run_sync(serve)

    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "root.key does not exist, and this database was set up with a root key" in lines[0]
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    assert not (tmp_path / "root.key").exists()
