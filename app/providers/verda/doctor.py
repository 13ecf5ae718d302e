"""Verda's own read-only checks for `autoprovision doctor`: its price list and the images."""

from app.providers.base import ProviderAdapter
from app.providers.diagnosis import Probe, Status, Verdict
from app.providers.verda.adapter import VerdaAdapter


async def diagnose(adapter: ProviderAdapter, probe: Probe) -> None:
    """Read the price list and look the configured images (instances', clusters') up, by
    image type or id."""
    if not isinstance(adapter, VerdaAdapter):
        raise TypeError(f"not a Verda adapter: {adapter!r}")

    async def prices() -> Verdict:
        return f"{len(await adapter.refresh_prices())} instance types priced"

    async def image() -> Verdict:
        found = await adapter.find_image()
        if found is None:
            return Status.FAIL, f"{adapter.image!r} is not among Verda's images"
        return f"{adapter.image!r} found (by {found})"

    async def cluster_image() -> Verdict:
        found = await adapter.find_cluster_image()
        if found is None:
            return Status.FAIL, f"{adapter.cluster_image!r} is not among Verda's cluster images"
        return f"{adapter.cluster_image!r} found (by {found})"

    await probe.run("prices", prices)
    await probe.run("image", image)
    await probe.run("cluster image", cluster_image)
