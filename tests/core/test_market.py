"""What an order wants of an offer: the machine's identity (nodes included), its fabric, and
an image it boots (the one the order names, one with the driver its script needs)."""

from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal
from types import SimpleNamespace

import pytest

from app.core.catalogue import ClusterInterconnect, Interconnect, Provider
from app.core.market import (
    Abilities,
    Boots,
    MachineKey,
    Offer,
    OrderWants,
    all_wants_of,
    fits,
    matches,
    wants_of,
)

T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
INFINIBAND = ClusterInterconnect.INFINIBAND
MACHINE = Offer(Provider("verda"), "FIN-01", "8B200.240V", "B200", 8, Decimal("40.00"))
CLUSTER = replace(
    MACHINE, sku="16B200", price_per_hour=Decimal("80.00"), nodes=2, cluster_interconnect=INFINIBAND
)
SINGLE = OrderWants("ord_a", T0, frozenset({"verda"}), "B200", 8, Decimal("100.00"))


def test_a_machine_is_its_gpu_model_gpus_per_node_and_nodes() -> None:
    assert MachineKey("B200", 8) == ("B200", 8, 1)
    assert MACHINE.machine == SINGLE.machine == MachineKey("B200", 8, 1)
    assert CLUSTER.machine == MachineKey("B200", 8, 2) != MACHINE.machine
    assert replace(SINGLE, nodes=2).machine == CLUSTER.machine


def test_a_cluster_does_not_fit_a_single_machine_order_of_its_shape_nor_the_reverse() -> None:
    assert fits(SINGLE, MACHINE)  # control: the single machine of the same shape fits
    assert not fits(SINGLE, CLUSTER)
    two_nodes = replace(SINGLE, nodes=2)
    assert fits(two_nodes, CLUSTER)
    assert not fits(two_nodes, MACHINE)
    assert not fits(replace(SINGLE, nodes=3), CLUSTER)


def test_a_cluster_is_priced_whole_against_the_orders_max() -> None:
    two_nodes = replace(SINGLE, nodes=2, max_price_per_hour=Decimal("80.00"))
    assert matches(two_nodes, CLUSTER, CLUSTER.price_per_hour)
    cheaper = replace(two_nodes, max_price_per_hour=Decimal("79.99"))
    assert not matches(cheaper, CLUSTER, CLUSTER.price_per_hour)


@pytest.mark.parametrize(
    ("wanted", "offered", "ok"),
    [
        (INFINIBAND, INFINIBAND, True),
        (INFINIBAND, None, False),
        (None, INFINIBAND, True),
        (None, None, True),
    ],
)
def test_a_required_cluster_interconnect_must_be_the_offers(
    wanted: ClusterInterconnect | None, offered: ClusterInterconnect | None, ok: bool
) -> None:
    wants = replace(SINGLE, nodes=2, cluster_interconnect=wanted)
    assert fits(wants, replace(CLUSTER, cluster_interconnect=offered)) is ok


def test_the_interconnect_within_a_node_is_still_checked_on_a_cluster() -> None:
    wants = replace(SINGLE, nodes=2, interconnect=Interconnect.SXM)
    assert fits(wants, replace(CLUSTER, interconnect=Interconnect.SXM))
    assert not fits(wants, replace(CLUSTER, interconnect=Interconnect.PCIE))


def _row(**columns: object) -> SimpleNamespace:
    base = {
        "id": "ord_a",
        "created_at": T0,
        "providers": ["verda"],
        "gpu_model": "B200",
        "gpu_count": 8,
        "max_price_per_hour": Decimal("100.00"),
        "regions": None,
        "min_disk_gb": None,
        "interconnect": None,
        "account_id": "acct_a",
        "nodes": 1,
        "cluster_interconnect": None,
        "startup_script_bytes": None,
        "image": None,
        "max_total_usd": None,
    }
    return SimpleNamespace(**(base | columns))


def test_an_order_row_wants_its_nodes_and_their_fabric() -> None:
    wants = wants_of(_row(), able=Abilities())
    assert (wants.nodes, wants.cluster_interconnect) == (1, None)
    assert wants.machine == MachineKey("B200", 8)
    clustered = wants_of(_row(nodes=2, cluster_interconnect="infiniband"), able=Abilities())
    assert (clustered.nodes, clustered.cluster_interconnect) == (2, INFINIBAND)


