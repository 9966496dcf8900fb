"""The engine's bookkeeping core, without a store or trio: its rules by example, and its
invariants under any sequence of operations (hypothesis state machines).

Invariants of the delivery book: held counts never go negative and always add up; no webhook,
developer (whatever its number of apps) or engine holds past its cap; no developer gains room
while another waits for it; a claim goes to the developers holding least, and among those holding
as much to the longest waiting, and a developer's part to its apps, an app's part to its
businesses, each unit to the one holding least, then to the longest waiting; an outcome of a
fan-out that did not commit is never written; whatever happened, once every attempt has ended,
every fan-out has ended and every write succeeded, the book has settled. Of the run book: no
developer, app or business runs past its share, no more runs than workers, no worker is left
free while a tenant with due runs could have it, and each worker goes to the developer running
least, within it to the app running least, within that to the business running least, ties to
the longest waiting."""

from __future__ import annotations

import itertools
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


def _book(
    total: int,
    per_developer: int,
    per_webhook: int,
    free: int = 1,
    developers: dict[str, str] | None = None,
) -> DeliveryBook[str, str]:
    """A delivery book knowing the developer of each app of ``developers`` (app to developer);
    the apps named nowhere are their own developers, as the store answers for an app with none."""
    book: DeliveryBook[str, str] = DeliveryBook(
        total=total, per_developer=per_developer, per_webhook=per_webhook, per_webhook_free=free
    )
    named = developers or {}
    apps = {"flood", "victim", "app", "wide", "big", "small", "late", "a", "b", "c", *named}
    book.note_developers((app, named.get(app, app)) for app in apps)
    return book


def _no_business(due: dict[str, float]) -> dict[tuple[str, str], float]:
    """Due deliveries of apps, none for a business (test deliveries, app events)."""
    return {(app, ""): at for app, at in due.items()}


def test_an_apps_webhooks_fill_its_share_and_leave_the_rest_to_others() -> None:
    book = _book(total=40, per_developer=4, per_webhook=3)
    taken = [book.take("flood", "", f"hook_{i % 2}") for i in range(100)]
    assert taken.count(None) == 4
    assert book.take("victim", "", "its_hook") is None
    assert book.held_back[Refusal.OWN_CAP] == 96


@pytest.mark.parametrize("apps", [1, 4, 16])
def test_a_developers_apps_together_hold_what_one_app_would(apps: int) -> None:
    """The share is the developer's: more apps buy no more of the engine."""
    flood = {f"flood_{i}": "dev_flood" for i in range(apps)}
    book = _book(total=40, per_developer=4, per_webhook=40, free=0, developers=flood)
    taken = [book.take(f"flood_{i % apps}", "", f"hook_{i % apps}") for i in range(100)]
    assert taken.count(None) == 4
    assert book.developers.held("dev_flood") == 4
    assert book.take("victim", "", "its_hook") is None


def test_a_developers_apps_get_no_free_deliveries_past_twice_its_share() -> None:
    """One quiet webhook's free delivery each, until the developer holds twice its share."""
    flood = {f"flood_{i}": "dev_flood" for i in range(16)}
    book = _book(total=100, per_developer=4, per_webhook=8, developers=flood)
    taken = [book.take(f"flood_{i}", "", f"hook_{i}") for i in range(16)]
    assert taken.count(None) == 8
    assert book.developers.held("dev_flood") == 8


def test_a_webhook_with_no_backlog_gets_its_free_deliveries_past_its_apps_share() -> None:
    """So a webhook with no backlog is not held up by its app's other webhooks: the app is
    past its share by at most the free deliveries of each webhook."""
    book = _book(total=40, per_developer=4, per_webhook=8, free=2)
    assert [book.take("app", "", "busy") for _ in range(8)].count(None) == 4
    assert book.take("app", "", "quiet") is None
    assert book.take("app", "", "quiet") is None
    assert book.take("app", "", "quiet") is Refusal.OWN_CAP
    assert book.apps.held("app") == 6


def test_an_app_with_many_quiet_webhooks_holds_at_most_twice_its_share() -> None:
    book = _book(total=100, per_developer=4, per_webhook=8)
    taken = [book.take("wide", "", f"hook_{i}") for i in range(50)]
    assert taken.count(None) == 8
    assert book.apps.held("wide") == 8
    assert book.take("victim", "", "its_hook") is None


