"""An endpoint's lifecycle core (contract.md, third round: the engine rules of webhook
endpoints), without a store or trio: its transitions as a table, and its invariants under any
sequence of happenings with non-decreasing times (a hypothesis state machine).

Invariants: an endpoint is never switched on with a reason, nor switched off without a time; a
``disabled`` notice comes only from a step that found the endpoint switched on, and only the
app's switch turns a switched-off endpoint back on; ``failing`` and ``recovered`` notices
alternate, ``failing`` first; the consecutive failures are the deliveries failed for good since
the last delivered one; and the engine switches an endpoint off as ``failing`` exactly when the
contract's rule holds (checked against a model that keeps every happening).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from ledgerport import catalog
from ledgerport.apps import EndpointState
from ledgerport.engine import (
    Delivered,
    Endpoint,
    Failed,
    Gone,
    Happening,
    Notice,
    SwitchedOff,
    SwitchedOn,
    Tick,
    failing_too_long,
    step,
)

WINDOW = 100.0
"""The tables' ``disable_after``: small round numbers make the edges plain."""

FAILURES = catalog.WEBHOOK_DISABLE_FAILURES


def _fresh() -> Endpoint:
    """An endpoint made (switched on) at 0, as ``create_webhook`` writes one."""
    return Endpoint(True, health=EndpointState(switched_on_at=0.0))


def _run(
    happenings: Sequence[Happening], start: Endpoint | None = None
) -> tuple[Endpoint, list[Notice]]:
    endpoint = start or _fresh()
    notices: list[Notice] = []
    for happening in happenings:
        endpoint, raised = step(endpoint, happening, disable_after=WINDOW)
        notices.extend(raised)
    return endpoint, notices


def _final(at: float) -> Failed:
    return Failed(at, f"HTTP 500 at {at}", final=True)


def _finals(*moments: float) -> list[Happening]:
    return [_final(at) for at in moments]


FAILING = Notice("failing")
RECOVERED = Notice("recovered")
GONE = Notice("disabled", "gone")
DISABLED = Notice("disabled", "failing")


@dataclass(frozen=True)
class Row:
    happenings: list[Happening]
    notices: list[Notice]
    enabled: bool = True
    reason: str | None = None
    state: str = "healthy"
    consecutive: int = 0
    health: dict[str, object] = field(default_factory=dict)
    """Other fields of the endpoint's health that the row pins."""


