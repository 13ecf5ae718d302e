"""Our account balance at each provider, and what the creates sent since it was read will cost.

Before an order is claimed for an offer, the provider's last balance minus the first hour of
every create sent there since that read must cover one hour at the provider's price. A balance
that cannot be read blocks nothing: the create's own "no funds" answer stays the backstop.
"""

import asyncio
import itertools
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from app.core.catalogue import Provider
from app.core.clock import utcnow
from app.core.text import storable
from app.providers.base import ProviderAdapter, ProviderError
from app.providers.registry import described, display_name
from app.support.metrics import PROVIDER_BALANCE

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BalanceRead:
    """One read of a provider account's balance: the amount, or why there is none."""

    amount: Decimal | None
    read_at: datetime
    error: str | None = None


class ProviderBalances:
    """The last balance read per provider, and the first hours committed since."""

    def __init__(
        self,
        adapters: Mapping[Provider, ProviderAdapter],
        *,
        clock: Callable[[], datetime] = utcnow,
        keep: Callable[[Provider, "BalanceRead"], Awaitable[None]] | None = None,
    ) -> None:
        self.adapters = adapters
        self.clock = clock
        self.keep = keep  # stores each read for every replica's admin view
        self.last: dict[Provider, BalanceRead] = {}
        self._sequence = itertools.count(1)
        # provider -> (sequence number, first hour) of each create sent, oldest first
        self._sent: defaultdict[Provider, list[tuple[int, Decimal]]] = defaultdict(list)
        self._reading: dict[Provider, asyncio.Task[BalanceRead]] = {}

    def sent(self, provider: Provider, price_per_hour: Decimal) -> None:
        """A create went out: its first hour comes off the balance until the next read."""
        self._sent[provider].append((next(self._sequence), price_per_hour))

    def headroom(self) -> dict[str, Decimal]:
        """What each provider account can still pay for, where its balance is known."""
        return {
            str(provider): read.amount
            - sum((p for _, p in self._sent.get(provider, [])), Decimal(0))
            for provider, read in self.last.items()
            if read.amount is not None
        }

    async def read(self, provider: Provider) -> BalanceRead:
        """Read one provider's balance now (creates sent while it is read stay counted)."""
        mark = next(self._sequence)
        try:
            amount = await self.adapters[provider].balance()
        except ProviderError as exc:
            result = BalanceRead(None, self.clock(), storable(described(exc))[:500])
        except Exception as exc:  # a shape we do not understand is not a reason to stop
            result = BalanceRead(None, self.clock(), f"unreadable balance ({type(exc).__name__})")
        else:
            result = BalanceRead(amount, self.clock())
            self._sent[provider] = [s for s in self._sent[provider] if s[0] > mark]
            PROVIDER_BALANCE.labels(str(provider)).set(float(amount))
        previous = self.last.get(provider)
        if result.error is not None and (previous is None or previous.error != result.error):
            log.warning(
                "%s balance cannot be read (%s): not checked before creates until it can",
                display_name(provider),
                result.error,
            )
        self.last[provider] = result
        if self.keep is not None:
            try:
                await self.keep(provider, result)
            except Exception:
                log.exception("keeping %s's balance read failed", provider)
        return result

    async def read_all(self) -> None:
        """Read every provider's balance, side by side."""
        await asyncio.gather(*(self.read(p) for p in self.adapters))

    def read_soon(self, provider: Provider) -> None:
        """Start a read in the background (after a create's outcome), unless one is running."""
        running = self._reading.get(provider)
        if running is not None and not running.done():
            return
        self._reading[provider] = asyncio.create_task(
            self.read(provider), name=f"balance {provider}"
        )

    async def reads_done(self) -> None:
        """Wait for the background reads `read_soon` started."""
        await asyncio.gather(*self._reading.values(), return_exceptions=True)

    async def stop(self) -> None:
        """Cancel reads still running."""
        for task in self._reading.values():
            task.cancel()
        await asyncio.gather(*self._reading.values(), return_exceptions=True)
