"""Hyperstack's parse functions on answers recorded from the simulator
(tests/providers/hyperstack/)."""

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from app.core.catalogue import Interconnect, Provider
from app.providers.base import StockForecast, Unavailable, VMState
from app.providers.hyperstack import parse

RECORDED = Path(__file__).parent / "hyperstack"


def recorded(name: str) -> Any:
    return json.loads((RECORDED / f"{name}.json").read_text())


def offers() -> dict[str, Any]:
    prices = parse.price_list(recorded("pricebook"))
    slots = parse.stock_slots(recorded("stocks"))
    made = (parse.to_offer(row, prices, slots) for row in parse.flavor_rows(recorded("flavors")))
    return {offer.sku: offer for offer in made if offer is not None}


def test_offers_are_flavors_in_stock_priced_per_gpu_times_count_and_the_public_ip() -> None:
    found = offers()
    assert set(found) == {"n3-H100x1", "n3-H100x8", "n3-RTX-A6000x1"}  # no k8s, no CPU-only
    h100 = found["n3-H100x8"]
    assert (h100.provider, h100.region, h100.gpu_model, h100.gpu_count) == (
        Provider("hyperstack"),
        "CANADA-1",
        "H100",
        8,
    )
    # 8 x $2.40 and the `PublicIP` row ($0.00672/h): we create every VM with a floating IP
    assert (h100.price_per_hour, h100.interconnect) == (Decimal("19.20672"), Interconnect.PCIE)
    assert (h100.vcpus, h100.ram_gb, h100.disk_gb, h100.disk_fixed) == (224, 1440, 100, True)
    assert (h100.available, found["n3-RTX-A6000x1"].available) == (3, 12)


def test_without_a_public_ip_row_the_ip_adds_nothing() -> None:
    prices = parse.price_list(recorded("pricebook"))
    assert prices.pop("PublicIP") == Decimal("0.00672")
    rows = parse.flavor_rows(recorded("flavors"))
    made = {o.sku: o for row in rows if (o := parse.to_offer(row, prices, {})) is not None}
    assert made["n3-H100x8"].price_per_hour == Decimal("19.2")


def test_a_gpu_without_a_price_is_not_offered() -> None:
    prices = parse.price_list(recorded("pricebook"))
    del prices["H100-80G-PCIe"]
    rows = parse.flavor_rows(recorded("flavors"))
    made = [parse.to_offer(row, prices, {}) for row in rows]
    assert {o.sku for o in made if o is not None} == {"n3-RTX-A6000x1"}


def test_a_created_vm_and_the_same_vm_running() -> None:
    created = parse.created_vm(recorded("create_vm"))
    running = parse.instance(recorded("vm_active"))
    assert created is not None and created.id == running.id
    assert (created.state, created.provider_status) == (VMState.PENDING, "CREATING")
    assert (running.state, running.ip) == (VMState.RUNNING, "203.0.113.1")
    assert (running.name, running.region, running.sku, running.tags) == (
        "ap-01jd3xk9-1",
        "CANADA-1",
        "n3-H100x1",
        ("ap-order-01jd3xk9",),
    )
    listed = [parse.to_vm(row) for row in parse.listed(recorded("vms"), "instances")]
    assert [vm.id for vm in listed if vm is not None] == [running.id]


def test_ids_that_are_not_integers_make_no_vm() -> None:
    for bad in ("abc", True, None, "12a"):
        assert parse.to_vm({**recorded("vm_active")["instance"], "id": bad}) is None
    assert parse.created_vm({"instances": []}) is None


def test_environments_and_key_pairs_by_exact_name() -> None:
    environments = recorded("environments")
    assert parse.environment_region(environments, "autoprovision-canada-1") == "CANADA-1"
    assert parse.environment_region(environments, "autoprovision-canada") is None
    named = parse.keypairs_named(recorded("keypairs"), "autoprovision")
    assert [parse.keypair_environment(k) for k in named] == [
        "default-CANADA-1",
        "autoprovision-canada-1",
    ]
    assert (parse.keypair_public_key(named) or "").endswith("operator")
    assert parse.keypair_public_key([]) is None


def test_credit_and_whether_it_pays_for_a_machine() -> None:
    credit = recorded("credit")
    assert parse.credit(credit) == Decimal("10000.0")
    assert not parse.cannot_pay(credit, Decimal("19.20"))
    assert parse.cannot_pay(credit, Decimal("10000.01"))
    refused = {"data": {**credit["data"], "can_create_instance": False}}
    assert parse.cannot_pay(refused, Decimal("1"))


def test_answers_of_the_wrong_shape_are_unavailable() -> None:
    for read, body in (
        (parse.price_list, {"data": []}),
        (parse.flavor_rows, []),
        (parse.instance, {"instance": {"id": "x"}}),
        (parse.credit, {"data": {}}),
        (lambda b: parse.listed(b, "instances"), {"instances": None}),
    ):
        with pytest.raises(Unavailable):
            read(body)


def test_no_planned_stock_is_no_forecast() -> None:
    assert parse.forecasts(recorded("stocks")) == []  # every `planned_*` null, as recorded


def test_a_forecast_is_kept_in_hyperstacks_words_and_odd_ones_never_fail() -> None:
    def model(name: Any, week: Any = None, month: Any = None, **extra: Any) -> Any:
        return {"model": name, "planned_7_days": week, "planned_30_days": month, **extra}

    body = {
        "stocks": [
            {
                "region": "CANADA-1",
                "models": [
                    model("H100-80G-PCIe", "10+", "25+", planned_100_days="200+"),
                    model("L40", None, "soon"),  # a string no one has seen: kept as it is
                    model("RTX-A6000", 12, True),  # a number as its digits; not text: nothing
                    model("A100-80G-PCIe", "", ["10+"]),  # nothing said
                    model("H100-80G-PCIe-NVLink", None, None, planned_100_days="100+"),
                    model("Quantum-9000", "10+", "25+"),  # a GPU the catalogue does not know
                    model(None, "10+"),
                    "not a model",
                ],
            },
            {"region": "US-1", "models": [model("B300-SXM", "9" * 60)]},
            {"region": None, "models": [model("L40", "10+")]},
            {"region": "NORWAY-1", "models": None},
            "not a region",
        ]
    }
    hyperstack = Provider("hyperstack")
    assert parse.forecasts(body) == [
        StockForecast(
            hyperstack, "CANADA-1", "H100-80G-PCIe", "H100", Interconnect.PCIE, "10+", "25+"
        ),
        StockForecast(hyperstack, "CANADA-1", "L40", "L40", Interconnect.PCIE, None, "soon"),
        StockForecast(
            hyperstack, "CANADA-1", "RTX-A6000", "RTX-A6000", Interconnect.PCIE, "12", None
        ),
        StockForecast(hyperstack, "US-1", "B300-SXM", "B300", Interconnect.SXM, "9" * 40, None),
    ]
    odd: list[Any] = [None, [], {"stocks": None}, {"stocks": [{"region": "US-1"}]}]
    assert [parse.forecasts(body) for body in odd] == [[], [], [], []]
