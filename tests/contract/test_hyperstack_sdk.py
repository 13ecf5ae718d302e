"""Hyperstack's official SDK (generated from its OpenAPI spec) against the simulator.

The SDK validates every response with strict pydantic models, so a missing field, a field of
the wrong type or a wrong envelope in the simulator fails these tests.
"""

import importlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.clock import FakeClock
from tests.waiting import eventually_sync

# Typed as Any: the SDK's models make every field Optional and its package exports nothing
# explicitly; what this test relies on is the SDK's validation at run time, not its types.
hyperstack: Any = importlib.import_module("hyperstack")
ApiException = hyperstack.exceptions.ApiException
NotFoundException = hyperstack.exceptions.NotFoundException
UnauthorizedException = hyperstack.exceptions.UnauthorizedException

IMAGE = "Ubuntu Server 22.04 LTS R535 CUDA 12.2"
PUBLIC_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB5cnVsqeu6woWI8fLxtwtQqatcnRNQyYFRM/QGmv8As sdk"


# The simulators are reset before each test, with quick boots.
pytestmark = pytest.mark.usefixtures("sim_sync")


def sim(hyperstack_url: str, method: str, path: str, body: Any = None) -> Any:
    return httpx.request(method, f"{hyperstack_url}/_sim/{path}", json=body).json()


@pytest.fixture
def api(hyperstack_url: str) -> Iterator[Any]:
    config = hyperstack.Configuration(host=f"{hyperstack_url}/v1", api_key={"apiKey": "sim-key"})
    with hyperstack.ApiClient(config) as client:
        yield client


def test_catalogue_reads_parse(hyperstack_url: str, api: Any) -> None:
    sim(hyperstack_url, "PUT", "stock", {"sku": "n3-H100x8", "region": "CANADA-1", "quantity": 3})
    regions = hyperstack.RegionApi(api).list_regions()
    assert {r.name for r in regions.regions} == {"CANADA-1", "NORWAY-1", "US-1"}
    gpus = hyperstack.GpuApi(api).list_gpus()
    assert "H100-80G-PCIe" in {g.name for g in gpus.gpu_list}

    groups = hyperstack.FlavorApi(api).list_flavors(region="CANADA-1").data
    flavors = {f.name: f for g in groups for f in g.flavors}
    assert {g.region_name for g in groups} == {"CANADA-1"}
    h100 = flavors["n3-H100x8"]
    assert (h100.gpu, h100.gpu_count, h100.stock_available) == ("H100-80G-PCIe", 8, True)
    assert flavors["n3-H100x1"].stock_available is False

    stocks = hyperstack.StockApi(api).get_gpu_stock().stocks
    canada = next(s for s in stocks if s.region == "CANADA-1")
    assert canada.stock_type == "GPU"
    model = next(m for m in canada.models if m.model == "H100-80G-PCIe")
    assert (model.available, model.configurations.var_8x) == ("10+", 3)

    prices = {p.name: p.value for p in hyperstack.PricebookApi(api).get_pricebook()}
    assert prices["H100-80G-PCIe"] == pytest.approx(2.40)

    images = hyperstack.ImageApi(api).list_images(region="CANADA-1").images
    assert IMAGE in {i.name for group in images for i in group.images}

    credit = hyperstack.CreditApi(api).get_user_credit().data
    assert credit.credit == pytest.approx(10000) and credit.can_create_instance is True


