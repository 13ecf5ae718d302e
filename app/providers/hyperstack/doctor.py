"""Hyperstack's own read-only checks for `autoprovision doctor`: its pricebook, the image in
every region that sells GPUs, and the environments and key pair a create would use."""

from app.providers.base import ProviderAdapter
from app.providers.diagnosis import Probe, Status, Verdict
from app.providers.hyperstack.adapter import HyperstackAdapter


async def diagnose(adapter: ProviderAdapter, probe: Probe) -> None:
    """Look up what a create needs, as the adapter would, without making any of it."""
    if not isinstance(adapter, HyperstackAdapter):
        raise TypeError(f"not a Hyperstack adapter: {adapter!r}")
    regions: list[str] = []

    async def prices() -> Verdict:
        return f"{len(await adapter.refresh_prices())} GPU models priced"

    async def image() -> Verdict:
        regions.extend(await adapter.gpu_regions())
        if not regions:
            return Status.WARN, "no region sells GPU VMs right now"
        missing = [region for region in regions if not await adapter.has_image(region)]
        if missing:
            return Status.FAIL, f"{adapter.image!r} is missing in {', '.join(missing)}"
        return f"{adapter.image!r} found in {', '.join(regions)}"

    async def environments() -> Verdict:
        found, absent, elsewhere = [], [], []
        for region in regions:
            name = adapter.environment_name(region)
            at = await adapter.environment_region(region)
            if at is None:
                absent.append(name)
            elif at.upper() != region.upper():
                elsewhere.append(f"{name} is in {at}, not {region}")
            else:
                found.append(name)
        if elsewhere:
            return Status.FAIL, "; ".join(elsewhere) + " (the setting needs {region} in it)"
        parts = [f"found: {', '.join(found)}"] if found else []
        if absent:
            parts.append(f"would be created at first deploy: {', '.join(absent)}")
        return "; ".join(parts) or "no region to check"

    async def key_pair() -> Verdict:
        holders = await adapter.keypair_environments()
        if not holders:
            return Status.WARN, (
                f"no key pair named {adapter.key_name!r}: orders without an SSH public key "
                "would fail (import it once, in any environment)"
            )
        wanted = {adapter.environment_name(region) for region in regions}
        to_import = sorted(wanted - set(holders))
        if to_import:
            return f"{adapter.key_name!r} found; would be imported into {', '.join(to_import)}"
        return f"{adapter.key_name!r} found in {', '.join(holders)}"

    await probe.run("prices", prices)
    if (await probe.run("image", image)).status is Status.FAIL and not regions:
        return  # the regions could not be read: nothing to look up in them
    await probe.run("environments", environments)
    await probe.run("key pair", key_pair)