def test_room_is_taken_only_for_an_app_whose_developer_is_known() -> None:
    book: DeliveryBook[str, str] = DeliveryBook(total=4, per_developer=4, per_webhook=4)
    with pytest.raises(KeyError, match="developer of 'stranger'"):
        book.take("stranger", "", "h")


def test_claim_order_puts_waiting_developers_first_then_those_holding_least() -> None:
    book = _book(total=4, per_developer=4, per_webhook=4)
    for _ in range(4):
        book.take("big", "", "h1")
    assert book.take("late", "", "h2") is Refusal.TOTAL  # "late" waits now
    book.let_go("big", "", "h1")
    order = book.claim_order(_no_business({"big": 1.0, "small": 1.0, "late": 1.0}), budget=200)
    assert order == [(("late", ""), 1)]
    assert book.held_back[Refusal.FAIRNESS] >= 2


def test_a_developer_waiting_for_room_is_owed_it_whichever_of_its_apps_asks() -> None:
    book = _book(total=4, per_developer=4, per_webhook=4, developers={"a": "dev", "b": "dev"})
    for _ in range(4):
        book.take("big", "", "h1")
    assert book.take("a", "", "ha") is Refusal.TOTAL
    assert book.developers.waiting == ("dev",)
    book.let_go("big", "", "h1")
    assert book.take("big", "", "h1") is Refusal.FAIRNESS
    assert book.take("b", "", "hb") is None
    assert book.developers.waiting == ()


def test_claim_order_shares_the_batch_and_no_developer_gets_past_its_room() -> None:
    book = _book(total=100, per_developer=10, per_webhook=10)
    for _ in range(8):
        book.take("a", "", "h")
    order = book.claim_order(_no_business({"a": 1.0, "b": 1.0, "c": 1.0}), budget=30)
    assert order == [(("b", ""), 10), (("c", ""), 10), (("a", ""), 2)]


def test_claim_order_between_developers_holding_as_much_goes_to_the_longest_waiting() -> None:
    book = _book(total=100, per_developer=10, per_webhook=10)
    order = book.claim_order(_no_business({"a": 30.0, "b": 10.0, "c": 20.0}), budget=3)
    assert order == [(("b", ""), 1), (("c", ""), 1), (("a", ""), 1)]


@pytest.mark.parametrize("apps", [1, 4, 16])
def test_claim_order_gives_a_developers_apps_together_one_part(apps: int) -> None:
    """Sixteen apps of one developer get the part one app of it would, shared among them,
    those holding least and then waiting longest first."""
    flood = {f"flood_{i}": "dev_flood" for i in range(apps)}
    book = _book(total=100, per_developer=8, per_webhook=100, developers=flood)
    book.take("flood_0", "", "h")
    due = {f"flood_{i}": float(i) for i in range(apps)} | {"victim": 50.0}
    order = {app: n for (app, _), n in book.claim_order(_no_business(due), budget=100)}
    assert order.pop("victim") == 8
    assert sum(order.values()) == 7
    if apps > 1:
        assert order.get("flood_0", 0) <= min(order.get(f"flood_{i}", 0) for i in range(1, apps))
        assert order["flood_1"] >= order.get(f"flood_{apps - 1}", 0)


def test_claim_order_shares_an_apps_part_among_its_businesses() -> None:
    """A burst of one business of an app waited longest, but the app's part goes round its
    businesses: the other business's delivery is in this claim, not behind the burst."""
    book = _book(total=100, per_developer=10, per_webhook=100)
    due = {("app", "bus_burst"): 0.0, ("app", "bus_other"): 5.0}
    assert book.claim_order(due, budget=10) == [
        (("app", "bus_burst"), 5),
        (("app", "bus_other"), 5),
    ]


def test_claim_order_within_an_app_goes_to_the_business_holding_least() -> None:
    book = _book(total=100, per_developer=10, per_webhook=100)
    for _ in range(4):
        book.take("app", "bus_busy", "h")
    assert book.tenants.held(("app", "bus_busy")) == 4
    due = {("app", "bus_busy"): 0.0, ("app", "bus_quiet"): 9.0}
    assert book.claim_order(due, budget=3) == [(("app", "bus_quiet"), 3)]
    book.let_go("app", "bus_busy", "h")
    assert book.tenants.held(("app", "bus_busy")) == 3


