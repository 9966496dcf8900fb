from quart import Blueprint

blueprint = Blueprint("api", __name__)
