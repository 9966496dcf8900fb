"""Authentication and authorization: secrets, passwords, sessions, OAuth grants and tokens."""

from ._passwords import hash_password as hash_password
from ._passwords import verify_password as verify_password
from ._secrets import DecryptionError as DecryptionError
from ._secrets import Keyring as Keyring
from ._secrets import new_root_key as new_root_key
from ._secrets import new_token as new_token
from ._sessions import ADMIN_TOKEN_PREFIX as ADMIN_TOKEN_PREFIX
from ._sessions import admin_token_matches as admin_token_matches
from ._sessions import developer_token_user as developer_token_user
from ._sessions import end_login_session as end_login_session
from ._sessions import issue_developer_token as issue_developer_token
from ._sessions import login_session_user as login_session_user
from ._sessions import purge_expired_login_sessions as purge_expired_login_sessions
from ._sessions import start_login_session as start_login_session
