"""The developer console API, ``/developer/*``: an app's developer manages the app."""

from . import app_data_fields as app_data_fields
from . import apps as apps
from . import assets as assets
from . import cli_logins as cli_logins
from . import deliveries as deliveries
from . import extensions as extensions
from . import functions as functions
from . import listing as listing
from . import secrets as secrets
from . import stream_endpoints as stream_endpoints
from . import streams as streams
from . import versions as versions
from . import webhooks as webhooks
from ._blueprint import blueprint as blueprint
from ._blueprint import iso_time as iso_time
