"""Operations: metrics, logging with redaction."""

from ._logging import RedactingFilter as RedactingFilter
from ._logging import configure_logging as configure_logging
from ._logging import redact as redact
from ._metrics import Metrics as Metrics
