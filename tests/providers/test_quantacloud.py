"""The QuantaCloud adapter against the QuantaCloud simulator on a real socket."""

import base64
import gc
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from pydantic import SecretStr

from app.core.catalogue import Interconnect, Provider
from app.core.market import OfferKey
from app.providers.base import (
    VM,
    AuthFailed,
    NoCapacity,
    Offer,
    OutcomeUnknown,
    ProviderOutOfFunds,
    RateLimited,
    Refused,
    Rejected,
    Unavailable,
    VMState,
)
from app.providers.quantacloud import QuantaCloudAdapter
from app.simulators.control import SimControlSync
from app.support.security import ssh_key_fingerprint
from tests.waiting import eventually, vm_reaches

B300 = ("b300-sxm-x8", "us-east-1")
RTX = ("rtx-pro-6000-blackwell-x1", "us-east-1")
H100_PCIE = ("h100-pcie-x2", "us-midwest-1")
MIG = ("rtx-pro-6000-blackwell-mig-48gb-x1", "us-east-1")
TIMEOUT = 1.0  # room for a loaded machine to connect; the faults below outlast it
PUBLIC_KEY = "ssh-ed25519 " + base64.b64encode(b"\x00\x00\x00\x0bssh-ed25519" + b"k" * 32).decode()
OTHER_KEY = "ssh-ed25519 " + base64.b64encode(b"\x00\x00\x00\x0bssh-ed25519" + b"o" * 32).decode()


# The simulators are reset before each test, with quick boots.
pytestmark = pytest.mark.usefixtures("sim_sync")


@pytest.fixture
async def control(
    quantacloud_url: str, sim_sync: SimControlSync
) -> AsyncIterator[httpx.AsyncClient]:
    """The simulator's control API (`/_sim`), every simulator reset first (before a class's
    autouse fixture sets it up)."""
    async with httpx.AsyncClient(base_url=quantacloud_url) as client:
        yield client


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client


def make_adapter(
    http: httpx.AsyncClient, quantacloud_url: str, key: str = "sim-key"
) -> QuantaCloudAdapter:
    return QuantaCloudAdapter(
        http,
        base_url=f"{quantacloud_url}/api/v1",
        api_key=SecretStr(key),
        timeout=TIMEOUT,
        create_timeout=TIMEOUT,
    )


@pytest.fixture
def adapter(http: httpx.AsyncClient, quantacloud_url: str) -> QuantaCloudAdapter:
    return make_adapter(http, quantacloud_url)


async def stock(control: httpx.AsyncClient, kind: tuple[str, str], quantity: int = 1) -> None:
    sku, region = kind
    response = await control.put(
        "/_sim/stock", json={"sku": sku, "region": region, "quantity": quantity}
    )
    assert response.status_code == 200, response.text


async def fault(control: httpx.AsyncClient, kind: str, **extra: Any) -> None:
    assert (await control.post("/_sim/faults", json={"kind": kind, **extra})).status_code == 201


async def offer_of(adapter: QuantaCloudAdapter, kind: tuple[str, str]) -> Offer:
    offers = {o.key: o for o in await adapter.fetch_offers()}
    return offers[OfferKey("quantacloud", kind[1], kind[0])]


async def sim_vms(control: httpx.AsyncClient) -> list[dict[str, Any]]:
    body: list[dict[str, Any]] = (await control.get("/_sim/vms")).json()
    return body


async def account_keys(control: httpx.AsyncClient) -> list[dict[str, Any]]:
    listed = await control.get("/api/v1/users/me/ssh-keys", headers={"X-API-Key": "sim-key"})
    body: list[dict[str, Any]] = listed.json()
    return body


async def keys_on(control: httpx.AsyncClient, vm: VM) -> list[str]:
    """The fingerprints of the keys QuantaCloud put on this VM: who can log in to it."""
    (row,) = [row for row in await sim_vms(control) if row["id"] == vm.id]
    keys: list[str] = row["ssh_keys"]
    return keys


def since() -> datetime:
    return datetime.now(UTC)


