"""The Hyperstack adapter against the simulator on a real socket: offers, VMs, typed outcomes."""

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from app.core.catalogue import Interconnect, Provider
from app.core.market import MachineKey, OfferKey
from app.providers import assembly
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
    StockForecast,
    Unavailable,
    VMState,
    urgent,
)
from app.providers.hyperstack import HyperstackAdapter
from app.providers.hyperstack.adapter import keypair_name
from app.providers.hyperstack.limits import STOCK_READ
from tests.waiting import eventually, vm_reaches

IMAGE = "Ubuntu Server 22.04 LTS R535 CUDA 12.2"
NAME, TAG = "ap-01jd3xk9-1", "ap-order-01jd3xk9"
SSH_KEY = (
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB5cnVsqeu6woWI8fLxtwtQqatcnRNQyYFRM/QGmv8As me@laptop"
)
TIMEOUT = 1.0  # room for a loaded machine to connect
SLOW = 2.0  # longer than TIMEOUT


# The simulators are reset before each test, with quick boots.
pytestmark = pytest.mark.usefixtures("sim_sync")


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client


def make_adapter(
    http: httpx.AsyncClient, hyperstack_url: str, **overrides: Any
) -> HyperstackAdapter:
    settings: dict[str, Any] = {
        "base_url": f"{hyperstack_url}/v1",
        "api_key": SecretStr("sim-key"),
        "environment": "autoprovision-{region}",
        "key_name": "autoprovision",
        "image": IMAGE,
        "timeout": TIMEOUT,
        "create_timeout": TIMEOUT,
    }
    return HyperstackAdapter(http, **{**settings, **overrides})


@pytest.fixture
def adapter(http: httpx.AsyncClient, hyperstack_url: str) -> HyperstackAdapter:
    return make_adapter(http, hyperstack_url)


async def control(
    http: httpx.AsyncClient, hyperstack_url: str, method: str, path: str, body: Any
) -> Any:
    response = await http.request(method, f"{hyperstack_url}/_sim/{path}", json=body)
    assert response.status_code < 300, response.text
    return response.json()


async def stock(
    http: httpx.AsyncClient, hyperstack_url: str, sku: str, region: str, n: int
) -> None:
    await control(
        http, hyperstack_url, "PUT", "stock", {"sku": sku, "region": region, "quantity": n}
    )


async def fault(http: httpx.AsyncClient, hyperstack_url: str, kind: str, **extra: Any) -> None:
    await control(http, hyperstack_url, "POST", "faults", {"kind": kind, **extra})


async def sim_vms(http: httpx.AsyncClient, hyperstack_url: str) -> list[dict[str, Any]]:
    return list((await http.get(f"{hyperstack_url}/_sim/vms")).json())


def offer(sku: str = "n3-H100x1", region: str = "CANADA-1", price: str = "2.40") -> Offer:
    return Offer(Provider("hyperstack"), region, sku, "H100", 1, Decimal(price))


async def create(adapter: HyperstackAdapter, target: Offer | None = None, **kw: Any) -> VM:
    return await adapter.create_vm(
        target or offer(), name=kw.get("name", NAME), tag=TAG, ssh_public_key=kw.get("key")
    )


async def find(adapter: HyperstackAdapter) -> list[VM]:
    since = datetime.now(UTC) - timedelta(minutes=5)
    return await adapter.find_vms(name=NAME, tag=TAG, offer=offer(), not_before=since)


