"""Dry run: what the watcher would have deployed, told once per appearance of the offer."""

from collections.abc import Collection, Iterable

from app.core.market import OfferKey
from app.core.money import format_usd
from app.core.states import OrderEventKind
from app.providers.registry import display_name
from app.services.timeline import Line
from app.support.metrics import WOULD_DEPLOY
from app.watcher.match import Assignment


class WouldDeploy:
    """Turns the matcher's assignments into "would have deployed" lines, without a create.

    An appearance of an offer lasts while each read shows it; once a read no longer does, its
    next appearance is news again. An order is told again when it would take another offer.
    """

    def __init__(self) -> None:
        self._told: dict[str, OfferKey] = {}  # order id -> the offer it was last told of

    def shown(self, keys: Iterable[OfferKey]) -> None:
        """The offers the latest reads show: an offer not among them has ended its appearance."""
        present = set(keys)
        for order_id in [o for o, key in self._told.items() if key not in present]:
            del self._told[order_id]

    def fresh(self, assignments: Iterable[Assignment]) -> list[Line]:
        """Lines for the assignments not told yet in this appearance of their offer."""
        lines = []
        for assignment in assignments:
            key = assignment.offer.key
            if self._told.get(assignment.order_id) == key:
                continue
            self._told[assignment.order_id] = key
            WOULD_DEPLOY.labels(str(assignment.offer.provider)).inc()
            offer = assignment.offer
            lines.append(
                Line(
                    assignment.order_id,
                    OrderEventKind.WOULD_DEPLOY,
                    f"Would have deployed now: {display_name(offer.provider)} {offer.region} "
                    f"{offer.gpu_count}x {offer.gpu_model} ({offer.sku}) at "
                    f"{format_usd(assignment.price_with_fees)}/h incl. fees. Dry run: no create "
                    "sent, nothing held; still waiting.",
                )
            )
        return lines

    def keep_only(self, waiting: Collection[str]) -> None:
        """Forget orders that are no longer waiting."""
        for order_id in [o for o in self._told if o not in waiting]:
            del self._told[order_id]