class TestFetchOffers:
    async def test_offers_are_normalized(
        self, adapter: QuantaCloudAdapter, control: httpx.AsyncClient
    ) -> None:
        for kind in (B300, RTX, H100_PCIE, MIG):
            await stock(control, kind, 2)
        offers = {o.sku: o for o in await adapter.fetch_offers()}
        wire = (await control.get("/api/v1/offers")).json()["offers"]
        b300_id = next(o["id"] for o in wire if o["gpu"]["slug"] == "b300-sxm")
        assert offers["b300-sxm-x8"] == Offer(
            provider=Provider("quantacloud"),
            region="us-east-1",
            sku="b300-sxm-x8",
            gpu_model="B300",
            gpu_count=8,
            price_per_hour=Decimal("45.52"),
            interconnect=Interconnect.SXM,
            vcpus=224,
            ram_gb=2048,
            disk_gb=8000,
            disk_fixed=True,
            available=None,
            offer_id=b300_id,
        )
        rtx = offers["rtx-pro-6000-blackwell-x1"]
        assert (rtx.gpu_model, rtx.price_per_hour, rtx.disk_gb) == (
            "RTX-PRO-6000",
            Decimal("2.39"),
            725,
        )
        assert rtx.interconnect == Interconnect.PCIE
        pcie = offers["h100-pcie-x2"]
        assert (pcie.gpu_model, pcie.gpu_count, pcie.region) == ("H100", 2, "us-midwest-1")
        assert set(offers) == {"b300-sxm-x8", "rtx-pro-6000-blackwell-x1", "h100-pcie-x2"}

    async def test_every_page_is_read(
        self, adapter: QuantaCloudAdapter, control: httpx.AsyncClient
    ) -> None:
        catalog = (await control.get("/_sim/catalog")).json()
        for entry in catalog:
            await stock(control, (entry["sku"], entry["region"]))
        adapter.page_size = 7
        offers = await adapter.fetch_offers()
        whole_gpus = [e for e in catalog if "-mig-" not in e["sku"]]
        assert len(offers) == len(whole_gpus) == 76
        assert {(o.sku, o.region) for o in offers} == {(e["sku"], e["region"]) for e in whole_gpus}
        assert all(o.price_per_hour > 0 and o.offer_id for o in offers)

    async def test_nothing_in_stock_is_no_offers(self, adapter: QuantaCloudAdapter) -> None:
        assert await adapter.fetch_offers() == []


class TestDeploymentLifecycle:
    async def test_create_get_find_delete(
        self, adapter: QuantaCloudAdapter, control: httpx.AsyncClient
    ) -> None:
        await stock(control, B300, 2)
        offer = await offer_of(adapter, B300)
        before = since()
        vm = await adapter.create_vm(
            offer, name="ap-01jd3x-1", tag="ap-order-01jd3x", ssh_public_key=None
        )
        assert (vm.provider, vm.state, vm.provider_status, vm.name) == (
            Provider("quantacloud"),
            VMState.PENDING,
            "provisioning",
            None,
        )
        assert (vm.region, vm.sku) == ("us-east-1", "b300-sxm-x8")
        (made,) = await sim_vms(control)
        assert made["id"] == vm.id and made["offer_id"] == offer.offer_id

        running = await vm_reaches(adapter, vm.id, VMState.RUNNING)
        assert running.ip == made["ip"] and running.sku == "b300-sxm-x8"
        assert running.created_at is not None and running.created_at >= before - timedelta(
            seconds=1
        )
        found = await adapter.find_vms(name="ap-01jd3x-1", tag="t", offer=offer, not_before=before)
        assert [v.id for v in found] == [vm.id]

        await adapter.delete_vm(vm.id)
        stopping = await adapter.get_vm(vm.id)
        assert stopping is not None and stopping.state in (VMState.DELETING, VMState.GONE)
        await adapter.delete_vm(vm.id)  # already stopping: fine
        await vm_reaches(adapter, vm.id, VMState.GONE)
        await adapter.delete_vm(vm.id)  # already gone: fine
        assert await adapter.find_vms(name="n", tag="t", offer=offer, not_before=before) == []

    async def test_balance_is_the_account_balance_less_the_first_hour(
        self, adapter: QuantaCloudAdapter, control: httpx.AsyncClient
    ) -> None:
        assert await adapter.balance() == Decimal("10000.000000")
        await stock(control, RTX)
        await adapter.create_vm(
            await offer_of(adapter, RTX), name="n", tag="t", ssh_public_key=None
        )
        assert await adapter.balance() == Decimal("9997.61")

    async def test_an_unknown_vm_is_none_and_deleting_it_is_fine(
        self, adapter: QuantaCloudAdapter
    ) -> None:
        assert await adapter.get_vm("dep_does_not_exist") is None
        await adapter.delete_vm("dep_does_not_exist")

    async def test_a_failed_vm_can_be_deleted(
        self, adapter: QuantaCloudAdapter, control: httpx.AsyncClient
    ) -> None:
        await stock(control, RTX)
        await fault(control, "fail_after_accept")
        vm = await adapter.create_vm(
            await offer_of(adapter, RTX), name="n", tag="t", ssh_public_key=None
        )
        assert vm.state == VMState.PENDING
        failed = await vm_reaches(adapter, vm.id, VMState.FAILED)
        assert failed.provider_status == "failed" and failed.ip is None
        await adapter.delete_vm(vm.id)  # "cannot stop" a failed deployment: already gone

    async def test_the_ssh_key_is_registered_once_and_reused(
        self, adapter: QuantaCloudAdapter, control: httpx.AsyncClient
    ) -> None:
        await stock(control, RTX, 2)
        for name in ("ap-a-1", "ap-b-1"):
            offer = await offer_of(adapter, RTX)
            await adapter.create_vm(offer, name=name, tag="t", ssh_public_key=PUBLIC_KEY)
        keys = (
            await control.get("/api/v1/users/me/ssh-keys", headers={"X-API-Key": "sim-key"})
        ).json()
        assert len(keys) == 1
        assert [vm["ssh_key_ids"] for vm in await sim_vms(control)] == [[keys[0]["id"]]] * 2

    async def test_an_unknown_status_is_unknown(
        self, adapter: QuantaCloudAdapter, control: httpx.AsyncClient
    ) -> None:
        await stock(control, RTX)
        vm = await adapter.create_vm(
            await offer_of(adapter, RTX), name="n", tag="t", ssh_public_key=None
        )
        await fault(control, "unknown_status")
        odd = await adapter.get_vm(vm.id)
        assert odd is not None
        assert (odd.state, odd.provider_status) == (VMState.UNKNOWN, "reticulating_splines")


