"""The one client of the simulators' control API (`/<provider>/_sim/...`), for tests, benchmarks
and demo mode. Each provider's prefix comes from its spec.

`SimControl` is async; `SimControlSync` makes the same calls from synchronous code. Every call
raises `httpx.HTTPStatusError` when the simulator refuses it.
"""

import asyncio
import ssl
import threading
from collections.abc import Coroutine
from decimal import Decimal
from typing import Any, TypeVar

import httpx

from app.providers.registry import simulated_specs, spec_for

T = TypeVar("T")


def control_path(provider: str, call: str) -> str:
    """The path of a control call (`stock`, `faults`...) on `provider`'s simulator."""
    simulator = spec_for(provider).simulator
    if simulator is None:
        raise LookupError(f"{provider} has no simulator")
    return f"{simulator.path}/_sim/{call}"


class SimControl:
    """The control API of the simulators served at `client.base_url` (or at `base_url`)."""

    def __init__(
        self,
        client: httpx.AsyncClient | None = None,
        *,
        base_url: str = "",
        timeout: float = 10,
        verify: ssl.SSLContext | bool = True,
    ) -> None:
        self._owned = client is None
        self.client = client or httpx.AsyncClient(
            base_url=base_url,
            timeout=timeout,
            trust_env=False,
            verify=verify,
            # Dropped before the simulators' server drops an idle connection (after 5 s): one
            # reused just as it closes fails with "Server disconnected".
            limits=httpx.Limits(keepalive_expiry=4.0),
        )

    async def aclose(self) -> None:
        """Close the HTTP client if this object made it."""
        if self._owned:
            await self.client.aclose()

    async def __aenter__(self) -> "SimControl":
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()

    @staticmethod
    def providers() -> list[str]:
        """The providers that have a simulator."""
        return [spec.name for spec in simulated_specs()]

    async def _send(self, method: str, provider: str, call: str, body: Any = None) -> Any:
        response = await self.client.request(method, control_path(provider, call), json=body)
        response.raise_for_status()
        return response.json()

    async def reset(self, provider: str, **config: Any) -> None:
        """Back to the start (no stock, VMs, faults), then `config` (e.g. `boot_seconds`)."""
        await self._send("POST", provider, "reset")
        if config:
            await self.config(provider, **config)

    async def reset_all(self, **config: Any) -> None:
        """`reset` on every simulator."""
        for provider in self.providers():
            await self.reset(provider, **config)

    async def config(self, provider: str, **values: Any) -> dict[str, Any]:
        """Change settings (`boot_seconds`, `rate_limits`, `balance`...); the settings after."""
        result: dict[str, Any] = await self._send("PUT", provider, "config", values)
        return result

    async def balance(self, provider: str, amount: Decimal | str | int) -> Decimal:
        """Set our account's balance at `provider`; the balance after."""
        answer = await self._send("PUT", provider, "balance", {"balance": str(amount)})
        return Decimal(answer["balance"])

    async def get_balance(self, provider: str) -> Decimal:
        """Our account's balance at `provider` now, after charging its VMs for their time."""
        return Decimal((await self._send("GET", provider, "balance"))["balance"])

    async def catalog(self, provider: str) -> list[dict[str, Any]]:
        """Every kind of machine (and of cluster, at Verda): `[{sku, region, gpu_model,
        gpu_count, price_per_hour, stock, kind, nodes, gpus_per_node}]`."""
        result: list[dict[str, Any]] = await self._send("GET", provider, "catalog")
        return result

    async def stock(self, provider: str, sku: str, region: str, quantity: int) -> float:
        """Set the stock of one kind; when it changed (Unix seconds)."""
        body = {"sku": sku, "region": region, "quantity": quantity}
        changed_at: float = (await self._send("PUT", provider, "stock", body))["changed_at"]
        return changed_at

    async def forecast(
        self, provider: str, region: str, gpu_model: str, **planned: str | None
    ) -> dict[str, Any]:
        """Set what the provider's stock answer says it plans to have of `gpu_model` (its own
        name for it) in `region` (Hyperstack's `planned_7_days=`, `planned_30_days=`...; left
        out: null); the forecast as set."""
        body = {"region": region, "gpu_model": gpu_model, **planned}
        result: dict[str, Any] = await self._send("PUT", provider, "forecast", body)
        return result

    async def fault(self, provider: str, kind: str, **extra: Any) -> None:
        """Queue a fault (`count`, `seconds` in `extra`)."""
        await self._send("POST", provider, "faults", {"kind": kind, **extra})

    async def creates(self, provider: str) -> list[dict[str, Any]]:
        """Every create received: `[{received_at, sku, region, name, outcome, vm_id, kind,
        startup_script, image}]` (`kind`: `instance`, or `cluster` for a Verda cluster create;
        `startup_script`: the text the VM got, as the provider received it, or null; `image`:
        the image the create named, or null)."""
        result: list[dict[str, Any]] = await self._send("GET", provider, "creates")
        return result

    async def requests(self, provider: str) -> list[dict[str, Any]]:
        """The newest requests its API received, faulted ones too: `[{method, path, query,
        body, status, ...}]`, credentials and scripts masked."""
        result: list[dict[str, Any]] = await self._send("GET", provider, "requests")
        return result

    async def vms(self, provider: str) -> list[dict[str, Any]]:
        """The VMs that exist, with their status in the provider's words."""
        result: list[dict[str, Any]] = await self._send("GET", provider, "vms")
        return result

    async def volumes(self, provider: str) -> list[dict[str, Any]]:
        """Every volume it keeps apart from VMs, deleted ones too: `[{id, type, size_gb, status
        (attached, detached, trash or deleted), hourly_price, vm_id, cluster_id, ...}]`."""
        result: list[dict[str, Any]] = await self._send("GET", provider, "volumes")
        return result

    async def images(self, provider: str) -> list[dict[str, Any]]:
        """Its OS images (Verda's and Hyperstack's), each with its NVIDIA driver branch and the
        GPUs it runs: `[{..., driver, gpus, ...}]` (Verda: `image_type`, `cluster` and
        `instance_types`; Hyperstack: `name` and `flavors`)."""
        result: list[dict[str, Any]] = await self._send("GET", provider, "images")
        return result

    async def startup_scripts(self, provider: str) -> list[dict[str, Any]]:
        """The start-up scripts kept apart from VMs (Verda's): `[{id, name, script}]`."""
        result: list[dict[str, Any]] = await self._send("GET", provider, "startup-scripts")
        return result

    async def add_startup_script(self, provider: str, name: str, script: str) -> str:
        """Keep a start-up script as if made through the provider's API; its id."""
        body = {"name": name, "script": script}
        made: str = (await self._send("POST", provider, "startup-scripts", body))["id"]
        return made

    async def clusters(self, provider: str) -> list[dict[str, Any]]:
        """Every cluster made (Verda's Instant Clusters), discontinued ones too: `[{id, name,
        cluster_type, region, status, nodes, worker_nodes, price_per_hour, charged...}]`."""
        result: list[dict[str, Any]] = await self._send("GET", provider, "clusters")
        return result

    async def end_vm(self, provider: str, vm_id: str) -> dict[str, Any]:
        """Make the provider end a VM by itself, the way it would (discontinued, suspended,
        interrupted); billing stops. The VM as it is then."""
        result: dict[str, Any] = await self._send("POST", provider, f"vms/{vm_id}/end")
        return result


