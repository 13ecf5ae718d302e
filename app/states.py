"""The states of orders and of their create attempts, what moves between them, and the kinds of
event an order's timeline records.

The transition tables are the one statement of what may happen: the services check every move
against them (an illegal one is a bug and raises, it is never written), and the README's state
section and the architecture doc's diagram are rendered from them (`mermaid`), so a test can
hold both to the code.
"""

from collections.abc import Mapping
from enum import StrEnum
from typing import TypeVar


class OrderStatus(StrEnum):
    """Where an order is in its life."""

    WAITING = "waiting"
    DEPLOYING = "deploying"
    DEPLOYED = "deployed"
    RUNNING = "running"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    FAILED = "failed"

    @property
    def is_final(self) -> bool:
        """Nothing will ever change it again."""
        return not ORDER_TRANSITIONS[self]

    @property
    def has_vm(self) -> bool:
        """A create was accepted for it and its VM has not failed."""
        return self in (OrderStatus.DEPLOYED, OrderStatus.RUNNING)


class DeploymentStatus(StrEnum):
    """Where one create attempt is."""

    CREATING = "creating"  # intent committed, create call in flight
    UNKNOWN = "unknown"  # the create got no clear answer: the VM may exist
    DEPLOYED = "deployed"  # the provider accepted the create
    RUNNING = "running"
    NOT_CREATED = "not_created"  # refused (capacity, limits) or proven not to exist
    FAILED = "failed"  # the provider failed the VM before it ran; we deleted it

    @property
    def is_open(self) -> bool:
        """Its create may still make, or have made, a VM nobody has recorded yet."""
        return self in (DeploymentStatus.CREATING, DeploymentStatus.UNKNOWN)

    @property
    def owns_vm(self) -> bool:
        """The provider accepted its create and the VM has not failed: the VM is its order's."""
        return self in (DeploymentStatus.DEPLOYED, DeploymentStatus.RUNNING)

    @property
    def is_followed(self) -> bool:
        """The follower still looks at it: open, or deployed and not running yet."""
        return self.is_open or self is DeploymentStatus.DEPLOYED


OPEN_DEPLOYMENTS = tuple(s for s in DeploymentStatus if s.is_open)
VM_OWNING_DEPLOYMENTS = tuple(s for s in DeploymentStatus if s.owns_vm)
FOLLOWED_DEPLOYMENTS = tuple(s for s in DeploymentStatus if s.is_followed)


class OrderEventKind(StrEnum):
    """What a line of an order's timeline says happened (the dashboard styles by it)."""

    PLACED = "placed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    CREATE_SENT = "create_sent"
    DEPLOYED = "deployed"
    RUNNING = "running"
    # the create did not make a VM: the order waits again (or fails, for `rejected`)
    NO_CAPACITY = "no_capacity"
    RATE_LIMITED = "rate_limited"
    PROVIDER_FUNDS = "provider_funds"
    PROVIDER_AUTH = "provider_auth"
    PROVIDER_UNAVAILABLE = "provider_unavailable"
    REJECTED = "rejected"
    # the create got no clear answer, and what the look-up found
    OUTCOME_UNKNOWN = "outcome_unknown"
    OUTCOME_AMBIGUOUS = "outcome_ambiguous"
    ADOPTED = "adopted"
    NOT_CREATED = "not_created"
    VM_FAILED = "vm_failed"
    # why an order still waits although stock showed
    ABOVE_MAX = "above_max"
    SHORT_OF_FUNDS = "short_of_funds"
    # some accepted providers have no credentials on this service (or got them back)
    PROVIDERS_DISABLED = "providers_disabled"
    # dry run: what would have been deployed, had creates been sent
    WOULD_DEPLOY = "would_deploy"