class TestWhoCanLogIn:
    async def test_another_orders_key_never_reaches_the_vm_of_an_order_without_one(
        self, adapter: QuantaCloudAdapter, control: httpx.AsyncClient
    ) -> None:
        await stock(control, RTX, 2)
        theirs = await adapter.create_vm(
            await offer_of(adapter, RTX), name="ap-a-1", tag="t", ssh_public_key=OTHER_KEY
        )
        keyless = await adapter.create_vm(
            await offer_of(adapter, RTX), name="ap-b-1", tag="t", ssh_public_key=None
        )
        their_key = ssh_key_fingerprint(OTHER_KEY)
        assert their_key in [k["fingerprint"] for k in await account_keys(control)]
        assert await keys_on(control, theirs) == [their_key]  # control: the VM shows its keys
        (only,) = await keys_on(control, keyless)
        assert only != their_key

    async def test_an_orders_own_key_is_the_only_one_on_its_vm(
        self, adapter: QuantaCloudAdapter, control: httpx.AsyncClient
    ) -> None:
        await stock(control, RTX, 3)
        for key in (OTHER_KEY, None):
            await adapter.create_vm(
                await offer_of(adapter, RTX), name="ap-x-1", tag="t", ssh_public_key=key
            )
        mine = await adapter.create_vm(
            await offer_of(adapter, RTX), name="ap-c-1", tag="t", ssh_public_key=PUBLIC_KEY
        )
        assert len(await account_keys(control)) == 3
        assert await keys_on(control, mine) == [ssh_key_fingerprint(PUBLIC_KEY)]

    async def test_keyless_orders_share_one_key_of_ours_found_again_after_a_restart(
        self,
        adapter: QuantaCloudAdapter,
        control: httpx.AsyncClient,
        http: httpx.AsyncClient,
        quantacloud_url: str,
    ) -> None:
        await stock(control, RTX, 3)
        first = await adapter.create_vm(
            await offer_of(adapter, RTX), name="ap-a-1", tag="t", ssh_public_key=None
        )
        second = await adapter.create_vm(
            await offer_of(adapter, RTX), name="ap-b-1", tag="t", ssh_public_key=None
        )
        restarted = make_adapter(http, quantacloud_url)
        third = await restarted.create_vm(
            await offer_of(restarted, RTX), name="ap-c-1", tag="t", ssh_public_key=None
        )
        (ours,) = await account_keys(control)
        for vm in (first, second, third):
            assert await keys_on(control, vm) == [ours["fingerprint"]]

    async def test_the_private_half_of_our_key_is_not_kept(
        self, adapter: QuantaCloudAdapter, control: httpx.AsyncClient
    ) -> None:
        def private_keys() -> int:
            gc.collect()
            return sum(isinstance(o, Ed25519PrivateKey) for o in gc.get_objects())

        before = private_keys()
        held = Ed25519PrivateKey.generate()
        assert private_keys() == before + 1  # control: a private key still held is found
        del held
        await stock(control, RTX)
        await adapter.create_vm(
            await offer_of(adapter, RTX), name="ap-a-1", tag="t", ssh_public_key=None
        )
        assert len(await account_keys(control)) == 1  # one was made for this create
        assert private_keys() == before


