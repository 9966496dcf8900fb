"""Authentication and authorization: secrets, passwords, sessions, OAuth grants and tokens."""

from ledgerport.apps import INSTALLATION_END_HOOKS as _HOOKS
from ledgerport.keys import DecryptionError as DecryptionError
from ledgerport.keys import Keyring as Keyring
from ledgerport.keys import new_root_key as new_root_key
from ledgerport.keys import new_token as new_token

from ._authorize import MSG_NOT_REVIEWED as MSG_NOT_REVIEWED
from ._authorize import MSG_REQUEST_EXPIRED as MSG_REQUEST_EXPIRED
from ._authorize import AuthorizeParams as AuthorizeParams
from ._authorize import AuthorizeProblem as AuthorizeProblem
from ._authorize import TargetProblem as TargetProblem
from ._authorize import check_authorize_request as check_authorize_request
from ._authorize import check_resource as check_resource
from ._authorize import hold_request as hold_request
from ._authorize import purge_expired_requests as purge_expired_requests
from ._authorize import take_request as take_request
from ._clients import ClientCredentials as ClientCredentials
from ._clients import authenticate_client as authenticate_client
from ._clients import parse_credentials as parse_credentials
from ._device import DeviceAuthorization as DeviceAuthorization
from ._device import DeviceRequest as DeviceRequest
from ._device import approve_device_request as approve_device_request
from ._device import cancel_device_codes as cancel_device_codes
from ._device import deny_device_request as deny_device_request
from ._device import find_pending_device_request as find_pending_device_request
from ._device import normalize_user_code as normalize_user_code
from ._device import poll_device_code as poll_device_code
from ._device import purge_expired_device_codes as purge_expired_device_codes
from ._device import start_device_authorization as start_device_authorization
from ._grants import PURGE_GRACE as PURGE_GRACE
from ._grants import AccessGrant as AccessGrant
from ._grants import Outcome as Outcome
from ._grants import TokenPair as TokenPair
from ._grants import end_installation_grants as end_installation_grants
from ._grants import introspect as introspect
from ._grants import issue_code as issue_code
from ._grants import purge_expired_grants as purge_expired_grants
from ._grants import redeem_code as redeem_code
from ._grants import resolve_access_token as resolve_access_token
from ._grants import revoke_family as revoke_family
from ._grants import revoke_token as revoke_token
from ._grants import rotate_refresh_token as rotate_refresh_token
from ._grants import start_family as start_family
from ._limits import Lockout as Lockout
from ._limits import SlidingWindow as SlidingWindow
from ._oauth_errors import InvalidClient as InvalidClient
from ._oauth_errors import OAuthError as OAuthError
from ._oauth_errors import too_many_requests as too_many_requests
from ._passwords import hash_password as hash_password
from ._passwords import verify_password as verify_password
from ._registration import check_client_metadata as check_client_metadata
from ._registration import register_client as register_client
from ._session_tokens import SESSION_TOKEN_TYP as SESSION_TOKEN_TYP
from ._session_tokens import SIGNING_ALGORITHM as SIGNING_ALGORITHM
from ._session_tokens import NoActiveInstallation as NoActiveInstallation
from ._session_tokens import SessionToken as SessionToken
from ._session_tokens import SigningKey as SigningKey
from ._session_tokens import check_embedded_access as check_embedded_access
from ._session_tokens import exchange_session_token as exchange_session_token
from ._session_tokens import issue_session_token as issue_session_token
from ._session_tokens import jwks as jwks
from ._session_tokens import published_keys as published_keys
from ._session_tokens import purge_expired_signing_keys as purge_expired_signing_keys
from ._session_tokens import purge_spent_session_tokens as purge_spent_session_tokens
from ._session_tokens import rotate_signing_keys as rotate_signing_keys
from ._sessions import ADMIN_TOKEN_PREFIX as ADMIN_TOKEN_PREFIX
from ._sessions import admin_token_matches as admin_token_matches
from ._sessions import developer_token_user as developer_token_user
from ._sessions import end_login_session as end_login_session
from ._sessions import issue_developer_token as issue_developer_token
from ._sessions import login_session_user as login_session_user
from ._sessions import purge_expired_login_sessions as purge_expired_login_sessions
from ._sessions import start_login_session as start_login_session

# Tokens and codes of an installation die in the same transaction as the installation.
for _hook in (end_installation_grants, cancel_device_codes):
    if _hook not in _HOOKS:
        _HOOKS.append(_hook)
