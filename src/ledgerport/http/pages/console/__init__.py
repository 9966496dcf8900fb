"""The developer console's pages: the apps and an app's overview, its webhooks and deliveries,
its functions, versions and runs, its secrets and its marketplace listing. Importing a module
registers its routes on the console's blueprints (``_shared``, ``_debug``, ``secrets``)."""

from . import _debug
from . import apps as apps
from . import deliveries as deliveries
from . import function_forms as function_forms
from . import function_rollback as function_rollback
from . import functions as functions
from . import listing as listing
from . import runs as runs
from . import secrets as secrets
from . import webhook_confirms as webhook_confirms
from . import webhook_forms as webhook_forms
from . import webhook_recovery as webhook_recovery
from . import webhook_secrets as webhook_secrets
from . import webhooks as webhooks
from ._shared import PAGE_TITLE as PAGE_TITLE
from ._shared import WAYS as WAYS
from ._shared import blueprint as blueprint

debug_blueprint = _debug.blueprint
"""The blueprint of the pages that debug webhooks and functions (``deliveries``, ``runs``)."""