def test_claim_order_within_an_app_between_businesses_holding_as_much_the_longest_waiting() -> None:
    book = _book(total=100, per_developer=10, per_webhook=100)
    due = {("app", "bus_new"): 5.0, ("app", "bus_old"): 1.0, ("app", ""): 3.0}
    assert book.claim_order(due, budget=1) == [(("app", "bus_old"), 1)]
    assert book.claim_order(due, budget=3) == [
        (("app", "bus_old"), 1),
        (("app", ""), 1),
        (("app", "bus_new"), 1),
    ]


def test_an_apps_businesses_share_its_part_not_its_developers() -> None:
    """Two apps of one developer: the part goes round the apps first, then each app's part
    round its businesses, so an app with many businesses gets no more than its sibling."""
    book = _book(total=100, per_developer=8, per_webhook=100, developers={"a": "dev", "b": "dev"})
    due = {("a", f"bus_{i}"): float(i) for i in range(4)} | {("b", "bus_b"): 9.0}
    order = book.claim_order(due, budget=8)
    per_app: Counter[str] = Counter()
    for (app, _), count in order:
        per_app[app] += count
    assert per_app == {"a": 4, "b": 4}
    assert [tenant for tenant, count in order if tenant[0] == "a"] == [
        ("a", f"bus_{i}") for i in range(4)
    ]


def test_an_outcome_waits_for_its_fan_out_and_is_dropped_when_it_did_not_commit() -> None:
    book = _book(total=8, per_developer=8, per_webhook=8)
    fan_out = book.fan_out_began()
    book.awaits_commit("dlv_1", fan_out)
    book.awaits_commit("dlv_2", fan_out)
    assert book.attempt_ended("dlv_1", "kept 1") is Verdict.WAIT
    assert book.fan_out_ended(fan_out, committed=False) == ["kept 1"]
    assert book.unmade("dlv_2")
    assert book.attempt_ended("dlv_2", "kept 2") is Verdict.DROP


def test_a_delivery_fanned_out_again_while_its_first_attempt_went_on_records_both() -> None:
    """The first fan-out failed while the delivery's attempt went on; the next one (the same
    delivery id) started it again: both attempts wait for that fan-out, and are recorded when
    it commits."""
    book = _book(total=8, per_developer=8, per_webhook=8)
    failed = book.fan_out_began()
    book.awaits_commit("dlv_1", failed)
    assert book.fan_out_ended(failed, committed=False) == []
    again = book.fan_out_began()
    book.awaits_commit("dlv_1", again)
    assert book.attempt_ended("dlv_1", "first") is Verdict.WAIT
    assert book.attempt_ended("dlv_1", "second") is Verdict.WAIT
    assert book.fan_out_ended(again, committed=True) == ["first", "second"]
    assert book.attempt_ended("dlv_1", "later") is Verdict.RECORD


def test_the_outcomes_of_a_failed_write_are_written_again_first() -> None:
    book = _book(total=8, per_developer=8, per_webhook=8)
    for index in range(5):
        book.add_outcome("a", "h", f"o{index}")
    first = book.take_outcomes(3)
    assert book.unwritten == 5
    book.outcomes_not_written(first)
    assert [outcome for *_, outcome in book.take_outcomes(10)] == ["o0", "o1", "o2", "o3", "o4"]


# --- The delivery book, any sequence -------------------------------------------------------------

APP_IDS = ("app_a", "app_b", "app_c", "app_d")
APPS = st.sampled_from(APP_IDS)
BUSINESSES = st.sampled_from(["", "b1", "b2"])
HOOKS = st.sampled_from(["h1", "h2", "h3"])
DEVELOPERS = st.lists(st.sampled_from(["dev_1", "dev_2", None]), min_size=4, max_size=4)
"""The developer of each app of APP_IDS (None: it has none, and is its own developer)."""
Held = tuple[str, str, str]
"""What a delivery holds room as: (app, business, webhook)."""


