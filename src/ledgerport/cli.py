"""The ``ledgerport`` command: ``serve`` runs everything, ``migrate`` brings the schema up."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import trio

from ledgerport import __version__
from ledgerport.author_cli import AUTHOR_COMMANDS, run_author_command
from ledgerport.config import VARIABLES, Config, ConfigError, load
from ledgerport.ops import configure_logging

if TYPE_CHECKING:
    from ledgerport import storage

log = logging.getLogger("ledgerport")

EXIT_CONFIG = 2
EXIT_FAILURE = 1


_AUTHOR_HELP = """app author's commands (each has --help with an example; see docs/cli.md):
  login, logout        sign in to a server by the device flow; revoke and forget the token
  apps                 the apps you develop
  trigger TYPE         a test delivery of an event type
  tail deliveries|runs each delivery attempt or run as it ends
  deliveries recover   redeliver a webhook's failed deliveries since a moment
  runs replay          run a function again on a run's event
  functions            push, versions, rollback; run FILE locally in the server's sandbox

"""

_VARIABLES_HELP = (
    _AUTHOR_HELP
    + "configuration (environment variables, default, meaning; see README.md):\n"
    + ("\n".join(f"  {name:<32} {default:<27} {meaning}" for name, default, meaning in VARIABLES))
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ledgerport",
        description="The partner platform of a multi-business bookkeeping service.",
        epilog=_VARIABLES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"ledgerport {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser(
        "serve",
        help="run the HTTP front, engine, scheduler and runtime in one process",
        description="Run the HTTP front, engine, scheduler and runtime in one process.",
        epilog=_VARIABLES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve.add_argument("--bind", help="listen address host:port (overrides LEDGERPORT_BIND)")
    commands.add_parser("migrate", help="create or migrate the database schema, then exit")
    return parser


async def _migrate(config: Config) -> None:
    from ledgerport.storage import open_asyncio_loop, open_store

    async with open_asyncio_loop(), open_store(config.database, migrate=False) as store:
        applied = await store.migrate()
        version = await store.schema_version()
    if applied:
        log.info("applied migrations %s; schema at version %d", applied, version)
    else:
        log.info("schema already at version %d", version)


def _first_leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


def _missing_database(error: storage.DatabaseMissing) -> str:
    return (
        f"LEDGERPORT_DATABASE_URL: the database {error.name!r} does not exist on that server;"
        f" create it first (createdb {error.name}), then start again"
    )


def _configuration_error(error: BaseException | str) -> int:
    print(f"ledgerport: configuration error: {error}", file=sys.stderr)  # noqa: T201
    return EXIT_CONFIG


def main(argv: Sequence[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else list(argv)
    if arguments and arguments[0] in AUTHOR_COMMANDS:
        return run_author_command(arguments)
    args = _parser().parse_args(arguments)
    # The operator's commands need the storage layer; the app author's start without it.
    from ledgerport.storage import DatabaseMissing, StorageError

    configure_logging()
    try:
        config = load(bind=getattr(args, "bind", None))
    except ConfigError as exc:
        return _configuration_error(exc)
    configure_logging(format=config.log_format)
    try:
        if args.command == "migrate":
            trio.run(_migrate, config)
        else:
            from ledgerport.serve import serve

            trio.run(serve, config)
    except ConfigError as exc:  # found at start, such as a root key that does not fit
        return _configuration_error(exc)
    except DatabaseMissing as exc:
        return _configuration_error(_missing_database(exc))
    except StorageError as exc:
        log.error("storage failure: %s", exc)
        return EXIT_FAILURE
    except BaseExceptionGroup as group:
        configuration, _ = group.split(ConfigError)
        if configuration is not None:
            return _configuration_error(_first_leaf(configuration))
        missing, _ = group.split(DatabaseMissing)
        if missing is not None:
            leaf = _first_leaf(missing)
            assert isinstance(leaf, DatabaseMissing)
            return _configuration_error(_missing_database(leaf))
        storage, _ = group.split(StorageError)
        if storage is None:
            log.critical("ledgerport stopped on an error", exc_info=group)
            return EXIT_FAILURE
        log.error("storage failure: %s", _first_leaf(storage))
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return 0
    except BaseException as exc:  # a crashed service: log it and exit non-zero, never hang
        if isinstance(exc, SystemExit):
            raise
        log.critical("ledgerport stopped on an error", exc_info=exc)
        return EXIT_FAILURE
    return 0
