"""Apps, installations, webhooks, app data and hosted functions (domain, no HTTP)."""

from ._apps import APP_STATUSES as APP_STATUSES
from ._apps import APP_TYPES as APP_TYPES
from ._apps import App as App
from ._apps import Installation as Installation
from ._apps import active_installation as active_installation
from ._apps import create_app as create_app
from ._apps import end_installation_state as end_installation_state
from ._apps import find_app_by_client_id as find_app_by_client_id
from ._apps import get_app as get_app
from ._apps import get_installation as get_installation
from ._apps import install as install
from ._apps import ordered_scopes as ordered_scopes
from ._apps import record_installation_event as record_installation_event
from ._apps import set_app_reviewed as set_app_reviewed
from ._apps import set_app_status as set_app_status
from ._errors import AppHasNoAccess as AppHasNoAccess
from ._errors import AppNotActive as AppNotActive
from ._errors import AppNotFound as AppNotFound
from ._errors import AppNotReviewed as AppNotReviewed
from ._errors import AppsError as AppsError
from ._errors import InstallationNotFound as InstallationNotFound
from ._errors import NotAMember as NotAMember
from ._errors import ScopesNotRegistered as ScopesNotRegistered
from ._uris import is_loopback_host as is_loopback_host
from ._uris import redirect_uri_problems as redirect_uri_problems