class DeliveryBookMachine(RuleBasedStateMachine):
    """The engine's uses of its book, in any order: takes by fan-outs and claims, reservations
    that fail, attempts that end before or after their fan-out, outcomes written or not."""

    handed = Bundle("handed")
    """Deliveries handed to actors: (delivery id, (app, business, webhook), fan-out or None)."""
    fan_outs = Bundle("fan_outs")

    @initialize(
        total=st.integers(1, 12),
        per_developer=st.integers(1, 6),
        per_webhook=st.integers(1, 4),
        free=st.integers(0, 2),
        developers=DEVELOPERS,
    )
    def start(
        self,
        total: int,
        per_developer: int,
        per_webhook: int,
        free: int,
        developers: list[str | None],
    ) -> None:
        self.book: DeliveryBook[tuple[str, Held], tuple[str, str]] = DeliveryBook(
            total=total, per_developer=per_developer, per_webhook=per_webhook, per_webhook_free=free
        )
        self.developer = {app: dev or app for app, dev in zip(APP_IDS, developers, strict=True)}
        self.book.note_developers(self.developer.items())
        self.serial = 0
        self.held: Counter[Held] = Counter()
        self.uncommitted: set[str] = set()
        """Deliveries whose fan-out ended without committing."""
        self.open_fan_outs: list[object] = []
        self.waiting_attempts: dict[str, tuple[str, Held]] = {}
        """Attempts that ended before their fan-out did: delivery id to (id, what it holds)."""
        self.writing: list[list[tuple[str, str, tuple[str, str]]]] = []
        self.written: list[tuple[str, str]] = []

    def _new_id(self) -> str:
        self.serial += 1
        return f"dlv_{self.serial}"

    def _take(self, held: Held) -> bool:
        waiting_before = self.book.developers.waiting
        refusal = self.book.take(*held)
        if refusal is None:
            # No developer gains room while another waits for it.
            assert not waiting_before or self.developer[held[0]] in waiting_before
            self.held[held] += 1
            return True
        return False

    @rule(target=fan_outs)
    def begin_fan_out(self) -> object:
        fan_out = self.book.fan_out_began()
        self.open_fan_outs.append(fan_out)
        return fan_out

    @rule(target=handed, app=APPS, business=BUSINESSES, hook=HOOKS, fan_out=fan_outs)
    def fan_out_hands_over(self, app: str, business: str, hook: str, fan_out: object) -> object:
        if fan_out not in self.open_fan_outs or not self._take((app, business, hook)):
            return None
        delivery_id = self._new_id()
        self.book.awaits_commit(delivery_id, fan_out)  # type: ignore[arg-type]
        return (delivery_id, (app, business, hook), fan_out)

    @rule(target=handed, app=APPS, business=BUSINESSES, hook=HOOKS, fails=st.booleans())
    def claim_hands_over(self, app: str, business: str, hook: str, fails: bool) -> object:
        """A claiming transaction reserves room; when it fails, the reservation is undone."""
        held_before = self.book.held
        try:
            with self.book.reserving() as reservation:
                taken = reservation.take(app, business, hook)
                if fails:
                    raise RuntimeError("the claim's transaction failed")
                reservation.handed_over()
        except RuntimeError:
            assert self.book.held == held_before
            return None
        if not taken:
            return None
        self.held[app, business, hook] += 1
        return (self._new_id(), (app, business, hook), None)

    @rule(fan_out=consumes(fan_outs), committed=st.booleans())
    def fan_out_ends(self, fan_out: object, committed: bool) -> None:
        if fan_out not in self.open_fan_outs:
            return
        self.open_fan_outs.remove(fan_out)
        ended = self.book.fan_out_ended(fan_out, committed=committed)  # type: ignore[arg-type]
        for delivery_id, held in ended:
            del self.waiting_attempts[delivery_id]
            self._settle(delivery_id, held, record=committed)

    @rule(item=consumes(handed))
    def attempt_ends(self, item: object) -> None:
        if item is None:
            return
        delivery_id, held, fan_out = item  # type: ignore[misc]
        if fan_out is not None and self.book.unmade(delivery_id):
            # Its fan-out did not commit before the attempt started: it is not attempted.
            self.uncommitted.add(delivery_id)
            self.book.forget_unmade(delivery_id)
            self._settle(delivery_id, held, record=False)
            return
        verdict = self.book.attempt_ended(delivery_id, (delivery_id, held))
        if verdict is Verdict.WAIT:
            self.waiting_attempts[delivery_id] = (delivery_id, held)
            return
        if verdict is Verdict.DROP:
            self.uncommitted.add(delivery_id)
        self._settle(delivery_id, held, record=verdict is Verdict.RECORD)

    def _settle(self, delivery_id: str, held: Held, *, record: bool) -> None:
        app, _, hook = held
        if record:
            self.book.add_outcome(app, hook, (delivery_id, "outcome"))
        else:
            self.uncommitted.add(delivery_id)
        self.book.let_go(*held)
        self.held[held] -= 1

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

    @rule(
        due=st.dictionaries(st.tuples(APPS, BUSINESSES), st.integers(0, 3).map(float)),
        budget=st.integers(1, 20),
    )
    def claim_orders(self, due: dict[tuple[str, str], float], budget: int) -> None:
        book = self.book
        shares = book.developers
        held = {developer: shares.held(developer) for developer in self.developer.values()}
        order = book.claim_order(due, budget)
        parts: Counter[str] = Counter()
        for tenant, count in order:
            assert tenant in due
            assert count >= 1
            parts[self.developer[tenant[0]]] += count
        for developer, part in parts.items():
            # No developer's part past its room, however many of its apps have work due.
            assert part <= shares.per_tenant - held[developer]
        if shares.waiting and order:
            assert self.developer[order[0][0][0]] in shares.waiting
        first = [self.developer[app] for (app, _), _ in order]
        ranked = [
            developer for developer in dict.fromkeys(first) if developer not in shares.waiting
        ]
        oldest = {
            developer: min(at for (app, _), at in due.items() if self.developer[app] == developer)
            for developer in ranked
        }
        for before, after in itertools.pairwise(ranked):
            # Holding least first; holding as much, the longest waiting first.
            assert (held[before], oldest[before]) <= (held[after], oldest[after])
        # Within a developer's part its apps, and within an app's part its businesses, one
        # unit at a time to the one holding least (counting what it was handed), then to the
        # longest waiting: the last unit of each went to it when it held no more than any
        # other of its parent held in the end (and holding as much, it waited no less).
        got = dict(order)
        app_got: Counter[str] = Counter()
        for (app, _), count in order:
            app_got[app] += count
        since: dict[str, float] = {}
        for (app, _), at in due.items():
            since[app] = min(since.get(app, at), at)
        for winner, count in app_got.items():
            for other in since:
                if other != winner and self.developer[other] == self.developer[winner]:
                    assert (book.apps.held(winner) + count - 1, since[winner], winner) <= (
                        book.apps.held(other) + app_got[other],
                        since[other],
                        other,
                    )
        for winner, count in order:
            for other, at in due.items():
                if other[0] == winner[0] and other != winner:
                    assert (book.tenants.held(winner) + count - 1, due[winner], winner[1]) <= (
                        book.tenants.held(other) + got.get(other, 0),
                        at,
                        other[1],
                    )

    @invariant()
    def counts_add_up_and_stay_within_their_caps(self) -> None:
        book = self.book
        assert all(count >= 0 for count in self.held.values())
        assert book.held == sum(self.held.values())
        shares = book.developers
        for app in APP_IDS:
            expected = sum(count for (a, _, _), count in self.held.items() if a == app)
            assert book.apps.held(app) == expected
            for business in ("", "b1", "b2"):
                expected = sum(
                    count for (a, b, _), count in self.held.items() if (a, b) == (app, business)
                )
                assert book.tenants.held((app, business)) == expected
        for developer in set(self.developer.values()):
            mine = {key: n for key, n in self.held.items() if self.developer[key[0]] == developer}
            expected = sum(mine.values())
            hooks = {hook for (_, _, hook), count in mine.items() if count}
            assert shares.held(developer) == expected
            # No developer past its share (however many apps it has), but for the free
            # deliveries of each of its webhooks, and never twice its share.
            assert expected <= shares.per_tenant + len(hooks) * book.per_webhook_free
            assert expected <= 2 * shares.per_tenant
        for hook in ("h1", "h2", "h3"):
            expected = sum(count for (_, _, h), count in self.held.items() if h == hook)
            assert book.webhooks.held(hook) == expected <= book.webhooks.cap
        assert book.held <= shares.total

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
        for delivery_id, held in list(self.waiting_attempts.values()):
            verdict = self.book.attempt_ended(delivery_id, (delivery_id, held))
            assert verdict is not Verdict.WAIT
        while self.writing:
            self.write_ends(ok=True)
        for held, count in list(self.held.items()):
            for _ in range(count):
                self._settle(f"leftover_{held}", held, record=True)
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


