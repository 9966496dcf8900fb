"""HTTP front: OAuth, data API, console, operator API and pages on quart-trio."""

from ._app import create_app as create_app
from ._drain import RequestTracker as RequestTracker
