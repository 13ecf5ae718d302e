"""The expected wait and the per-key summary, on cases computed by hand.

Every case samples on a 1-hour grid (step=3600) over a 10-hour window from T0, so the waits
can be listed in the comments: "t=3: 1h" is the moment T0+3h waiting one hour for stock.
"""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import numpy as np

from app.core.catalogue import Interconnect, Provider
from app.core.market import Fees, Offer, OrderWants
from app.stock.stats import (
    Estimate,
    Samples,
    Stock,
    estimate,
    kaplan_meier_quantile,
    price_curve,
    spans_of,
)
from app.stock.summary import KeySummary, nearest_rank, summarise_key, weighted_median

T0 = datetime(2026, 12, 1, tzinfo=UTC)
NOW = T0 + timedelta(hours=10)
H = 3600.0
NO_FEES = Fees()


def at(hours: float) -> datetime:
    """T0 plus some hours."""
    return T0 + timedelta(hours=hours)


def span(start_h: float, end_h: float) -> tuple[float, float]:
    """A coverage span in epoch seconds, from hours after T0."""
    return (at(start_h).timestamp(), at(end_h).timestamp())


def seen(
    start_h: float,
    end_h: float,
    price: str = "40",
    *,
    provider: str = "verda",
    region: str = "FIN-01",
    sku: str = "8B300",
    gpu_count: int = 8,
    interconnect: Interconnect | None = Interconnect.SXM,
) -> Stock:
    """An appearance of 8x B300 from `start_h` to `end_h` hours after T0."""
    offer = Offer(
        provider=Provider(provider),
        region=region,
        sku=sku,
        gpu_model="B300",
        gpu_count=gpu_count,
        price_per_hour=Decimal(price),
        interconnect=interconnect,
    )
    return Stock(offer, spans_of([span(start_h, end_h)]))


def wants(max_price: str = "45", **changes: object) -> OrderWants:
    """An order for 8x B300 on Verda at up to `max_price`."""
    fields: dict[str, object] = {
        "id": "ord_x",
        "created_at": T0,
        "providers": frozenset({"verda"}),
        "gpu_model": "B300",
        "gpu_count": 8,
        "max_price_per_hour": Decimal(max_price),
    }
    fields.update(changes)
    return OrderWants(**fields)  # type: ignore[arg-type]


def run(
    order: OrderWants,
    items: list[Stock],
    coverage: list[tuple[float, float]],
    fees: Fees = NO_FEES,
) -> Estimate:
    """The estimate over [T0, T0+10h] on the hourly grid."""
    return estimate(order, items, spans_of(coverage), fees=fees, since=T0, now=NOW, step=H)


def test_one_appearance_in_a_fully_observed_window() -> None:
    # In stock 4h-6h. Waits: t=0..3: 4h,3h,2h,1h (seen); t=4,5: 0; t=6..9: no later
    # appearance, censored at the end of data: 4h,3h,2h,1h.
    # Kaplan-Meier, 10 at risk: at 0, 2 events: S=0.8 (8 left); at 1h, 1 event of 8: S=0.7,
    # and 1 censored (6 left); at 2h, 1 of 6: S=0.5833 (4 left); at 3h, 1 of 4: S=0.4375
    # <= 0.5: the median is 3h; at 4h, 1 of 2: S=0.21875, never <= 0.1: p90 more than 4h.
    result = run(wants(), [seen(4, 6)], [span(0, 10)])
    assert result.sufficient and result.wait is not None
    assert result.observed_seconds == 10 * H
    assert result.appearances == 1
    assert result.in_stock_fraction == 0.2
    assert result.wait.median_seconds == 3 * H
    assert result.wait.median_more_than_seconds is None
    assert result.wait.p90_seconds is None
    assert result.wait.p90_more_than_seconds == 4 * H


def test_no_appearance_after_the_last_one_is_censored_not_short() -> None:
    # In stock 1h-2h. t=0: 1h (seen); t=1: 0; t=2..9: censored at 8h..1h.
    # At 0: S=0.9 (9 left); at 1h: 1 event of 9: S=0.8. Never 0.5: more than 8h (the longest
    # follow-up), where counting the censored waits as seen would have said 4h.
    result = run(wants(), [seen(1, 2)], [span(0, 10)])
    assert result.wait is not None
    assert result.wait.median_seconds is None
    assert result.wait.median_more_than_seconds == 8 * H
    assert result.wait.p90_more_than_seconds == 8 * H