# The event stream's type of a timeline line; every other kind is an `order.note` (the order
# still waits, or is still deploying). A rejected create is the one way an order fails.
ORDER_EVENT_TYPES: Mapping[OrderEventKind, str] = {
    OrderEventKind.PLACED: "order.placed",
    OrderEventKind.CREATE_SENT: "order.deploying",
    OrderEventKind.DEPLOYED: "order.deployed",
    OrderEventKind.RUNNING: "order.running",
    OrderEventKind.REJECTED: "order.failed",
    OrderEventKind.CANCELLED: "order.cancelled",
    OrderEventKind.EXPIRED: "order.expired",
}
ORDER_NOTE = "order.note"


# status -> (next status, why), the only moves the services make.
ORDER_TRANSITIONS: Mapping[OrderStatus, Mapping[OrderStatus, str]] = {
    OrderStatus.WAITING: {
        OrderStatus.DEPLOYING: "matching stock, one hour held, create sent",
        OrderStatus.CANCELLED: "cancelled by its owner",
        OrderStatus.EXPIRED: "its expiry passed first",
    },
    OrderStatus.DEPLOYING: {
        OrderStatus.DEPLOYED: "the provider accepted the create (or the look-up found its VM)",
        OrderStatus.WAITING: "no VM came of the create (someone else got the stock first)",
        OrderStatus.FAILED: "the provider refused the request itself",
    },
    OrderStatus.DEPLOYED: {
        OrderStatus.RUNNING: "the VM runs, with an IP",
        OrderStatus.WAITING: "the provider failed the VM before it ran (deleted, refunded)",
    },
    OrderStatus.RUNNING: {},
    OrderStatus.CANCELLED: {},
    OrderStatus.EXPIRED: {},
    OrderStatus.FAILED: {},
}

DEPLOYMENT_TRANSITIONS: Mapping[DeploymentStatus, Mapping[DeploymentStatus, str]] = {
    DeploymentStatus.CREATING: {
        DeploymentStatus.DEPLOYED: "the provider accepted the create",
        DeploymentStatus.NOT_CREATED: "the provider refused it (capacity, limits, request)",
        DeploymentStatus.UNKNOWN: "no clear answer (timeout, 5xx, the process died)",
    },
    DeploymentStatus.UNKNOWN: {
        DeploymentStatus.DEPLOYED: "the look-up found the VM it made",
        DeploymentStatus.NOT_CREATED: "the look-up found none",
    },
    DeploymentStatus.DEPLOYED: {
        DeploymentStatus.RUNNING: "the VM runs, with an IP",
        DeploymentStatus.FAILED: "the provider failed the VM before it ran",
    },
    DeploymentStatus.RUNNING: {},
    DeploymentStatus.NOT_CREATED: {},
    DeploymentStatus.FAILED: {},
}


class IllegalTransition(RuntimeError):
    """A move the transition tables do not allow: a bug, never written."""


def check_order_move(before: OrderStatus, after: OrderStatus) -> None:
    """Raise IllegalTransition unless an order may go from `before` to `after`."""
    if after not in ORDER_TRANSITIONS[before]:
        raise IllegalTransition(f"an order cannot go from {before} to {after}")


def check_deployment_move(befores: tuple[DeploymentStatus, ...], after: DeploymentStatus) -> None:
    """Raise IllegalTransition unless an attempt may go from each of `befores` to `after`."""
    for before in befores:
        if after not in DEPLOYMENT_TRANSITIONS[before]:
            raise IllegalTransition(f"a create attempt cannot go from {before} to {after}")


State = TypeVar("State", bound=StrEnum)


def mermaid(transitions: Mapping[State, Mapping[State, str]]) -> str:
    """The transitions as a Mermaid state diagram (what the docs show)."""
    first = next(iter(transitions))
    lines = ["stateDiagram-v2", f"    [*] --> {first}"]
    for before, moves in transitions.items():
        for after, why in moves.items():
            lines.append(f"    {before} --> {after}: {why}")
        if not moves:
            lines.append(f"    {before} --> [*]")
    return "\n".join(lines)
