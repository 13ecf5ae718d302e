"""The official `verda` Python SDK against the simulated Verda: its own objects must parse.

The SDK is synchronous (`requests`), so the simulator runs on a real socket in a thread.
"""

import time
import uuid
from collections.abc import Iterator

import httpx
import pytest
from verda import VerdaClient
from verda.cluster_types import ClusterType
from verda.clusters import Cluster, ClusterWorkerNode
from verda.constants import ClusterStatus
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
CLUSTER_IMAGE = "ubuntu-24.04-cuda-13.0-cluster"
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
    # No volume_ids: the OS volume goes to the trash (the document's changelog, 2026-02;
    # `delete_permanently` applies to the volumes named only, as the SDK's docstring says).
    assert vm["os_volume_status"] == "trash"


def test_the_sdks_create_is_billed_the_fixed_price(
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
    shown = verda.instances.get_by_id(created.id)  # DYNAMIC_PRICE is removed (the document)
    assert (shown.pricing, shown.price_per_hour) == ("FIXED_PRICE", 45.52)


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
    assert vm["status"] in ("deleting", "discontinued") and vm["os_volume_status"] == "detached"


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
    assert [(s.id, s.name) for s in verda.startup_scripts.get()] == [  # newest first
        (other.id, "other"),
        (made.id, "boot"),
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


def test_cluster_types_parse_into_the_sdks_objects(verda: VerdaClient) -> None:
    types = {t.cluster_type: t for t in verda.cluster_types.get()}
    b200 = types["16B200"]
    assert isinstance(b200, ClusterType)
    assert (b200.price_per_hour, b200.model, b200.currency) == (71.84, "B200", "usd")
    assert b200.gpu["number_of_gpus"] == 16 and b200.node_details[0] == "2x 8 GPU nodes"
    assert types["32B200"].price_per_hour == 143.68  # the price of the whole cluster


def test_cluster_availability_and_images(verda: VerdaClient, control: httpx.Client) -> None:
    put_stock(control, "16B200", "FIN-01", 1)
    put_stock(control, "8B200.240V", "FIN-01", 1)  # an instance: not a cluster in stock
    assert verda.clusters.get_availabilities(location_code="FIN-01") == ["16B200"]
    assert verda.clusters.is_available("16B200", location_code="FIN-01") is True
    assert verda.clusters.is_available("16B200", location_code="FIN-03") is False
    assert verda.clusters.is_available("16B200") is True
    assert (
        "16B200"
        not in verda.instances.get_availabilities(location_code="FIN-01")[0]["availabilities"]
    )
    assert CLUSTER_IMAGE in verda.clusters.get_cluster_images("16B200")
    assert IMAGE not in verda.clusters.get_cluster_images()


def test_create_get_list_and_delete_a_cluster(verda: VerdaClient, control: httpx.Client) -> None:
    control.put("/_sim/config", json={"boot_seconds": 60}).raise_for_status()
    put_stock(control, "16B200", "FIN-01", 1)
    key = verda.ssh_keys.create("contract", SSH_KEY)
    created = verda.clusters.create(
        cluster_type="16B200",
        image=CLUSTER_IMAGE,
        hostname="ap-cluster-1",
        description="contract test",
        ssh_key_ids=[key.id],
        location="FIN-01",
        shared_volume_name="ap-cluster-home",
        shared_volume_size=1000,
        wait_for_status=ClusterStatus.ORDERED,  # the SDK's wait, answered on its first look
    )
    assert isinstance(created, Cluster) and created.status == "ordered"
    assert (created.hostname, created.location, created.cluster_type) == (
        "ap-cluster-1",
        "FIN-01",
        "16B200",
    )
    assert created.ssh_key_ids == [key.id] and created.image == CLUSTER_IMAGE
    (volume,) = created.shared_volumes
    assert (volume.name, volume.size_in_gigabytes) == ("ap-cluster-home", 1000)
    assert len(created.worker_nodes) == 2 and created.ip is None
    assert all(isinstance(node, ClusterWorkerNode) for node in created.worker_nodes)
    control.put("/_sim/config", json={"boot_seconds": 0}).raise_for_status()
    running = verda.clusters.get_by_id(created.id)
    assert running.status == "running" and running.ip is not None
    assert [(n.id, n.status) for n in running.worker_nodes] == [
        (n.id, "running") for n in created.worker_nodes
    ]
    assert all(n.private_ip for n in running.worker_nodes)
    assert [c.id for c in verda.clusters.get()] == [created.id]
    assert [c.id for c in verda.clusters.get(status="running")] == [created.id]
    verda.clusters.delete(created.id)  # PUT /clusters {"actions": [{"id", "action"}]}
    assert verda.clusters.get_by_id(created.id).status == "discontinued"
    assert verda.clusters.get() == []
    (create,) = control.get("/_sim/creates").json()
    assert (create["kind"], create["outcome"], create["vm_id"]) == (
        "cluster",
        "created",
        created.id,
    )
    assert control.get("/_sim/vms").json() == []  # a cluster is not an instance


def test_cluster_errors_are_the_sdks_api_exceptions(
    verda: VerdaClient, control: httpx.Client
) -> None:
    with pytest.raises(APIException) as no_stock:
        verda.clusters.create("16B200", CLUSTER_IMAGE, "ap-cluster-2", location="FIN-01")
    assert no_stock.value.code == verda.constants.error_codes.SERVICE_UNAVAILABLE
    put_stock(control, "16B200", "FIN-01", 1)
    with pytest.raises(APIException) as wrong_image:
        verda.clusters.create("16B200", IMAGE, "ap-cluster-2", location="FIN-01")
    assert wrong_image.value.code == verda.constants.error_codes.INVALID_REQUEST
    with pytest.raises(APIException) as unknown:
        verda.clusters.delete(str(uuid.uuid4()))
    assert unknown.value.code == verda.constants.error_codes.NOT_FOUND
    made = verda.clusters.create(
        "16B200", CLUSTER_IMAGE, "ap-cluster-2", location="FIN-01", wait_for_status=None
    )
    assert made.shared_volumes[0].size_in_gigabytes == 30000  # the SDK's default, sent