TRANSITIONS: dict[str, Row] = {
    "a delivery of a healthy endpoint raises nothing": Row(
        [Delivered(5)], [], health={"last_delivery_at": 5, "failing_since": None}
    ),
    "a delivery after failing resets the count and recovers": Row(
        [*_finals(1, 2), Delivered(3)],
        [FAILING, RECOVERED],
        health={"last_delivery_at": 3, "failing_since": None, "recent_failures": ()},
    ),
    "a second delivery after recovering raises nothing more": Row(
        [_final(1), Delivered(2), Delivered(3)], [FAILING, RECOVERED]
    ),
    "a failure that is not the last attempt only records the error": Row(
        [Failed(4, "timed out", final=False)],
        [],
        health={"last_error": "timed out", "recent_failures": (), "failing_since": None},
    ),
    "a failure that is not the last attempt of a failing endpoint only records the error": Row(
        [_final(1), Failed(2, "timed out", final=False)],
        [FAILING],
        state="failing",
        consecutive=1,
        health={"last_error": "timed out", "recent_failures": (1,)},
    ),
    "the first delivery of a healthy endpoint to fail for good raises failing": Row(
        [_final(7)],
        [FAILING],
        state="failing",
        consecutive=1,
        health={"failing_since": 7, "last_error": "HTTP 500 at 7"},
    ),
    "failing is raised once for a run of failures": Row(
        _finals(1, 2), [FAILING], state="failing", consecutive=2, health={"failing_since": 1}
    ),
    "a new run of failures after a delivery raises failing again": Row(
        [_final(1), Delivered(2), _final(3)],
        [FAILING, RECOVERED, FAILING],
        state="failing",
        consecutive=1,
        health={"failing_since": 3},
    ),
    "a 410 of a healthy endpoint switches it off as gone": Row(
        [Gone(9)],
        [FAILING, GONE],
        enabled=False,
        reason="gone",
        state="failing",
        consecutive=1,
        health={"last_error": "HTTP 410"},
    ),
    "a 410 of a failing endpoint raises only disabled": Row(
        [_final(1), Gone(2)],
        [FAILING, GONE],
        enabled=False,
        reason="gone",
        state="failing",
        consecutive=2,
    ),
    "a 410 after the app switched it off keeps a null reason": Row(
        [SwitchedOff(1), Gone(2)],
        [FAILING],
        enabled=False,
        state="failing",
        consecutive=1,
    ),
    "a second 410 raises no second disabled": Row(
        [Gone(1), Gone(2)],
        [FAILING, GONE],
        enabled=False,
        reason="gone",
        state="failing",
        consecutive=2,
    ),
    "the rule exactly at its edge: quiet for the whole window": Row(
        [*_finals(10, 20, 30), Tick(WINDOW)],
        [FAILING, DISABLED],
        enabled=False,
        reason="failing",
        state="failing",
        consecutive=3,
    ),
    "the rule just before its edge": Row(
        [*_finals(10, 20, 30), Tick(WINDOW - 0.001)], [FAILING], state="failing", consecutive=3
    ),
    "a failure exactly at the window's start counts": Row(
        [*_finals(0, 20, 30), Tick(WINDOW)],
        [FAILING, DISABLED],
        enabled=False,
        reason="failing",
        state="failing",
        consecutive=3,
    ),
    "a failure just before the window's start does not": Row(
        [*_finals(0, 20, 30), Tick(WINDOW + 0.5)], [FAILING], state="failing", consecutive=3
    ),
    "two failures in the window are not enough": Row(
        [*_finals(10, 20), Tick(5 * WINDOW)], [FAILING], state="failing", consecutive=2
    ),
    "three failures, one of them before the window, are not enough": Row(
        [*_finals(10, 150, 160), Tick(200)], [FAILING], state="failing", consecutive=3
    ),
    "a final failure completes the rule itself": Row(
        [*_finals(10, 150, 160, 170)],
        [FAILING, DISABLED],
        enabled=False,
        reason="failing",
        state="failing",
        consecutive=4,
    ),
    "a failure that is not the last attempt does not complete it": Row(
        [*_finals(10, 20, 30), Failed(2 * WINDOW, "timed out", final=False)],
        [FAILING],
        state="failing",
        consecutive=3,
    ),
    "a delivery inside the window prevents it": Row(
        [Delivered(50), *_finals(60, 70, 80), Tick(50 + WINDOW - 1)],
        [FAILING],
        state="failing",
        consecutive=3,
    ),
    "a delivery inside the window prevents it until the window is past it": Row(
        [Delivered(50), *_finals(60, 70, 80), Tick(50 + WINDOW)],
        [FAILING, DISABLED],
        enabled=False,
        reason="failing",
        state="failing",
        consecutive=3,
    ),
    "a switch-on inside the window prevents it": Row(
        [*_finals(10, 20), SwitchedOff(25), SwitchedOn(50), *_finals(60, 70, 80), Tick(149)],
        [FAILING],
        state="failing",
        consecutive=5,
        health={"switched_on_at": 50, "recent_failures": (60, 70, 80)},
    ),
    "a switch-on inside the window prevents it until the window is past it": Row(
        [*_finals(10, 20), SwitchedOff(25), SwitchedOn(50), *_finals(60, 70, 80), Tick(150)],
        [FAILING, DISABLED],
        enabled=False,
        reason="failing",
        state="failing",
        consecutive=5,
    ),
    "failures before a switch-on do not count after it, at the same moment either": Row(
        [*_finals(50, 50), SwitchedOff(50), SwitchedOn(50), _final(60), Tick(50 + WINDOW)],
        [FAILING],
        state="failing",
        consecutive=3,
        health={"recent_failures": (60,)},
    ),
    "failures before a delivery do not count after it, at the same moment either": Row(
        [*_finals(50, 50, 50), Delivered(50), Tick(50 + WINDOW)],
        [FAILING, RECOVERED],
        health={"recent_failures": ()},
    ),
    "a tick with nothing quiet long enough changes nothing": Row([Tick(10 * WINDOW)], []),
    "switched on, the reason is cleared and the window starts again": Row(
        [Gone(5), SwitchedOn(WINDOW * 3)],
        [FAILING, GONE],
        state="failing",
        consecutive=1,
        health={"switched_on_at": WINDOW * 3, "recent_failures": ()},
    ),
    "switched on after failing, three new failures and a whole window are needed": Row(
        [*_finals(10, 20, 30), Tick(WINDOW), SwitchedOn(200), *_finals(210, 220, 230), Tick(299)],
        [FAILING, DISABLED],
        state="failing",
        consecutive=6,
    ),
    "switched on after failing, the rule applies again": Row(
        [*_finals(10, 20, 30), Tick(WINDOW), SwitchedOn(200), *_finals(210, 220, 230), Tick(300)],
        [FAILING, DISABLED, DISABLED],
        enabled=False,
        reason="failing",
        state="failing",
        consecutive=6,
    ),
    "a switch-on of an endpoint already on changes nothing": Row(
        [_final(10), SwitchedOn(50)],
        [FAILING],
        state="failing",
        consecutive=1,
        health={"switched_on_at": 0, "recent_failures": (10,)},
    ),
    "switched off by the app, the reason stays null": Row(
        [*_finals(10, 20), SwitchedOff(30)],
        [FAILING],
        enabled=False,
        state="failing",
        consecutive=2,
    ),
    "switched off by the app, the rule raises nothing": Row(
        [*_finals(10, 20, 30), SwitchedOff(40), Tick(5 * WINDOW)],
        [FAILING],
        enabled=False,
        state="failing",
        consecutive=3,
    ),
    "switched off by the app after the engine did, the engine's reason stays": Row(
        [Gone(1), SwitchedOff(2)],
        [FAILING, GONE],
        enabled=False,
        reason="gone",
        state="failing",
        consecutive=1,
    ),
}


