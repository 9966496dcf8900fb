"""The bookkeeping product's own routes on the API host: never open to OAuth clients.

They are not part of the partner API, so the OpenAPI document leaves them out.
"""

from __future__ import annotations

from quart import Response
from quart_schema import hide

from ledgerport import auth, catalog

from ._blueprint import blueprint

_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]


@hide
async def not_exposed(area: str, rest: str = "") -> Response:
    """403 ENDPOINT_NOT_EXPOSED: a product route outside the partner surface, whatever the token."""
    raise auth.EndpointNotExposed()


_AREAS = ",".join(f"'{area}'" for area in catalog.INTERNAL_AREAS)
blueprint.add_url_rule(f"/<any({_AREAS}):area>", "not_exposed", not_exposed, methods=_METHODS)
blueprint.add_url_rule(
    f"/<any({_AREAS}):area>/<path:rest>", "not_exposed_below", not_exposed, methods=_METHODS
)
