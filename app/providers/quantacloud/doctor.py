"""QuantaCloud's own read-only checks for `autoprovision doctor`: there is little to check, as
its prices come with its offers and every deployment boots its one stock image."""

from app.providers.base import ProviderAdapter
from app.providers.diagnosis import Probe, Status, Verdict


async def diagnose(adapter: ProviderAdapter, probe: Probe) -> None:
    """Report the prices the stock read found (QuantaCloud has no separate price list)."""

    async def prices() -> Verdict:
        if probe.offers is None:
            return Status.SKIP, "they come with the offers, which could not be read"
        return f"with each offer: {len(probe.offers)} in stock, each priced"

    await probe.run("prices", prices)
