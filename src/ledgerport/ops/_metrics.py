"""The Prometheus metrics of one service instance, in a registry of its own.

Every label value comes from a closed set (route templates, known methods, the service's own
statuses, catalog names), never from raw request input: each distinct value is a series kept
for the life of the process, so a client could otherwise grow memory without bound.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from itertools import accumulate
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    Info,
    Metric,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from ledgerport import __version__

OTHER = "other"
"""The label value of anything outside a label's closed set."""
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def closed_label(value: str, allowed: Collection[str]) -> str:
    """``value`` when it is one of ``allowed``, else :data:`OTHER`."""
    return value if value in allowed else OTHER


class _CountsCollector:
    """Counts an object of the process keeps (``read()``: the store's ``statistics()``, the
    settling rate limiter's), served at each scrape as ``families`` (name, kind, attribute,
    help) and whatever ``more`` makes of them; zeros while nothing is read."""

    def __init__(
        self,
        families: tuple[tuple[str, str, str, str], ...],
        more: Callable[[Any], Iterator[Metric]] | None = None,
    ) -> None:
        self.read: Callable[[], Any] | None = None
        self._families = families
        self._more = more

    def describe(self) -> Iterator[Metric]:
        return self._metrics(None)

    def collect(self) -> Iterator[Metric]:
        return self._metrics(None if self.read is None else self.read())

    def _metrics(self, counts: Any) -> Iterator[Metric]:
        if self._more is not None:
            yield from self._more(counts)
        for name, kind, attribute, help_text in self._families:
            family = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
            value = 0.0 if counts is None else float(getattr(counts, attribute))
            yield family(name, help_text, value=value)


def _transaction_histogram(counts: Any) -> HistogramMetricFamily:
    """``ledgerport_store_transaction_duration_seconds`` from the store's bucket counts (which
    are per bucket: Prometheus wants them cumulative, ``+Inf`` last)."""
    bounds: tuple[float, ...] = () if counts is None else counts.TRANSACTION_BOUNDS
    per_bucket = [0] if counts is None else counts.transaction_buckets
    cumulative = list(accumulate(per_bucket))
    labels = [str(float(bound)) for bound in bounds] + ["+Inf"]
    return HistogramMetricFamily(
        "ledgerport_store_transaction_duration_seconds",
        "Time of the transactions this process ended, from their start (SQLite: once the"
        " writer's turn came) to their commit or rollback; _count is how many.",
        buckets=list(zip(labels, cumulative, strict=True)),
        sum_value=0.0 if counts is None else counts.transaction_seconds,
    )


_STORE_FAMILIES = (
    (
        "ledgerport_store_unavailable",
        "counter",
        "unavailable",
        "Statements the database did not answer or refused to run.",
    ),
    (
        "ledgerport_store_writer_waits",
        "counter",
        "waits",
        "SQLite: transactions that waited for the one writer's turn (0 on PostgreSQL).",
    ),
    (
        "ledgerport_store_writer_wait_seconds",
        "counter",
        "wait_seconds",
        "SQLite: their waits in all.",
    ),
    (
        "ledgerport_store_listens_lost",
        "counter",
        "listens_lost",
        "PostgreSQL: times the connection listening for notifications was lost (each is"
        " replaced at once; 0 on SQLite).",
    ),
    ("ledgerport_store_connections", "gauge", "connections", "Database connections open now."),
    (
        "ledgerport_store_connections_in_use",
        "gauge",
        "connections_in_use",
        "Database connections holding a transaction or a statement now.",
    ),
    (
        "ledgerport_store_connections_max",
        "gauge",
        "connections_max",
        "The most connections this process's pool opens.",
    ),
)


