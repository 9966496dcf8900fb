"""The engine: the workers that own everything after a commit: the delivery engine (dispatcher,
claimer, one actor per webhook, recorder), the hosted-function runner, the scheduler (with the
ticker of functions' schedules), and the node they claim under. Started by ``ledgerport.serve``.

Besides the workers, the parts of the delivery engine that have tests of their own are named
here: the bookkeeping (``DeliveryBook``, ``Shares``), one attempt's pure parts
(``request_headers``, ``attempt_error``, ``attempt_outcome``), the send-time check's freshness
(``Planned``, ``check_stands``), the actors and the recorder; and how a function run ended
(``run_ended``, with the platform's ``RunNote``s in its log), and a run's way out
(``Egress``: its fetches and secrets)."""

from ._actors import Actors as Actors
from ._attempt import attempt_outcome as attempt_outcome
from ._attempt import logged_headers as logged_headers
from ._attempt import request_headers as request_headers
from ._core import Capped as Capped
from ._core import Refusal as Refusal
from ._core import Shares as Shares
from ._delivery import DeliveryEngine as DeliveryEngine
from ._delivery_book import DeliveryBook as DeliveryBook
from ._delivery_book import Verdict as Verdict
from ._documents import fetch_client_document as fetch_client_document
from ._egress import Egress as Egress
from ._functions import FunctionRunner as FunctionRunner
from ._health import Delivered as Delivered
from ._health import Endpoint as Endpoint
from ._health import Failed as Failed
from ._health import Gone as Gone
from ._health import Happening as Happening
from ._health import Notice as Notice
from ._health import SwitchedOff as SwitchedOff
from ._health import SwitchedOn as SwitchedOn
from ._health import Tick as Tick
from ._health import failing_too_long as failing_too_long
from ._health import step as step
from ._lifecycle import record_health as record_health
from ._lifecycle import tick_endpoints as tick_endpoints
from ._node import Node as Node
from ._post import attempt_error as attempt_error
from ._post import read_head as read_head
from ._rate import SendRate as SendRate
from ._recorder import UNRECORDED_MAX as UNRECORDED_MAX
from ._recorder import Recorder as Recorder
from ._retry import jitter as jitter
from ._retry import next_attempt_at as next_attempt_at
from ._retry import retry_after_seconds as retry_after_seconds
from ._retry import schedule as schedule
from ._run_book import DueRuns as DueRuns
from ._run_book import RunBook as RunBook
from ._run_book import half_share as half_share
from ._run_outcome import RUN_RETRY_DELAYS as RUN_RETRY_DELAYS
from ._run_outcome import RunNote as RunNote
from ._run_outcome import run_ended as run_ended
from ._scheduler import Scheduler as Scheduler
from ._schedules import ScheduleTicker as ScheduleTicker
from ._schemes import hmac_key_cached as hmac_key_cached
from ._schemes import signature_headers as signature_headers
from ._schemes import signing_key_cached as signing_key_cached
from ._schemes import verify_asymmetric as verify_asymmetric
from ._schemes import verify_standard as verify_standard
from ._send_check import PLAN_FRESH as PLAN_FRESH
from ._send_check import Planned as Planned
from ._send_check import check_stands as check_stands
from ._shared import DeliveryState as DeliveryState
from ._signing import signature as signature
from ._signing import signature_header as signature_header
from ._signing import verify_header as verify_header
from ._stream import StreamDesk as StreamDesk
from ._transport import DeliveryClient as DeliveryClient
from ._transport import DeliveryConnection as DeliveryConnection
from ._transport import DeliveryResponse as DeliveryResponse
from ._transport import request_bytes as request_bytes
