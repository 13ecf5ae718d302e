"""The offer book: what a create has taken stays taken until a read shows the stock after it;
ages and cool-downs run on the book's clock, which these tests move by hand."""

from decimal import Decimal

from app.core.catalogue import Provider
from app.providers.base import Offer
from app.watcher.book import OfferBook
from tests.clock import TICK, FakeClock

HYPERSTACK = Provider("hyperstack")
OFFER = Offer(
    provider=HYPERSTACK,
    region="CANADA-1",
    sku="n3-H100x8",
    gpu_model="H100",
    gpu_count=8,
    price_per_hour=Decimal("19.20"),
    available=2,
)
MAX_AGE = 3.0
LANDS_AFTER = 0.25  # a read lands this long after it began (binary-exact)
FRESH = {HYPERSTACK: MAX_AGE}


def book_on(clock: FakeClock, cooldown: float = 5.0) -> OfferBook:
    return OfferBook(cooldown_seconds=cooldown, clock=clock)


def available(book: OfferBook) -> int:
    return sum(o.available or 1 for o in book.current(max_age=FRESH))


def read(book: OfferBook, clock: FakeClock, offers: list[Offer] | None = None) -> None:
    """A read that starts now and lands a little later, as a poll does."""
    started = clock()
    clock.advance(LANDS_AFTER)
    book.update(HYPERSTACK, [OFFER] if offers is None else offers, started=started)


def test_a_unit_in_flight_stays_taken_across_reads_that_began_before_its_answer() -> None:
    clock = FakeClock()
    book = book_on(clock)
    read(book, clock)
    taken = book.take(OFFER.key)
    assert available(book) == 1
    read(book, clock)  # the create is not answered yet
    assert available(book) == 1
    before_answer = clock()
    clock.advance(LANDS_AFTER)
    book.answered(taken, consumed=True)
    book.update(HYPERSTACK, [OFFER], started=before_answer)  # may predate the create
    assert available(book) == 1
    read(book, clock)  # began after the answer: reflects the create
    assert available(book) == 2


def test_a_unit_whose_create_failed_is_free_again_at_once() -> None:
    clock = FakeClock()
    book = book_on(clock)
    read(book, clock)
    taken = book.take(OFFER.key)
    book.answered(taken, consumed=False)
    assert available(book) == 2


def test_an_offer_cools_down_for_exactly_the_cooldown() -> None:
    clock = FakeClock()
    book = book_on(clock, cooldown=5.0)
    book.cool(OFFER.key)
    clock.advance(5.0 - TICK)
    assert book.cooling() == {OFFER.key}
    clock.advance(TICK)
    assert book.cooling() == frozenset()


def test_a_provider_asking_for_longer_is_given_longer_never_less_than_the_cooldown() -> None:
    clock = FakeClock()
    book = book_on(clock, cooldown=5.0)
    book.cool(OFFER.key, seconds=30.0)
    clock.advance(30.0 - TICK)
    assert book.cooling() == {OFFER.key}
    clock.advance(TICK)
    assert book.cooling() == frozenset()
    book.cool(OFFER.key, seconds=1.0)
    clock.advance(5.0 - TICK)
    assert book.cooling() == {OFFER.key}
    clock.advance(TICK)
    assert book.cooling() == frozenset()


def test_a_read_is_acted_on_up_to_its_max_age_and_not_after() -> None:
    clock = FakeClock()
    book = book_on(clock)
    read(book, clock)
    clock.advance(MAX_AGE)
    assert book.current(max_age=FRESH) == [OFFER]
    clock.advance(TICK)
    assert book.current(max_age=FRESH) == []
    read(book, clock)
    assert book.current(max_age=FRESH) == [OFFER]


def test_a_failed_read_keeps_the_last_offers_ageing() -> None:
    clock = FakeClock()
    book = book_on(clock)
    read(book, clock)
    clock.advance(MAX_AGE)
    book.failed(HYPERSTACK, "HTTP 503")
    assert book.current(max_age=FRESH) == [OFFER]
    clock.advance(TICK)
    book.failed(HYPERSTACK, "HTTP 503")
    assert book.current(max_age=FRESH) == []


def test_an_offer_is_timed_from_when_it_was_first_seen_in_its_current_run() -> None:
    clock = FakeClock()
    book = book_on(clock)
    read(book, clock)  # first seen when this read landed
    clock.advance(2.0)
    read(book, clock)
    assert book.seen_for(OFFER.key) == 2.0 + LANDS_AFTER
    read(book, clock, offers=[])  # sold out: the run ends
    assert book.seen_for(OFFER.key) is None
    read(book, clock)
    clock.advance(1.0)
    assert book.seen_for(OFFER.key) == 1.0


def cools_for_exactly(book: OfferBook, clock: FakeClock, seconds: float) -> None:
    clock.advance(seconds - TICK)
    assert book.cooling() == {OFFER.key}
    clock.advance(TICK)
    assert book.cooling() == frozenset()


def test_an_offer_refused_again_and_again_rests_longer_each_time_up_to_the_cap() -> None:
    clock = FakeClock()
    book = book_on(clock, cooldown=5.0)
    rests = []
    for _ in range(10):
        rests.append(book.refused(OFFER.key))
        cools_for_exactly(book, clock, rests[-1])
    assert rests == [5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 640.0, 900.0, 900.0]


def test_an_accepted_create_there_starts_the_rests_over() -> None:
    clock = FakeClock()
    book = book_on(clock, cooldown=5.0)
    other = Offer(HYPERSTACK, "CANADA-1", "n3-L40x1", "L40", 1, Decimal("1.00"))
    assert [book.refused(OFFER.key) for _ in range(3)] == [5.0, 10.0, 20.0]
    assert book.refused(other.key) == 5.0  # each offer counts its own
    book.accepted(other.key)
    assert book.refused(OFFER.key) == 40.0  # the control: another offer's accept changes nothing
    book.accepted(OFFER.key)
    assert book.refused(OFFER.key) == 5.0


def test_a_refused_offer_rests_a_second_at_least_when_capacity_cools_nothing() -> None:
    clock = FakeClock()
    book = book_on(clock, cooldown=0.0)
    assert [book.refused(OFFER.key) for _ in range(2)] == [1.0, 2.0]


def test_a_shorter_capacity_cool_down_does_not_cut_a_refusals_rest() -> None:
    clock = FakeClock()
    book = book_on(clock, cooldown=5.0)
    book.refused(OFFER.key)
    book.refused(OFFER.key)  # rests 10 s
    book.cool(OFFER.key)  # 5 s
    cools_for_exactly(book, clock, 10.0)