class TestOffers:
    async def test_offers_are_normalized_from_flavors_stocks_and_prices(
        self, http: httpx.AsyncClient, hyperstack_url: str, adapter: HyperstackAdapter
    ) -> None:
        await stock(http, hyperstack_url, "n3-H100x8", "CANADA-1", 3)
        await stock(http, hyperstack_url, "n3-B300-SXM6x8", "US-1", 1)
        await stock(http, hyperstack_url, "n3-H100x8-NVLink", "CANADA-1", 1)
        await stock(http, hyperstack_url, "n3-RTX-A6000x1", "NORWAY-1", 12)
        offers = {o.key: o for o in await adapter.fetch_offers()}
        assert set(offers) == {
            ("hyperstack", "CANADA-1", "n3-H100x8"),
            ("hyperstack", "US-1", "n3-B300-SXM6x8"),
            ("hyperstack", "CANADA-1", "n3-H100x8-NVLink"),
            ("hyperstack", "NORWAY-1", "n3-RTX-A6000x1"),
        }  # the in-stock k8s and CPU flavors are not GPU VMs for sale
        h100 = offers[OfferKey("hyperstack", "CANADA-1", "n3-H100x8")]
        assert h100 == Offer(
            provider=Provider("hyperstack"),
            region="CANADA-1",
            sku="n3-H100x8",
            gpu_model="H100",
            gpu_count=8,
            price_per_hour=Decimal("19.20672"),  # and the public IP every VM gets
            interconnect=Interconnect.PCIE,
            vcpus=224,
            ram_gb=1440,
            disk_gb=100,
            disk_fixed=True,
            available=3,
        )
        b300 = offers[OfferKey("hyperstack", "US-1", "n3-B300-SXM6x8")]
        assert (b300.gpu_model, b300.interconnect, b300.price_per_hour) == (
            "B300",
            Interconnect.SXM,
            Decimal("44.80672"),
        )
        nvlink = offers[OfferKey("hyperstack", "CANADA-1", "n3-H100x8-NVLink")]
        assert (nvlink.interconnect, nvlink.available) == (Interconnect.NVLINK, 1)
        a6000 = offers[OfferKey("hyperstack", "NORWAY-1", "n3-RTX-A6000x1")]
        assert (a6000.gpu_model, a6000.price_per_hour, a6000.available) == (
            "RTX-A6000",
            Decimal("0.50672"),
            12,
        )

    async def test_a_gpu_without_a_price_row_is_not_offered(
        self, http: httpx.AsyncClient, hyperstack_url: str, adapter: HyperstackAdapter
    ) -> None:
        await stock(http, hyperstack_url, "n3-A100-SXM4x8", "US-1", 2)  # unpriced by default
        await stock(http, hyperstack_url, "n3-H200x8", "US-1", 1)
        skus = {o.sku: o for o in await adapter.fetch_offers()}
        assert set(skus) == {"n3-H200x8"}
        assert skus["n3-H200x8"].price_per_hour == Decimal("27.60672")

    async def test_decimal_string_prices_give_the_same_decimals(
        self, http: httpx.AsyncClient, hyperstack_url: str, adapter: HyperstackAdapter
    ) -> None:
        await stock(http, hyperstack_url, "n3-L40x4", "CANADA-1", 1)
        await control(http, hyperstack_url, "PUT", "config", {"pricebook_string_values": True})
        [l40] = await adapter.fetch_offers()
        assert isinstance(l40.price_per_hour, Decimal)
        assert l40.price_per_hour == Decimal("4.00672")

    async def test_a_pricebook_without_a_public_ip_row_prices_the_gpus_alone(
        self, http: httpx.AsyncClient, hyperstack_url: str, adapter: HyperstackAdapter
    ) -> None:
        """What the simulator then bills too: the VM's price is the flavor's."""
        await stock(http, hyperstack_url, "n3-L40x4", "CANADA-1", 1)
        await control(http, hyperstack_url, "PUT", "config", {"public_ip_priced": False})
        [l40] = await adapter.fetch_offers()
        assert l40.price_per_hour == Decimal("4.00")
        await create(adapter, l40)
        [vm] = await sim_vms(http, hyperstack_url)
        assert vm["price_per_hour"] == "4.00"

    async def test_prices_are_cached_until_refreshed(
        self, http: httpx.AsyncClient, hyperstack_url: str, adapter: HyperstackAdapter
    ) -> None:
        await stock(http, hyperstack_url, "n3-L40x1", "CANADA-1", 1)
        assert len(await adapter.fetch_offers()) == 1
        await control(http, hyperstack_url, "PUT", "config", {"unpriced_gpus": ["L40"]})
        assert len(await adapter.fetch_offers()) == 1
        assert "L40" not in await adapter.refresh_prices()
        assert await adapter.fetch_offers() == []

    async def test_the_forecast_of_the_last_stock_read_comes_without_a_request_of_its_own(
        self, http: httpx.AsyncClient, hyperstack_url: str, adapter: HyperstackAdapter
    ) -> None:
        assert adapter.stock_forecasts() is None  # nothing read yet: nothing known
        planned = {"planned_7_days": "10+", "planned_30_days": "25+"}
        body = {"region": "US-1", "gpu_model": "H100-80G-SXM5", **planned}
        await control(http, hyperstack_url, "PUT", "forecast", body)
        body = {"region": "US-1", "gpu_model": "B300-SXM", "planned_100_days": "100+"}
        await control(http, hyperstack_url, "PUT", "forecast", body)
        assert adapter.stock_forecasts() is None  # the last read's, never one of its own

        await adapter.fetch_offers()
        sent = len(await control(http, hyperstack_url, "GET", "requests", None))
        h100 = StockForecast(
            Provider("hyperstack"), "US-1", "H100-80G-SXM5", "H100", Interconnect.SXM, "10+", "25+"
        )
        assert adapter.stock_forecasts() == [h100]  # B300's says nothing within 30 days
        assert len(await control(http, hyperstack_url, "GET", "requests", None)) == sent

        await control(http, hyperstack_url, "POST", "reset", None)
        await adapter.fetch_offers()
        assert adapter.stock_forecasts() == []  # read, and no forecast any more

    async def test_odd_rows_are_left_out_and_missing_stock_counts_are_no_error(self) -> None:
        def flavor(name: str, gpu: Any, count: Any, **extra: Any) -> dict[str, Any]:
            return {"name": name, "gpu": gpu, "gpu_count": count, "stock_available": True, **extra}

        flavors = [
            flavor("n3-H100x2", "H100-80G-PCIe", 2, cpu=56, ram=360.5, disk=100, new_field=[1]),
            flavor("n3-RTX-A6000x1-spot", "RTX-A6000-spot", 1),
            flavor("n9-Q9000x1", "Quantum-9000", 1),
            flavor("n3-L40x1", "L40", None),
            flavor("n3-A100x1", "A100-80G-PCIe", 1),
            flavor("n3-L40x2", "L40", 2, stock_available=None),
            "not a flavor",
        ]
        answers: dict[str, Any] = {
            "/v1/core/flavors": {"data": [{"region_name": "CANADA-1", "flavors": flavors}]},
            "/v1/pricebook": [
                {"name": "H100-80G-PCIe", "value": "2.450000000"},
                {"name": "A100-80G-PCIe", "value": 0},
                {"name": "L40", "value": "n/a"},
                {"name": "RTX-A6000-spot", "value": None},
            ],
        }

        def serve(request: httpx.Request) -> httpx.Response:
            if request.url.path in answers:
                return httpx.Response(200, json=answers[request.url.path])
            return httpx.Response(404, json={"message": "Stocks Not Found"})

        async with httpx.AsyncClient(transport=httpx.MockTransport(serve)) as client:
            adapter = make_adapter(client, "http://hyperstack.test")
            offers = await adapter.fetch_offers()
        assert [(o.sku, o.price_per_hour, o.available, o.ram_gb) for o in offers] == [
            ("n3-H100x2", Decimal("4.900000000"), None, 360)
        ]
        assert adapter.stock_forecasts() is None  # "Stocks Not Found": nothing said either way


