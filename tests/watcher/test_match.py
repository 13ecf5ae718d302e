"""The matcher: which waiting order gets which offer (pure, no database)."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from app.core.catalogue import ClusterInterconnect, Interconnect, Provider
from app.core.market import Fees, OrderWants, matches
from app.providers.base import Offer
from app.watcher.match import assign

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
NO_FEES = Fees()


def offer(**overrides: object) -> Offer:
    base = Offer(
        provider=Provider("verda"),
        region="FIN-01",
        sku="8B300.240V",
        gpu_model="B300",
        gpu_count=8,
        price_per_hour=Decimal("40.00"),
        interconnect=Interconnect.SXM,
        disk_gb=None,
        disk_fixed=False,
    )
    return replace(base, **overrides)  # type: ignore[arg-type]


def order(order_id: str = "ord_a", minutes: int = 0, **overrides: object) -> OrderWants:
    base = OrderWants(
        id=order_id,
        created_at=T0 + timedelta(minutes=minutes),
        providers=frozenset({"verda", "hyperstack"}),
        gpu_model="B300",
        gpu_count=8,
        max_price_per_hour=Decimal("45.00"),
    )
    return replace(base, **overrides)  # type: ignore[arg-type]


class TestRules:
    def test_a_matching_offer_matches(self) -> None:
        assert matches(order(), offer(), Decimal("40.00"))

    def test_the_provider_must_be_accepted(self) -> None:
        assert not matches(order(providers=frozenset({"hyperstack"})), offer(), Decimal("40"))

    def test_gpu_model_and_count_must_be_equal(self) -> None:
        assert not matches(order(gpu_model="B200"), offer(), Decimal("40"))
        assert not matches(order(gpu_count=4), offer(), Decimal("40"))

    def test_price_with_fees_exactly_at_the_max_matches_one_cent_above_does_not(self) -> None:
        fees = Fees(percent=Decimal("5"), flat_per_hour=Decimal("0.10"))
        at_max = fees.apply(Decimal("40.00"))
        assert at_max == Decimal("42.10")
        wants = order(max_price_per_hour=Decimal("42.10"))
        assert assign([wants], [offer()], fees=fees).assignments != []
        cent_short = replace(wants, max_price_per_hour=Decimal("42.09"))
        assert assign([cent_short], [offer()], fees=fees).assignments == []

    def test_regions_compare_without_case(self) -> None:
        assert matches(order(regions=frozenset({"FIN-01"})), offer(region="fin-01"), Decimal(40))
        assert not matches(order(regions=frozenset({"ICE-01"})), offer(), Decimal(40))

    def test_a_fixed_disk_must_be_big_enough_a_chosen_disk_always_is(self) -> None:
        wants = order(min_disk_gb=1000)
        assert not matches(wants, offer(disk_gb=725, disk_fixed=True), Decimal(40))
        assert matches(wants, offer(disk_gb=1000, disk_fixed=True), Decimal(40))
        assert not matches(wants, offer(disk_gb=None, disk_fixed=True), Decimal(40))
        assert matches(wants, offer(disk_gb=None, disk_fixed=False), Decimal(40))

    def test_a_disk_billed_apart_is_part_of_the_price_matched_against_the_max(self) -> None:
        # 1000 GB x $0.2 per GB-month / 730 h = $0.27397.../h, rounded up to $0.28
        priced = offer(disk_price_per_gb_hour=Decimal("0.2") / 730)
        fees = Fees(percent=Decimal("5"), flat_per_hour=Decimal("0.10"))  # 40.00 -> 42.10
        short = order(min_disk_gb=1000, max_price_per_hour=Decimal("42.37"))
        result = assign([short], [priced], fees=fees)
        assert result.assignments == []
        assert [a.price_with_fees for a in result.above_max] == [Decimal("42.38")]
        enough = replace(short, max_price_per_hour=Decimal("42.38"))
        (assigned,) = assign([enough], [priced], fees=fees).assignments
        assert assigned.price_with_fees == Decimal("42.38")
        no_disk = replace(short, min_disk_gb=None)  # the default 100 GB: $0.0273.../h -> $0.03
        (plain,) = assign([no_disk], [priced], fees=fees).assignments
        assert plain.price_with_fees == Decimal("42.13")

    def test_the_disk_price_decides_which_offer_is_cheapest(self) -> None:
        verda = offer(price_per_hour=Decimal("40.00"), disk_price_per_gb_hour=Decimal("0.001"))
        hyperstack = offer(
            provider=Provider("hyperstack"), region="CANADA-1", price_per_hour=Decimal("40.50"),
            disk_gb=2000, disk_fixed=True,
        )  # fmt: skip
        big = order(min_disk_gb=1000)  # Verda: 40.00 + 1.00 for the disk
        (taken,) = assign([big], [verda, hyperstack], fees=NO_FEES).assignments
        assert (taken.offer, taken.price_with_fees) == (hyperstack, Decimal("40.50"))
        small = order(min_disk_gb=100)  # Verda: 40.00 + 0.10
        (taken,) = assign([small], [verda, hyperstack], fees=NO_FEES).assignments
        assert (taken.offer, taken.price_with_fees) == (verda, Decimal("40.10"))

    def test_the_disk_counts_against_our_funds_at_the_provider(self) -> None:
        priced = offer(disk_price_per_gb_hour=Decimal("0.001"))
        wants = order(min_disk_gb=1000)  # the provider bills us 40.00 + 1.00
        short = assign([wants], [priced], fees=NO_FEES, provider_funds={"verda": Decimal("40.99")})
        assert short.assignments == [] and len(short.provider_short) == 1
        paid = assign([wants], [priced], fees=NO_FEES, provider_funds={"verda": Decimal("41.00")})
        assert len(paid.assignments) == 1

    @pytest.mark.parametrize(
        ("wanted", "offered", "ok"),
        [
            (Interconnect.SXM, Interconnect.SXM, True),
            (Interconnect.SXM, Interconnect.NVLINK, False),
            (Interconnect.NVLINK, Interconnect.SXM, True),
            (Interconnect.NVLINK, Interconnect.PCIE, False),
            (Interconnect.PCIE, Interconnect.PCIE, True),
            (Interconnect.NVLINK, None, False),
        ],
    )
    def test_interconnect(
        self, wanted: Interconnect, offered: Interconnect | None, ok: bool
    ) -> None:
        assert matches(order(interconnect=wanted), offer(interconnect=offered), Decimal(40)) is ok


class TestAssign:
    def test_each_order_takes_its_cheapest_matching_offer(self) -> None:
        cheap = offer(region="FIN-02", price_per_hour=Decimal("39.00"))
        dear = offer(region="FIN-01", price_per_hour=Decimal("44.00"))
        result = assign([order()], [dear, cheap], fees=NO_FEES).assignments
        assert [(a.order_id, a.offer.region) for a in result] == [("ord_a", "FIN-02")]

    def test_the_oldest_order_wins_one_unit_of_stock(self) -> None:
        orders = [order(f"ord_{i}", minutes=m) for i, m in enumerate([5, 1, 3])]
        result = assign(orders, [offer()], fees=NO_FEES).assignments
        assert [a.order_id for a in result] == ["ord_1"]

    def test_no_more_orders_at_one_offer_than_its_known_quantity(self) -> None:
        orders = [order(f"ord_{i}", minutes=i) for i in range(5)]
        result = assign(orders, [offer(available=3)], fees=NO_FEES).assignments
        assert [a.order_id for a in result] == ["ord_0", "ord_1", "ord_2"]

    def test_when_the_cheapest_is_taken_the_next_order_gets_the_next_cheapest(self) -> None:
        orders = [order("ord_old", minutes=0), order("ord_new", minutes=1)]
        offers = [offer(region="FIN-02", price_per_hour=Decimal(39)), offer(region="FIN-01")]
        result = assign(orders, offers, fees=NO_FEES).assignments
        assert [(a.order_id, a.offer.region) for a in result] == [
            ("ord_old", "FIN-02"),
            ("ord_new", "FIN-01"),
        ]

    def test_cooling_offers_are_skipped(self) -> None:
        hot = offer()
        cooled = assign([order()], [hot], fees=NO_FEES, excluded=frozenset({hot.key}))
        assert cooled.assignments == []

    def test_the_price_with_fees_is_what_the_assignment_carries(self) -> None:
        fees = Fees(percent=Decimal("10"))
        (result,) = assign([order()], [offer()], fees=fees).assignments
        assert result.price_with_fees == Decimal("44.00")

    def test_orders_that_match_nothing_get_nothing(self) -> None:
        assert assign([order(gpu_model="H200")], [offer()], fees=NO_FEES).assignments == []


class TestClusters:
    """A cluster offer (nodes > 1) is a machine of its own: never one of its nodes."""

    def cluster(self, **overrides: object) -> Offer:
        return offer(
            sku="16B300", nodes=2, cluster_interconnect=ClusterInterconnect.INFINIBAND,
            **overrides,
        )  # fmt: skip

    def test_a_cluster_offer_never_goes_to_a_single_machine_order(self) -> None:
        cheap_cluster = self.cluster(price_per_hour=Decimal("30.00"), available=5)
        alone = assign([order()], [cheap_cluster], fees=NO_FEES)
        assert (alone.assignments, alone.above_max) == ([], [])  # not even a near miss
        (taken,) = assign([order()], [cheap_cluster, offer()], fees=NO_FEES).assignments
        assert taken.offer == offer()  # control: the single machine of the same shape goes
        two_nodes = order(nodes=2)
        (taken,) = assign([two_nodes], [cheap_cluster, offer()], fees=NO_FEES).assignments
        assert taken.offer == cheap_cluster  # and the cluster goes to an order for two nodes

    def test_room_is_counted_per_machine_with_its_nodes(self) -> None:
        orders = [
            order("ord_1", 0),
            order("ord_2", 1),
            order("ord_3", 2, nodes=2),
            order("ord_4", 3, nodes=2),
        ]
        offers = [offer(available=1), self.cluster(available=1)]
        result = assign(orders, offers, fees=NO_FEES, near_misses=False)
        assert [(a.order_id, a.offer.nodes) for a in result.assignments] == [
            ("ord_1", 1),
            ("ord_3", 2),
        ]

    def test_the_hot_path_skips_by_the_cheapest_offer_of_the_same_nodes(self) -> None:
        cheap_cluster = self.cluster(price_per_hour=Decimal("30.00"))
        dear_single = offer(price_per_hour=Decimal("46.00"))
        result = assign([order()], [cheap_cluster, dear_single], fees=NO_FEES, near_misses=False)
        assert result.assignments == []
        (taken,) = assign(
            [order(max_price_per_hour=Decimal("46.00"))],
            [cheap_cluster, dear_single],
            fees=NO_FEES,
            near_misses=False,
        ).assignments
        assert taken.offer == dear_single


class TestFundsAndNearMisses:
    def test_an_order_whose_account_cannot_pay_an_hour_is_skipped_for_the_next(self) -> None:
        poor = order("ord_poor", minutes=0, account_id="acct_poor")
        rich = order("ord_rich", minutes=1, account_id="acct_rich")
        funds = {"acct_poor": Decimal("39.99"), "acct_rich": Decimal("40.00")}
        result = assign([poor, rich], [offer()], fees=NO_FEES, funds=funds)
        assert [a.order_id for a in result.assignments] == ["ord_rich"]
        assert [(a.order_id, a.price_with_fees) for a in result.short_of_funds] == [
            ("ord_poor", Decimal("40.00"))
        ]

    def test_one_accounts_balance_is_spent_down_across_its_orders(self) -> None:
        orders = [order(f"ord_{i}", minutes=i, account_id="acct_a") for i in range(3)]
        result = assign(
            orders, [offer(available=3)], fees=NO_FEES, funds={"acct_a": Decimal("80.00")}
        )
        assert [a.order_id for a in result.assignments] == ["ord_0", "ord_1"]
        assert [a.order_id for a in result.short_of_funds] == ["ord_2"]

    def test_the_cheapest_offer_above_the_max_is_reported(self) -> None:
        offers = [offer(region="FIN-02", price_per_hour=Decimal(47)), offer(region="FIN-01",
                  price_per_hour=Decimal(46))]  # fmt: skip
        result = assign([order()], offers, fees=NO_FEES)
        assert result.assignments == []
        assert [(a.offer.region, a.price_with_fees) for a in result.above_max] == [
            ("FIN-01", Decimal("46.00"))
        ]


class TestSpendLimit:
    """An order's max_total_usd: no offer whose first hour, held at the claim (fees and a disk
    billed apart included), would take the order past it, whatever its price cap allows."""

    def test_an_offer_whose_first_hour_passes_the_total_is_not_taken(self) -> None:
        dear = offer(price_per_hour=Decimal("42.00"))  # under the order's $45.00 cap
        limited = order(max_total_usd=Decimal("41.99"))
        for hot_path in (False, True):
            result = assign([limited], [dear], fees=NO_FEES, near_misses=not hot_path)
            assert result.assignments == []
        told = assign([limited], [dear], fees=NO_FEES).above_max
        assert [(a.offer, a.price_with_fees) for a in told] == [(dear, Decimal("42.00"))]
        enough = replace(limited, max_total_usd=Decimal("42.00"))  # control: at the limit
        (taken,) = assign([enough], [dear], fees=NO_FEES, near_misses=False).assignments
        assert taken.price_with_fees == Decimal("42.00")

    def test_the_disk_billed_apart_counts_in_the_first_hour(self) -> None:
        priced = offer(price_per_hour=Decimal("41.00"), disk_price_per_gb_hour=Decimal("0.001"))
        limited = order(min_disk_gb=1000, max_total_usd=Decimal("41.99"))  # 41.00 + 1.00
        assert assign([limited], [priced], fees=NO_FEES).assignments == []
        enough = replace(limited, max_total_usd=Decimal("42.00"))
        assert len(assign([enough], [priced], fees=NO_FEES).assignments) == 1

    def test_an_alternative_dearer_than_the_total_is_not_taken_the_one_within_it_is(self) -> None:
        # The order of the report: alternatives at $3.00 and $50.00 an hour, a $3.00 limit.
        small = order(
            gpu_model="H100", gpu_count=1, max_price_per_hour=Decimal("3.00"),
            max_total_usd=Decimal("3.00"),
        )  # fmt: skip
        large = replace(small, gpu_model="B300", gpu_count=8, max_price_per_hour=Decimal("50.00"))
        alternatives = [small, replace(large, alternative=2)]
        b300 = offer(price_per_hour=Decimal("45.00"))
        result = assign(alternatives, [b300], fees=NO_FEES)
        assert result.assignments == []
        assert [(a.alternative, a.price_with_fees) for a in result.above_max] == [
            (2, Decimal("45.00"))
        ]
        h100 = offer(sku="1H100", gpu_model="H100", gpu_count=1, price_per_hour=Decimal("2.63"))
        (taken,) = assign(alternatives, [b300, h100], fees=NO_FEES).assignments
        assert (taken.alternative, taken.offer) == (1, h100)


class TestProviderFunds:
    """Our account at the offer's provider must cover one hour at the provider's price."""

    def test_a_provider_account_that_cannot_pay_sends_the_order_to_a_dearer_provider(self) -> None:
        verda = offer(price_per_hour=Decimal("40.00"))
        hyperstack = offer(provider=Provider("hyperstack"), price_per_hour=Decimal("44.00"))
        fees = Fees(flat_per_hour=Decimal("0.50"))  # the check is on the provider's own price
        result = assign(
            [order()],
            [verda, hyperstack],
            fees=fees,
            provider_funds={"verda": Decimal("39.99"), "hyperstack": Decimal("44.00")},
        )
        assert [(a.order_id, a.offer.provider) for a in result.assignments] == [
            ("ord_a", "hyperstack")
        ]
        assert [(a.order_id, a.offer.provider) for a in result.provider_short] == [
            ("ord_a", "verda")
        ]
        # Control: a verda account that covers the hour exactly takes the cheaper offer.
        covered = assign(
            [order()], [verda, hyperstack], fees=fees, provider_funds={"verda": Decimal("40.00")}
        )
        assert [a.offer.provider for a in covered.assignments] == ["verda"]

    def test_creates_in_one_pass_spend_the_account_down_and_cheaper_orders_still_go(
        self,
    ) -> None:
        big = offer(available=3)
        small = offer(sku="1H100", gpu_model="H100", gpu_count=1, price_per_hour=Decimal("3"))
        orders = [
            order("ord_1", 0),
            order("ord_2", 1),
            order("ord_3", 2, gpu_model="H100", gpu_count=1),
        ]
        result = assign(
            orders, [big, small], fees=NO_FEES, provider_funds={"verda": Decimal("50.00")}
        )
        assert [a.order_id for a in result.assignments] == ["ord_1", "ord_3"]
        assert [a.order_id for a in result.provider_short] == ["ord_2"]

    def test_a_provider_without_a_known_balance_is_not_limited(self) -> None:
        result = assign([order()], [offer()], fees=NO_FEES, provider_funds={})
        assert [a.order_id for a in result.assignments] == ["ord_a"]