def test_an_order_with_a_start_up_script_fits_only_offers_of_providers_that_run_one() -> None:
    row = _row(providers=["runs", "cannot"], startup_script_bytes=12)
    wants = wants_of(row, able=Abilities(script_runners=frozenset({"runs"})))
    assert (wants.providers, wants.needs_startup_script) == (frozenset({"runs"}), True)
    at_runner = replace(MACHINE, provider=Provider("runs"))
    assert fits(wants, at_runner)
    assert not fits(wants, replace(MACHINE, provider=Provider("cannot")))
    # Positive control: without a script, the other provider's offer fits as well.
    plain = wants_of(
        _row(providers=["runs", "cannot"]), able=Abilities(script_runners=frozenset({"runs"}))
    )
    assert not plain.needs_startup_script
    assert fits(plain, replace(MACHINE, provider=Provider("cannot")))


def test_an_order_naming_an_image_fits_only_offers_of_providers_that_choose_one() -> None:
    able = Abilities(image_choosers=frozenset({"chooses"}))
    wants = wants_of(_row(providers=["chooses", "stock"], image="os-13"), able=able)
    assert wants.providers == frozenset({"chooses"})
    assert fits(wants, replace(MACHINE, provider=Provider("chooses")))
    assert not fits(wants, replace(MACHINE, provider=Provider("stock")))
    # Positive control: without an image, the stock-image provider's offer fits as well.
    plain = wants_of(_row(providers=["chooses", "stock"]), able=able)
    assert fits(plain, replace(MACHINE, provider=Provider("stock")))


BOOTS = Boots(
    images=(("os-12.8", 570), ("os-13", 580), ("os-minimal", None)),
    aliases={"id-13": "os-13"},
    configured="os-12.8",
    gpu_min_driver=570,
)


def test_the_image_a_machine_boots_is_the_configured_one_unless_a_driver_is_needed() -> None:
    assert BOOTS.choose() == "os-12.8"
    assert BOOTS.choose(580) == "os-13"  # a serve script needs R580
    assert BOOTS.choose(590) is None
    # A driver the GPU needs is never guessed: an image that does not say its driver is
    # chosen only where nothing is needed.
    minimal = Boots(images=(("os-minimal", None),))
    assert minimal.choose() == "os-minimal"
    assert replace(minimal, gpu_min_driver=570).choose() is None
    assert Boots(images=()).choose() is None


def test_an_order_fits_only_offers_whose_machine_boots_its_image_and_driver() -> None:
    offer = replace(MACHINE, boots=BOOTS)
    serving = replace(SINGLE, min_driver=580)
    assert fits(serving, offer) and fits(replace(serving, image="id-13"), offer)
    assert not fits(replace(serving, image="os-12.8"), offer)  # R570: the script stops
    assert not fits(replace(serving, image="os-minimal"), offer)  # its driver is not known
    assert not fits(replace(SINGLE, image="os-12.4"), offer)  # not listed for this machine
    assert not fits(serving, replace(offer, boots=replace(BOOTS, images=(("os-12.8", 570),))))
    assert not fits(SINGLE, replace(offer, boots=Boots(images=())))  # nothing boots it
    # Where the offer's images are not known, a named image is left to the create, a needed
    # driver is not; and an order that needs neither fits as before (positive controls).
    assert fits(replace(SINGLE, image="os-12.4"), MACHINE)
    assert not fits(serving, MACHINE)
    assert fits(SINGLE, MACHINE) and fits(SINGLE, offer)


def test_an_order_serving_a_model_wants_an_r580_driver() -> None:
    assert wants_of(_row(serve_engine="vllm"), able=Abilities()).min_driver == 580
    assert wants_of(_row(), able=Abilities()).min_driver is None
    assert wants_of(_row(image="os-13"), able=Abilities()).image == "os-13"


def test_every_alternative_of_an_order_keeps_its_first_hour_within_the_orders_total() -> None:
    shapes = [
        {"gpu_model": "H100", "gpu_count": 1, "providers": ["verda"], "max_price_per_hour": "3"},
        {"gpu_model": "B300", "gpu_count": 8, "providers": ["verda"], "max_price_per_hour": "50"},
    ]
    row = _row(alternatives=shapes, max_total_usd=Decimal("3.00"))
    small, large = all_wants_of(row, able=Abilities())
    assert (small.first_hour_cap, large.first_hour_cap) == (Decimal("3.00"), Decimal("3.00"))
    unlimited = all_wants_of(_row(alternatives=shapes), able=Abilities())
    assert [w.first_hour_cap for w in unlimited] == [Decimal("3"), Decimal("50")]
    b300 = replace(MACHINE, gpu_model="B300", price_per_hour=Decimal("45.00"))
    assert matches(unlimited[1], b300, b300.price_per_hour)  # control: without the limit
    assert not matches(large, b300, b300.price_per_hour)