def _own(app_id: str, business: str) -> DueRuns:
    """Due runs of an app that is its own developer (one app per developer)."""
    return DueRuns(app_id, app_id, business)


def test_a_floods_runs_leave_a_worker_for_another_tenant_at_once() -> None:
    book = RunBook(2)
    flood = _own("app_flood", "bus_flood")
    assert book.choose({flood: 0.0}) == [(flood, 1)]
    victim = _own("app_victim", "bus_victim")
    assert book.choose({flood: 0.0, victim: 1.0}) == [(victim, 1)]
    assert book.held_back[Refusal.OWN_CAP] >= 1


@pytest.mark.parametrize("apps", [1, 4, 16])
def test_a_developers_apps_together_keep_what_one_app_would(apps: int) -> None:
    """Sixteen apps of one developer, each with a backlog waiting longer than the victim's
    run: they keep the share one app would (half the workers), and the victim's run gets a
    worker at once."""
    book = RunBook(4)
    flood = {DueRuns("dev_flood", f"app_{i}", "bus_flood"): float(i) for i in range(apps)}
    chosen = dict(book.choose(flood))
    assert sum(chosen.values()) == 2
    victim = DueRuns("dev_victim", "app_victim", "bus_victim")
    assert book.choose({**flood, victim: 100.0}) == [(victim, 2)]
    assert book.developers.held("dev_flood") == 2