def test_create_get_list_and_delete_a_vm(
    hyperstack_url: str, api: Any, sim_clock: FakeClock
) -> None:
    sim(hyperstack_url, "PUT", "stock", {"sku": "n3-L40x1", "region": "NORWAY-1", "quantity": 1})
    environment = hyperstack.EnvironmentApi(api).create_environment(
        hyperstack.CreateEnvironment(name="sdk-norway-1", region="NORWAY-1")
    )
    assert environment.environment.region == "NORWAY-1"
    keypair = hyperstack.KeypairApi(api).import_key_pair(
        hyperstack.ImportKeypairPayload(
            name="sdk-key", environment_name="sdk-norway-1", public_key=PUBLIC_KEY
        )
    )
    assert keypair.keypair.fingerprint
    assert "sdk-key" in {k.name for k in hyperstack.KeypairApi(api).list_key_pairs().keypairs}
    listed = hyperstack.EnvironmentApi(api).list_environments()
    assert "sdk-norway-1" in {e.name for e in listed.environments}

    vms = hyperstack.VirtualMachineApi(api)
    created = vms.create_vms(
        hyperstack.CreateInstancesPayload(
            name="ap-sdk-1",
            environment_name="sdk-norway-1",
            flavor_name="n3-L40x1",
            key_name="sdk-key",
            image_name=IMAGE,
            count=1,
            assign_floating_ip=True,
            labels=["ap-order-sdk"],
            security_rules=[
                hyperstack.CreateSecurityRulePayload(
                    direction="ingress",
                    protocol="tcp",
                    ethertype="IPv4",
                    remote_ip_prefix="0.0.0.0/0",
                    port_range_min=22,
                    port_range_max=22,
                )
            ],
        )
    )
    instance = created.instances[0]
    assert (instance.name, instance.status, instance.labels) == (
        "ap-sdk-1",
        "CREATING",
        ["ap-order-sdk"],
    )
    assert instance.security_rules[0].port_range_min == 22
    with pytest.raises(ApiException) as still_creating:  # Hyperstack refuses it until created
        vms.delete_vm(instance.id)
    assert still_creating.value.status == 400
    assert "being created" in still_creating.value.data.message

    def active() -> Any:
        got = vms.get_vm(instance.id).instance
        return got if got.status == "ACTIVE" and got.floating_ip else None

    got = eventually_sync(active, clock=sim_clock)  # booted in simulated time
    assert got.environment.region == "NORWAY-1" and got.flavor.name == "n3-L40x1"

    found = vms.list_vms(search="ap-sdk", page=1, page_size=10)
    assert [i.id for i in found.instances] == [instance.id]
    assert (found.count, found.page, found.page_size) == (1, 1, 10)

    assert vms.delete_vm(instance.id).message == "Instance is being deleted."
    with pytest.raises(NotFoundException):  # read until the VM is gone
        eventually_sync(lambda: vms.get_vm(instance.id) is None, interval=0.02, clock=sim_clock)


def test_errors_parse_as_the_sdk_error_model(hyperstack_url: str, api: Any) -> None:
    vms = hyperstack.VirtualMachineApi(api)
    with pytest.raises(ApiException) as out_of_stock:
        vms.create_vms(
            hyperstack.CreateInstancesPayload(
                name="ap-sdk-2",
                environment_name="default-CANADA-1",
                flavor_name="n3-H100x8",
                key_name="autoprovision",
                image_name=IMAGE,
                count=1,
            )
        )
    assert out_of_stock.value.status == 409
    assert out_of_stock.value.data.error_reason == "conflict"

    with pytest.raises(NotFoundException) as missing:
        vms.get_vm(999)
    assert missing.value.data.error_reason == "not_found"

    wrong = hyperstack.Configuration(host=f"{hyperstack_url}/v1", api_key={"apiKey": "nope"})
    with hyperstack.ApiClient(wrong) as client, pytest.raises(UnauthorizedException) as refused:
        hyperstack.FlavorApi(client).list_flavors()
    assert refused.value.data.error_reason == "unauthorized"


def test_the_sdk_refuses_pricebook_values_sent_as_strings(hyperstack_url: str, api: Any) -> None:
    """Why the simulator sends numbers by default: the spec says number, and the SDK is strict."""
    sim(hyperstack_url, "PUT", "config", {"pricebook_string_values": True})
    with pytest.raises(ValueError):
        hyperstack.PricebookApi(api).get_pricebook()
