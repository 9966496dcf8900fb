"""The data API (Bearer access tokens)."""

from . import invoices as invoices
from ._blueprint import blueprint as blueprint
