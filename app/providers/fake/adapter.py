"""`FakeAdapter`: a provider held in memory for tests, with scripted offers and create outcomes.

Nothing goes over the network. A test sets what `fetch_offers` returns, queues what the next
creates do (make a VM, raise one of the typed outcomes, or break off with or without a VM made),
moves the VMs it made through their states, and reads back every create it was sent:

    fake = FakeAdapter()
    offer = fake.offer(gpu_model="H100", gpu_count=8, price="20.00")
    fake.set_offers(offer)
    fake.queue(Create.fails(NoCapacity), Create.unknown(made_vm=True))  # then: plain success
    ...                                      # the code under test calls create_vm three times
    [first, second, third] = fake.creates
    fake.advance(third.vm_id, VMState.RUNNING, ip="192.0.2.10")

A cluster (machines sold as one offer, priced for all of them) is an offer with `nodes`, and
its fabric if it has one (its default SKU says its nodes: `fake-b200x8-n2`):

    cluster = fake.offer(gpu_model="B200", nodes=2, cluster_interconnect=INFINIBAND)

Stock is exactly what was set: a create does not take it away (set the offers again to).
"""

import asyncio
import itertools
from collections import Counter, deque
from collections.abc import Collection
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from app.core.catalogue import Interconnect, Provider
from app.providers.base import (
    VM,
    Images,
    MachineKey,
    Offer,
    OutcomeUnknown,
    ProviderError,
    StockForecast,
    VMState,
    Volume,
)
from app.providers.budget import Budget, StockRead

PROVIDER = Provider("fake")


@dataclass(frozen=True)
class Create:
    """What one create call does: make a VM and answer it, or raise `error`.

    With an error, `makes_vm` says whether the VM exists anyway (a create that broke off after
    the provider made the VM). `wait_for`, when given, holds the call until it is set.
    """

    error: type[ProviderError] | None = None
    makes_vm: bool = True
    wait_for: asyncio.Event | None = None

    @classmethod
    def ok(cls, *, wait_for: asyncio.Event | None = None) -> "Create":
        """The create makes a VM and answers with it."""
        return cls(wait_for=wait_for)

    @classmethod
    def fails(cls, error: type[ProviderError]) -> "Create":
        """The create raises `error` (NoCapacity, ProviderOutOfFunds, ...); no VM is made."""
        return cls(error=error, makes_vm=False)

    @classmethod
    def unknown(cls, *, made_vm: bool, wait_for: asyncio.Event | None = None) -> "Create":
        """The create raises OutcomeUnknown; the VM was made or not, as `made_vm` says."""
        return cls(error=OutcomeUnknown, makes_vm=made_vm, wait_for=wait_for)


@dataclass
class CreateCall:
    """One create the fake was sent, what it did, and the VM it made (if any)."""

    offer: Offer
    name: str
    tag: str
    ssh_public_key: str | None
    disk_gb: int | None
    outcome: Create
    vm_id: str | None = None
    startup_script: str | None = None
    image: str | None = None


