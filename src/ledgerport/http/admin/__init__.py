"""The operator API, ``/admin/*``: the bookkeeping product's backend provisions tenants here.

Request bodies are models validated at the door; answers are typed dictionaries, which are also
what the OpenAPI document says each operation answers.
"""

from . import apps as apps
from . import failing as failing
from . import tenants as tenants
from ._blueprint import blueprint as blueprint