class TestFindVms:
    async def test_only_live_deployments_of_the_offers_kind_since_the_intent(
        self, adapter: QuantaCloudAdapter, control: httpx.AsyncClient
    ) -> None:
        await stock(control, RTX, 3)
        await stock(control, B300)
        rtx = await offer_of(adapter, RTX)
        b300 = await offer_of(adapter, B300)
        before = since()
        ours = await adapter.create_vm(rtx, name="n", tag="t", ssh_public_key=None)
        await adapter.create_vm(b300, name="n", tag="t", ssh_public_key=None)
        stopped = await adapter.create_vm(
            await offer_of(adapter, RTX), name="n", tag="t", ssh_public_key=None
        )
        await adapter.delete_vm(stopped.id)
        found = await adapter.find_vms(name="n", tag="t", offer=rtx, not_before=before)
        assert [vm.id for vm in found] == [ours.id]
        later = before + timedelta(minutes=5)
        assert await adapter.find_vms(name="n", tag="t", offer=rtx, not_before=later) == []

    async def test_without_the_proposed_fields_every_live_deployment_is_a_candidate(
        self, adapter: QuantaCloudAdapter, control: httpx.AsyncClient
    ) -> None:
        await control.put("/_sim/config", json={"deployment_details": False})
        await stock(control, RTX)
        await stock(control, B300)
        rtx = await offer_of(adapter, RTX)
        first = await adapter.create_vm(rtx, name="n", tag="t", ssh_public_key=None)
        second = await adapter.create_vm(
            await offer_of(adapter, B300), name="n", tag="t", ssh_public_key=None
        )
        later = since() + timedelta(minutes=5)
        found = await adapter.find_vms(name="n", tag="t", offer=rtx, not_before=later)
        assert {vm.id for vm in found} == {first.id, second.id}


READS: dict[str, Callable[[QuantaCloudAdapter], Awaitable[Any]]] = {
    "fetch_offers": lambda a: a.fetch_offers(),
    "get_vm": lambda a: a.get_vm("dep_x"),
    "find_vms": lambda a: a.find_vms(
        name="n",
        tag="t",
        offer=Offer(Provider("quantacloud"), "us-east-1", "l40s-x1", "L40S", 1, Decimal(1)),
        not_before=since(),
    ),
    "balance": lambda a: a.balance(),
}


class TestReadFaults:
    @pytest.mark.parametrize("read", list(READS))
    @pytest.mark.parametrize("kind", ["http_500", "malformed_json"])
    async def test_a_broken_answer_to_a_read_is_unavailable(
        self, adapter: QuantaCloudAdapter, control: httpx.AsyncClient, read: str, kind: str
    ) -> None:
        await fault(control, kind)
        with pytest.raises(Unavailable):
            await READS[read](adapter)

    async def test_a_slow_read_is_unavailable(
        self, adapter: QuantaCloudAdapter, control: httpx.AsyncClient
    ) -> None:
        await fault(control, "timeout", seconds=TIMEOUT + 0.3)
        with pytest.raises(Unavailable):
            await adapter.fetch_offers()

    @pytest.mark.parametrize("read", list(READS))
    async def test_429_is_rate_limited_without_a_hint(
        self, adapter: QuantaCloudAdapter, control: httpx.AsyncClient, read: str
    ) -> None:
        await fault(control, "http_429", seconds=7)
        with pytest.raises(RateLimited) as caught:
            await READS[read](adapter)
        assert caught.value.retry_after is None  # QuantaCloud sends no retry hint