def test_the_worker_that_frees_goes_to_the_developer_running_least() -> None:
    book = RunBook(4)
    a1, a2 = DueRuns("dev_a", "app_a", "bus_1"), DueRuns("dev_a", "app_a", "bus_2")
    b = DueRuns("dev_b", "app_b", "bus_3")
    first = dict(book.choose({a1: 0.0, a2: 0.0}))
    assert sum(first.values()) == 2  # dev_a's share of four workers
    assert dict(book.choose({a1: 0.0, a2: 0.0, b: 5.0})) == {b: 2}
    book.ended(a1)
    assert book.choose({a1: 0.0, a2: 0.0, b: 5.0}) == [(a1, 1)]


def test_between_developers_running_as_much_the_longest_waiting_goes_first() -> None:
    book = RunBook(8)
    late, early, middle = (DueRuns(f"dev_{n}", f"app_{n}", "") for n in ("l", "e", "m"))
    assert book.choose({late: 30.0, early: 10.0, middle: 20.0}) == [
        (early, 3),
        (middle, 3),
        (late, 2),
    ]
    book = RunBook(2)
    assert book.choose({late: 30.0, early: 10.0, middle: 20.0}) == [(early, 1), (middle, 1)]


def test_within_a_developer_the_app_running_least_goes_first() -> None:
    book = RunBook(8)
    busy, quiet = DueRuns("dev", "app_busy", "bus_1"), DueRuns("dev", "app_quiet", "bus_2")
    assert book.choose({busy: 0.0}) == [(busy, 4)]
    book.ended(busy)
    # The busy app's run waited longer, but the app runs more.
    assert book.choose({busy: 0.0, quiet: 9.0}) == [(quiet, 1)]
    assert book.developers.held("dev") == 4


def test_within_an_app_the_businesses_take_turns() -> None:
    book = RunBook(8)
    backlog, single = DueRuns("dev", "app_a", "bus_big"), DueRuns("dev", "app_a", "bus_small")
    chosen = dict(book.choose({backlog: 0.0, single: 5.0}))
    assert chosen == {backlog: 2, single: 2}


def test_within_an_app_the_longest_waiting_business_goes_first() -> None:
    book = RunBook(2)
    newer, older = DueRuns("dev", "app_a", "bus_new"), DueRuns("dev", "app_a", "bus_old")
    assert book.choose({newer: 5.0, older: 1.0}) == [(older, 1)]


APP_DEVELOPERS = {"a1": "d1", "a2": "d1", "a3": "d2", "a4": "a4"}
"""The developer of each app of the run book machine (a4 has none: it is its own)."""


def test_a_run_waiting_on_the_network_frees_its_share_of_the_cpu_not_its_tenants() -> None:
    """A run whose calls under way are all fetches makes room for another run on a spare
    process, and still counts against its app's share."""
    book = RunBook(4, spare=2)
    a, b = DueRuns("dev_a", "app_a", "bus_1"), DueRuns("dev_b", "app_b", "bus_2")
    c = DueRuns("dev_c", "app_c", "bus_3")
    assert dict(book.choose({a: 0.0, b: 1.0})) == {a: 2, b: 2}
    assert book.room == 0
    book.wait(True)  # one of a's runs fetches
    assert book.room == 1
    # a's share (two of four workers) is still held, its waiting run among them: c gets it.
    assert book.choose({a: 0.0, b: 1.0, c: 2.0}) == [(c, 1)]
    assert book.apps.held("app_a") == 2
    book.wait(True)  # two more fetch
    book.wait(True)
    assert book.room == 1  # three waiting, one process left of six
    book.wait(False)
    book.wait(False)
    book.wait(False)
    assert book.room == -1  # five computing on four workers: nothing more until one ends
    assert book.choose({a: 0.0, b: 1.0, c: 2.0}) == []


