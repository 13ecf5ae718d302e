"""The QuantaCloud adapter: in-stock offers with ephemeral ids, deployments without names.

QuantaCloud deployments carry no name, label or tag, so a create's returned id is the only
handle on its VM; after a lost answer, `find_vms` lists the live deployments that may be of the
offer's kind since the intent, and the caller adopts the one it cannot otherwise account for.
What QuantaCloud is known to do, and how sure that is, is in `facts`.
"""

from collections.abc import Collection
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from pydantic import SecretStr

from app.providers.base import (
    PROVIDER_CLOCK_SKEW,
    VM,
    Images,
    MachineKey,
    Offer,
    OutcomeUnknown,
    Refused,
    Rejected,
    StockForecast,
    Volume,
)
from app.providers.budget import StockRead
from app.providers.http import Connections, ProviderHTTP
from app.providers.quantacloud import facts, limits, parse
from app.providers.quantacloud.client import DeploymentNotFound, QuantaCloudClient
from app.providers.quantacloud.keys import AccountKeys
from app.providers.quantacloud.parse import NOT_LIVE, PROVIDER


class QuantaCloudAdapter:
    """QuantaCloud behind the `ProviderAdapter` interface."""

    provider = PROVIDER
    page_size = facts.MAX_PAGE_SIZE

    def __init__(
        self,
        client: Connections,
        *,
        base_url: str,
        api_key: SecretStr,
        timeout: float = 10.0,
        create_timeout: float = 30.0,
    ) -> None:
        http = ProviderHTTP(
            self.provider,
            client,
            base_url,
            timeout,
            create_timeout,
            published=limits.PUBLISHED,
        )
        self.budget = http.budget
        self._api = QuantaCloudClient(http, api_key)
        self._keys = AccountKeys(self._api)
        self._base_url = base_url

    def __repr__(self) -> str:
        return f"QuantaCloudAdapter(base_url={self._base_url!r})"

    def stock_reads(self, machines: Collection[MachineKey]) -> list[StockRead]:
        """One read, whatever is wanted: every flavor's stock comes in it."""
        return [limits.STOCK_READ]

    async def fetch_offers(self, machines: Collection[MachineKey] | None = None) -> list[Offer]:
        """In-stock offers, cheapest per (region, sku); MIG slices and unknown GPUs left out."""
        return parse.cheapest_offers(await self._api.offers(page_size=self.page_size))

    def stock_forecasts(self) -> list[StockForecast] | None:
        """None: QuantaCloud's offers say nothing of stock to come."""
        return None

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
        """Deploy `offer` by its (ephemeral) id, naming the one key its VM gets: the order's, or
        for an order without one our no-login key (`keys`), never the account's every key.

        QuantaCloud has no name or tag to set, runs no start-up script and boots one stock
        image: a create with either is refused before anything is sent."""
        if startup_script is not None:
            raise Rejected(self.provider, "QuantaCloud runs no start-up script")
        if image is not None:
            raise Rejected(self.provider, "QuantaCloud boots one stock image")
        if not offer.offer_id:
            raise Rejected(self.provider, f"offer {offer.sku} in {offer.region} has no offer id")
        body: dict[str, Any] = {
            facts.PROVIDER_FIELD: facts.PROVIDER_SLUG,
            facts.OFFER_ID: offer.offer_id,
        }
        body[facts.SSH_KEY_IDS] = await self._keys.for_vm(ssh_public_key)
        try:
            answer = await self._api.deploy(body)
        except (Rejected, Refused):  # any refusal: the no-login key may be gone
            self._keys.forget()
            raise
        vm = parse.created_deployment(answer, offer)
        if vm is None:
            raise OutcomeUnknown(self.provider, "POST /deployments answered without an id")
        return vm

    async def get_vm(self, vm_id: str) -> VM | None:
        """The deployment with this id, or None when QuantaCloud says it does not exist."""
        body = await self._api.deployment(vm_id)
        return None if body is None else parse.deployment(body)

    async def find_vms(
        self, *, name: str, tag: str, offer: Offer, not_before: datetime
    ) -> list[VM]:
        """Live deployments that may be what a create of `offer` made since `not_before` (less
        clock skew): none is ruled out on a field no public source shows unless it says, in
        normalized values, that it is something else (`parse.candidates` says what adoption
        then relies on). The caller drops the ids it already accounts for.
        """
        if not_before.tzinfo is None:
            not_before = not_before.replace(tzinfo=UTC)
        rows = await self._api.deployments(page_size=self.page_size)
        return parse.candidates(rows, offer, not_before - PROVIDER_CLOCK_SKEW)

    async def list_vms(self) -> list[VM]:
        """Every live deployment on the account (QuantaCloud has no tags to tell ours apart)."""
        return parse.live_deployments(await self._api.deployments(page_size=self.page_size))

    async def delete_vm(self, vm_id: str) -> None:
        """Stop (= terminate) a deployment; one already stopping, gone or failed is fine."""
        try:
            await self._api.stop(vm_id)
        except DeploymentNotFound:
            return
        except Rejected as refused:
            # "cannot stop" comes as validation_error; trust the deployment, not the message.
            vm = await self.get_vm(vm_id)
            if vm is not None and vm.state not in NOT_LIVE:
                raise refused

    async def balance(self) -> Decimal:
        """Balance in USD."""
        return parse.balance(await self._api.balance())

    async def images(self) -> Images:
        """None: every QuantaCloud deployment boots one stock image."""
        return Images()

    async def delete_startup_script(self, name: str) -> None:
        """Nothing to do: QuantaCloud keeps no start-up scripts."""

    async def list_startup_scripts(self) -> list[str]:
        """None: QuantaCloud keeps no start-up scripts."""
        return []

    async def list_volumes(self) -> list[Volume]:
        """None: a deployment's disk goes with it."""
        return []

    async def delete_volume(self, volume_id: str) -> None:
        """Nothing to do: QuantaCloud keeps no volumes."""