class TestCreateOutcomes:
    async def create(self, adapter: QuantaCloudAdapter, offer: Offer) -> VM:
        return await adapter.create_vm(offer, name="ap-x-1", tag="ap-order-x", ssh_public_key=None)

    async def key_known(self, adapter: QuantaCloudAdapter, control: httpx.AsyncClient) -> None:
        """A create of another kind first, so the adapter knows the key its next create names
        and sends nothing before it: a request fault then hits that create."""
        await stock(control, B300)
        await self.create(adapter, await offer_of(adapter, B300))

    async def only_vm(self, adapter: QuantaCloudAdapter, offer: Offer, before: datetime) -> VM:
        async def check() -> list[VM]:
            return await adapter.find_vms(name="n", tag="t", offer=offer, not_before=before)

        (vm,) = await eventually(check)
        assert isinstance(vm, VM)
        return vm

    @pytest.mark.parametrize("kind", ["http_500", "malformed_json"])
    async def test_a_broken_answer_to_a_create_is_outcome_unknown(
        self, adapter: QuantaCloudAdapter, control: httpx.AsyncClient, kind: str
    ) -> None:
        await self.key_known(adapter, control)
        await stock(control, RTX)
        offer = await offer_of(adapter, RTX)
        await fault(control, kind)
        with pytest.raises(OutcomeUnknown):
            await self.create(adapter, offer)

    async def test_a_create_that_times_out_is_unknown_and_then_found(
        self, adapter: QuantaCloudAdapter, control: httpx.AsyncClient
    ) -> None:
        await self.key_known(adapter, control)
        await stock(control, RTX)
        offer = await offer_of(adapter, RTX)
        before = since()
        await fault(control, "timeout", seconds=TIMEOUT + 0.3)
        with pytest.raises(OutcomeUnknown):
            await self.create(adapter, offer)
        vm = await self.only_vm(adapter, offer, before)
        (made,) = [v for v in await sim_vms(control) if v["offer_id"] == offer.offer_id]
        assert vm.id == made["id"]

    async def test_a_short_create_delay_is_a_success(
        self, adapter: QuantaCloudAdapter, control: httpx.AsyncClient
    ) -> None:
        await stock(control, RTX)
        offer = await offer_of(adapter, RTX)
        await fault(control, "create_delay", seconds=0.1)
        vm = await self.create(adapter, offer)
        assert vm.id == (await sim_vms(control))[0]["id"]

    async def test_a_long_create_delay_is_unknown_and_then_found(
        self, adapter: QuantaCloudAdapter, control: httpx.AsyncClient
    ) -> None:
        await stock(control, RTX)
        offer = await offer_of(adapter, RTX)
        before = since()
        await fault(control, "create_delay", seconds=TIMEOUT + 0.3)
        with pytest.raises(OutcomeUnknown):
            await self.create(adapter, offer)
        assert (await self.only_vm(adapter, offer, before)).id == (await sim_vms(control))[0]["id"]

    async def test_an_error_after_commit_is_unknown_and_finds_exactly_that_vm(
        self, adapter: QuantaCloudAdapter, control: httpx.AsyncClient
    ) -> None:
        await stock(control, RTX, 2)
        offer = await offer_of(adapter, RTX)
        before = since()
        await fault(control, "create_error_after_commit")
        with pytest.raises(OutcomeUnknown):
            await self.create(adapter, offer)
        (record,) = (await control.get("/_sim/creates")).json()
        assert (await self.only_vm(adapter, offer, before)).id == record["vm_id"]

    async def test_a_capacity_race_is_no_capacity(
        self, adapter: QuantaCloudAdapter, control: httpx.AsyncClient
    ) -> None:
        await stock(control, RTX)
        offer = await offer_of(adapter, RTX)
        await fault(control, "capacity_race")
        with pytest.raises(NoCapacity) as caught:
            await self.create(adapter, offer)
        assert caught.value.status_code == 400
        cooling = await control.get("/_sim/config")
        assert cooling.json()["cooldown_seconds"] > 0
        with pytest.raises(NoCapacity) as again:
            await self.create(adapter, offer)
        assert again.value.status_code == 503 and again.value.retry_after is not None
        assert await sim_vms(control) == []

    async def test_zero_stock_is_no_capacity(
        self, adapter: QuantaCloudAdapter, control: httpx.AsyncClient
    ) -> None:
        await stock(control, RTX)
        offer = await offer_of(adapter, RTX)
        await stock(control, RTX, 0)
        with pytest.raises(NoCapacity):
            await self.create(adapter, offer)

    async def test_too_little_balance_is_insufficient_funds(
        self, adapter: QuantaCloudAdapter, control: httpx.AsyncClient
    ) -> None:
        await control.put("/_sim/config", json={"balance": "1"})
        await stock(control, RTX)
        with pytest.raises(ProviderOutOfFunds) as caught:
            await self.create(adapter, await offer_of(adapter, RTX))
        assert caught.value.status_code == 402

    async def test_429_on_a_create_is_rate_limited(
        self, adapter: QuantaCloudAdapter, control: httpx.AsyncClient
    ) -> None:
        await self.key_known(adapter, control)
        await stock(control, RTX)
        offer = await offer_of(adapter, RTX)
        await fault(control, "http_429")
        with pytest.raises(RateLimited):
            await self.create(adapter, offer)

    @pytest.mark.parametrize(
        ("status", "reason"),
        [(400, "validation_error"), (400, "quota_exceeded"), (404, "not_found"), (409, None)],
    )
    async def test_a_refusal_quantacloud_does_not_explain_is_refused_with_what_it_said(
        self, adapter: QuantaCloudAdapter, control: httpx.AsyncClient, status: int, reason: str
    ) -> None:
        await stock(control, RTX)
        offer = await offer_of(adapter, RTX)
        message = "Deployments are paused for this account"
        await fault(control, "create_refused", status=status, reason=reason, message=message)
        with pytest.raises(Refused) as caught:
            await self.create(adapter, offer)
        refused = caught.value
        assert (refused.status_code, refused.reason, refused.said) == (status, reason, message)
        assert await sim_vms(control) == []

    async def test_after_a_refused_create_our_no_login_key_is_looked_up_again(
        self, adapter: QuantaCloudAdapter, control: httpx.AsyncClient
    ) -> None:
        """The refusal may be of the key it named (gone from the account)."""

        async def key_reads() -> int:
            logged = (await control.get("/_sim/requests")).json()
            return sum(r["method"] == "GET" and r["path"].endswith("/ssh-keys") for r in logged)

        await stock(control, RTX, 2)
        offer = await offer_of(adapter, RTX)
        await self.create(adapter, offer)
        read_before = await key_reads()
        await self.create(adapter, offer)  # the control: known, so not read again
        await fault(control, "create_refused", status=404, reason="not_found", message="Gone")
        with pytest.raises(Refused):
            await self.create(adapter, offer)
        assert await key_reads() == read_before
        await stock(control, RTX, 1)
        await self.create(adapter, await offer_of(adapter, RTX))
        assert await key_reads() == read_before + 1

    @pytest.mark.parametrize(
        ("reason", "message"),
        [("validation_error", "offer_id must be a UUID"), ("provider_not_found", "No such")],
    )
    async def test_a_refusal_naming_a_field_we_sent_is_rejected(
        self, adapter: QuantaCloudAdapter, control: httpx.AsyncClient, reason: str, message: str
    ) -> None:
        """The control: `offer_id` in the message, or the code that names our `provider`."""
        await stock(control, RTX)
        offer = await offer_of(adapter, RTX)
        await fault(control, "create_refused", reason=reason, message=message)
        with pytest.raises(Rejected) as caught:
            await self.create(adapter, offer)
        assert caught.value.status_code == 400

    async def test_a_request_quantacloud_refuses_is_rejected(
        self, adapter: QuantaCloudAdapter, control: httpx.AsyncClient
    ) -> None:
        await stock(control, RTX)
        offer = await offer_of(adapter, RTX)
        with pytest.raises(Rejected) as caught:
            await adapter.create_vm(offer, name="n", tag="t", ssh_public_key="not an ssh key")
        assert caught.value.status_code == 400
        without_id = Offer(
            Provider("quantacloud"), "us-east-1", offer.sku, "RTX-PRO-6000", 1, Decimal(1)
        )
        with pytest.raises(Rejected):
            await self.create(adapter, without_id)
        assert await sim_vms(control) == []


class TestCredentials:
    async def test_a_wrong_key_is_auth_failed_and_never_shown(
        self, http: httpx.AsyncClient, quantacloud_url: str, control: httpx.AsyncClient
    ) -> None:
        secret = "wrong-key-do-not-print"
        adapter = make_adapter(http, quantacloud_url, key=secret)
        await stock(control, RTX)
        offer = await offer_of(adapter, RTX)  # the catalogue is public
        calls = [
            adapter.create_vm(offer, name="n", tag="t", ssh_public_key=None),
            adapter.get_vm("dep_x"),
            adapter.balance(),
            adapter.delete_vm("dep_x"),
        ]
        for call in calls:
            with pytest.raises(AuthFailed) as caught:
                await call
            assert secret not in str(caught.value) and secret not in repr(caught.value)
        assert secret not in repr(adapter)
        assert secret not in repr(vars(adapter))