class TestVMs:
    async def test_create_get_find_delete_and_balance(
        self, http: httpx.AsyncClient, hyperstack_url: str, adapter: HyperstackAdapter
    ) -> None:
        await stock(http, hyperstack_url, "n3-L40x1", "NORWAY-1", 1)
        vm = await create(adapter, offer("n3-L40x1", "NORWAY-1", "1.00"))
        assert (vm.state, vm.name, vm.tags, vm.region, vm.sku) == (
            VMState.PENDING,
            NAME,
            (TAG,),
            "NORWAY-1",
            "n3-L40x1",
        )
        [made] = await sim_vms(http, hyperstack_url)
        assert made["id"] == vm.id
        with_ip = await eventually(lambda: _with_ip(adapter, vm.id))
        assert with_ip.state is VMState.RUNNING and with_ip.ip == made["ip"]
        assert [v.id for v in await find(adapter)] == [vm.id]
        since = datetime.now(UTC) - timedelta(minutes=5)
        other = await adapter.find_vms(name=NAME, tag="ap-order-x", offer=offer(), not_before=since)
        assert other == []
        await adapter.delete_vm(vm.id)
        deleting = await adapter.get_vm(vm.id)
        assert deleting is None or deleting.state is VMState.DELETING
        await eventually(lambda: _gone(adapter, vm.id))
        await adapter.delete_vm(vm.id)  # already gone: fine
        # It was ACTIVE for under a minute, and Hyperstack bills each minute begun: the L40's
        # $1.00 and its public IP's $0.00672 an hour, /60.
        assert await adapter.balance() == Decimal("9999.983221")

    async def test_the_region_environment_and_key_pair_are_made_once(
        self, http: httpx.AsyncClient, hyperstack_url: str, adapter: HyperstackAdapter
    ) -> None:
        await stock(http, hyperstack_url, "n3-RTX-A6000x2", "NORWAY-1", 2)
        target = offer("n3-RTX-A6000x2", "NORWAY-1", "1.00")
        await create(adapter, target)
        await create(adapter, target, name="ap-01jd3xk9-2")
        headers = {"api_key": "sim-key"}
        environments = (
            await http.get(f"{hyperstack_url}/v1/core/environments", headers=headers)
        ).json()
        assert [e["name"] for e in environments["environments"]] == [
            "default-CANADA-1",
            "autoprovision-norway-1",
        ]
        keypairs = (await http.get(f"{hyperstack_url}/v1/core/keypairs", headers=headers)).json()
        assert [(k["name"], k["environment"]["name"]) for k in keypairs["keypairs"]] == [
            ("autoprovision", "default-CANADA-1"),
            ("autoprovision", "autoprovision-norway-1"),
        ]

    async def test_an_order_ssh_key_becomes_a_key_pair_of_its_own(
        self, http: httpx.AsyncClient, hyperstack_url: str, adapter: HyperstackAdapter
    ) -> None:
        await stock(http, hyperstack_url, "n3-H100x1", "CANADA-1", 1)
        vm = await create(adapter, key=SSH_KEY)
        got = await http.get(
            f"{hyperstack_url}/v1/core/virtual-machines/{vm.id}", headers={"api_key": "sim-key"}
        )
        assert got.json()["instance"]["keypair"]["name"] == keypair_name(SSH_KEY)
        assert keypair_name(SSH_KEY) == keypair_name(SSH_KEY.replace("me@laptop", "other"))

    async def test_a_key_pair_that_exists_nowhere_is_rejected_before_any_create(
        self, http: httpx.AsyncClient, hyperstack_url: str
    ) -> None:
        await stock(http, hyperstack_url, "n3-H100x1", "CANADA-1", 1)
        adapter = make_adapter(http, hyperstack_url, key_name="nobody")
        with pytest.raises(Rejected, match="nobody"):
            await create(adapter)
        assert await control(http, hyperstack_url, "GET", "creates", None) == []

    async def test_an_environment_name_without_region_cannot_serve_two_regions(
        self, http: httpx.AsyncClient, hyperstack_url: str
    ) -> None:
        adapter = make_adapter(http, hyperstack_url, environment="one-for-all")
        await stock(http, hyperstack_url, "n3-H100x1", "CANADA-1", 1)
        await create(adapter)
        with pytest.raises(Rejected, match="region"):
            await create(adapter, offer("n3-H100x1", "NORWAY-1"))

    async def test_a_vm_failed_after_accept_is_failed(
        self, http: httpx.AsyncClient, hyperstack_url: str, adapter: HyperstackAdapter
    ) -> None:
        await stock(http, hyperstack_url, "n3-H100x1", "CANADA-1", 1)
        await fault(http, hyperstack_url, "fail_after_accept")
        vm = await create(adapter)
        assert vm.state is VMState.PENDING
        failed = await vm_reaches(adapter, vm.id, VMState.FAILED)
        assert failed.provider_status == "ERROR"

    async def test_an_unknown_status_is_unknown(
        self, http: httpx.AsyncClient, hyperstack_url: str, adapter: HyperstackAdapter
    ) -> None:
        await stock(http, hyperstack_url, "n3-H100x1", "CANADA-1", 1)
        vm = await create(adapter)
        await fault(http, hyperstack_url, "unknown_status")
        got = await adapter.get_vm(vm.id)
        assert got is not None and got.state is VMState.UNKNOWN
        assert got.provider_status == "reticulating_splines"

    async def test_ids_hyperstack_cannot_have_are_not_found(
        self, adapter: HyperstackAdapter
    ) -> None:
        assert await adapter.get_vm("412999") is None
        assert await adapter.get_vm("../pricebook") is None
        await adapter.delete_vm("412999")


