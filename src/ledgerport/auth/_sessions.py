"""Who is calling: the operator's admin token, developer tokens and login (cookie) sessions."""

from __future__ import annotations

import hmac

from ledgerport import catalog
from ledgerport.books import User, get_user
from ledgerport.keys import Keyring, new_token
from ledgerport.storage import Transaction


def admin_token_matches(keyring: Keyring, presented: str, stored_hash: str) -> bool:
    """Constant-time check of a presented admin token against the stored keyed hash."""
    return hmac.compare_digest(keyring.hash_token(presented), stored_hash)


async def issue_developer_token(
    tx: Transaction, keyring: Keyring, *, now: float, user_id: str
) -> str:
    await get_user(tx, user_id)
    token = new_token(catalog.DEVELOPER_TOKEN_PREFIX)
    await tx.execute(
        "INSERT INTO developer_tokens (token_hash, user_id, created_at) VALUES ($1, $2, $3)",
        keyring.hash_token(token),
        user_id,
        now,
    )
    return token


async def developer_token_user(tx: Transaction, keyring: Keyring, token: str) -> str | None:
    user_id: str | None = await tx.fetchval(
        "SELECT user_id FROM developer_tokens WHERE token_hash = $1", keyring.hash_token(token)
    )
    return user_id


async def start_login_session(
    tx: Transaction, keyring: Keyring, *, now: float, user_id: str
) -> str:
    """A new cookie session for the user; answers the raw session id for the cookie."""
    session = new_token(catalog.LOGIN_SESSION_PREFIX)
    await tx.execute(
        "INSERT INTO login_sessions (session_hash, user_id, created_at, expires_at)"
        " VALUES ($1, $2, $3, $4)",
        keyring.hash_token(session),
        user_id,
        now,
        now + catalog.LOGIN_SESSION_TTL,
    )
    return session


async def login_session_user(
    tx: Transaction, keyring: Keyring, *, now: float, session: str
) -> str | None:
    user_id: str | None = await tx.fetchval(
        "SELECT user_id FROM login_sessions WHERE session_hash = $1 AND expires_at > $2",
        keyring.hash_token(session),
        now,
    )
    return user_id


async def login_session_person(
    tx: Transaction, keyring: Keyring, *, now: float, session: str
) -> User | None:
    """The user a login session signs in, with their email and name, in one statement (what a
    page's header shows); None when the session is unknown or expired."""
    row = await tx.fetchrow(
        "SELECT u.id, u.email, u.name FROM login_sessions s JOIN users u ON u.id = s.user_id"
        " WHERE s.session_hash = $1 AND s.expires_at > $2",
        keyring.hash_token(session),
        now,
    )
    return None if row is None else User(row["id"], row["email"], row["name"])


async def end_login_session(tx: Transaction, keyring: Keyring, session: str) -> None:
    await tx.execute(
        "DELETE FROM login_sessions WHERE session_hash = $1", keyring.hash_token(session)
    )


async def purge_expired_login_sessions(tx: Transaction, *, now: float) -> int:
    return await tx.execute("DELETE FROM login_sessions WHERE expires_at <= $1", now)
