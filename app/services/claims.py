"""Step 1 of the deploy protocol (ARCHITECTURE.md): the claim, before any create is sent.

The order goes waiting -> deploying (compare-and-set), one hour is held, and the attempt is
written with its deterministic VM name and tag. The caller commits this before the create call,
so a crash after it leaves an intent the reconciler can resolve. The settles are in `attempts`.
"""

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, cast

from sqlalchemy import Connection, Table, bindparam, insert, or_, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.clock import utcnow
from app.core.drivers import SERVE_MIN_DRIVER, branch
from app.core.errors import InsufficientFunds
from app.core.ids import new_id
from app.core.market import MAX_ALTERNATIVES, Offer
from app.core.money import format_usd
from app.core.states import (
    AttemptStatus,
    OrderEventKind,
    OrderStatus,
    check_order_move,
)
from app.providers.registry import display_name, spec_for
from app.services import ledger, machine_reports, timeline
from app.services.timeline import Line
from app.storage.models import Attempt, Order
from app.storage.types import UTCDateTime

COLUMNS = Attempt.__table__.columns
DEFAULT_HOUR_SECONDS = 3600.0
# Built once: on the deploy path, building and keying a statement costs more than running it.
_orders = cast(Table, Order.__table__)


def _claim_statement(alternative: int) -> Any:
    """The claim of a waiting order for an offer matched to its alternative `alternative`."""
    # A cluster offer is never claimed for an alternative of one machine, nor the reverse: the
    # offer's nodes must be those of the alternative it was matched to (the first is the
    # order's own columns; the others are listed in `alternatives`).
    nodes = (
        _orders.c.nodes
        if alternative == 1
        else _orders.c.alternatives[(alternative - 1, "nodes")].as_integer()
    )
    return (
        update(_orders)
        .where(
            _orders.c.id == bindparam("order_id"),
            _orders.c.status == OrderStatus.WAITING,
            nodes == bindparam("offer_nodes"),
            # The hour held must not take the order past its spend limit, as it is now.
            or_(_orders.c.max_total_usd.is_(None), _orders.c.max_total_usd >= bindparam("hour")),
        )
        .values(
            status=OrderStatus.DEPLOYING,
            updated_at=bindparam("now", type_=UTCDateTime()),
            attempts=_orders.c.attempts + 1,
        )
        .returning(
            _orders.c.account_id,
            _orders.c.ssh_public_key,
            _orders.c.min_disk_gb,
            _orders.c.attempts,
            # Read by the claim itself: no statement more on the way from stock to create.
            _orders.c.startup_script,
            _orders.c.image,
            _orders.c.serve_engine,
        )
    )


_CLAIMS = {n: _claim_statement(n) for n in range(1, MAX_ALTERNATIVES + 1)}
check_order_move(OrderStatus.WAITING, OrderStatus.DEPLOYING)  # what _CLAIMS do, checked once
_INSERT_ATTEMPT = insert(cast(Table, Attempt.__table__))


class KindBusy(Exception):
    """Another attempt of this kind is still open at a provider that cannot name VMs."""


@dataclass(frozen=True)
class Intent:
    """A committed create attempt: everything the create call needs."""

    attempt_id: str
    order_id: str
    number: int
    vm_name: str
    tag: str
    offer: Offer
    price_with_fees: Decimal
    ssh_public_key: str | None
    disk_gb: int | None
    created_at: datetime
    # The order's start-up script as stored (sealed for the order's id): the deployer opens it.
    sealed_startup_script: str | None = None
    # The image to boot: the order's, else the one chosen for the machine from what its offer
    # boots (None: not known, the provider's configured one).
    image: str | None = None
    # With a start-up script: the token its machine reports with (`machine_reports`), only here
    # and in the script the create sends (never in a log: kept out of the repr); the attempt
    # keeps its SHA-256.
    report_token: str | None = field(default=None, repr=False)


VM_NAME_PREFIX = "ap-"


def vm_name(order_id: str, number: int) -> str:
    """The VM name an attempt is created with: `ap-<order token>-<attempt>` (<= 50 chars)."""
    return f"{VM_NAME_PREFIX}{order_id.partition('_')[2]}-{number}"


VM_TAG_PREFIX = "ap-order-"


def vm_tag(order_id: str) -> str:
    """The tag every VM of one order carries: `ap-order-<order token>`."""
    return f"{VM_TAG_PREFIX}{order_id.partition('_')[2]}"


def describe_offer(offer: Offer, price_with_fees: Decimal) -> str:
    """`Verda FIN-01 8B300.240V at $46.10/h incl. fees`."""
    return (
        f"{display_name(offer.provider)} {offer.region} {offer.sku} at "
        f"{format_usd(price_with_fees)}/h incl. fees"
    )


def serial_kind(region: str, sku: str) -> str:
    """The kind of machine an attempt at a provider that cannot name VMs is serialized on."""
    return f"{region}/{sku}"


def boot_image(offer: Offer, named: str | None, min_driver: int | None) -> tuple[str | None, str]:
    """The image a create of `offer` boots: the order's (`named`), else the best of those the
    offer's machine boots with at least `min_driver` (its serve script's), else None (not
    known: the provider's configured one); and, when that is not the configured image, a
    sentence saying why, for the order's timeline."""
    boots = offer.boots
    if named is not None or boots is None:
        return named, ""
    chosen = boots.choose(min_driver)
    configured = boots.configured
    if chosen is None or configured is None or chosen == configured:
        return chosen, ""
    runs, driver = boots.driver_of(configured)
    if not runs:
        why = f"does not run {offer.gpu_count}x {offer.gpu_model} there"
    elif min_driver is not None and (driver is None or driver < min_driver):
        why = f"has {branch(driver)}; the serve script needs R{min_driver} or newer"
    else:
        why = f"has {branch(driver)}; {offer.gpu_model} needs R{boots.gpu_min_driver} or newer"
    return chosen, f" Boots {chosen}: the configured {configured} {why}."


