from quart import Blueprint
from quart_schema import security_scheme_blueprint

from ledgerport import auth, storage

from .._openapi import blueprint_raises

blueprint = Blueprint("api", __name__)
security_scheme_blueprint(blueprint, [{"accessToken": []}])
# What every call's two gates can refuse (``_auth.requires``): limits, token, scope, permission.
blueprint_raises(
    blueprint,
    auth.RateLimited,
    auth.InvalidAccessToken,
    auth.InsufficientScope,
    auth.PermissionDenied,
    storage.StorageUnavailable,
)
