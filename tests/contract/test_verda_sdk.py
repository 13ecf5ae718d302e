"""The official `verda` Python SDK against the simulated Verda: its own objects must parse.

The SDK is synchronous (`requests`), so the simulator runs on a real socket in a thread.
"""

import time
import uuid
from collections.abc import Iterator

import httpx
import pytest
from verda import VerdaClient
from verda.exceptions import APIException
from verda.images import Image
from verda.instance_types import InstanceType
from verda.instances import Instance
from verda.startup_scripts import StartupScript

from app.simulators.control import SimControlSync
from app.simulators.verda import VerdaSimulator
from tests.fixtures.simulators import ServedSimulators
from tests.waiting import eventually_sync

IMAGE = "ubuntu-24.04-cuda-12.8-open-docker"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGNvbnRyYWN0LXRlc3Qta2V5 sdk@test"


@pytest.fixture
def control(verda_url: str, sim_sync: SimControlSync) -> Iterator[httpx.Client]:
    """The simulated Verda's control API (`/_sim`), the simulators reset."""
    with httpx.Client(base_url=verda_url) as client:
        yield client


@pytest.fixture
def verda(verda_url: str, control: httpx.Client) -> VerdaClient:
    return VerdaClient("sim-client", "sim-secret", base_url=f"{verda_url}/v1")


def put_stock(control: httpx.Client, sku: str, region: str, quantity: int) -> None:
    body = {"sku": sku, "region": region, "quantity": quantity}
    control.put("/_sim/stock", json=body).raise_for_status()


def test_wrong_credentials_raise_the_sdks_api_exception(verda_url: str) -> None:
    with pytest.raises(APIException) as caught:
        VerdaClient("sim-client", "wrong", base_url=f"{verda_url}/v1")
    assert caught.value.code == "unauthorized_request"


def test_instance_types_parse_into_the_sdks_objects(verda: VerdaClient) -> None:
    types = {t.instance_type: t for t in verda.instance_types.get()}
    b300 = types["8B300.240V"]
    assert isinstance(b300, InstanceType)
    assert (b300.price_per_hour, b300.model, b300.currency) == (45.52, "B300", "usd")
    assert b300.gpu["number_of_gpus"] == 8 and b300.gpu_memory["size_in_gigabytes"] == 2144
    assert 0 < b300.spot_price_per_hour < b300.price_per_hour
    assert b300.serverless_price is not None
    assert types["1H100.80S.30V"].price_per_hour == 2.59


def test_availability_lists_and_single_type(verda: VerdaClient, control: httpx.Client) -> None:
    put_stock(control, "8B300.240V", "FIN-03", 2)
    every = verda.instances.get_availabilities(is_spot=False)
    by_location = {loc["location_code"]: loc["availabilities"] for loc in every}
    assert "8B300.240V" in by_location["FIN-03"]
    one = verda.instances.get_availabilities(location_code="FIN-03")
    assert [loc["location_code"] for loc in one] == ["FIN-03"]
    assert verda.instances.is_available("8B300.240V", location_code="FIN-03") is True
    assert verda.instances.is_available("8B300.240V", location_code="ICE-01") is False
    assert verda.instances.is_available("8B300.240V", is_spot=True) is False


def test_locations_images_and_ssh_keys(verda: VerdaClient) -> None:
    assert {loc["code"] for loc in verda.locations.get()} == {"FIN-01", "FIN-02", "FIN-03",
                                                                "ICE-01"}  # fmt: skip
    images = verda.images.get(instance_type="8B300.240V")
    assert all(isinstance(i, Image) for i in images)
    assert IMAGE in {i.image_type for i in images}
    key = verda.ssh_keys.create("contract", SSH_KEY)
    assert str(uuid.UUID(key.id)) == key.id
    assert [(k.id, k.public_key) for k in verda.ssh_keys.get()] == [(key.id, SSH_KEY)]
    assert verda.ssh_keys.get_by_id(key.id).name == "contract"


def test_create_get_list_and_delete_an_instance(verda: VerdaClient, control: httpx.Client) -> None:
    put_stock(control, "8B300.240V", "FIN-03", 1)
    key = verda.ssh_keys.create("contract", SSH_KEY)
    created = verda.instances.create(
        instance_type="8B300.240V",
        image=IMAGE,
        hostname="ap-contract-1",
        description="contract test",
        ssh_key_ids=[key.id],
        location="FIN-03",
        pricing="FIXED_PRICE",
    )
    assert isinstance(created, Instance)
    assert created.status in ("provisioning", "running")
    assert (created.hostname, created.location, created.instance_type) == (
        "ap-contract-1",
        "FIN-03",
        "8B300.240V",
    )
    assert created.ssh_key_ids == [key.id] and created.price_per_hour == 45.52
    current = eventually_sync(
        lambda: (shown := verda.instances.get_by_id(created.id)).status == "running" and shown
    )
    assert current.ip is not None and current.os_volume_id is not None
    assert [i.id for i in verda.instances.get()] == [created.id]
    assert [i.id for i in verda.instances.get(status="running")] == [created.id]
    verda.instances.action(created.id, "delete", delete_permanently=True)
    assert verda.instances.get_by_id(created.id).status in ("deleting", "discontinued")
    (vm,) = control.get("/_sim/vms").json()
    assert vm["os_volume_kept"] is False  # no volume_ids: the OS volume goes with it


def test_the_sdks_default_pricing_is_the_dynamic_price(
    verda: VerdaClient, control: httpx.Client
) -> None:
    put_stock(control, "8B300.240V", "FIN-03", 1)
    created = verda.instances.create(
        instance_type="8B300.240V",
        image=IMAGE,
        hostname="ap-contract-2",
        description="no pricing sent",
        location="FIN-03",
        wait_for_status=None,
    )
    shown = verda.instances.get_by_id(created.id)
    assert (shown.pricing, shown.price_per_hour) == ("DYNAMIC_PRICE", 56.9)


