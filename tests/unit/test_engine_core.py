"""The engine's bookkeeping core, without a store or trio: its rules by example, and its
invariants under any sequence of operations (hypothesis state machines).

Invariants of the delivery book: held counts never go negative and always add up; no webhook,
app or engine holds past its cap; no app gains room while another waits for it; an outcome of a
fan-out that did not commit is never written; whatever happened, once every attempt has ended,
every fan-out has ended and every write succeeded, the book has settled. Of the run book: no app
or business runs past its share, no more runs than workers, and a worker that frees goes to the
tenant running least."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    precondition,
    rule,
)

from ledgerport.engine import DeliveryBook, DueRuns, Refusal, RunBook, Shares, Verdict, half_share

# --- Shares, by example --------------------------------------------------------------------------


def test_a_tenant_holds_at_most_its_share_and_the_budget_at_most_its_total() -> None:
    shares: Shares[str] = Shares(total=3, per_tenant=2)
    assert shares.take("a") is None
    assert shares.take("a") is None
    assert shares.take("a") is Refusal.OWN_CAP
    assert shares.take("b") is None
    assert shares.take("c") is Refusal.TOTAL
    assert shares.in_use == 3


def test_while_a_tenant_waits_for_room_the_next_unit_let_go_is_its_own() -> None:
    shares: Shares[str] = Shares(total=2, per_tenant=2)
    assert shares.take("flood") is None
    assert shares.take("flood") is None
    assert shares.take("victim") is Refusal.TOTAL
    shares.let_go("flood")
    assert shares.take("flood") is Refusal.FAIRNESS  # the victim waits: it goes first
    assert shares.take("victim") is None
    assert shares.waiting == ()
    assert shares.take("flood") is Refusal.TOTAL


def test_a_waiter_without_work_is_forgotten() -> None:
    shares: Shares[str] = Shares(total=1, per_tenant=1)
    shares.take("a")
    shares.take("b")
    shares.let_go("a")
    shares.forget(["b"])
    assert shares.take("a") is None


def test_letting_go_of_a_unit_not_held_is_an_error() -> None:
    shares: Shares[str] = Shares(total=1, per_tenant=1)
    with pytest.raises(ValueError, match="holds no unit"):
        shares.let_go("a")


# --- The delivery book, by example ---------------------------------------------------------------


def test_an_apps_webhooks_fill_its_share_and_leave_the_rest_to_others() -> None:
    book: DeliveryBook[str, str] = DeliveryBook(total=40, per_app=4, per_webhook=3)
    taken = [book.take("flood", f"hook_{i % 2}") for i in range(100)]
    assert taken.count(None) == 4
    assert book.take("victim", "its_hook") is None
    assert book.held_back[Refusal.OWN_CAP] == 96


def test_a_webhook_with_no_backlog_gets_its_free_deliveries_past_its_apps_share() -> None:
    """So a webhook with no backlog is not held up by its app's other webhooks: the app is
    past its share by at most the free deliveries of each webhook."""
    book: DeliveryBook[str, str] = DeliveryBook(
        total=40, per_app=4, per_webhook=8, per_webhook_free=2
    )
    assert [book.take("app", "busy") for _ in range(8)].count(None) == 4
    assert book.take("app", "quiet") is None
    assert book.take("app", "quiet") is None
    assert book.take("app", "quiet") is Refusal.OWN_CAP
    assert book.apps.held("app") == 6


def test_an_app_with_many_quiet_webhooks_holds_at_most_twice_its_share() -> None:
    book: DeliveryBook[str, str] = DeliveryBook(total=100, per_app=4, per_webhook=8)
    taken = [book.take("wide", f"hook_{i}") for i in range(50)]
    assert taken.count(None) == 8
    assert book.apps.held("wide") == 8
    assert book.take("victim", "its_hook") is None


def test_claim_order_puts_waiting_apps_first_then_those_holding_least() -> None:
    book: DeliveryBook[str, str] = DeliveryBook(total=4, per_app=4, per_webhook=4)
    for _ in range(4):
        book.take("big", "h1")
    assert book.take("late", "h2") is Refusal.TOTAL  # "late" waits now
    book.let_go("big", "h1")
    order = book.claim_order(["big", "small", "late"], budget=200)
    assert order == [("late", 1)]
    assert book.held_back[Refusal.FAIRNESS] >= 2


def test_claim_order_shares_the_batch_and_no_app_gets_past_its_room() -> None:
    book: DeliveryBook[str, str] = DeliveryBook(total=100, per_app=10, per_webhook=10)
    for _ in range(8):
        book.take("a", "h")
    order = book.claim_order(["a", "b", "c"], budget=30)
    assert order == [("b", 10), ("c", 10), ("a", 2)]


def test_an_outcome_waits_for_its_fan_out_and_is_dropped_when_it_did_not_commit() -> None:
    book: DeliveryBook[str, str] = DeliveryBook(total=8, per_app=8, per_webhook=8)
    fan_out = book.fan_out_began()
    book.awaits_commit("dlv_1", fan_out)
    book.awaits_commit("dlv_2", fan_out)
    assert book.attempt_ended("dlv_1", "kept 1") is Verdict.WAIT
    assert book.fan_out_ended(fan_out, committed=False) == ["kept 1"]
    assert book.unmade("dlv_2")
    assert book.attempt_ended("dlv_2", "kept 2") is Verdict.DROP


def test_the_outcomes_of_a_failed_write_are_written_again_first() -> None:
    book: DeliveryBook[str, str] = DeliveryBook(total=8, per_app=8, per_webhook=8)
    for index in range(5):
        book.add_outcome("a", "h", f"o{index}")
    first = book.take_outcomes(3)
    assert book.unwritten == 5
    book.outcomes_not_written(first)
    assert [outcome for *_, outcome in book.take_outcomes(10)] == ["o0", "o1", "o2", "o3", "o4"]


# --- The delivery book, any sequence -------------------------------------------------------------

APPS = st.sampled_from(["app_a", "app_b", "app_c", "app_d"])
HOOKS = st.sampled_from(["h1", "h2", "h3"])


class DeliveryBookMachine(RuleBasedStateMachine):
    """The engine's uses of its book, in any order: takes by fan-outs and claims, reservations
    that fail, attempts that end before or after their fan-out, outcomes written or not."""

    handed = Bundle("handed")
    """Deliveries handed to actors: (delivery id, app, webhook, fan-out or None)."""
    fan_outs = Bundle("fan_outs")

    @initialize(
        total=st.integers(1, 12),
        per_app=st.integers(1, 6),
        per_webhook=st.integers(1, 4),
        free=st.integers(0, 2),
    )
    def start(self, total: int, per_app: int, per_webhook: int, free: int) -> None:
        self.book: DeliveryBook[tuple[str, str, str], tuple[str, str]] = DeliveryBook(
            total=total, per_app=per_app, per_webhook=per_webhook, per_webhook_free=free
        )
        self.serial = 0
        self.held: Counter[tuple[str, str]] = Counter()
        self.uncommitted: set[str] = set()
        """Deliveries whose fan-out ended without committing."""
        self.open_fan_outs: list[object] = []
        self.waiting_attempts: dict[str, tuple[str, str, str]] = {}
        """Attempts that ended before their fan-out did: delivery id to (id, app, webhook)."""
        self.writing: list[list[tuple[str, str, tuple[str, str]]]] = []
        self.written: list[tuple[str, str]] = []

    def _new_id(self) -> str:
        self.serial += 1
        return f"dlv_{self.serial}"

    def _take(self, app: str, hook: str) -> bool:
        waiting_before = self.book.apps.waiting
        refusal = self.book.take(app, hook)
        if refusal is None:
            # No app gains room while another waits for it.
            assert not waiting_before or app in waiting_before
            self.held[app, hook] += 1
            return True
        return False

    @rule(target=fan_outs)
    def begin_fan_out(self) -> object:
        fan_out = self.book.fan_out_began()
        self.open_fan_outs.append(fan_out)
        return fan_out

    @rule(target=handed, app=APPS, hook=HOOKS, fan_out=fan_outs)
    def fan_out_hands_over(self, app: str, hook: str, fan_out: object) -> object:
        if fan_out not in self.open_fan_outs or not self._take(app, hook):
            return None
        delivery_id = self._new_id()
        self.book.awaits_commit(delivery_id, fan_out)  # type: ignore[arg-type]
        return (delivery_id, app, hook, fan_out)

    @rule(target=handed, app=APPS, hook=HOOKS, fails=st.booleans())
    def claim_hands_over(self, app: str, hook: str, fails: bool) -> object:
        """A claiming transaction reserves room; when it fails, the reservation is undone."""
        held_before = self.book.held
        try:
            with self.book.reserving() as reservation:
                taken = reservation.take(app, hook)
                if fails:
                    raise RuntimeError("the claim's transaction failed")
                reservation.handed_over()
        except RuntimeError:
            assert self.book.held == held_before
            return None
        if not taken:
            return None
        self.held[app, hook] += 1
        return (self._new_id(), app, hook, None)

    @rule(fan_out=consumes(fan_outs), committed=st.booleans())
    def fan_out_ends(self, fan_out: object, committed: bool) -> None:
        if fan_out not in self.open_fan_outs:
            return
        self.open_fan_outs.remove(fan_out)
        ended = self.book.fan_out_ended(fan_out, committed=committed)  # type: ignore[arg-type]
        for delivery_id, app, hook in ended:
            del self.waiting_attempts[delivery_id]
            self._settle(delivery_id, app, hook, record=committed)

    @rule(item=consumes(handed))
    def attempt_ends(self, item: object) -> None:
        if item is None:
            return
        delivery_id, app, hook, fan_out = item  # type: ignore[misc]
        if fan_out is not None and self.book.unmade(delivery_id):
            # Its fan-out did not commit before the attempt started: it is not attempted.
            self.uncommitted.add(delivery_id)
            self.book.forget_unmade(delivery_id)
            self._settle(delivery_id, app, hook, record=False)
            return
        verdict = self.book.attempt_ended(delivery_id, (delivery_id, app, hook))
        if verdict is Verdict.WAIT:
            self.waiting_attempts[delivery_id] = (delivery_id, app, hook)
            return
        if verdict is Verdict.DROP:
            self.uncommitted.add(delivery_id)
        self._settle(delivery_id, app, hook, record=verdict is Verdict.RECORD)

    def _settle(self, delivery_id: str, app: str, hook: str, *, record: bool) -> None:
        if record:
            self.book.add_outcome(app, hook, (delivery_id, "outcome"))
        else:
            self.uncommitted.add(delivery_id)
        self.book.let_go(app, hook)
        self.held[app, hook] -= 1

    @rule(limit=st.integers(1, 5))
    def write_begins(self, limit: int) -> None:
        batch = self.book.take_outcomes(limit)
        if batch:
            self.writing.append(batch)

    @precondition(lambda self: self.writing)
    @rule(ok=st.booleans())
    def write_ends(self, ok: bool) -> None:
        batch = self.writing.pop(0)
        if ok:
            self.book.outcomes_written(batch)
            self.written += [outcome for *_, outcome in batch]
        else:
            self.book.outcomes_not_written(batch)

    @rule(due=st.lists(APPS, unique=True), budget=st.integers(1, 20))
    def claim_orders(self, due: list[str], budget: int) -> None:
        order = self.book.claim_order(due, budget)
        for app, count in order:
            assert app in due
            assert 1 <= count <= self.book.apps.per_tenant - self.book.apps.held(app)
        if self.book.apps.waiting and order:
            assert order[0][0] in self.book.apps.waiting

    @invariant()
    def counts_add_up_and_stay_within_their_caps(self) -> None:
        book = self.book
        assert all(count >= 0 for count in self.held.values())
        assert book.held == sum(self.held.values())
        for app in ("app_a", "app_b", "app_c", "app_d"):
            expected = sum(count for (a, _), count in self.held.items() if a == app)
            holding = sum(1 for (a, _), count in self.held.items() if a == app and count)
            assert book.apps.held(app) == expected
            # Past its share by at most the free deliveries of each of its webhooks.
            assert expected <= book.apps.per_tenant + holding * book.per_webhook_free
            assert expected <= 2 * book.apps.per_tenant
        for hook in ("h1", "h2", "h3"):
            expected = sum(count for (_, h), count in self.held.items() if h == hook)
            assert book.webhooks.held(hook) == expected <= book.webhooks.cap
        assert book.held <= book.apps.total

    @invariant()
    def no_outcome_of_an_uncommitted_fan_out_is_written(self) -> None:
        assert not {delivery_id for delivery_id, _ in self.written} & self.uncommitted

    def teardown(self) -> None:
        """Settling always completes: every fan-out ends, every attempt ends, every write
        succeeds; then nothing is held and nothing waits."""
        if not hasattr(self, "book"):
            return
        for fan_out in list(self.open_fan_outs):
            self.fan_out_ends(fan_out, committed=True)
        for delivery_id, app, hook in list(self.waiting_attempts.values()):
            verdict = self.book.attempt_ended(delivery_id, (delivery_id, app, hook))
            assert verdict is not Verdict.WAIT
        while self.writing:
            self.write_ends(ok=True)
        for (app, hook), count in list(self.held.items()):
            for _ in range(count):
                self._settle(f"leftover_{app}_{hook}", app, hook, record=True)
        while self.book.outcomes_waiting:
            self.write_begins(limit=5)
            self.write_ends(ok=True)
        assert self.book.settled


DeliveryBookMachine.TestCase.settings = settings(max_examples=300, stateful_step_count=60)
TestDeliveryBook = DeliveryBookMachine.TestCase


# --- The run book --------------------------------------------------------------------------------


@pytest.mark.parametrize(("workers", "share"), [(1, 1), (2, 1), (3, 2), (4, 2), (8, 4)])
def test_an_app_and_a_business_keep_at_most_half_the_workers_busy(workers: int, share: int) -> None:
    assert half_share(workers) == share


def test_a_floods_runs_leave_a_worker_for_another_tenant_at_once() -> None:
    book = RunBook(2)
    flood = DueRuns("app_flood", "bus_flood")
    assert book.choose([flood]) == [(flood, 1)]
    victim = DueRuns("app_victim", "bus_victim")
    assert book.choose([flood, victim]) == [(victim, 1)]
    assert book.held_back[Refusal.OWN_CAP] >= 1


def test_the_worker_that_frees_goes_to_the_tenant_running_least() -> None:
    book = RunBook(4)
    a1, a2, b = DueRuns("app_a", "bus_1"), DueRuns("app_a", "bus_2"), DueRuns("app_b", "bus_3")
    first = dict(book.choose([a1, a2]))
    assert sum(first.values()) == 2  # app_a's share of four workers
    assert dict(book.choose([a1, a2, b])) == {b: 2}
    book.ended(a1)
    assert book.choose([a1, a2, b]) == [(a1, 1)] or book.choose([a1, a2, b]) == []


def test_within_an_app_the_businesses_take_turns() -> None:
    book = RunBook(8)
    backlog, single = DueRuns("app_a", "bus_big"), DueRuns("app_a", "bus_small")
    chosen = dict(book.choose([backlog, single]))
    assert chosen[single] >= 1


class RunBookMachine(RuleBasedStateMachine):
    @initialize(workers=st.integers(1, 8))
    def start(self, workers: int) -> None:
        self.book = RunBook(workers)
        self.running: list[DueRuns] = []

    @rule(
        due=st.lists(
            st.builds(
                DueRuns,
                st.sampled_from(["a1", "a2", "a3"]),
                st.sampled_from(["", "b1", "b2", "b3"]),
            ),
            unique=True,
        )
    )
    def choose(self, due: list[DueRuns]) -> None:
        before = {pair.app_id: self.book.apps.held(pair.app_id) for pair in due}
        room = self.book.room
        chosen = self.book.choose(due)
        for pair, count in chosen:
            assert pair in due
            self.running += [pair] * count
        assert sum(count for _, count in chosen) <= room
        got = {pair.app_id for pair, _ in chosen}
        for pair in due:
            passed_over = before[pair.app_id] == 0 and pair.app_id not in got
            if passed_over and not self.book.capped(pair):
                # A tenant running nothing is passed over only when every free worker went
                # to tenants that were running nothing either.
                assert sum(count for _, count in chosen) == room
                assert all(before[chosen_pair.app_id] == 0 for chosen_pair, _ in chosen)

    @precondition(lambda self: self.running)
    @rule(index=st.integers(0, 100))
    def run_ends(self, index: int) -> None:
        self.book.ended(self.running.pop(index % len(self.running)))

    @invariant()
    def within_the_shares(self) -> None:
        book = self.book
        if not hasattr(self, "running"):
            return
        assert book.busy == len(self.running) <= book.workers
        for app, count in Counter(pair.app_id for pair in self.running).items():
            assert book.apps.held(app) == count <= book.apps.cap
        for business, count in Counter(p.business for p in self.running if p.business).items():
            assert book.businesses.held(business) == count <= book.businesses.cap


RunBookMachine.TestCase.settings = settings(max_examples=300, stateful_step_count=40)
TestRunBook = RunBookMachine.TestCase
