"""The store's transaction-time histogram: each transaction lands in the first bucket whose
bound it does not exceed, and /metrics serves the buckets cumulatively."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ledgerport.ops import Metrics
from ledgerport.storage import StoreStatistics

BOUNDS = StoreStatistics.TRANSACTION_BOUNDS
HISTOGRAM = "ledgerport_store_transaction_duration_seconds"


def test_the_bounds_run_from_a_millisecond_to_five_seconds_in_few_steps() -> None:
    assert BOUNDS[0] == 0.001
    assert BOUNDS[-1] == 5.0
    assert list(BOUNDS) == sorted(set(BOUNDS))
    assert len(BOUNDS) <= 12


@pytest.mark.parametrize(
    ("seconds", "bucket"),
    [
        (0.0, 0),
        (0.0004, 0),
        (0.001, 0),  # a bound is "at most": its own bucket
        (0.0010001, 1),
        (0.003, 2),
        (0.25, BOUNDS.index(0.25)),
        (0.9, BOUNDS.index(1.0)),
        (5.0, len(BOUNDS) - 1),
        (5.01, len(BOUNDS)),  # above every bound
        (600.0, len(BOUNDS)),
    ],
)
def test_a_transaction_lands_in_the_first_bucket_it_does_not_exceed(
    seconds: float, bucket: int
) -> None:
    statistics = StoreStatistics()

    statistics.count_transaction(seconds)

    expected = [0] * (len(BOUNDS) + 1)
    expected[bucket] = 1
    assert statistics.transaction_buckets == expected
    assert (statistics.transactions, statistics.transaction_seconds) == (1, seconds)


def test_a_snapshot_keeps_its_counts_while_the_store_counts_on() -> None:
    statistics = StoreStatistics()
    statistics.count_transaction(0.002)

    snapshot = statistics.snapshot(connections=3)
    statistics.count_transaction(0.002)

    assert sum(snapshot.transaction_buckets) == snapshot.transactions == 1
    assert snapshot.connections == 3
    assert sum(statistics.transaction_buckets) == 2


def test_metrics_serve_the_buckets_cumulatively_with_count_and_sum() -> None:
    statistics = StoreStatistics()
    for seconds in (0.0005, 0.001, 0.003, 0.2, 7.0):
        statistics.count_transaction(seconds)
    metrics = Metrics()
    metrics.watch_store(statistics.snapshot)

    (family,) = [
        family
        for family in text_string_to_metric_families(metrics.render().decode())
        if family.name == HISTOGRAM
    ]

    assert family.type == "histogram"
    buckets = {s.labels["le"]: s.value for s in family.samples if s.name == f"{HISTOGRAM}_bucket"}
    assert buckets == {
        "0.001": 2,
        "0.0025": 2,
        "0.005": 3,
        "0.01": 3,
        "0.025": 3,
        "0.05": 3,
        "0.1": 3,
        "0.25": 4,
        "1.0": 4,
        "5.0": 4,
        "+Inf": 5,
    }
    totals = {s.name: s.value for s in family.samples if "le" not in s.labels}
    assert totals == {f"{HISTOGRAM}_count": 5, f"{HISTOGRAM}_sum": pytest.approx(7.2045)}
