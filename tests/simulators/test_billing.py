"""How each simulator charges its balance for the VMs it runs, on a clock the test advances."""

from decimal import ROUND_HALF_UP, Decimal
from typing import TypeVar

import pytest

from app.simulators.billing import BillingPolicy, Span, charge, parse_amount
from app.simulators.core import ProviderSimulator
from app.simulators.hyperstack import HyperstackSimulator
from app.simulators.quantacloud import QuantaCloudSimulator
from app.simulators.verda import VerdaSimulator
from app.simulators.vms import CatalogEntry, SimVM
from tests.clock import FakeClock

START = Decimal("10000.00")
S = TypeVar("S", bound=ProviderSimulator)


def simulator(kind: type[S], boot_seconds: float = 0.0) -> S:
    sim = kind()
    sim.clock = FakeClock()
    sim.boot_seconds = boot_seconds
    return sim


def run(sim: ProviderSimulator, entry: CatalogEntry | None = None) -> SimVM:
    return sim.new_vm(
        f"vm-{len(sim.vms)}", entry or next(iter(sim.catalog.values())), name=None, tags=[]
    )


def advance(sim: ProviderSimulator, seconds: float) -> None:
    clock = sim.clock
    assert isinstance(clock, FakeClock)
    clock.advance(seconds)


def cost(vm: SimVM, seconds: int) -> Decimal:
    """What `seconds` of this VM cost, rounded to micro-dollars as the simulators round."""
    amount = vm.entry.price_per_hour * seconds / Decimal(3600)
    return amount.quantize(Decimal("0.000001"), rounding=ROUND_HALF_UP)


def volume_cost(seconds: int) -> Decimal:
    """What `seconds` of a $0.20/h volume cost, to the micro-dollar."""
    return (Decimal("0.20") * seconds / Decimal(3600)).quantize(Decimal("0.000001"))


class TestCharge:
    HOURLY = BillingPolicy(block_seconds=3600, refund_unused=False)
    REFUNDED = BillingPolicy(block_seconds=600, refund_unused=True)

    @pytest.mark.parametrize(
        ("policy", "seconds", "owed"),
        [
            (BillingPolicy(block_seconds=600, refund_unused=False), 0.5, "2.00"),  # Verda: 1/6
            (BillingPolicy(block_seconds=600, refund_unused=False), 1.01, "4.00"),  # 2 blocks
            (BillingPolicy(block_seconds=60, refund_unused=False), 1.01, "2.20"),  # Hyperstack
            (BillingPolicy(block_seconds=3600, refund_unused=False), 6.0, "12.00"),  # the hour
            (BillingPolicy(block_seconds=3600, refund_unused=False), 6.001, "24.00"),
        ],
    )
    def test_a_shortened_hour_shrinks_every_block_with_it(
        self, policy: BillingPolicy, seconds: float, owed: str
    ) -> None:
        """With 6-second hours (as the service's tests and demo mode run), Verda's 10-minute
        block is a second, Hyperstack's minute a tenth of one: what a machine owes is what
        it would owe on real hours, scaled."""
        assert charge(Decimal("6.00") * 2, Span(0, seconds), 99, policy, 6.0) == Decimal(owed)

    def test_each_block_begun_is_charged_in_full(self) -> None:
        price = Decimal("2.40")
        assert charge(price, Span(0), 0, self.HOURLY) == Decimal("2.40")
        assert charge(price, Span(0), 3600, self.HOURLY) == Decimal("2.40")
        assert charge(price, Span(0), 3600.5, self.HOURLY) == Decimal("4.80")
        assert charge(price, Span(0, 10), 99999, self.HOURLY) == Decimal("2.40")

    def test_a_refunding_provider_charges_exactly_once_the_vm_is_gone(self) -> None:
        price = Decimal("6.00")
        assert charge(price, Span(0), 1, self.REFUNDED) == Decimal("1.00")  # 10 min prepaid
        assert charge(price, Span(0, 60), 600, self.REFUNDED) == Decimal("0.10")

    def test_nothing_before_it_bills_or_if_it_stopped_first(self) -> None:
        assert charge(Decimal(1), None, 50, self.HOURLY) == 0
        assert charge(Decimal(1), Span(100), 50, self.HOURLY) == 0
        assert charge(Decimal(1), Span(100, 40), 500, self.HOURLY) == 0

    def test_clock_noise_does_not_begin_another_block(self) -> None:
        span = Span(1000.2)
        assert charge(Decimal(6), span, 1000.2 + 3600.0000000001, self.REFUNDED) == Decimal(6)

    def test_thirds_of_a_cent_round_to_micro_dollars(self) -> None:
        minute = BillingPolicy(block_seconds=60, refund_unused=False)
        assert charge(Decimal(1), Span(0), 1, minute) == Decimal("0.016667")


@pytest.mark.parametrize(
    ("value", "expected"),
    [("123.45", "123.45"), (50, "50"), (12.5, "12.5"), ("-3", "-3"), ("1e2", "1E+2")],
)
def test_amounts_are_decimal_strings_or_numbers(value: object, expected: str) -> None:
    assert parse_amount(value) == Decimal(expected)


