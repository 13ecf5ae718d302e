"""The offer book: what a create has taken stays taken until a read shows the stock after it."""

import time
from decimal import Decimal

from app.catalogue import Provider
from app.providers.base import Offer
from app.watcher.book import OfferBook

OFFER = Offer(
    provider=Provider("hyperstack"),
    region="CANADA-1",
    sku="n3-H100x8",
    gpu_model="H100",
    gpu_count=8,
    price_per_hour=Decimal("19.20"),
    available=2,
)
FRESH = {Provider("hyperstack"): 60.0}


def available(book: OfferBook) -> int:
    return sum(o.available or 1 for o in book.current(max_age=FRESH))


def test_a_unit_in_flight_stays_taken_across_reads_that_began_before_its_answer() -> None:
    book = OfferBook(cooldown_seconds=5)
    book.update(Provider("hyperstack"), [OFFER], started=time.monotonic())
    taken = book.take(OFFER.key)
    assert available(book) == 1
    book.update(Provider("hyperstack"), [OFFER], started=time.monotonic())  # create not answered
    assert available(book) == 1
    before_answer = time.monotonic()
    book.answered(taken, consumed=True)
    book.update(Provider("hyperstack"), [OFFER], started=before_answer)
    assert available(book) == 1
    book.update(Provider("hyperstack"), [OFFER], started=time.monotonic())  # reflects the create
    assert available(book) == 2


def test_a_unit_whose_create_failed_is_free_again_at_once() -> None:
    book = OfferBook(cooldown_seconds=5)
    book.update(Provider("hyperstack"), [OFFER], started=time.monotonic())
    taken = book.take(OFFER.key)
    book.answered(taken, consumed=False)
    assert available(book) == 2


def test_an_offer_answered_with_no_capacity_cools_down() -> None:
    book = OfferBook(cooldown_seconds=0.05)
    book.cool(OFFER.key)
    assert book.cooling() == {OFFER.key}
    time.sleep(0.06)
    assert book.cooling() == frozenset()


def test_stale_reads_are_not_acted_on() -> None:
    book = OfferBook(cooldown_seconds=5)
    book.update(Provider("hyperstack"), [OFFER], started=time.monotonic())
    assert book.current(max_age={Provider("hyperstack"): 0.0}) == []