async def claim(
    session: AsyncSession, *, order_id: str, offer: Offer, price_with_fees: Decimal
) -> Intent | None:
    """Claim a waiting order for `offer`; None if it is no longer waiting (or its spend limit
    no longer covers an hour at `price_with_fees`).

    Raises InsufficientFunds (nothing written) when one hour is more than the account's
    available balance, and KindBusy when the provider cannot name VMs and another attempt of
    this kind is still open (the caller rolls back what was written).
    """
    connection = await session.connection()
    return await connection.run_sync(
        claim_on, order_id=order_id, offer=offer, price_with_fees=price_with_fees
    )


def claim_all(
    connection: Connection,
    claims: Sequence[tuple[str, Offer, Decimal, int]],
    *,
    billing_hour_seconds: float = DEFAULT_HOUR_SECONDS,
) -> tuple[list[Intent], set[str]]:
    """Claim each (order, offer, price with fees, alternative) in the connection's transaction.

    Returns the intents, and the ids of orders that were not waiting any more (or whose spend
    limit no longer covers the hour). Of several,
    one short of money or of a free kind is skipped and spoils no other (a savepoint each);
    a single one raises, and the caller rolls back.
    """
    intents: list[Intent] = []
    gone: set[str] = set()
    for order_id, offer, price_with_fees, alternative in claims:
        isolated = connection.begin_nested() if len(claims) > 1 else contextlib.nullcontext()
        try:
            with isolated:
                intent = claim_on(
                    connection,
                    order_id=order_id,
                    offer=offer,
                    price_with_fees=price_with_fees,
                    billing_hour_seconds=billing_hour_seconds,
                    alternative=alternative,
                )
        except (InsufficientFunds, KindBusy):
            if len(claims) == 1:
                raise
            continue  # the balance moved, or a create of that kind is open
        if intent is None:
            gone.add(order_id)
        else:
            intents.append(intent)
    return intents, gone


def claim_on(
    connection: Connection,
    *,
    order_id: str,
    offer: Offer,
    price_with_fees: Decimal,
    billing_hour_seconds: float = DEFAULT_HOUR_SECONDS,
    alternative: int = 1,
) -> Intent | None:
    """`claim` in a transaction of a synchronous connection (one hop on the deploy path); the
    machine's billing hours will last `billing_hour_seconds`; `alternative`: which of the
    order's alternatives the offer was matched to."""
    now = utcnow()
    claimed = connection.execute(
        _CLAIMS[alternative],
        {"order_id": order_id, "now": now, "offer_nodes": offer.nodes, "hour": price_with_fees},
    ).first()
    if claimed is None:
        return None
    account_id, ssh_public_key, min_disk_gb, number, sealed_script, named, serves = claimed
    image, chose = boot_image(offer, named, SERVE_MIN_DRIVER if serves else None)
    hold = ledger.place_hold_on(
        connection, account_id=account_id, amount=price_with_fees, order_id=order_id
    )
    token, token_sha256 = machine_reports.new_token() if sealed_script else (None, None)
    attempt = Attempt(
        id=new_id("dep"),
        provider_vm_id=None,
        provider_status=None,
        ip=None,
        detail=None,
        running_at=None,
        order_id=order_id,
        number=number,
        provider=str(offer.provider),
        region=offer.region,
        sku=offer.sku,
        gpu_model=offer.gpu_model,
        gpu_count=offer.gpu_count,
        nodes=offer.nodes,
        alternative=alternative,
        machines=None,
        offer_id=offer.offer_id,
        vm_name=vm_name(order_id, number),
        tag=vm_tag(order_id),
        serial_kind=None
        if spec_for(offer.provider).finds_vms_by_name
        else serial_kind(offer.region, offer.sku),
        price_per_hour=offer.price_per_hour,
        price_per_hour_with_fees=price_with_fees,
        status=AttemptStatus.CREATING,
        hold_id=hold.id,
        created_at=now,
        updated_at=now,
        billing_hour_seconds=billing_hour_seconds,
        billed_from=None,
        paid_hours=0,
        charged=Decimal(0),
        unpaid_since=None,
        ended_at=None,
        delete_attempts=0,
        next_delete_at=None,
        report_token_sha256=token_sha256,
        stage=None,
        stage_detail=None,
        progress=None,
        reported_at=None,
        ready_at=None,
    )
    # Plain INSERTs: this commit is on the path from stock read to create call.
    try:
        connection.execute(_INSERT_ATTEMPT, {c.key: getattr(attempt, c.key) for c in COLUMNS})
    except IntegrityError as exc:
        if "serial_kind" in str(exc.orig):
            raise KindBusy(attempt.serial_kind) from exc
        raise
    timeline.write_on(
        connection,
        Line(
            order_id,
            OrderEventKind.CREATE_SENT,
            f"{describe_offer(offer, price_with_fees)}: create sent"
            f"{f' (alternative {alternative})' if alternative > 1 else ''}.{chose}",
        ),
    )
    return Intent(
        attempt_id=attempt.id,
        order_id=order_id,
        number=number,
        vm_name=attempt.vm_name,
        tag=attempt.tag,
        offer=offer,
        price_with_fees=price_with_fees,
        ssh_public_key=ssh_public_key,
        disk_gb=min_disk_gb,
        created_at=now,
        sealed_startup_script=sealed_script,
        image=image,
        report_token=token,
    )