@pytest.mark.parametrize("value", [None, True, "", "abc", "NaN", "Infinity", [1], {"a": 1}])
def test_anything_else_is_not_an_amount(value: object) -> None:
    assert parse_amount(value) is None


class TestVerda:
    def test_running_bills_in_ten_minute_blocks_each_begun_in_full(self) -> None:
        sim = simulator(VerdaSimulator, boot_seconds=60)
        vm = run(sim)
        advance(sim, 59)
        assert sim.vm_status(vm) == "provisioning" and sim.balance == START
        advance(sim, 1)  # running: the first ten minutes are taken
        assert sim.balance == START - cost(vm, 600)
        advance(sim, 601)
        assert sim.balance == START - cost(vm, 1200)
        vm.details["offline"] = True  # shut down: Verda keeps billing
        advance(sim, 299)  # 900 s since it ran, then deleted: the block begun is kept
        vm.deleted = sim.clock()
        assert sim.balance == START - cost(vm, 1200)
        advance(sim, 7200)
        assert sim.balance == START - cost(vm, 1200)

    def test_a_vm_verda_ends_by_itself_stops_billing_then(self) -> None:
        sim = simulator(VerdaSimulator, boot_seconds=0)
        vm = run(sim)
        advance(sim, 900)
        sim.end_vm(vm)
        assert sim.vm_status(vm) == "discontinued"
        advance(sim, 7200)
        assert sim.balance == START - cost(vm, 1200)
        assert sim.hourly_charge() == 0

    def test_a_volume_bills_by_the_second_until_deleted_for_good_the_trash_too(self) -> None:
        sim = simulator(VerdaSimulator, boot_seconds=0)
        vm = run(sim)
        kept, trashed, gone = (
            sim.new_volume(name=n, kind="NVMe", size_gb=730, location="FIN-01", vm_id=vm.id)
            for n in ("kept", "trashed", "gone")
        )  # 730 GB at $0.20/GB-month: $0.20 an hour each
        advance(sim, 600)
        vm.deleted = sim.clock()
        kept.detach()
        trashed.delete(sim.clock(), permanently=False)
        gone.delete(sim.clock(), permanently=True)
        advance(sim, 1800)
        # Each to the micro-dollar: the one deleted for good 10 minutes, the others 40.
        volumes = volume_cost(600) + 2 * volume_cost(2400)
        assert sim.balance == START - cost(vm, 600) - volumes
        advance(sim, 96 * 3600)  # the trash is emptied 96 hours after the delete
        assert sim.hourly_charge() == Decimal("0.20")  # the one left detached
        assert sim.balance < START and trashed.status == "deleted"

    def test_a_vm_that_fails_before_it_runs_costs_nothing(self) -> None:
        sim = simulator(VerdaSimulator, boot_seconds=10)
        vm = run(sim)
        vm.fail_after_accept = True
        advance(sim, 3600)
        assert sim.vm_status(vm) == "error" and sim.balance == START


class TestHyperstack:
    def test_active_bills_each_minute_begun_and_delete_stops_it(self) -> None:
        sim = simulator(HyperstackSimulator, boot_seconds=30)
        vm = run(sim)
        advance(sim, 29)
        assert sim.vm_status(vm) == "BUILD" and sim.balance == START
        advance(sim, 1 + 61)
        assert sim.balance == START - cost(vm, 120)
        vm.deleted = sim.clock()
        advance(sim, 3600)
        sim.purge_deleted()  # forgotten VMs keep what they cost
        assert not sim.vms
        assert sim.balance == START - cost(vm, 120)

    def test_the_credit_endpoint_reads_the_charged_balance(self) -> None:
        sim = simulator(HyperstackSimulator)
        vm = run(sim)
        advance(sim, 3600)
        assert sim.credit()["credit"] == float(START - cost(vm, 3600))


class TestQuantaCloud:
    def test_each_hour_begun_is_taken_from_the_create_provisioning_included(self) -> None:
        sim = simulator(QuantaCloudSimulator, boot_seconds=600)
        vm = run(sim)
        assert sim.vm_status(vm) == "provisioning"
        assert sim.balance == START - cost(vm, 3600)
        advance(sim, 3600)
        assert sim.balance == START - cost(vm, 3600)
        advance(sim, 1)
        assert sim.balance == START - cost(vm, 7200)
        vm.deleted = sim.clock()
        advance(sim, 36000)
        assert sim.balance == START - cost(vm, 7200)

    def test_a_failed_deployment_keeps_its_first_hour_and_bills_no_more(self) -> None:
        sim = simulator(QuantaCloudSimulator, boot_seconds=10)
        vm = run(sim)
        vm.fail_after_accept = True
        advance(sim, 7200)
        assert sim.vm_status(vm) == "failed"
        assert sim.balance == START - cost(vm, 3600)


def test_setting_the_balance_settles_what_ran_before_and_charges_from_then() -> None:
    sim = simulator(HyperstackSimulator)
    vm = run(sim)
    advance(sim, 3600)
    sim.balance = Decimal("100")
    assert sim.balance == Decimal("100")
    advance(sim, 1800)
    assert sim.balance == Decimal(100) - (cost(vm, 5400) - cost(vm, 3600))
    assert sim.hourly_charge() == vm.entry.price_per_hour
