"""Which waiting order gets which offer: a pure function, no I/O.

Rules: an offer matches an order when the provider is accepted, its machine is the order's (GPU
model, GPUs per node and nodes: a cluster is never taken for one of its machines, nor one
machine for a cluster), the price with fees, plus the disk the order gets (its own, or
`DEFAULT_DISK_GB`) where it is billed apart from the machine (`disk_price_per_hour`), is at or
below the order's max and within its `max_total_usd` (that sum is the first hour, held at the
claim: `OrderWants.first_hour_cap`), and the optional region, disk, interconnect and cluster
interconnect constraints hold. Orders are served oldest first; each takes its cheapest matching
offer that still has room, and no offer is given to more orders than its known quantity (one,
when the provider only says "available"). An order with several alternatives (shapes, each
with its own providers, price and constraints) is served once, taking the cheapest offer any of
them matches, or with `prefer: listed` the first alternative, in the order listed, that matches
one.
"""

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from itertools import groupby

from app.core.market import (
    Fees,
    MachineKey,
    Offer,
    OrderWants,
    disk_price_per_hour,
    disk_size_gb,
    fits,
)


@dataclass(frozen=True)
class Assignment:
    """`order_id` and `offer` at `price_with_fees` per hour: a create to send, or a near miss."""

    order_id: str
    offer: Offer
    price_with_fees: Decimal
    alternative: int = 1  # which of the order's alternatives it is for


@dataclass
class MatchResult:
    """What one matching pass decided."""

    assignments: list[Assignment] = field(default_factory=list)
    # Matched, but the account's available balance does not cover one hour.
    short_of_funds: list[Assignment] = field(default_factory=list)
    # Everything matched but the price: the cheapest such offer per order.
    above_max: list[Assignment] = field(default_factory=list)
    # Matched, but our account at the offer's provider cannot pay its first hour.
    provider_short: list[Assignment] = field(default_factory=list)


def price_floors(offers: Iterable[Offer], *, fees: Fees) -> dict[MachineKey, Decimal]:
    """Per machine, the least an order must be willing to pay to take any of these offers (its
    cheapest price with fees; a disk billed apart only adds to it)."""
    floors: dict[MachineKey, Decimal] = {}
    for offer in offers:
        price = fees.apply(offer.price_per_hour)
        if offer.machine not in floors or price < floors[offer.machine]:
            floors[offer.machine] = price
    return floors


def assign(
    orders: Iterable[OrderWants],
    offers: Sequence[Offer],
    *,
    fees: Fees,
    excluded: frozenset[tuple[str, str, str]] = frozenset(),
    funds: Mapping[str, Decimal] | None = None,
    provider_funds: Mapping[str, Decimal] | None = None,
    near_misses: bool = True,
) -> MatchResult:
    """Oldest order first, each to its cheapest matching offer with room left.

    `excluded` holds offer keys not to send anything to now (cooling down after a capacity
    error, or a kind whose last create is unresolved at a provider that cannot name VMs).
    `funds` (account id -> available balance), when given, skips orders whose account cannot
    pay one hour, spending it down as orders of one account are assigned.
    `provider_funds` (provider -> what our account there can still pay), when given, skips
    offers whose provider price for one hour it does not cover, spending it down likewise; the
    order may then take a dearer offer elsewhere. A provider not in it is not limited.
    `near_misses=False` (the watcher's hot path) skips, without looking at them, orders that no
    offer is cheap enough for, and leaves `above_max` empty. Ties on price go to the offer that
    sorts first by key, so the result is stable.
    """
    by_machine: dict[MachineKey, list[tuple[Decimal, Offer]]] = defaultdict(list)
    for offer in offers:
        if offer.key not in excluded:
            by_machine[offer.machine].append((fees.apply(offer.price_per_hour), offer))
    for candidates in by_machine.values():
        candidates.sort(key=lambda pair: (pair[0], pair[1].key))
    room = {o.key: (o.available if o.available is not None else 1) for o in offers}
    machine_room = Counter[MachineKey]()
    for key, candidates in by_machine.items():
        machine_room[key] = sum(room[offer.key] for _, offer in candidates)
    # Machines with an offer whose disk is billed apart: their order depends on the order's disk.
    priced_disks = {o.machine for o in offers if o.disk_price_per_gb_hour}
    cheapest = {key: candidates[0][0] for key, candidates in by_machine.items() if candidates}
    with_disk: dict[tuple[MachineKey, int], list[tuple[Decimal, Offer]]] = {}
    left = dict(funds) if funds is not None else None
    provider_left = dict(provider_funds or {})
    result = MatchResult()

    def best(order: OrderWants, misses: list[tuple[str, Assignment]]) -> Assignment | None:
        """The offer `order` (one alternative) would take now, or None (its miss noted)."""
        machine = order.machine
        if machine_room[machine] <= 0:
            return None  # nothing left for this machine (or none in stock)
        if not near_misses and cheapest[machine] > order.first_hour_cap:
            return None  # the hot path skips orders no offer is cheap enough for
        candidates = by_machine[machine]
        if machine in priced_disks:
            disk = (machine, disk_size_gb(order.min_disk_gb))
            if disk not in with_disk:  # one sort per machine and disk size, not per order
                with_disk[disk] = sorted(
                    ((price + disk_price_per_hour(order, o), o) for price, o in candidates),
                    key=lambda pair: (pair[0], pair[1].key),
                )
            candidates = with_disk[disk]
        for price, offer in candidates:
            if room[offer.key] <= 0 or not fits(order, offer):
                continue
            found = Assignment(order.id, offer, price, order.alternative)
            provider_price = offer.price_per_hour + disk_price_per_hour(order, offer)
            if price > order.first_hour_cap:  # its price cap, or its total's first hour
                if near_misses:
                    misses.append(("above_max", found))
            elif left is not None and left.get(order.account_id, Decimal(0)) < price:
                misses.append(("short_of_funds", found))
            elif provider_left.get(str(offer.provider), provider_price) < provider_price:
                misses.append(("provider_short", found))
                continue  # our account at another provider may pay for a dearer offer
            else:
                return found
            return None  # candidates are cheapest first: the first that fits decides
        return None

    ordered = sorted(orders, key=lambda o: (o.created_at, o.id, o.alternative))
    for _, alternatives in groupby(ordered, key=lambda o: o.id):
        misses: list[tuple[str, Assignment]] = []
        chosen: tuple[Assignment, OrderWants] | None = None
        for order in alternatives:
            found = best(order, misses)
            if found is None:
                continue
            if chosen is None or found.price_with_fees < chosen[0].price_with_fees:
                chosen = (found, order)
            if order.prefer_listed:
                break  # strictly in the order listed: the first that can deploy
        for kind, miss in misses:
            # Our account at a provider short of an hour is said even when the order takes a
            # dearer offer elsewhere; the other misses only when it takes none.
            if chosen is None or kind == "provider_short":
                getattr(result, kind).append(miss)
        if chosen is None:
            continue
        taken, order = chosen
        offer = taken.offer
        room[offer.key] -= 1
        machine_room[order.machine] -= 1
        if left is not None:
            left[order.account_id] -= taken.price_with_fees
        if str(offer.provider) in provider_left:
            provider_left[str(offer.provider)] -= offer.price_per_hour + disk_price_per_hour(
                order, offer
            )
        result.assignments.append(taken)
    return result
