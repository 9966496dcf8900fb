"""Apps, installations, webhooks, app data and hosted functions (domain, no HTTP)."""

from ._apps import APP_STATUSES as APP_STATUSES
from ._apps import APP_TYPES as APP_TYPES
from ._apps import INSTALLATION_END_HOOKS as INSTALLATION_END_HOOKS
from ._apps import App as App
from ._apps import AppNotActive as AppNotActive
from ._apps import AppNotFound as AppNotFound
from ._apps import AppNotReviewed as AppNotReviewed
from ._apps import Installation as Installation
from ._apps import InstallationNotFound as InstallationNotFound
from ._apps import NotAMember as NotAMember
from ._apps import ScopesNotRegistered as ScopesNotRegistered
from ._apps import active_installation as active_installation
from ._apps import create_app as create_app
from ._apps import find_app_by_client_id as find_app_by_client_id
from ._apps import get_app as get_app
from ._apps import get_installation as get_installation
from ._apps import install as install
from ._apps import ordered_scopes as ordered_scopes
from ._apps import revoke_access as revoke_access
from ._apps import set_app_reviewed as set_app_reviewed
from ._apps import set_app_status as set_app_status
from ._apps import uninstall as uninstall
from ._uris import is_loopback_host as is_loopback_host
from ._uris import redirect_uri_problems as redirect_uri_problems