class FakeAdapter:
    """A `ProviderAdapter` whose provider is a script in memory (see the module docstring)."""

    def __init__(self, provider: Provider = PROVIDER, *, finds_vms_by_name: bool = True) -> None:
        self.provider = provider
        self.finds_vms_by_name = (
            finds_vms_by_name  # False: VMs carry no name or tag, like QuantaCloud's
        )
        self.offers: list[Offer] = []
        self.forecasts: list[StockForecast] | None = None  # what `stock_forecasts` answers
        self.budget = Budget(())  # no limits: read at the poll period
        self.outcomes: deque[Create] = deque()
        self.read_errors: deque[type[ProviderError]] = deque()
        self.delete_errors: deque[type[ProviderError]] = deque()
        self.script_delete_errors: deque[type[ProviderError]] = deque()
        self.creates: list[CreateCall] = []
        self.vms: dict[str, VM] = {}
        self.deleted: list[str] = []
        # Start-up scripts kept apart from VMs, as Verda keeps them: made by a create that
        # carries one (named after the VM), until deleted; and the names deleted, in order.
        self.startup_scripts: dict[str, str] = {}
        self.deleted_scripts: list[str] = []
        # The images creates may name (`images()`); `image_error` is raised by it when set.
        self.known_images = Images(machines=frozenset({"fake-os"}), clusters=frozenset({"fake-os"}))
        self.image_error: ProviderError | None = None
        self.account_balance = Decimal("1000")
        self.balance_error: ProviderError | None = None  # raised by balance() when set
        self.calls: Counter[str] = Counter()  # ProviderAdapter method name -> calls made
        self._ids = itertools.count(1)

    def __repr__(self) -> str:
        return f"FakeAdapter(provider={self.provider!r}, offers={len(self.offers)})"

    # --- scripting -------------------------------------------------------------------------

    def offer(
        self,
        *,
        region: str = "FAKE-1",
        sku: str | None = None,
        gpu_model: str = "H100",
        gpu_count: int = 8,
        price: Decimal | str = "20.00",
        nodes: int = 1,
        **fields: Any,
    ) -> Offer:
        """An offer of this provider: `nodes` machines of `gpu_count` GPUs each at `price` for
        all of them (`fields`: any other `Offer` field, e.g. `disk_gb`, `cluster_interconnect`)."""
        cluster = f"-n{nodes}" if nodes > 1 else ""
        return Offer(
            provider=self.provider,
            region=region,
            sku=sku or f"fake-{gpu_model.lower()}x{gpu_count}{cluster}",
            gpu_model=gpu_model,
            gpu_count=gpu_count,
            price_per_hour=Decimal(price),
            interconnect=fields.pop("interconnect", Interconnect.SXM),
            nodes=nodes,
            **fields,
        )

    def set_offers(self, *offers: Offer) -> None:
        """What `fetch_offers` answers from now on (none: no stock)."""
        self.offers = list(offers)

    def queue(self, *outcomes: Create) -> None:
        """What the next creates do, in order; once these are used up, creates succeed."""
        self.outcomes.extend(outcomes)

    def fail_reads(self, *errors: type[ProviderError]) -> None:
        """The next `fetch_offers` calls raise these, in order (e.g. `Unavailable`)."""
        self.read_errors.extend(errors)

    def fail_deletes(self, *errors: type[ProviderError]) -> None:
        """The next `delete_vm` calls raise these, in order (a refused or failed delete)."""
        self.delete_errors.extend(errors)

    def fail_script_deletes(self, *errors: type[ProviderError]) -> None:
        """The next `delete_startup_script` calls raise these, in order."""
        self.script_delete_errors.extend(errors)

    def advance(
        self, vm_id: str, state: VMState, *, ip: str | None = None, status: str | None = None
    ) -> VM:
        """Move a VM to `state` (and give it `ip`), shown as `status` (the provider's own word;
        by default the state's name); returns it as `get_vm` will now."""
        vm = replace(self.vms[vm_id], state=state, provider_status=status or str(state))
        if ip is not None:
            vm = replace(vm, ip=ip)
        self.vms[vm_id] = vm
        return vm

    def add_vm(self, offer: Offer, *, name: str | None = None, tag: str | None = None) -> VM:
        """A VM on the account that no create of ours made (or one a lost create made)."""
        return self._make_vm(offer, name=name, tag=tag)

    # --- ProviderAdapter -------------------------------------------------------------------

    def stock_reads(self, machines: Collection[MachineKey]) -> list[StockRead]:
        """One read of everything (it costs nothing)."""
        return [(("GET", "/offers"),)]

    async def fetch_offers(self, machines: Collection[MachineKey] | None = None) -> list[Offer]:
        """The offers set last, unless a read error is queued."""
        self.calls["fetch_offers"] += 1
        if self.read_errors:
            raise self.read_errors.popleft()(self.provider, "scripted read failure")
        return list(self.offers)

    def stock_forecasts(self) -> list[StockForecast] | None:
        """`forecasts` as set (None by default: the fake says nothing of stock to come)."""
        return None if self.forecasts is None else list(self.forecasts)

    async def create_vm(
        self,
        offer: Offer,
        *,
        name: str,
        tag: str,
        ssh_public_key: str | None,
        disk_gb: int | None = None,
        startup_script: str | None = None,
        image: str | None = None,
    ) -> VM:
        """Do what the next queued outcome says (by default: make a pending VM); a start-up
        script is kept under the VM's name first, whatever the outcome."""
        self.calls["create_vm"] += 1
        outcome = self.outcomes.popleft() if self.outcomes else Create.ok()
        call = CreateCall(offer, name, tag, ssh_public_key, disk_gb, outcome)
        call.startup_script = startup_script
        call.image = image
        if startup_script is not None:
            self.startup_scripts[name] = startup_script
        self.creates.append(call)
        if outcome.wait_for is not None:
            await outcome.wait_for.wait()
        if outcome.error is None:
            vm = self._make_vm(offer, name=name, tag=tag)
            call.vm_id = vm.id
            return vm
        if outcome.makes_vm:
            call.vm_id = self._make_vm(offer, name=name, tag=tag).id
        raise outcome.error(self.provider, f"scripted {outcome.error.__name__}")

    async def get_vm(self, vm_id: str) -> VM | None:
        """The VM as it is now; None for ids this fake never made."""
        self.calls["get_vm"] += 1
        return self.vms.get(vm_id)

    async def find_vms(
        self, *, name: str, tag: str, offer: Offer, not_before: datetime
    ) -> list[VM]:
        """By name and tag; without names, live VMs of the offer's kind made since `not_before`."""
        self.calls["find_vms"] += 1
        if self.finds_vms_by_name:
            return [vm for vm in self.vms.values() if vm.name == name and tag in vm.tags]
        return [
            vm
            for vm in self._live()
            if (vm.region, vm.sku) == (offer.region, offer.sku)
            and (vm.created_at is None or vm.created_at >= not_before)
        ]

    async def list_vms(self) -> list[VM]:
        """Every VM not deleted."""
        self.calls["list_vms"] += 1
        return self._live()

    async def delete_vm(self, vm_id: str) -> None:
        """Mark the VM gone; unknown or gone already is fine (unless a delete error is queued)."""
        self.calls["delete_vm"] += 1
        if self.delete_errors:
            raise self.delete_errors.popleft()(self.provider, "scripted delete failure")
        if vm_id in self.vms:
            self.deleted.append(vm_id)
            self.advance(vm_id, VMState.GONE)

    async def balance(self) -> Decimal:
        """`account_balance`, or `balance_error` raised."""
        self.calls["balance"] += 1
        if self.balance_error is not None:
            raise self.balance_error
        return self.account_balance

    async def images(self) -> Images:
        """`known_images` (or `image_error`, raised)."""
        self.calls["images"] += 1
        if self.image_error is not None:
            raise self.image_error
        return self.known_images

    async def delete_startup_script(self, name: str) -> None:
        """Forget the script kept for `name`; none is fine (unless a delete error is queued)."""
        self.calls["delete_startup_script"] += 1
        if self.script_delete_errors:
            raise self.script_delete_errors.popleft()(self.provider, "scripted delete failure")
        if self.startup_scripts.pop(name, None) is not None:
            self.deleted_scripts.append(name)

    async def list_startup_scripts(self) -> list[str]:
        """The names of the scripts kept."""
        self.calls["list_startup_scripts"] += 1
        return sorted(self.startup_scripts)

    async def list_volumes(self) -> list[Volume]:
        """None: the fake provider keeps no volumes."""
        return []

    async def delete_volume(self, volume_id: str) -> None:
        """Nothing to do."""

    # --- internals -------------------------------------------------------------------------

    def _make_vm(self, offer: Offer, *, name: str | None, tag: str | None) -> VM:
        vm = VM(
            provider=self.provider,
            id=f"fake-vm-{next(self._ids)}",
            state=VMState.PENDING,
            provider_status=str(VMState.PENDING),
            name=name if self.finds_vms_by_name else None,
            region=offer.region,
            sku=offer.sku,
            created_at=datetime.now(UTC),
            tags=(tag,) if self.finds_vms_by_name and tag else (),
        )
        self.vms[vm.id] = vm
        return vm

    def _live(self) -> list[VM]:
        return [vm for vm in self.vms.values() if vm.state is not VMState.GONE]
