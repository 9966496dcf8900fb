"""The queue protocol of webhook deliveries and hosted-function runs (domain, no HTTP): fan-out
of committed events, claims and their leases, the send-time check, attempt outcomes and runs
ended, the history the console shows, redelivery, test deliveries and test runs, the nodes that
claim and the takeover of a dead node's claims. Used by the engine and by the console; it reads
``apps``' configuration (webhooks, functions), which never imports it."""

from ._attempts import RESPONSE_BODY_KEPT as RESPONSE_BODY_KEPT
from ._attempts import AttemptMade as AttemptMade
from ._attempts import LoggedAttempt as LoggedAttempt
from ._attempts import attempt_log as attempt_log
from ._bodies import TEST_BUSINESS_ID as TEST_BUSINESS_ID
from ._deliveries import DELIVERIES_CHANNEL as DELIVERIES_CHANNEL
from ._deliveries import DELIVERY_STATUSES as DELIVERY_STATUSES
from ._deliveries import AttemptOutcome as AttemptOutcome
from ._deliveries import ClaimedDelivery as ClaimedDelivery
from ._deliveries import Delivery as Delivery
from ._deliveries import DeliveryStatus as DeliveryStatus
from ._deliveries import claim_due as claim_due
from ._deliveries import create_test_delivery as create_test_delivery
from ._deliveries import delivery_due_times as delivery_due_times
from ._deliveries import next_due_at as next_due_at
from ._deliveries import purge_deliveries as purge_deliveries
from ._deliveries import queue_depth as queue_depth
from ._deliveries import recent_deliveries as recent_deliveries
from ._deliveries import record_outcomes as record_outcomes
from ._deliveries import redeliver as redeliver
from ._deliveries import release_claims as release_claims
from ._deliveries import renew_claims as renew_claims
from ._errors import QueuesError as QueuesError
from ._errors import RedeliveryRefused as RedeliveryRefused
from ._errors import RunNotFound as RunNotFound
from ._fan_out import FanOut as FanOut
from ._fan_out import Pending as Pending
from ._fan_out import delivery_id_for as delivery_id_for
from ._fan_out import dispatch_backlog as dispatch_backlog
from ._fan_out import event_log_length as event_log_length
from ._fan_out import pending_events as pending_events
from ._fan_out import plan_fan_out as plan_fan_out
from ._fan_out import write_fan_out as write_fan_out
from ._nodes import NODE_KEY_PREFIX as NODE_KEY_PREFIX
from ._nodes import TakenOver as TakenOver
from ._nodes import register_node as register_node
from ._nodes import remove_node as remove_node
from ._nodes import take_over as take_over
from ._runs import FUNCTION_RUNS_CHANNEL as FUNCTION_RUNS_CHANNEL
from ._runs import RUN_EXCERPT_CHARS as RUN_EXCERPT_CHARS
from ._runs import RUN_STATUSES as RUN_STATUSES
from ._runs import ClaimedRun as ClaimedRun
from ._runs import FunctionRun as FunctionRun
from ._runs import RunDetail as RunDetail
from ._runs import RunEnded as RunEnded
from ._runs import RunPlan as RunPlan
from ._runs import RunStatus as RunStatus
from ._runs import claim_runs as claim_runs
from ._runs import create_test_run as create_test_run
from ._runs import get_run as get_run
from ._runs import next_run_due_at as next_run_due_at
from ._runs import purge_runs as purge_runs
from ._runs import recent_runs as recent_runs
from ._runs import record_runs as record_runs
from ._runs import run_due_times as run_due_times
from ._runs import run_plan as run_plan
from ._runs import run_queue_depth as run_queue_depth
from ._send_checks import SendPlan as SendPlan
from ._send_checks import send_plan as send_plan
from ._send_checks import send_plans as send_plans