def test_deletes_the_sdk_sends_are_refused_while_provisioning_and_keep_volumes_it_names(
    verda: VerdaClient, control: httpx.Client
) -> None:
    control.put("/_sim/config", json={"boot_seconds": 60})
    put_stock(control, "8B300.240V", "FIN-03", 1)
    booting = verda.instances.create(
        instance_type="8B300.240V",
        image=IMAGE,
        hostname="ap-contract-3",
        description="delete while provisioning",
        location="FIN-03",
        pricing="FIXED_PRICE",
        wait_for_status=None,
    )
    with pytest.raises(APIException) as refused:
        verda.instances.action(booting.id, "delete")
    assert "provisioning" in refused.value.message
    control.put("/_sim/config", json={"boot_seconds": 0})
    verda.instances.action(booting.id, "delete", volume_ids=[])  # keeps the OS volume
    (vm,) = control.get("/_sim/vms").json()
    assert vm["status"] in ("deleting", "discontinued") and vm["os_volume_kept"] is True


def test_ssh_keys_are_deleted_as_the_sdk_asks(verda: VerdaClient) -> None:
    first, second, third = (verda.ssh_keys.create(name, SSH_KEY) for name in ("a", "b", "c"))
    verda.ssh_keys.delete([first.id, second.id])  # DELETE /sshkeys {"keys": [...]}
    assert [k.id for k in verda.ssh_keys.get()] == [third.id]
    verda.ssh_keys.delete_by_id(third.id)
    assert verda.ssh_keys.get() == []
    with pytest.raises(APIException) as caught:
        verda.ssh_keys.delete([third.id])
    assert caught.value.code == verda.constants.error_codes.NOT_FOUND


def test_startup_scripts_round_trip(verda: VerdaClient) -> None:
    made = verda.startup_scripts.create("boot", "#!/bin/bash\necho hi\n")
    assert isinstance(made, StartupScript) and str(uuid.UUID(made.id)) == made.id
    other = verda.startup_scripts.create("other", "#!/bin/sh\ntrue\n")
    assert [(s.id, s.name) for s in verda.startup_scripts.get()] == [
        (made.id, "boot"),
        (other.id, "other"),
    ]
    assert verda.startup_scripts.get_by_id(made.id).script == "#!/bin/bash\necho hi\n"
    verda.startup_scripts.delete([made.id])  # DELETE /scripts {"scripts": [...]}
    verda.startup_scripts.delete_by_id(other.id)
    assert verda.startup_scripts.get() == []
    with pytest.raises(APIException) as caught:
        verda.startup_scripts.get_by_id(made.id)
    assert caught.value.code == verda.constants.error_codes.NOT_FOUND


def test_a_create_with_an_image_id_and_a_startup_script(
    verda: VerdaClient, control: httpx.Client
) -> None:
    """What dstack sends for a V100: the hard-coded image id and a script made just before."""
    put_stock(control, "1V100.6V", "FIN-01", 1)
    key = verda.ssh_keys.create("dstack", SSH_KEY)
    script = verda.startup_scripts.create("dstack-boot", "#!/bin/bash\ntrue\n")
    created = verda.instances.create(
        instance_type="1V100.6V",
        image="2088da25-bb0d-41cc-a191-dccae45d96fd",  # Ubuntu 22.04 + CUDA 12.0 + Docker
        hostname="dstack-v100",
        description="dstack",
        ssh_key_ids=[key.id],
        location="FIN-01",
        startup_script_id=script.id,
    )
    assert created.image == "ubuntu-22.04-cuda-12.0-docker"
    assert created.startup_script_id == script.id
    with pytest.raises(APIException) as caught:
        verda.instances.create(
            instance_type="1V100.6V",
            image="2404f580-1300-1111-82b3-f199fb9b701b",  # Ubuntu 24.04 + CUDA 13.0 Open
            hostname="dstack-v100-2",
            description="dstack",
            location="FIN-01",
            startup_script_id=str(uuid.uuid4()),
        )
    assert caught.value.code == verda.constants.error_codes.INVALID_REQUEST


def test_no_capacity_is_the_sdks_service_unavailable(verda: VerdaClient) -> None:
    with pytest.raises(APIException) as caught:
        verda.instances.create(
            instance_type="8H200.141S.176V",
            image=IMAGE,
            hostname="ap-contract-2",
            description="",
            location="FIN-01",
        )
    assert caught.value.code == verda.constants.error_codes.SERVICE_UNAVAILABLE


def test_balance(verda: VerdaClient, control: httpx.Client) -> None:
    control.put("/_sim/config", json={"balance": "50.5"}).raise_for_status()
    balance = verda.balance.get()
    assert (balance.amount, balance.currency) == (50.5, "usd")


def test_an_expired_token_is_refreshed_by_the_sdk(
    verda_url: str, control: httpx.Client, served_simulators: ServedSimulators
) -> None:
    control.put("/_sim/config", json={"token_ttl_seconds": 0.2}).raise_for_status()
    verda = VerdaClient("sim-client", "sim-secret", base_url=f"{verda_url}/v1")
    simulator = served_simulators.simulators["verda"]
    assert isinstance(simulator, VerdaSimulator)
    # Tokens expire on the real clock (the simulator's clock is for VMs): until the SDK's has.
    eventually_sync(
        lambda: all(expiry <= time.monotonic() for expiry in simulator.access_tokens.values())
    )
    assert verda.balance.get().currency == "usd"
