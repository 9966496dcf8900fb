"""The engine: the workers that own everything after a commit: the delivery engine (dispatcher,
claimer, one actor per webhook, recorder), the hosted-function runner, the scheduler, and the
node they claim under. Started by ``ledgerport.serve``."""

from ._core import Capped as Capped
from ._core import DeliveryBook as DeliveryBook
from ._core import Refusal as Refusal
from ._core import Shares as Shares
from ._core import Verdict as Verdict
from ._delivery import UNRECORDED_MAX as UNRECORDED_MAX
from ._delivery import DeliveryEngine as DeliveryEngine
from ._functions import FunctionRunner as FunctionRunner
from ._node import Node as Node
from ._retry import next_attempt_at as next_attempt_at
from ._run_book import DueRuns as DueRuns
from ._run_book import RunBook as RunBook
from ._run_book import half_share as half_share
from ._scheduler import Scheduler as Scheduler
from ._signing import signature as signature
from ._signing import signature_header as signature_header
from ._signing import verify_header as verify_header