@pytest.mark.parametrize("row", TRANSITIONS.values(), ids=TRANSITIONS.keys())
def test_transitions(row: Row) -> None:
    endpoint, notices = _run(row.happenings)
    health = endpoint.health
    assert notices == row.notices
    assert (endpoint.enabled, endpoint.disabled_reason) == (row.enabled, row.reason)
    assert (health.state, health.consecutive_failures) == (row.state, row.consecutive)
    assert {name: getattr(health, name) for name in row.health} == row.health
    assert (endpoint.disabled_at is None) == endpoint.enabled


def test_switched_off_it_is_off_from_that_moment() -> None:
    by_app, _ = _run([SwitchedOff(12)])
    gone, _ = _run([Gone(13)])
    failing, _ = _run([*_finals(10, 20, 30), Tick(WINDOW + 7)])
    assert (by_app.disabled_at, gone.disabled_at, failing.disabled_at) == (12, 13, WINDOW + 7)
    assert [by_app.sending, gone.sending, failing.sending] == [False, False, False]


def test_switched_on_again_it_sends_with_no_reason_nor_time_off() -> None:
    endpoint, notices = _run([Gone(5), SwitchedOn(6)])
    assert endpoint.sending
    assert (endpoint.disabled_reason, endpoint.disabled_at) == (None, None)
    assert notices == [FAILING, GONE]


def test_the_rule_reads_the_window_it_is_given() -> None:
    failed, _ = _run(_finals(10, 20, 30))
    assert not failing_too_long(failed, 59, disable_after=60)
    assert failing_too_long(failed, 60, disable_after=60)
    assert not failing_too_long(failed, 60, disable_after=61)


def test_the_rule_counts_the_catalogs_number_of_failures() -> None:
    fewer, _ = _run(_finals(*range(1, FAILURES)))
    enough, _ = _run(_finals(*range(1, FAILURES + 1)))
    assert not failing_too_long(fewer, WINDOW, WINDOW)
    assert failing_too_long(enough, WINDOW, WINDOW)


# --- Any sequence of happenings ------------------------------------------------------------------

SMALL_WINDOW = 10
"""The machine's ``disable_after``: time advances by whole seconds up to 6, or to the end of a
window that one of the model's moments starts, so that a sequence crosses a window's edges and
lands exactly on them within a few steps."""

ERRORS = st.sampled_from(["HTTP 500", "timed out", "connection refused"])