async def _with_ip(adapter: HyperstackAdapter, vm_id: str) -> VM | None:
    vm = await adapter.get_vm(vm_id)
    return vm if vm is not None and vm.ip else None


async def _gone(adapter: HyperstackAdapter, vm_id: str) -> bool:
    return await adapter.get_vm(vm_id) is None


async def _none_left(http: httpx.AsyncClient, hyperstack_url: str) -> bool:
    return all(vm["status"] == "DELETING" for vm in await sim_vms(http, hyperstack_url))


Call = Callable[[HyperstackAdapter], Awaitable[Any]]
READS: dict[str, Call] = {
    "fetch_offers": lambda a: a.fetch_offers(),
    "get_vm": lambda a: a.get_vm("412001"),
    "find_vms": find,
    "balance": lambda a: a.balance(),
}


class TestOutcomes:
    async def test_a_remembered_environment_that_vanished_is_retried_not_refused(
        self, http: httpx.AsyncClient, hyperstack_url: str, adapter: HyperstackAdapter
    ) -> None:
        await stock(http, hyperstack_url, "n3-H100x1", "CANADA-1", 2)
        await create(adapter)
        await control(http, hyperstack_url, "POST", "reset", None)  # environments are gone
        await stock(http, hyperstack_url, "n3-H100x1", "CANADA-1", 1)
        with pytest.raises(Unavailable):
            await create(adapter)
        vm = await create(adapter)  # looked up again, made again
        assert vm.state is VMState.PENDING

    @pytest.fixture
    async def ready(
        self, http: httpx.AsyncClient, hyperstack_url: str, adapter: HyperstackAdapter
    ) -> HyperstackAdapter:
        """An adapter whose environment and key pair are known, so a create is one request."""
        await stock(http, hyperstack_url, "n3-H100x1", "CANADA-1", 2)
        await adapter.prepare("CANADA-1", None)
        return adapter

    @pytest.mark.parametrize("read", READS.values(), ids=READS.keys())
    @pytest.mark.parametrize("kind", ["http_500", "timeout", "malformed_json"])
    async def test_a_failed_read_is_unavailable(
        self,
        http: httpx.AsyncClient,
        hyperstack_url: str,
        adapter: HyperstackAdapter,
        read: Call,
        kind: str,
    ) -> None:
        await fault(http, hyperstack_url, kind, seconds=SLOW)
        with pytest.raises(Unavailable):
            await read(adapter)

    @pytest.mark.parametrize("kind", ["http_500", "malformed_json"])
    async def test_a_create_with_a_broken_answer_is_outcome_unknown(
        self, http: httpx.AsyncClient, hyperstack_url: str, ready: HyperstackAdapter, kind: str
    ) -> None:
        await fault(http, hyperstack_url, kind)
        with pytest.raises(OutcomeUnknown):
            await create(ready)

    async def test_a_create_that_times_out_is_unknown_and_then_found(
        self, http: httpx.AsyncClient, hyperstack_url: str, ready: HyperstackAdapter
    ) -> None:
        await fault(http, hyperstack_url, "timeout", seconds=SLOW)
        with pytest.raises(OutcomeUnknown):
            await create(ready)
        [found] = await eventually(lambda: find(ready))
        assert found.name == NAME and found.tags == (TAG,)

    async def test_a_create_answered_late_but_in_time_succeeds(
        self, http: httpx.AsyncClient, hyperstack_url: str, ready: HyperstackAdapter
    ) -> None:
        await fault(http, hyperstack_url, "create_delay", seconds=0.1)
        vm = await create(ready)
        assert vm.state is VMState.PENDING

    async def test_a_create_answered_too_late_is_unknown_and_then_found(
        self, http: httpx.AsyncClient, hyperstack_url: str, ready: HyperstackAdapter
    ) -> None:
        await fault(http, hyperstack_url, "create_delay", seconds=SLOW)
        with pytest.raises(OutcomeUnknown):
            await create(ready)
        [found] = await find(ready)
        assert [found.id] == [v["id"] for v in await sim_vms(http, hyperstack_url)]

    async def test_a_500_after_the_vm_was_made_is_unknown_and_finds_exactly_that_vm(
        self, http: httpx.AsyncClient, hyperstack_url: str, ready: HyperstackAdapter
    ) -> None:
        await fault(http, hyperstack_url, "create_error_after_commit")
        with pytest.raises(OutcomeUnknown):
            await create(ready)
        found = await find(ready)
        assert [v.id for v in found] == [v["id"] for v in await sim_vms(http, hyperstack_url)]
        assert len(found) == 1

    async def test_a_capacity_race_is_no_capacity(
        self, http: httpx.AsyncClient, hyperstack_url: str, ready: HyperstackAdapter
    ) -> None:
        await fault(http, hyperstack_url, "capacity_race")
        with pytest.raises(NoCapacity) as raised:
            await create(ready)
        assert raised.value.status_code == 409

    async def test_no_stock_is_no_capacity(
        self, http: httpx.AsyncClient, hyperstack_url: str, ready: HyperstackAdapter
    ) -> None:
        await stock(http, hyperstack_url, "n3-H100x1", "CANADA-1", 0)
        with pytest.raises(NoCapacity):
            await create(ready)

    async def test_too_little_credit_is_insufficient_funds(
        self, http: httpx.AsyncClient, hyperstack_url: str, ready: HyperstackAdapter
    ) -> None:
        await control(http, hyperstack_url, "PUT", "config", {"balance": "1"})
        with pytest.raises(ProviderOutOfFunds):
            await create(ready)

    async def test_a_request_the_provider_refuses_by_its_field_is_rejected(
        self, http: httpx.AsyncClient, hyperstack_url: str
    ) -> None:
        await stock(http, hyperstack_url, "n3-H100x1", "CANADA-1", 1)
        adapter = make_adapter(http, hyperstack_url, image="")
        with pytest.raises(Rejected) as raised:  # "image_name is required ..."
            await create(adapter)
        assert raised.value.status_code == 400

    async def test_an_image_hyperstack_does_not_find_is_refused_not_rejected(
        self, http: httpx.AsyncClient, hyperstack_url: str
    ) -> None:
        """A 404 names no field of ours: the image may be missing in this region only."""
        await stock(http, hyperstack_url, "n3-H100x1", "CANADA-1", 1)
        adapter = make_adapter(http, hyperstack_url, image="Windows 95")
        with pytest.raises(Refused) as raised:
            await create(adapter)
        assert (raised.value.status_code, raised.value.reason) == (404, "not_found")
        assert raised.value.said == "Image Windows 95 not found in CANADA-1"

    @pytest.mark.parametrize(
        ("status", "reason"),
        [(400, "bad_request"), (400, None), (409, "already_exist"), (405, None), (422, "x")],
    )
    async def test_a_refusal_hyperstack_does_not_explain_is_refused_with_what_it_said(
        self,
        http: httpx.AsyncClient,
        hyperstack_url: str,
        ready: HyperstackAdapter,
        status: int,
        reason: str | None,
    ) -> None:
        message = "Your project cannot launch this right now"
        await fault(
            http, hyperstack_url, "create_refused", status=status, reason=reason, message=message
        )
        with pytest.raises(Refused) as raised:
            await create(ready)  # the credit is fine: not a money problem
        refused = raised.value
        assert (refused.status_code, refused.reason, refused.said) == (status, reason, message)
        assert await sim_vms(http, hyperstack_url) == []

    async def test_a_refusal_naming_a_field_we_sent_is_rejected(
        self, http: httpx.AsyncClient, hyperstack_url: str, ready: HyperstackAdapter
    ) -> None:
        """The control: the same refusal, naming `security_rules` of our body, fails."""
        message = "security_rules: port_range_max must be at least port_range_min"
        await fault(http, hyperstack_url, "create_refused", reason="bad_request", message=message)
        with pytest.raises(Rejected) as raised:
            await create(ready)
        assert raised.value.status_code == 400
        assert "security_rules" in str(raised.value)

    async def test_a_cluster_delete_is_never_held_back_for_stock_reads(
        self, http: httpx.AsyncClient, hyperstack_url: str, ready: HyperstackAdapter
    ) -> None:
        (cluster,) = assembly.assembled_offers(
            [replace(offer(), available=2)], {MachineKey("H100", 1, 2)}
        )
        vm = await ready.create_vm(cluster, name=NAME, tag=TAG, ssh_public_key=None)
        await vm_reaches(ready, vm.id, VMState.RUNNING)
        # Other requests (status reads) have taken all the rate limit not kept for stock reads.
        ready.budget.sent(*STOCK_READ[0])
        while ready.budget.hold("GET", "/core/virtual-machines") == 0:
            ready.budget.sent("GET", "/core/virtual-machines/1")
        with pytest.raises(RateLimited, match="held back"):
            await ready.delete_vm(vm.id)  # the control: outside `urgent`, it waits
        assert len(await sim_vms(http, hyperstack_url)) == 2
        with urgent():
            await ready.delete_vm(vm.id)  # the node listing and both deletes go
        await eventually(lambda: _none_left(http, hyperstack_url), what="both nodes deleted")

    async def test_rate_limits_are_rate_limited_without_a_retry_after(
        self, http: httpx.AsyncClient, hyperstack_url: str, ready: HyperstackAdapter
    ) -> None:
        await fault(http, hyperstack_url, "http_429", count=2)
        with pytest.raises(RateLimited) as on_read:
            await ready.fetch_offers()
        with pytest.raises(RateLimited) as on_create:
            await create(ready)
        assert on_read.value.retry_after is None and on_create.value.retry_after is None

    async def test_a_wrong_key_is_auth_failed_and_never_shown(
        self, http: httpx.AsyncClient, hyperstack_url: str
    ) -> None:
        adapter = make_adapter(http, hyperstack_url, api_key=SecretStr("hs-secret-do-not-log"))
        for call in (adapter.fetch_offers(), create(adapter), adapter.balance()):
            with pytest.raises(AuthFailed) as raised:
                await call
            assert "hs-secret-do-not-log" not in str(raised.value)
        assert "hs-secret-do-not-log" not in repr(adapter)
        assert "hs-secret-do-not-log" not in repr(vars(adapter))