class RunBookMachine(RuleBasedStateMachine):
    @initialize(workers=st.integers(1, 8), spare=st.integers(0, 4))
    def start(self, workers: int, spare: int) -> None:
        self.book = RunBook(workers, spare=spare)
        self.running: list[DueRuns] = []
        self.waiting: list[bool] = []
        """Whether each run of ``running`` waits on the network only."""

    @rule(
        due=st.dictionaries(
            st.tuples(st.sampled_from(sorted(APP_DEVELOPERS)), st.sampled_from(["", "b1", "b2"])),
            st.integers(0, 3).map(float),
        )
    )
    def choose(self, due: dict[tuple[str, str], float]) -> None:
        book = self.book
        tenants = {DueRuns(APP_DEVELOPERS[app], app, bus): at for (app, bus), at in due.items()}
        room = book.room
        chosen = book.choose(tenants)
        for pair, count in chosen:
            assert pair in tenants
            self.running += [pair] * count
            self.waiting += [False] * count
        assert sum(count for _, count in chosen) <= max(room, 0)
        gained = {pair for pair, _ in chosen}
        open_ = [pair for pair in tenants if not book.capped(pair)]
        if book.room > 0:
            assert not open_, "a free worker was left while a tenant could have had it"
        # Each level in turn: the developers; the apps of one developer; the businesses of one
        # app. What gained a worker held, when it got its last one, no more than anything left
        # open held then (no more than now); holding as much, it waited longer.
        levels = [
            (lambda pair: (pair.developer,), lambda pair: ()),
            (lambda pair: (pair.developer, pair.app_id), lambda pair: (pair.developer,)),
            (lambda pair: (pair.app_id, pair.business), lambda pair: (pair.app_id,)),
        ]
        counts = [
            lambda key: book.developers.held(key[0]),
            lambda key: book.apps.held(key[1]),
            lambda key: book.tenants.held(DueRuns(APP_DEVELOPERS[key[0]], key[0], key[1])),
        ]
        for (key_of, parent_of), held in zip(levels, counts, strict=True):
            oldest: dict[tuple[str, ...], float] = {}
            for pair, at in tenants.items():
                oldest[key_of(pair)] = min(oldest.get(key_of(pair), at), at)
            for winner in {key_of(pair) for pair in gained}:
                parent = parent_of(next(p for p in gained if key_of(p) == winner))
                for left in {key_of(pair) for pair in open_ if parent_of(pair) == parent}:
                    if left == winner:
                        continue
                    assert held(winner) - 1 <= held(left)
                    if held(winner) - 1 == held(left):
                        assert oldest[winner] <= oldest[left]

    @precondition(lambda self: self.running)
    @rule(index=st.integers(0, 100))
    def run_ends(self, index: int) -> None:
        index %= len(self.running)
        if self.waiting.pop(index):
            self.book.wait(False)  # its fetches end before it does
        self.book.ended(self.running.pop(index))

    @precondition(lambda self: self.running)
    @rule(index=st.integers(0, 100))
    def run_waits_or_computes(self, index: int) -> None:
        index %= len(self.running)
        self.waiting[index] = not self.waiting[index]
        self.book.wait(self.waiting[index])

    @invariant()
    def within_the_shares(self) -> None:
        book = self.book
        if not hasattr(self, "running"):
            return
        assert book.busy == len(self.running) <= book.workers + book.spare
        assert book.waiting == sum(self.waiting)
        assert book.room <= book.workers + book.spare - book.busy
        for developer, count in Counter(pair.developer for pair in self.running).items():
            # However many apps the developer has.
            assert book.developers.held(developer) == count <= book.developers.cap
        for app, count in Counter(pair.app_id for pair in self.running).items():
            assert book.apps.held(app) == count <= book.apps.cap
        for business, count in Counter(p.business for p in self.running if p.business).items():
            assert book.businesses.held(business) == count <= book.businesses.cap


RunBookMachine.TestCase.settings = settings(max_examples=300, stateful_step_count=40)
TestRunBook = RunBookMachine.TestCase