class LifecycleMachine(RuleBasedStateMachine):
    """Happenings in any order, at non-decreasing times; beside the core, a model that keeps
    every happening and answers the contract's questions by counting them."""

    def __init__(self) -> None:
        super().__init__()
        self.now: float = 0
        self.endpoint = Endpoint(True, health=EndpointState(switched_on_at=0.0))
        self.history: list[tuple[Happening, Endpoint, Endpoint]] = []
        """Every step: the happening, the endpoint before it and after it."""
        self.health_notices: list[str] = []
        self.quiet_since: float = 0.0
        """The model's last delivery or switch-on (of a switched-off endpoint)."""
        self.failures: list[float] = []
        """The model's deliveries failed for good since then."""
        self.failed_since_delivered = 0

    def _rule_holds(self, at: float) -> bool:
        start = at - SMALL_WINDOW
        return (
            self.quiet_since <= start
            and sum(1 for moment in self.failures if moment >= start) >= FAILURES
        )

    def _apply(self, happening: Happening) -> None:
        before = self.endpoint
        after, notices = step(before, happening, disable_after=SMALL_WINDOW)
        self.history.append((happening, before, after))
        self.endpoint = after
        match happening:
            case Delivered():
                self.quiet_since = happening.at
                self.failures = []
                self.failed_since_delivered = 0
            case Failed(final=True) | Gone():
                self.failures.append(happening.at)
                self.failed_since_delivered += 1
            case SwitchedOn() if not before.enabled:
                self.quiet_since = happening.at
                self.failures = []
        disabled = [notice for notice in notices if notice.type == "disabled"]
        self.health_notices += [notice.type for notice in notices if notice.type != "disabled"]

        # A disabled notice only from a step that found the endpoint on, and then exactly one,
        # with the reason the endpoint now carries.
        if disabled:
            assert before.enabled
            assert disabled == [Notice("disabled", after.disabled_reason)]
            assert not after.enabled
        # Only the app's switch turns an endpoint on; the engine's switching off always tells.
        if after.enabled and not before.enabled:
            assert isinstance(happening, SwitchedOn)
        if before.enabled and not after.enabled:
            assert isinstance(happening, SwitchedOff) or disabled
        # A 410 switches an endpoint that was on off as gone.
        if isinstance(happening, Gone) and before.enabled:
            assert (after.enabled, after.disabled_reason) == (False, "gone")
        # The engine switches off as failing exactly when the contract's rule holds, at every
        # moment it checks (a tick, a delivery failed for good).
        if isinstance(happening, (Tick, Failed)) and before.enabled:
            checks = isinstance(happening, Tick) or happening.final
            holds = self._rule_holds(happening.at)
            if checks:
                assert after.enabled != holds, (holds, self.failures, self.quiet_since)
            if not after.enabled:
                assert holds
                assert after.disabled_reason == "failing"
        # Switched on, no reason and no time off; switched off by the app, no reason.
        if isinstance(happening, SwitchedOn):
            assert (after.enabled, after.disabled_reason) == (True, None)
        if isinstance(happening, SwitchedOff) and before.enabled:
            assert (after.enabled, after.disabled_reason) == (False, None)

    @rule(seconds=st.integers(0, 6))
    def wait(self, seconds: int) -> None:
        self.now += seconds

    @rule(data=st.data())
    def wait_for_an_edge(self, data: st.DataObject) -> None:
        """Advance to the moment a window that starts at the last delivery or switch-on, or at
        one of the failures since, ends: where ``<`` and ``<=`` differ."""
        edges = [
            moment + SMALL_WINDOW
            for moment in (self.quiet_since, *self.failures)
            if moment + SMALL_WINDOW >= self.now
        ]
        if edges:
            self.now = data.draw(st.sampled_from(edges))

    @rule()
    def delivered(self) -> None:
        self._apply(Delivered(self.now))

    @rule(error=ERRORS, final=st.booleans())
    def failed(self, error: str, final: bool) -> None:
        self._apply(Failed(self.now, error, final))

    @rule(error=ERRORS)
    def failed_for_good(self, error: str) -> None:
        """The rule's ingredient, twice as likely as the others."""
        self._apply(Failed(self.now, error, final=True))

    @rule()
    def gone(self) -> None:
        self._apply(Gone(self.now))

    @rule()
    def switched_on(self) -> None:
        self._apply(SwitchedOn(self.now))

    @rule()
    def switched_off(self) -> None:
        self._apply(SwitchedOff(self.now))

    @rule()
    def tick(self) -> None:
        self._apply(Tick(self.now))

    @invariant()
    def never_on_with_a_reason(self) -> None:
        if self.endpoint.enabled:
            assert self.endpoint.disabled_reason is None
            assert self.endpoint.disabled_at is None
        else:
            assert self.endpoint.disabled_at is not None
        assert self.endpoint.sending == self.endpoint.enabled

    @invariant()
    def failing_and_recovered_alternate_failing_first(self) -> None:
        expected = ["failing", "recovered"] * len(self.health_notices)
        assert self.health_notices == expected[: len(self.health_notices)]
        failing = self.endpoint.health.state == "failing"
        assert failing == (self.health_notices[-1:] == ["failing"])
        assert failing == (self.endpoint.health.failing_since is not None)

    @invariant()
    def consecutive_failures_are_those_since_the_last_delivery(self) -> None:
        health = self.endpoint.health
        assert health.consecutive_failures == self.failed_since_delivered
        assert (health.state == "failing") == (health.consecutive_failures > 0)


LifecycleMachine.TestCase.settings = settings(max_examples=300, stateful_step_count=60)
TestLifecycle = LifecycleMachine.TestCase
