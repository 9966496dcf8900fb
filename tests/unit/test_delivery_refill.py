"""When the delivery book wakes the claimer after room is let go (``DeliveryBook.let_go``): a
book starved only for webhooks' own caps is refilled when one of those webhooks has let half its
cap go, in a batch, not for every few deliveries let go elsewhere or before; a book starved for
a developer's share or the engine's total is refilled as soon as any of those has room again.
The claimer itself: tests/integration/test_engine_fairness.py, test_fair_queues.py."""

from __future__ import annotations

from ledgerport.engine import DeliveryBook, Refusal


def _book(*, total: int, per_developer: int, per_webhook: int) -> DeliveryBook[str, str]:
    book: DeliveryBook[str, str] = DeliveryBook(
        total=total, per_developer=per_developer, per_webhook=per_webhook, per_webhook_free=1
    )
    book.note_developers([("app", "dev"), ("other", "dev_other")])
    return book


def test_a_webhook_at_its_cap_is_refilled_once_half_its_cap_is_free() -> None:
    book = _book(total=100, per_developer=100, per_webhook=8)
    for _ in range(8):
        assert book.take("app", "", "full") is None
    assert book.take("app", "", "quiet") is None
    assert book.take("app", "", "full") is Refusal.OWN_CAP
    assert book.starved
    assert not book.short  # a write of outcomes makes no room for it
    # Room let go by another webhook, or by this one before half its cap: no claim yet.
    assert not book.let_go("app", "", "quiet")
    assert [book.let_go("app", "", "full") for _ in range(4)] == [False, False, False, True]
    book.fed()  # the claim that follows
    assert not book.starved


def test_a_claim_passing_over_a_webhook_at_its_cap_is_refilled_the_same_way() -> None:
    book = _book(total=100, per_developer=100, per_webhook=4)
    for _ in range(4):
        book.take("app", "", "full")
    book.fed()
    book.passed_over(["full"])
    assert book.starved
    assert [book.let_go("app", "", "full") for _ in range(2)] == [False, True]


def test_a_book_short_of_its_total_is_refilled_when_room_is_let_go() -> None:
    book = _book(total=4, per_developer=4, per_webhook=4)
    for _ in range(4):
        book.take("app", "", "hook")
    assert book.take("other", "", "its_hook") is Refusal.TOTAL
    assert book.short
    assert book.let_go("app", "", "hook")  # the waiting developer goes first


def test_a_fed_book_wakes_nothing() -> None:
    book = _book(total=100, per_developer=100, per_webhook=8)
    book.take("app", "", "hook")
    assert not book.starved
    assert not book.let_go("app", "", "hook")
