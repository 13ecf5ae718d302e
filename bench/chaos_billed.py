"""At the end of a chaos run, with every machine gone: what each provider billed for each machine
(the simulators bill on the service's shortened hour) against what its account paid for it.

The two sides keep different clocks: the service dates a machine's start and end by what it
saw (a follow, a delete's answer, a running watch two seconds apart, latency spikes up to
2.5 s), the simulator by when it did it. With ten-second hours a second is a tenth of an hour,
so a machine matches to the cent only when its ends fall in the same provider block on both
clocks. The rules are that no machine is paid for more than it was billed, nor billed for more
than it was paid, beyond what those clocks explain (see `_differs`); the report gives, for each
provider, the machines compared, those that match to the cent and the totals both ways.
Hyperstack forgets a VM once it is deleted (it answers 404, as the real one does), so only its
machines the simulator still lists are compared."""

import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from chaos_checks import Broken
from chaos_world import SERVICE_SETTINGS
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.states import AttemptStatus
from app.providers.registry import spec_for
from app.simulators.control import SimControl
from app.storage.models import Attempt, Order, OrderEvent

HOUR_SECONDS = float(SERVICE_SETTINGS["AUTOPROVISION_BILLING_HOUR_SECONDS"])
TIMING_SECONDS = 5.0  # the running watch's two seconds and a latency spike's 2.5 on top
CENT = Decimal("0.01")
NOT_CHARGED = "of that time was more than its balance or its limit allowed"


@dataclass
class Machine:
    """One attempt that had a machine: what its account paid, and what its provider billed."""

    provider: str
    nodes: int
    price: Decimal  # per hour with fees, for all its nodes
    paid: Decimal
    unpaid: bool  # it ran unpaid for a while: the grace was free
    why: str  # how it ended and how many deletes it took, for the report
    ran: bool  # the service saw it run and billed its account for it
    # What its order's timeline says was past its balance or limit when it ended: not charged.
    not_charged: Decimal
    unseen_seconds: float  # from its create to when the service saw it bill
    # From the first delete its provider took (the account's billing stops there) to when the
    # service saw it gone: the provider may bill on while it deletes, the account does not.
    deleting_seconds: float
    billed: Decimal = Decimal(0)
    found: bool = False


async def paid_against_billed(
    engine: AsyncEngine, sim: SimControl
) -> tuple[dict[str, Any], list[Broken]]:
    """The report's figures and the machines whose pay differs from their bill by more than
    the clocks explain. Run it once no machine is left."""
    machines, by_id, by_name = await _attempts(engine)
    unowned = never_ran = Decimal(0)
    for provider, bill in await _bills(sim):
        vm_id, name = str(bill["id"]), str(bill.get("name") or "")
        node_of = name.rsplit("-", 1)[0] if name.rsplit("-", 1)[-1].isdigit() else ""
        owner = by_id.get((provider, vm_id)) or by_name.get((provider, name))
        owner = owner or by_name.get((provider, node_of))
        hours = Decimal(bill["charged"]) / Decimal(bill["price_per_hour"])
        if owner is None:
            unowned += Decimal(bill["charged"])  # a create no attempt recorded: ours to pay
            continue
        machine = machines[owner]
        if not machine.ran:  # a failed create's VM, or a cluster's node made alone: ours
            never_ran += Decimal(bill["charged"])
            continue
        share = 1 if bill.get("worker_nodes") is not None else machine.nodes
        machine.billed += machine.price * hours / share
        machine.found = True
    broken, figures = [], {}
    for attempt_id, machine in machines.items():
        if machine.found:
            broken += _differs(attempt_id, machine)
    for provider in SimControl.providers():
        compared = [m for m in machines.values() if m.found and m.provider == provider]
        paid = sum((m.paid for m in compared), Decimal(0))
        billed = sum((m.billed for m in compared), Decimal(0)).quantize(CENT)
        exact = sum(m.billed.quantize(CENT, rounding=ROUND_HALF_UP) == m.paid for m in compared)
        figures[provider] = (
            f"{len(compared)} machines, {exact} to the cent; paid {paid}, billed {billed}"
        )
    figures["billed_for_no_attempt_usd"] = str(unowned.quantize(CENT))
    figures["billed_for_machines_never_run_usd"] = str(never_ran.quantize(CENT))
    return figures, broken