def test_an_appearance_after_a_coverage_gap_does_not_shorten_the_wait_before_it() -> None:
    # Observed 0-4h and 6-10h; in stock 7h-8h. t=0..3: the stretch runs into the gap at 4h:
    # censored at 4h,3h,2h,1h (not 7h..4h seen); t=6: 1h; t=7: 0; t=8,9: censored 2h, 1h.
    # 8 at risk: at 0, S=7/8 (7 left); at 1h, 1 event of 7: S=0.75, 2 censored (4 left);
    # then censored only: the median is more than 4h.
    result = run(wants(), [seen(7, 8)], [span(0, 4), span(6, 10)])
    assert result.wait is not None
    assert result.observed_seconds == 8 * H
    assert result.in_stock_fraction == 1 / 8
    assert result.wait.median_seconds is None
    assert result.wait.median_more_than_seconds == 4 * H


def test_a_price_change_mid_appearance_matches_only_the_cheap_part() -> None:
    # The same offer at $40 from 2h to 4h, then at $50 until 6h; the order pays up to $45.
    items = [seen(2, 4, "40"), seen(4, 6, "50")]
    cheap = run(wants("45"), items, [span(0, 10)])
    assert cheap.appearances == 1 and cheap.in_stock_fraction == 0.2
    # At $55 both parts match: one appearance (a price change is not a new one), 4 hours.
    both = run(wants("55"), items, [span(0, 10)])
    assert both.appearances == 1 and both.in_stock_fraction == 0.4


def test_the_current_fees_apply_to_the_provider_price() -> None:
    # $42 + 10% = $46.20 > $45: no match with today's fees, whatever was recorded then.
    result = run(wants("45"), [seen(2, 4, "42")], [span(0, 10)], fees=Fees(Decimal(10)))
    assert result.appearances == 0 and not result.sufficient


def test_matching_rules_come_from_the_market() -> None:
    items = [
        seen(1, 2, region="CANADA-1"),
        seen(3, 4, provider="hyperstack", sku="h"),
        seen(5, 6, interconnect=Interconnect.PCIE, sku="p"),
        seen(7, 8, gpu_count=4, sku="4"),
    ]
    order = wants(regions=frozenset({"FIN-01"}), interconnect=Interconnect.NVLINK)
    result = run(order, items, [span(0, 10)])
    assert result.appearances == 0
    assert result.wait is None
    assert result.in_stock_fraction == 0.0
    assert result.missing == (
        "no appearance at or under $45.00 in 10 hours of observation over the last 10 hours"
    )
    # SXM boards satisfy an NVLink order: the right region at FIN-01 with SXM counts.
    assert run(order, [seen(1, 2)], [span(0, 10)]).appearances == 1


def test_too_little_observation_is_insufficient() -> None:
    result = run(wants(), [seen(0, 0.25)], [span(0, 0.5)])
    assert result.missing == "observed only 30 minutes of the last 10 hours"
    assert result.wait is None and result.observed_seconds == 0.5 * H


def test_coverage_outside_the_window_is_not_observation() -> None:
    result = run(wants(), [seen(4, 6)], [span(-50, 0.5), span(9.5, 20)])
    assert result.observed_seconds == 1 * H


def test_the_price_curve_is_at_the_observed_prices_around_the_max() -> None:
    # Fitting offers at $40, $44, $50 and $60 (the pcie one does not fit and is left out).
    items = [
        seen(1, 2, "40", sku="a"),
        seen(3, 4, "44", sku="b"),
        seen(5, 6, "50", sku="c"),
        seen(7, 8, "60", sku="d"),
        seen(7, 8, "46", sku="e", interconnect=Interconnect.PCIE),
    ]
    order = wants("45", interconnect=Interconnect.SXM)
    coverage = spans_of([span(0, 10)])
    curve = price_curve(order, items, coverage, fees=NO_FEES, since=T0, now=NOW, step=H)
    assert [p.max_price_per_hour for p in curve] == [Decimal(x) for x in ("40", "44", "50", "60")]
    assert [p.appearances for p in curve] == [1, 2, 3, 4]


def samples(*pairs: tuple[float, bool]) -> Samples:
    """Waits as the grid gives them."""
    return Samples(np.array([p[0] for p in pairs], float), np.array([p[1] for p in pairs], bool))


