"""The engine: the workers that own everything after a commit: the delivery engine (dispatcher,
claimer, one actor per webhook, recorder), the hosted-function runner and the scheduler.
Started by ``ledgerport.serve``."""

from ._delivery import DeliveryEngine as DeliveryEngine
from ._functions import FunctionRunner as FunctionRunner
from ._retry import next_attempt_at as next_attempt_at
from ._scheduler import Scheduler as Scheduler
from ._signing import signature as signature
from ._signing import signature_header as signature_header
from ._signing import verify_header as verify_header
