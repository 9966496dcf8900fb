"""The partner API's tables as data, one module per table family.

What: every name and figure the spec (``partner-api.md``) and its fixed points (``contract.md``)
state as a table lives here once:

- ``_scopes``: business areas and their scopes, role permissions and role defaults, app data
  resource types;
- ``_events``: the 45 event types with audience, gating scope and sample payload;
- ``_versions``: the dated API versions with their sunsets;
- ``_limits``: lifetimes, size limits, the webhook retry schedule, lockout and the rate limits;
- ``_oauth``: grant, token and authentication types, the OAuth error codes with their statuses
  and the invalid_grant descriptions;
- ``_consent``: the consent page's messages;
- ``_error_codes``: the standard envelope's codes with their statuses;
- ``_tokens``: the prefixes of every kind of token and secret;
- ``_records``: the kinds of business records, their ids and numbers, the plans' ceilings.

Why: the same facts are needed by the OAuth server, the data API, the delivery engine, the
discovery document, the OpenAPI document and the tests. Keeping them as immutable data means no
literal is repeated (and drifts) elsewhere, and tests are parametrized over the tables. The
package is pure data plus a few lookups: it performs no I/O and reads no clock at import;
functions that depend on time take the date as an argument (domain code injects the clock).

Durations are integers in seconds, sizes are counts. Names the spec does not fix (most event
names, the rate limit names, ledgerport's own lifetimes and error codes) are documented in
``docs/catalog.md``.
"""