def test_kaplan_meier_without_censoring_is_the_plain_quantile() -> None:
    plain = samples(*((float(d), True) for d in (1, 2, 3, 4)))
    assert kaplan_meier_quantile(plain, 0.5) == (2.0, True)
    assert kaplan_meier_quantile(plain, 0.9) == (4.0, True)
    assert kaplan_meier_quantile(samples(), 0.5) == (0.0, False)


def summary_of(
    items: list[Stock], coverage: list[tuple[float, float]], since: datetime = T0
) -> KeySummary:
    """The summary of one key over [since, T0+10h]."""
    out = summarise_key(
        items, spans_of(coverage), fees=NO_FEES, since=since, now=NOW, last_seen_at=at(5.9)
    )
    assert out is not None
    return out


def test_summary_of_one_key() -> None:
    # Appearances: 1h-3h (a price change at 2h joins its two intervals) and 5h-6h.
    # In stock 2h and 1h; nearest rank: median 1h, p90 2h; one gap, 3h-5h, observed.
    items = [seen(1, 2, "40"), seen(2, 3, "50"), seen(5, 6, "40")]
    out = summary_of(items, [span(0, 10)])
    assert out.appearances == 2
    assert out.hours_in_stock == 3
    assert (out.median_seconds_in_stock, out.p90_seconds_in_stock) == (1 * H, 2 * H)
    assert out.median_gap_seconds == 2 * H
    # $40 for 2 of the 3 hours in stock: the median by time in stock is $40.
    assert (out.price_min, out.price_median, out.price_max) == (
        Decimal(40),
        Decimal(40),
        Decimal(50),
    )
    assert out.hours_observed == 10
    assert out.last_seen_at == at(5.9)
    # A gap the provider was not read through throughout may hide an appearance: not counted.
    gappy = summary_of(items, [span(0, 4), span(4.5, 10)])
    assert gappy.median_gap_seconds is None and gappy.hours_observed == 9.5


def test_the_median_price_is_weighted_by_time_in_stock() -> None:
    # $50 for 3 hours, $40 for 1: three intervals at $40 would say $40 by count.
    items = [seen(1, 4, "50"), seen(5, 5.25, "40"), seen(6, 6.5, "40"), seen(7, 7.25, "40")]
    assert summary_of(items, [span(0, 10)]).price_median == Decimal(50)
    assert weighted_median([Decimal(1), Decimal(2)], [0.0, 0.0]) == Decimal(1)


def test_time_in_stock_counts_within_the_window() -> None:
    # From 2h: the appearance 1h-3h counts its last hour; the one at 5h-6h all of it.
    out = summary_of([seen(1, 3), seen(5, 6)], [span(0, 10)], since=at(2))
    assert out.appearances == 2 and out.hours_in_stock == 2
    assert out.median_seconds_in_stock == 1 * H
    # A key whose stock all lies before the window is not in the summary.
    before = [seen(0, 1)]
    assert (
        summarise_key(before, spans_of([]), fees=NO_FEES, since=at(2), now=NOW, last_seen_at=T0)
        is None
    )


def test_nearest_rank() -> None:
    assert nearest_rank(np.array([3.0, 1.0, 2.0]), 0.5) == 2.0
    assert nearest_rank(np.array([4.0, 1.0, 3.0, 2.0]), 0.9) == 4.0
    assert nearest_rank(np.array([]), 0.5) is None


def test_an_orders_alternatives_wait_for_the_first_of_them() -> None:
    # 8x B300 shows 6h-7h; 4x B300 (the other alternative) shows 2h-3h. Alone, the first
    # alternative's wait at t=0 is 6h; with the other it is 2h: the first of either to show.
    both = [seen(6, 7), seen(2, 3, sku="4B300", gpu_count=4)]
    alone = run(wants(), both, [span(0, 10)])
    assert alone.appearances == 1
    other = wants(gpu_count=4, alternative=2)
    together = estimate(
        wants(), both, spans_of([span(0, 10)]), fees=NO_FEES, since=T0, now=NOW, step=H,
        also=[other],
    )  # fmt: skip
    assert together.appearances == 2
    assert together.in_stock_fraction == 0.2
    assert together.wait is not None and alone.wait is not None
    assert together.wait.median_seconds is not None
    assert together.wait.median_seconds < (alone.wait.median_seconds or float("inf"))