class SimControlSync:
    """`SimControl`'s calls for synchronous code. They run on an event loop in a thread of this
    object's own, so they work whether or not the calling thread has a loop running."""

    def __init__(self, base_url: str, *, timeout: float = 10) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="sim control", daemon=True
        )
        self._thread.start()
        self._control = SimControl(base_url=base_url, timeout=timeout)

    def _run(self, call: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(call, self._loop).result()

    def close(self) -> None:
        """Close the HTTP client, then stop the loop and its thread."""
        self._run(self._control.aclose())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def __enter__(self) -> "SimControlSync":
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def reset(self, provider: str, **config: Any) -> None:
        """`SimControl.reset`."""
        self._run(self._control.reset(provider, **config))

    def reset_all(self, **config: Any) -> None:
        """`SimControl.reset_all`."""
        self._run(self._control.reset_all(**config))

    def config(self, provider: str, **values: Any) -> dict[str, Any]:
        """`SimControl.config`."""
        return self._run(self._control.config(provider, **values))

    def balance(self, provider: str, amount: Decimal | str | int) -> Decimal:
        """`SimControl.balance`."""
        return self._run(self._control.balance(provider, amount))

    def get_balance(self, provider: str) -> Decimal:
        """`SimControl.get_balance`."""
        return self._run(self._control.get_balance(provider))

    def catalog(self, provider: str) -> list[dict[str, Any]]:
        """`SimControl.catalog`."""
        return self._run(self._control.catalog(provider))

    def stock(self, provider: str, sku: str, region: str, quantity: int) -> float:
        """`SimControl.stock`."""
        return self._run(self._control.stock(provider, sku, region, quantity))

    def forecast(
        self, provider: str, region: str, gpu_model: str, **planned: str | None
    ) -> dict[str, Any]:
        """`SimControl.forecast`."""
        return self._run(self._control.forecast(provider, region, gpu_model, **planned))

    def fault(self, provider: str, kind: str, **extra: Any) -> None:
        """`SimControl.fault`."""
        self._run(self._control.fault(provider, kind, **extra))

    def creates(self, provider: str) -> list[dict[str, Any]]:
        """`SimControl.creates`."""
        return self._run(self._control.creates(provider))

    def requests(self, provider: str) -> list[dict[str, Any]]:
        """`SimControl.requests`."""
        return self._run(self._control.requests(provider))

    def vms(self, provider: str) -> list[dict[str, Any]]:
        """`SimControl.vms`."""
        return self._run(self._control.vms(provider))

    def volumes(self, provider: str) -> list[dict[str, Any]]:
        """`SimControl.volumes`."""
        return self._run(self._control.volumes(provider))

    def images(self, provider: str) -> list[dict[str, Any]]:
        """`SimControl.images`."""
        return self._run(self._control.images(provider))

    def clusters(self, provider: str) -> list[dict[str, Any]]:
        """`SimControl.clusters`."""
        return self._run(self._control.clusters(provider))

    def end_vm(self, provider: str, vm_id: str) -> dict[str, Any]:
        """`SimControl.end_vm`."""
        return self._run(self._control.end_vm(provider, vm_id))