def _differs(attempt_id: str, machine: Machine) -> list[Broken]:
    """The machine, if its pay and its bill differ by more than the clocks explain: paid more
    than billed by more than a block and TIMING_SECONDS; billed more by more than that and the
    time before the service saw it run (a VM found after an unclear create bills from its start,
    the service only from when it saw it), the time it took to go once a delete was taken, and
    what its end could not charge (past the balance or the limit, said on the timeline). Time
    run unpaid is the operator's by design."""
    billed = machine.billed.quantize(CENT, rounding=ROUND_HALF_UP)
    block = machine.price / spec_for(machine.provider).billing.blocks_per_hour
    allowed = block + machine.price * Decimal(TIMING_SECONDS / HOUR_SECONDS)
    not_paid_by_design = machine.price * Decimal(
        (machine.unseen_seconds + machine.deleting_seconds) / HOUR_SECONDS
    )
    said = f"{machine.provider} attempt {attempt_id}: paid {machine.paid}, the provider billed"
    if machine.paid - billed > allowed:
        return [Broken("paid_more_than_billed", f"{said} {billed} ({machine.why})")]
    not_paid_by_design += machine.not_charged
    if billed - machine.paid > allowed + not_paid_by_design and not machine.unpaid:
        return [Broken("billed_not_paid", f"{said} {billed} ({machine.why})")]
    return []


async def _attempts(
    engine: AsyncEngine,
) -> tuple[dict[str, Machine], dict[tuple[str, str], str], dict[tuple[str, str], str]]:
    """Every attempt that may have had a machine, and its ids and names at its provider."""
    machines: dict[str, Machine] = {}
    by_id: dict[tuple[str, str], str] = {}
    by_name: dict[tuple[str, str], str] = {}
    async with engine.connect() as connection:
        rows = await connection.execute(
            select(
                Attempt.id,
                Attempt.order_id,
                Attempt.provider,
                Attempt.provider_vm_id,
                Attempt.vm_name,
                Attempt.machines,
                Attempt.nodes,
                Attempt.price_per_hour_with_fees,
                Attempt.charged,
                Attempt.unpaid_since,
                Attempt.created_at,
                Attempt.billed_from,
                Attempt.ended_at,
                Attempt.updated_at,
                Attempt.status,
                Attempt.delete_attempts,
                Order.terminate_reason,
            ).join(Order, Order.id == Attempt.order_id)
        )
        not_charged = await _not_charged(connection)
        for row in rows:
            machines[row.id] = Machine(
                provider=row.provider,
                nodes=row.nodes,
                price=row.price_per_hour_with_fees,
                paid=row.charged,
                unpaid=row.unpaid_since is not None,
                why=f"{row.status}, {row.terminate_reason}, {row.delete_attempts} deletes",
                ran=row.billed_from is not None,
                not_charged=not_charged.get(row.order_id, Decimal(0)),
                unseen_seconds=(
                    (row.billed_from - row.created_at).total_seconds() if row.billed_from else 0.0
                ),
                deleting_seconds=(
                    (row.updated_at - row.ended_at).total_seconds()
                    if row.status is AttemptStatus.TERMINATED and row.ended_at
                    else 0.0
                ),
            )
            for vm_id in {row.provider_vm_id, *(m.get("id") for m in row.machines or [])}:
                if vm_id is not None:
                    by_id[(row.provider, str(vm_id))] = row.id
            by_name[(row.provider, row.vm_name)] = row.id
    return machines, by_id, by_name


async def _not_charged(connection: Any) -> dict[str, Decimal]:
    """By order: what the end of its machine could not charge, as its timeline tells the user
    (`billing.overrun_said`)."""
    lines = await connection.execute(
        select(OrderEvent.order_id, OrderEvent.message).where(
            OrderEvent.message.like(f"%{NOT_CHARGED}%")
        )
    )
    found: dict[str, Decimal] = {}
    for order_id, message in lines:
        for amount in re.findall(rf"\$([0-9.,]+) {re.escape(NOT_CHARGED)}", message):
            found[order_id] = found.get(order_id, Decimal(0)) + Decimal(amount.replace(",", ""))
    return found


async def _bills(sim: SimControl) -> list[tuple[str, dict[str, Any]]]:
    """Every VM and Verda cluster the simulators ever made, with what each was charged."""
    found = [(p, vm) for p in SimControl.providers() for vm in await sim.vms(p)]
    return found + [("verda", cluster) for cluster in await sim.clusters("verda")]