_LIMIT_FAMILIES = (
    (
        "ledgerport_rate_limit_settlements",
        "counter",
        "settlements",
        "Transactions that added the rate-limit hits this process counted to the database"
        " (PostgreSQL without Redis; 0 elsewhere).",
    ),
    (
        "ledgerport_rate_limit_settlement_failures",
        "counter",
        "failures",
        "Settlements that failed; their hits are kept and added by a later one.",
    ),
    (
        "ledgerport_rate_limit_hits_settled",
        "counter",
        "hits",
        "Rate-limit hits counted in this process and added to the database.",
    ),
    (
        "ledgerport_rate_limit_views",
        "gauge",
        "views",
        "Rate-limit budgets this process keeps a view of now (its memory for them).",
    ),
)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._store = _CountsCollector(
            _STORE_FAMILIES, lambda counts: iter([_transaction_histogram(counts)])
        )
        self.registry.register(self._store)
        self._limiter = _CountsCollector(_LIMIT_FAMILIES)
        self.registry.register(self._limiter)
        # What every Prometheus client serves: the process (CPU, memory, open files, start
        # time), the interpreter and its collector; and which version runs.
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        Info("ledgerport_build", "The version this process runs.", registry=self.registry).info(
            {"version": __version__}
        )
        self.http_requests = Counter(
            "ledgerport_http_requests_total",
            "HTTP requests answered, by route template, method and status.",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.http_latency = Histogram(
            "ledgerport_http_request_duration_seconds",
            "Time to answer an HTTP request, by route template and method.",
            ["route", "method"],
            registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self.http_in_flight = Gauge(
            "ledgerport_http_requests_in_flight",
            "HTTP requests being answered now.",
            registry=self.registry,
        )
        self.task_crashes = Counter(
            "ledgerport_task_crashes_total",
            "Supervised background tasks that ended with an error.",
            ["task"],
            registry=self.registry,
        )
        self.cleanup_rows = Counter(
            "ledgerport_cleanup_rows_total",
            "Expired rows removed by the scheduler, by kind.",
            ["kind"],
            registry=self.registry,
        )

        self.oauth_grants = Counter(
            "ledgerport_oauth_grants_total",
            "Token endpoint requests, by grant type and outcome (ok or the OAuth error code).",
            ["grant_type", "outcome"],
            registry=self.registry,
        )
        self.oauth_client_auth_failures = Counter(
            "ledgerport_oauth_client_auth_failures_total",
            "Failed client authentications, by endpoint.",
            ["endpoint"],
            registry=self.registry,
        )
        self.oauth_lockouts = Counter(
            "ledgerport_oauth_lockouts_total",
            "(IP, client) pairs locked after repeated failed client authentication, by endpoint.",
            ["endpoint"],
            registry=self.registry,
        )
        self.rate_limited = Counter(
            "ledgerport_rate_limited_total",
            "Requests refused with 429, by limit name.",
            ["limit"],
            registry=self.registry,
        )
        self.session_tokens = Counter(
            "ledgerport_session_tokens_issued_total",
            "Session tokens issued, by source (bridge: a signed-in user; admin: operator API).",
            ["source"],
            registry=self.registry,
        )
        self.device_decisions = Counter(
            "ledgerport_device_decisions_total",
            "Decisions on the device verification page (approve, deny, wrong_code).",
            ["decision"],
            registry=self.registry,
        )
        self.client_registrations = Counter(
            "ledgerport_client_registrations_total",
            "Clients registered at /oauth/register, by type.",
            ["type"],
            registry=self.registry,
        )

        self.deliveries = Counter(
            "ledgerport_webhook_deliveries_total",
            "Webhook delivery attempts and send-time refusals, by outcome (delivered, retrying,"
            " failed, queued: given back unattempted) and event type.",
            ["outcome", "type"],
            registry=self.registry,
        )
        self.webhook_endpoints_disabled = Counter(
            "ledgerport_webhook_endpoints_disabled_total",
            "Webhook endpoints the engine switched off, by reason (gone: a 410 answer; failing:"
            " LEDGERPORT_WEBHOOK_DISABLE_AFTER without a delivered attempt).",
            ["reason"],
            registry=self.registry,
        )
        for reason in ("gone", "failing"):  # served at 0 from the start, as the dashboard reads
            self.webhook_endpoints_disabled.labels(reason)
        self.webhook_rate_limited = Counter(
            "ledgerport_webhook_rate_waits_total",
            "Attempts that waited for the next second of their endpoint's rateLimit.",
            registry=self.registry,
        )
        self.delivery_attempt_seconds = Histogram(
            "ledgerport_webhook_attempt_duration_seconds",
            "Time from sending a webhook attempt to its answer (or its failure).",
            registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self.delivery_event_lag = Histogram(
            "ledgerport_webhook_event_to_first_attempt_seconds",
            "Time from an event's commit to its delivery's first attempt.",
            registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 30, 300),
        )
        self.delivery_queue_depth = Gauge(
            "ledgerport_webhook_queue_depth",
            "Deliveries waiting for their first attempt (all processes).",
            registry=self.registry,
        )
        self.delivery_retry_backlog = Gauge(
            "ledgerport_webhook_retry_backlog",
            "Deliveries waiting for a retry (all processes).",
            registry=self.registry,
        )
        self.delivery_actors = Gauge(
            "ledgerport_webhook_actors",
            "Delivery actors alive in this process (one per webhook with work).",
            registry=self.registry,
        )
        self.webhook_apps_failing = Gauge(
            "ledgerport_webhook_apps_failing",
            "Apps with a webhook whose deliveries that ended in the last 15 minutes are at least"
            " 5 and mostly failed or wait for a retry (all processes: aggregate with max);"
            " GET /admin/webhooks/failing names them.",
            registry=self.registry,
        )
        self.webhooks_failing = Gauge(
            "ledgerport_webhooks_failing",
            "Webhooks whose deliveries that ended in the last 15 minutes are at least 5 and"
            " mostly failed or wait for a retry (all processes: aggregate with max).",
            registry=self.registry,
        )
        self.failing_counted_at = float("-inf")
        """When the two gauges above were last counted (the platform's clock): a scrape counts
        them again only when they are older than ``http``'s refresh interval."""
        self.dispatcher_lag_events = Gauge(
            "ledgerport_dispatcher_lag_events",
            "Committed events not fanned out into deliveries yet (all processes).",
            registry=self.registry,
        )

        self.sign_in_failures = Counter(
            "ledgerport_sign_in_failures_total",
            "Failed sign-ins at the application host's page, by reason (wrong_credentials,"
            " expired_form).",
            ["reason"],
            registry=self.registry,
        )
        self.event_log_length = Gauge(
            "ledgerport_event_log_events",
            "The sequence number of the newest committed event (all processes): its rate is"
            " the event log's append rate; aggregate with max.",
            registry=self.registry,
        )

        self.gc_pause = Histogram(
            "ledgerport_gc_pause_seconds",
            "Pauses of Python's garbage collector (the whole process waits), by generation"
            " (2: a full collection).",
            ["generation"],
            registry=self.registry,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1),
        )
        self.memory_trim = Histogram(
            "ledgerport_memory_trim_seconds",
            "Time the C library took to give freed memory back to the system (the process"
            " waits meanwhile); every 30 s.",
            registry=self.registry,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25),
        )
        self.memory_returned = Counter(
            "ledgerport_memory_returned_bytes_total",
            "Resident memory the trims gave back to the system.",
            registry=self.registry,
        )
        self.service_restarts = Counter(
            "ledgerport_service_restarts_total",
            "Long-lived services of this process (node, scheduler, delivery-engine,"
            " function-runner) started again by the supervisor after they stopped, by service.",
            ["service"],
            registry=self.registry,
        )
        self.claims_taken_over = Counter(
            "ledgerport_claims_taken_over_total",
            "Deliveries and hosted-function runs a dead node held, given back to the queue by"
            " this process, by kind (delivery, run).",
            ["kind"],
            registry=self.registry,
        )
        self.nodes_taken_over = Counter(
            "ledgerport_nodes_taken_over_total",
            "Dead nodes (serving processes) whose claims this process gave back to the queue.",
            registry=self.registry,
        )

        self.function_schedule_runs = Counter(
            "ledgerport_function_schedule_runs_total",
            "Hosted-function runs queued by the ticks of functions' schedules (one a tick and"
            " ACTIVE installation).",
            registry=self.registry,
        )
        self.function_runs = Counter(
            "ledgerport_function_runs_total",
            "Hosted-function runs ended, by outcome (succeeded, failed, retrying: the platform"
            " failed the run and it goes again, queued: given back when the runner stopped).",
            ["outcome"],
            registry=self.registry,
        )
        self.function_fetches = Counter(
            "ledgerport_function_fetches_total",
            "Hosted functions' context.fetch calls, by outcome (answered: the host answered,"
            " whatever its status; refused: a rule of the function or the platform refused it;"
            " failed: no connection, no answer in time, or one too large).",
            ["outcome"],
            registry=self.registry,
        )
        for outcome in ("answered", "refused", "failed"):
            self.function_fetches.labels(outcome)
        self.function_run_seconds = Histogram(
            "ledgerport_function_run_duration_seconds",
            "Wall time of a hosted-function run in its sandbox worker.",
            registry=self.registry,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10),
        )
        self.function_queue_depth = Gauge(
            "ledgerport_function_queue_depth",
            "Hosted-function runs waiting to run (all processes).",
            registry=self.registry,
        )
        self.function_workers = Gauge(
            "ledgerport_function_workers",
            "Sandbox worker processes alive in this process's pool.",
            registry=self.registry,
        )
        self.function_worker_restarts = Counter(
            "ledgerport_function_worker_restarts_total",
            "Sandbox workers started to replace one that died, was killed or was recycled, by"
            " reason.",
            ["reason"],
            registry=self.registry,
        )
        self.function_limit_kills = Counter(
            "ledgerport_function_limit_kills_total",
            "Hosted-function runs stopped for breaking a limit, by limit (cpu, wall, heap, log,"
            " result).",
            ["limit"],
            registry=self.registry,
        )

        self.function_frames_refused = Counter(
            "ledgerport_function_frames_refused_total",
            "Frames from sandbox workers refused and never answered, by reason (other_run: a"
            " frame naming a run other than the one going on; unexpected: a frame a worker"
            " never sends). Each recycles its worker.",
            ["reason"],
            registry=self.registry,
        )

        self.fairness_held_back = Counter(
            "ledgerport_fairness_held_back_total",
            "Deliveries refused room and runs passed over for a worker, by kind (delivery, run)"
            " and reason: own_cap (the webhook, developer, app or business holds its share),"
            " total (the engine or pool is full), fairness (developers waiting for room go"
            " first).",
            ["kind", "reason"],
            registry=self.registry,
        )
        self.fairness_busiest_share = Gauge(
            "ledgerport_fairness_busiest_share",
            "The share in use of the developer (all its apps together) using most of its share"
            " in this process (0 to 1), by kind (delivery: held deliveries; run: busy workers)."
            " Per process: aggregate with max.",
            ["kind"],
            registry=self.registry,
        )
        self.fairness_tenants_holding = Gauge(
            "ledgerport_fairness_tenants_holding",
            "Developers holding deliveries (delivery) or busy workers (run) in this process.",
            ["kind"],
            registry=self.registry,
        )
        self.fairness_tenants_waiting = Gauge(
            "ledgerport_fairness_tenants_waiting",
            "Developers with due deliveries that found this process full and go first when room"
            " is let go.",
            ["kind"],
            registry=self.registry,
        )

        self.app_storage_trimmed_bytes = Counter(
            "ledgerport_app_storage_trimmed_bytes_total",
            "Bytes of output dropped to keep apps within their storage quota, by kind"
            " (run_output: a run's log lines, result, error and stack; attempt_body: a webhook"
            " attempt's kept answer).",
            ["kind"],
            registry=self.registry,
        )
        self.app_storage_trimmed_items = Counter(
            "ledgerport_app_storage_trimmed_items_total",
            "Runs whose output and attempts whose body were dropped to keep apps within their"
            " storage quota, by kind (run_output, attempt_body).",
            ["kind"],
            registry=self.registry,
        )
        self.app_storage_over_quota = Gauge(
            "ledgerport_app_storage_apps_over_quota",
            "Apps keeping more than their storage quota when the trimming pass last looked"
            " (before it trimmed them).",
            registry=self.registry,
        )

    def request_answered(self, route: str, method: str, status: int, seconds: float) -> None:
        """Count an HTTP request answered (``http_requests``) and observe its time
        (``http_latency``), by route template and method."""
        self.http_requests.labels(route, method, str(status)).inc()
        self.http_latency.labels(route, method).observe(seconds)

    def watch_store(self, statistics: Callable[[], Any]) -> None:
        """Serve the store's own counts (``Store.statistics``) as ``ledgerport_store_*``."""
        self._store.read = statistics

    def watch_limiter(self, statistics: Callable[[], Any]) -> None:
        """Serve the settling rate limiter's counts (``SettlingRateLimiter.statistics``) as
        ``ledgerport_rate_limit_*``."""
        self._limiter.read = statistics

    def render(self) -> bytes:
        return generate_latest(self.registry)
