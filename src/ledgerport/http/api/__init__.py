"""The data API (Bearer access tokens)."""

from . import app_data as app_data
from . import events as events
from . import internal as internal
from . import invoicing as invoicing
from . import ledger as ledger
from . import parties as parties
from . import purchasing as purchasing
from ._blueprint import blueprint as blueprint
from ._records import RecordIdConverter as RecordIdConverter