from ._consent import CONSENT_INVALID_CLIENT as CONSENT_INVALID_CLIENT
from ._consent import CONSENT_INVALID_TARGET as CONSENT_INVALID_TARGET
from ._consent import CONSENT_MESSAGES as CONSENT_MESSAGES
from ._consent import CONSENT_NOT_REVIEWED as CONSENT_NOT_REVIEWED
from ._consent import CONSENT_PKCE_REQUIRED as CONSENT_PKCE_REQUIRED
from ._consent import CONSENT_REDIRECT_MISMATCH as CONSENT_REDIRECT_MISMATCH
from ._consent import CONSENT_REQUEST_EXPIRED as CONSENT_REQUEST_EXPIRED
from ._consent import CONSENT_SCOPES_NOT_PERMITTED as CONSENT_SCOPES_NOT_PERMITTED
from ._error_codes import API_ERROR_CODES as API_ERROR_CODES
from ._error_codes import CONSOLE_ERROR_CODES as CONSOLE_ERROR_CODES
from ._error_codes import ERROR_CODES as ERROR_CODES
from ._error_codes import SERVICE_ERROR_CODES as SERVICE_ERROR_CODES
from ._error_codes import ErrorCode as ErrorCode
from ._events import DEFAULT_TEST_EVENT as DEFAULT_TEST_EVENT
from ._events import EVENT_NAMES as EVENT_NAMES
from ._events import EVENTS as EVENTS
from ._events import Audience as Audience
from ._events import EventType as EventType
from ._events import event_type as event_type
from ._extensions import EXTENSION_LABEL_MAX_LENGTH as EXTENSION_LABEL_MAX_LENGTH
from ._extensions import EXTENSION_PATH_MAX_LENGTH as EXTENSION_PATH_MAX_LENGTH
from ._extensions import EXTENSION_TARGETS as EXTENSION_TARGETS
from ._extensions import ExtensionPlace as ExtensionPlace
from ._extensions import ExtensionTarget as ExtensionTarget
from ._limits import ACCESS_TOKEN_TTL as ACCESS_TOKEN_TTL
from ._limits import APP_DATA_RESOURCE_IDS_MAX as APP_DATA_RESOURCE_IDS_MAX
from ._limits import APP_DATA_VALUES_MAX as APP_DATA_VALUES_MAX
from ._limits import AUTHORIZATION_CODE_TTL as AUTHORIZATION_CODE_TTL
from ._limits import AUTHORIZATION_REQUEST_TTL as AUTHORIZATION_REQUEST_TTL
from ._limits import BULK_IMPORT_MAX as BULK_IMPORT_MAX
from ._limits import CHOICE_OPTION_MAX_LENGTH as CHOICE_OPTION_MAX_LENGTH
from ._limits import CHOICE_OPTIONS_MAX as CHOICE_OPTIONS_MAX
from ._limits import CHOICE_OPTIONS_MIN as CHOICE_OPTIONS_MIN
from ._limits import CLEANUP_INTERVAL as CLEANUP_INTERVAL
from ._limits import CLIENT_NAME_MAX_LENGTH as CLIENT_NAME_MAX_LENGTH
from ._limits import CONSOLE_DELIVERIES_SHOWN as CONSOLE_DELIVERIES_SHOWN
from ._limits import CONSOLE_RUNS_SHOWN as CONSOLE_RUNS_SHOWN
from ._limits import CONTACT_MAX_LENGTH as CONTACT_MAX_LENGTH
from ._limits import DELIVERY_RETENTION as DELIVERY_RETENTION
from ._limits import DEVICE_CODE_TTL as DEVICE_CODE_TTL
from ._limits import DEVICE_POLL_INTERVAL as DEVICE_POLL_INTERVAL
from ._limits import DEVICE_SLOW_DOWN_STEP as DEVICE_SLOW_DOWN_STEP
from ._limits import EVENT_RETENTION as EVENT_RETENTION
from ._limits import EVENTS_PAGE_DEFAULT as EVENTS_PAGE_DEFAULT
from ._limits import EVENTS_PAGE_MAX as EVENTS_PAGE_MAX
from ._limits import EXPIRED_ROW_GRACE as EXPIRED_ROW_GRACE
from ._limits import FUNCTION_ALLOWED_HOSTS_MAX as FUNCTION_ALLOWED_HOSTS_MAX
from ._limits import FUNCTION_COMPILE_SECONDS as FUNCTION_COMPILE_SECONDS
from ._limits import FUNCTION_FETCH_ANSWER_MAX_BYTES as FUNCTION_FETCH_ANSWER_MAX_BYTES
from ._limits import FUNCTION_FETCHES_PER_RUN_MAX as FUNCTION_FETCHES_PER_RUN_MAX
from ._limits import FUNCTION_NAME_PATTERN as FUNCTION_NAME_PATTERN
from ._limits import FUNCTION_NAMES_RESERVED as FUNCTION_NAMES_RESERVED
from ._limits import FUNCTION_SOURCE_MAX_BYTES as FUNCTION_SOURCE_MAX_BYTES
from ._limits import FUNCTION_SOURCE_MAX_DEPTH as FUNCTION_SOURCE_MAX_DEPTH
from ._limits import FUNCTIONS_PER_APP_MAX as FUNCTIONS_PER_APP_MAX
from ._limits import HEALTH_WINDOW as HEALTH_WINDOW
from ._limits import IDEMPOTENCY_WINDOW as IDEMPOTENCY_WINDOW
from ._limits import JWKS_MAX_AGE as JWKS_MAX_AGE
from ._limits import LOCKOUT_DURATION as LOCKOUT_DURATION
from ._limits import LOCKOUT_FAILURES as LOCKOUT_FAILURES
from ._limits import LOCKOUT_WINDOW as LOCKOUT_WINDOW
from ._limits import LOGIN_SESSION_TTL as LOGIN_SESSION_TTL
from ._limits import NOTICE_TTL as NOTICE_TTL
from ._limits import OAUTH_JSON_MAX_BYTES as OAUTH_JSON_MAX_BYTES
from ._limits import PUSHED_REQUEST_TTL as PUSHED_REQUEST_TTL
from ._limits import RATE_LIMIT_API_PER_IP as RATE_LIMIT_API_PER_IP
from ._limits import RATE_LIMIT_APP as RATE_LIMIT_APP
from ._limits import RATE_LIMIT_APP_PER_BUSINESS as RATE_LIMIT_APP_PER_BUSINESS
from ._limits import (
    RATE_LIMIT_DEVICE_UNAUTHENTICATED_PER_IP as RATE_LIMIT_DEVICE_UNAUTHENTICATED_PER_IP,
)
from ._limits import RATE_LIMIT_DOCUMENT_FETCH_PER_IP as RATE_LIMIT_DOCUMENT_FETCH_PER_IP
from ._limits import RATE_LIMIT_FUNCTION_UPLOADS as RATE_LIMIT_FUNCTION_UPLOADS
from ._limits import (
    RATE_LIMIT_INTROSPECT_UNAUTHENTICATED_PER_IP as RATE_LIMIT_INTROSPECT_UNAUTHENTICATED_PER_IP,
)
from ._limits import RATE_LIMIT_OAUTH_CLIENT_WITH_SECRET as RATE_LIMIT_OAUTH_CLIENT_WITH_SECRET
from ._limits import (
    RATE_LIMIT_OAUTH_CLIENT_WITHOUT_SECRET as RATE_LIMIT_OAUTH_CLIENT_WITHOUT_SECRET,
)
from ._limits import RATE_LIMIT_OAUTH_IP_CEILING as RATE_LIMIT_OAUTH_IP_CEILING
from ._limits import RATE_LIMIT_REGISTER_PER_IP as RATE_LIMIT_REGISTER_PER_IP
from ._limits import (
    RATE_LIMIT_REVOKE_UNAUTHENTICATED_PER_IP as RATE_LIMIT_REVOKE_UNAUTHENTICATED_PER_IP,
)
from ._limits import RATE_LIMIT_TOKEN_CONFIDENTIAL_CLIENT as RATE_LIMIT_TOKEN_CONFIDENTIAL_CLIENT
from ._limits import (
    RATE_LIMIT_TOKEN_UNAUTHENTICATED_PER_IP as RATE_LIMIT_TOKEN_UNAUTHENTICATED_PER_IP,
)
from ._limits import RATE_LIMIT_USER_CODE_PER_IP as RATE_LIMIT_USER_CODE_PER_IP
from ._limits import RATE_LIMIT_USER_CODE_PER_USER as RATE_LIMIT_USER_CODE_PER_USER
from ._limits import RATE_LIMITS as RATE_LIMITS
from ._limits import REDIRECT_URIS_MAX as REDIRECT_URIS_MAX
from ._limits import REDIRECT_URIS_MIN as REDIRECT_URIS_MIN
from ._limits import REFRESH_TOKEN_TTL as REFRESH_TOKEN_TTL
from ._limits import REGISTRATION_CONTACTS_MAX as REGISTRATION_CONTACTS_MAX
from ._limits import REQUEST_BODY_MAX_BYTES as REQUEST_BODY_MAX_BYTES
from ._limits import RETRY_AFTER_MAX as RETRY_AFTER_MAX
from ._limits import RETRY_JITTER as RETRY_JITTER
from ._limits import SECRET_NAME_PATTERN as SECRET_NAME_PATTERN
from ._limits import SECRET_VALUE_MAX_BYTES as SECRET_VALUE_MAX_BYTES
from ._limits import SECRETS_PER_APP_MAX as SECRETS_PER_APP_MAX
from ._limits import SESSION_TOKEN_SKEW as SESSION_TOKEN_SKEW
from ._limits import SESSION_TOKEN_TTL as SESSION_TOKEN_TTL
from ._limits import SIGNING_KEY_PERIOD as SIGNING_KEY_PERIOD
from ._limits import SIGNING_KEY_PREPUBLISH as SIGNING_KEY_PREPUBLISH
from ._limits import SIGNING_KEY_RETIRED_GRACE as SIGNING_KEY_RETIRED_GRACE
from ._limits import URI_MAX_LENGTH as URI_MAX_LENGTH
from ._limits import WEBHOOK_DISABLE_AFTER as WEBHOOK_DISABLE_AFTER
from ._limits import WEBHOOK_DISABLE_FAILURES as WEBHOOK_DISABLE_FAILURES
from ._limits import WEBHOOK_HEADER_NAME_MAX as WEBHOOK_HEADER_NAME_MAX
from ._limits import WEBHOOK_HEADER_VALUE_MAX as WEBHOOK_HEADER_VALUE_MAX
from ._limits import WEBHOOK_HEADERS_MAX as WEBHOOK_HEADERS_MAX
from ._limits import WEBHOOK_MAX_ATTEMPTS as WEBHOOK_MAX_ATTEMPTS
from ._limits import WEBHOOK_RATE_LIMIT_MAX as WEBHOOK_RATE_LIMIT_MAX
from ._limits import WEBHOOK_RETRY_DELAYS as WEBHOOK_RETRY_DELAYS
from ._limits import WEBHOOK_SECRET_OVERLAP as WEBHOOK_SECRET_OVERLAP
from ._limits import WEBHOOK_SIGNATURE_TOLERANCE as WEBHOOK_SIGNATURE_TOLERANCE
from ._limits import WEBHOOK_TIMEOUT as WEBHOOK_TIMEOUT
from ._limits import WEBHOOKS_PER_APP_MAX as WEBHOOKS_PER_APP_MAX
from ._limits import RateLimit as RateLimit
from ._limits import RateLimitKey as RateLimitKey
from ._oauth import CODE_CHALLENGE_METHODS as CODE_CHALLENGE_METHODS
from ._oauth import DPOP_NONCE_WINDOW as DPOP_NONCE_WINDOW
from ._oauth import DPOP_PROOF_MAX_AGE as DPOP_PROOF_MAX_AGE
from ._oauth import DPOP_PROOF_MAX_LENGTH as DPOP_PROOF_MAX_LENGTH
from ._oauth import DPOP_PROOF_MAX_SKEW as DPOP_PROOF_MAX_SKEW
from ._oauth import DPOP_SIGNING_ALGS as DPOP_SIGNING_ALGS
from ._oauth import GRANT_AUTHORIZATION_CODE as GRANT_AUTHORIZATION_CODE
from ._oauth import GRANT_CODE_USED as GRANT_CODE_USED
from ._oauth import GRANT_DEVICE_CODE as GRANT_DEVICE_CODE
from ._oauth import GRANT_EXPIRED as GRANT_EXPIRED
from ._oauth import GRANT_PKCE_FAILED as GRANT_PKCE_FAILED
from ._oauth import GRANT_REDIRECT_MISMATCH as GRANT_REDIRECT_MISMATCH
from ._oauth import GRANT_REFRESH_REUSE as GRANT_REFRESH_REUSE
from ._oauth import GRANT_REFRESH_TOKEN as GRANT_REFRESH_TOKEN
from ._oauth import GRANT_REVOKED as GRANT_REVOKED
from ._oauth import GRANT_TOKEN_EXCHANGE as GRANT_TOKEN_EXCHANGE
from ._oauth import GRANT_TYPES as GRANT_TYPES
from ._oauth import INVALID_GRANT_DESCRIPTIONS as INVALID_GRANT_DESCRIPTIONS
from ._oauth import OAUTH_ERRORS as OAUTH_ERRORS
from ._oauth import RESPONSE_TYPES as RESPONSE_TYPES
from ._oauth import SUBJECT_TOKEN_TYPES as SUBJECT_TOKEN_TYPES
from ._oauth import TOKEN_ENDPOINT_AUTH_METHODS as TOKEN_ENDPOINT_AUTH_METHODS
from ._oauth import TOKEN_TYPE_ACCESS as TOKEN_TYPE_ACCESS
from ._oauth import TOKEN_TYPE_HINTS as TOKEN_TYPE_HINTS
from ._oauth import TOKEN_TYPE_ID_TOKEN as TOKEN_TYPE_ID_TOKEN
from ._oauth import TOKEN_TYPE_JWT as TOKEN_TYPE_JWT
from ._oauth import USER_CODE_ALPHABET as USER_CODE_ALPHABET
from ._oauth import USER_CODE_LENGTH as USER_CODE_LENGTH
from ._oauth import OAuthErrorCode as OAuthErrorCode
from ._records import ACCOUNT_TYPES as ACCOUNT_TYPES
from ._records import DEFAULT_CURRENCY as DEFAULT_CURRENCY
from ._records import FREE_PLAN_YEARLY_INVOICES as FREE_PLAN_YEARLY_INVOICES
from ._records import FREE_PLAN_YEARLY_TURNOVER as FREE_PLAN_YEARLY_TURNOVER
from ._records import INTERNAL_AREAS as INTERNAL_AREAS
from ._records import NUMBER_DIGITS as NUMBER_DIGITS
from ._records import RECORD_KINDS as RECORD_KINDS
from ._records import RecordKind as RecordKind
from ._scopes import APP_DATA_RESOURCE_SCOPES as APP_DATA_RESOURCE_SCOPES
from ._scopes import APP_DATA_RESOURCE_TYPES as APP_DATA_RESOURCE_TYPES
from ._scopes import AREAS as AREAS
from ._scopes import PERMISSION_ACCOUNTS_WRITE as PERMISSION_ACCOUNTS_WRITE
from ._scopes import PERMISSION_APPS_INSTALL as PERMISSION_APPS_INSTALL
from ._scopes import PERMISSION_DESCRIPTIONS as PERMISSION_DESCRIPTIONS
from ._scopes import PERMISSION_JOURNAL_POST as PERMISSION_JOURNAL_POST
from ._scopes import PERMISSION_PAYMENTS_DELETE as PERMISSION_PAYMENTS_DELETE
from ._scopes import PERMISSIONS as PERMISSIONS
from ._scopes import ROLE_DEFAULTS as ROLE_DEFAULTS
from ._scopes import ROLES as ROLES
from ._scopes import SCOPE_DESCRIPTIONS as SCOPE_DESCRIPTIONS
from ._scopes import SCOPES as SCOPES
from ._scopes import SENSITIVE_PERMISSIONS as SENSITIVE_PERMISSIONS
from ._scopes import is_scope as is_scope
from ._tokens import ACCESS_TOKEN_PREFIX as ACCESS_TOKEN_PREFIX
from ._tokens import ADMIN_TOKEN_PREFIX as ADMIN_TOKEN_PREFIX
from ._tokens import AUTHORIZATION_REQUEST_PREFIX as AUTHORIZATION_REQUEST_PREFIX
from ._tokens import CLIENT_SECRET_PREFIX as CLIENT_SECRET_PREFIX
from ._tokens import CODE_PREFIX as CODE_PREFIX
from ._tokens import DEVELOPER_TOKEN_PREFIX as DEVELOPER_TOKEN_PREFIX
from ._tokens import DEVICE_CODE_PREFIX as DEVICE_CODE_PREFIX
from ._tokens import LOGIN_SESSION_PREFIX as LOGIN_SESSION_PREFIX
from ._tokens import PROTECTED_RESOURCE_PATH as PROTECTED_RESOURCE_PATH
from ._tokens import REFRESH_TOKEN_PREFIX as REFRESH_TOKEN_PREFIX
from ._tokens import REGISTRATION_TOKEN_PREFIX as REGISTRATION_TOKEN_PREFIX
from ._tokens import TOKEN_PREFIXES as TOKEN_PREFIXES
from ._tokens import WEBHOOK_PRIVATE_KEY_PREFIX as WEBHOOK_PRIVATE_KEY_PREFIX
from ._tokens import WEBHOOK_SECRET_PREFIX as WEBHOOK_SECRET_PREFIX
from ._versions import API_VERSION_SUPPORT_MONTHS as API_VERSION_SUPPORT_MONTHS
from ._versions import API_VERSIONS as API_VERSIONS
from ._versions import CURRENT_API_VERSION as CURRENT_API_VERSION
from ._versions import ApiVersion as ApiVersion
from ._versions import resolve_version as resolve_version
