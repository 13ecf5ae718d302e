"""Timeline notes that say why an order is still waiting, produced once per situation."""

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from decimal import Decimal

from app.core.market import Fees, OrderWants
from app.core.money import format_usd
from app.core.states import OrderEventKind
from app.providers.base import Offer
from app.providers.registry import display_name
from app.services.claims import describe_offer
from app.services.timeline import Line
from app.watcher.match import Assignment, MatchResult, assign
from app.watcher.waiting import oldest_first


def near_misses(
    groups: Sequence[Sequence[OrderWants]],
    offers: Sequence[Offer],
    fees: Fees,
    excluded: frozenset[tuple[str, str, str]],
    funds: Mapping[str, Decimal],
    provider_funds: Mapping[str, Decimal],
) -> MatchResult:
    """The full match, near misses included, of the orders in `groups` (each oldest first):
    pure, so it may run off the event loop on copies."""
    return assign(
        oldest_first(groups),
        offers,
        fees=fees,
        excluded=excluded,
        funds=funds,
        provider_funds=provider_funds,
    )


def still_waiting(result: MatchResult, waiting: Collection[str]) -> MatchResult:
    """`result` without the orders that stopped waiting since it was worked out."""
    return replace(
        result,
        short_of_funds=[a for a in result.short_of_funds if a.order_id in waiting],
        above_max=[a for a in result.above_max if a.order_id in waiting],
        provider_short=[a for a in result.provider_short if a.order_id in waiting],
    )


class WaitingNotes:
    """Remembers what each order was last told, so a situation is noted once, not every poll."""

    def __init__(self) -> None:
        self._told: dict[tuple[str, str], tuple[object, ...]] = {}

    def fresh(
        self,
        result: MatchResult,
        orders: Mapping[str, tuple[OrderWants, ...]],
        funds: Mapping[str, Decimal],
        provider_funds: Mapping[str, Decimal] | None = None,
    ) -> list[Line]:
        """Notes for near misses and funding gaps this order has not been told about yet."""
        notes = []
        for short in result.provider_short:
            if self._new(short, "provider_funds"):
                offer = short.offer
                balance = (provider_funds or {}).get(str(offer.provider), Decimal(0))
                notes.append(
                    Line(
                        short.order_id,
                        OrderEventKind.PROVIDER_FUNDS,
                        f"{display_name(offer.provider)} account balance {format_usd(balance)} "
                        f"does not cover one hour of {offer.gpu_count}x {offer.gpu_model} "
                        f"({format_usd(offer.price_per_hour)}); waiting.",
                    )
                )
        for miss in result.above_max:
            if self._new(miss, "above_max"):
                wants = orders[miss.order_id][miss.alternative - 1]
                seen = f"Stock seen: {describe_offer(miss.offer, miss.price_with_fees)}"
                if miss.price_with_fees > wants.max_price_per_hour:
                    said = f"{seen}, above your max of {format_usd(wants.max_price_per_hour)}."
                else:  # within its price cap: its spend limit is what it passes
                    total = format_usd(wants.first_hour_cap)
                    said = (
                        f"{seen}: its first hour, paid at deploy, would pass your max_total_usd "
                        f"of {total}."
                    )
                notes.append(Line(miss.order_id, OrderEventKind.ABOVE_MAX, said))
        for short in result.short_of_funds:
            if self._new(short, "short_of_funds"):
                available = funds.get(orders[short.order_id][0].account_id, Decimal(0))
                notes.append(
                    Line(
                        short.order_id,
                        OrderEventKind.SHORT_OF_FUNDS,
                        f"{describe_offer(short.offer, short.price_with_fees)} matches, but your "
                        f"available balance ({format_usd(available)}) does not cover one hour: "
                        "keeps waiting.",
                    )
                )
        return notes

    def _new(self, seen: Assignment, kind: str) -> bool:
        situation = (seen.offer.key, seen.price_with_fees)
        if self._told.get((seen.order_id, kind)) == situation:
            return False
        self._told[(seen.order_id, kind)] = situation
        return True

    def keep_only(self, waiting: Collection[str]) -> None:
        """Forget orders that are no longer waiting (a new wait starts a new story)."""
        for key in [k for k in self._told if k[0] not in waiting]:
            del self._told[key]
