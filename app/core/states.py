"""The states of orders and of their create attempts, what moves between them, and the kinds of
event an order's timeline records.

The transition tables are the one statement of what may happen: the services check every move
against them (an illegal one is a bug and raises, it is never written), and the docs' states
page and the architecture doc's diagram are rendered from them (`mermaid`), so a test can hold
both to the code.
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
    TERMINATING = "terminating"  # the intent to delete is committed; the VM is being deleted
    TERMINATED = "terminated"  # the provider shows the VM gone after our delete
    LOST = "lost"  # the provider ended the VM (gone, failed or suspended) while it ran

    @property
    def is_final(self) -> bool:
        """Nothing will ever change it again."""
        return not ORDER_TRANSITIONS[self]

    @property
    def can_terminate(self) -> bool:
        """A terminate moves it to `terminating` (its create may still be in flight)."""
        return OrderStatus.TERMINATING in ORDER_TRANSITIONS[self]


class AttemptStatus(StrEnum):
    """Where one create attempt is."""

    CREATING = "creating"  # intent committed, create call in flight
    UNKNOWN = "unknown"  # the create got no clear answer: the VM may exist
    DEPLOYED = "deployed"  # the provider accepted the create
    RUNNING = "running"
    NOT_CREATED = "not_created"  # refused (capacity, limits) or proven not to exist
    FAILED = "failed"  # the provider failed the VM, or it did not run in time; we deleted it
    TERMINATING = "terminating"  # our delete is being sent until the provider shows it gone
    TERMINATED = "terminated"  # the provider shows it gone after our delete
    LOST = "lost"  # the provider ended it while it ran (gone, failed or suspended)

    @property
    def is_open(self) -> bool:
        """Its create may still make, or have made, a VM nobody has recorded yet."""
        return self in (AttemptStatus.CREATING, AttemptStatus.UNKNOWN)

    @property
    def owns_vm(self) -> bool:
        """The provider accepted its create and the VM is not gone: the VM is its order's."""
        return self in (
            AttemptStatus.DEPLOYED,
            AttemptStatus.RUNNING,
            AttemptStatus.TERMINATING,
        )

    @property
    def is_ended(self) -> bool:
        """Its VM ran and is over (deleted by us or ended by the provider): nothing bills."""
        return self in (AttemptStatus.TERMINATED, AttemptStatus.LOST)

    @property
    def is_followed(self) -> bool:
        """The follower still looks at it: open, or deployed and not running yet."""
        return self.is_open or self is AttemptStatus.DEPLOYED


OPEN_ATTEMPTS = tuple(s for s in AttemptStatus if s.is_open)
VM_OWNING_ATTEMPTS = tuple(s for s in AttemptStatus if s.owns_vm)
FOLLOWED_ATTEMPTS = tuple(s for s in AttemptStatus if s.is_followed)
ENDED_ATTEMPTS = tuple(s for s in AttemptStatus if s.is_ended)


class TerminateReason(StrEnum):
    """Why a machine was terminated."""

    REQUESTED = "requested"  # by its owner
    ADMIN = "admin"  # by the operator, with the admin key
    UNPAID = "unpaid"  # a billing hour was not paid within the grace
    MAX_RUNTIME = "max_runtime"  # it ran as long as the order allowed
    MAX_TOTAL = "max_total"  # the next hour would have taken it past the order's total
    NODE_LOST = "node_lost"  # its provider lost a node of the cluster (`on_node_lost: terminate`)


class NodeLostPolicy(StrEnum):
    """What happens to a cluster when its provider loses one of its nodes."""

    KEEP = "keep"  # the order stays with the nodes left; its owner decides
    TERMINATE = "terminate"  # the rest is terminated and the unused time refunded


class AlternativePreference(StrEnum):
    """Which of an order's alternatives it takes when stock for several shows at once."""

    CHEAPEST = "cheapest"  # the cheapest offer any alternative matches
    LISTED = "listed"  # the first alternative, in the order listed, that matches an offer


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
    REFUSED = "refused"  # no VM; the provider did not say why: the order waits, that offer rests
    REJECTED = "rejected"
    # the create got no clear answer, and what the look-up found
    OUTCOME_UNKNOWN = "outcome_unknown"
    OUTCOME_AMBIGUOUS = "outcome_ambiguous"
    ADOPTED = "adopted"
    NOT_CREATED = "not_created"
    # after the accepted create, before the VM runs
    STATUS_UNKNOWN = "status_unknown"  # the provider shows the VM in a status not known here
    VM_FAILED = "vm_failed"  # the VM failed or did not run in time: deleted, refunded
    # why an order still waits although stock showed
    ABOVE_MAX = "above_max"
    SHORT_OF_FUNDS = "short_of_funds"
    # some accepted providers have no credentials on this service (or got them back)
    PROVIDERS_DISABLED = "providers_disabled"
    # dry run: what would have been deployed, had creates been sent
    WOULD_DEPLOY = "would_deploy"
    # after the deploy: paying as it runs, its limits, and its end
    BILLED = "billed"  # a billing hour was paid
    UNPAID = "unpaid"  # a billing hour could not be paid: the grace runs
    LIMITS = "limits"  # when its limits will terminate it
    TERMINATING = "terminating"
    DELETE_RETRY = "delete_retry"  # the provider did not take the delete yet: tried again later
    TERMINATED = "terminated"
    LOST = "lost"
    NODE_LOST = "node_lost"  # the provider lost a node of a cluster that still runs
    # the machine reported a stage (services/machine_reports): on its way, ready, or failed
    MACHINE_REPORT = "machine_report"
    MACHINE_READY = "machine_ready"
    MACHINE_FAILED = "machine_failed"
    NO_REPORTS = "no_reports"  # serves a model, but machines cannot reach this service


class MachineStage(StrEnum):
    """How far a machine got, as its start-up script reports it (`POST /v1/machines/report`),
    in the order it gets there: a machine's stage only moves forward, `failed` last."""

    BOOTED = "booted"
    DRIVER_OK = "driver_ok"  # the GPU driver answers (its version in the detail)
    IMAGE_PULLED = "image_pulled"
    ENGINE_STARTING = "engine_starting"
    DOWNLOADING = "downloading"  # the engine loads the weights: bytes done of the total
    HEALTHY = "healthy"  # the engine's /health answers on the machine
    READY = "ready"  # a completion was answered
    FAILED = "failed"  # with a cause


class MachineFailure(StrEnum):
    """Why a machine reported `failed`."""

    DRIVER_TOO_OLD = "driver_too_old"
    NO_GPU = "no_gpu"
    DISK_TOO_SMALL = "disk_too_small"
    DOWNLOAD_FAILED = "download_failed"
    ENGINE_FAILED = "engine_failed"
    OTHER = "other"


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
    OrderEventKind.TERMINATING: "order.terminating",
    OrderEventKind.TERMINATED: "order.terminated",
    OrderEventKind.LOST: "order.lost",
    OrderEventKind.NODE_LOST: "order.node_lost",
    OrderEventKind.MACHINE_REPORT: "order.progress",
    OrderEventKind.MACHINE_READY: "order.ready",
    OrderEventKind.MACHINE_FAILED: "order.not_ready",
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
        OrderStatus.TERMINATING: "terminate asked for while the create was in flight",
    },
    OrderStatus.DEPLOYED: {
        OrderStatus.RUNNING: "the VM runs, with an IP",
        OrderStatus.WAITING: "the VM failed or did not run in time (deleted, refunded)",
        OrderStatus.TERMINATING: "terminate asked for before the VM ran",
    },
    OrderStatus.RUNNING: {
        OrderStatus.TERMINATING: "terminate asked for, a limit reached or an hour left unpaid",
        OrderStatus.LOST: "the provider ended the VM (gone, failed or suspended)",
    },
    OrderStatus.TERMINATING: {
        OrderStatus.TERMINATED: "the provider shows the VM gone (or no VM came of the create)",
    },
    OrderStatus.CANCELLED: {},
    OrderStatus.EXPIRED: {},
    OrderStatus.FAILED: {},
    OrderStatus.TERMINATED: {},
    OrderStatus.LOST: {},
}

ATTEMPT_TRANSITIONS: Mapping[AttemptStatus, Mapping[AttemptStatus, str]] = {
    AttemptStatus.CREATING: {
        AttemptStatus.DEPLOYED: "the provider accepted the create",
        AttemptStatus.NOT_CREATED: "the provider refused it (capacity, limits, request)",
        AttemptStatus.UNKNOWN: "no clear answer (timeout, 5xx, the process died)",
    },
    AttemptStatus.UNKNOWN: {
        AttemptStatus.DEPLOYED: "the look-up found the VM it made",
        AttemptStatus.NOT_CREATED: "the look-up found none",
    },
    AttemptStatus.DEPLOYED: {
        AttemptStatus.RUNNING: "the VM runs, with an IP",
        AttemptStatus.FAILED: "the VM failed, or did not run by its deadline",
        AttemptStatus.TERMINATING: "its order is terminating (delete intent committed)",
    },
    AttemptStatus.RUNNING: {
        AttemptStatus.TERMINATING: "its order is terminating (delete intent committed)",
        AttemptStatus.LOST: "the provider ended the VM",
    },
    AttemptStatus.TERMINATING: {
        AttemptStatus.TERMINATED: "the provider shows the VM gone",
    },
    AttemptStatus.NOT_CREATED: {},
    AttemptStatus.FAILED: {},
    AttemptStatus.TERMINATED: {},
    AttemptStatus.LOST: {},
}


# What ledger entries, holds and webhooks record: states too, stored with a CHECK like the above.


class LedgerKind(StrEnum):
    """What a ledger entry records."""

    TOPUP = "topup"
    HOLD = "hold"
    HOLD_RELEASE = "hold_release"
    DEBIT = "debit"
    REFUND = "refund"


class HoldStatus(StrEnum):
    """An open hold reserves balance; it ends released (nothing spent) or debited."""

    OPEN = "open"
    RELEASED = "released"
    DEBITED = "debited"


class WebhookFormat(StrEnum):
    """The body an endpoint gets: Standard Webhooks' JSON, or a message a chat app shows."""

    STANDARD = "standard"
    SLACK = "slack"
    DISCORD = "discord"


class WebhookEventType(StrEnum):
    """What a webhook reports."""

    ORDER_DEPLOYED = "order.deployed"
    ORDER_RUNNING = "order.running"
    ORDER_CANCELLED = "order.cancelled"
    ORDER_EXPIRED = "order.expired"
    ORDER_FAILED = "order.failed"
    ORDER_TERMINATING = "order.terminating"
    ORDER_TERMINATED = "order.terminated"
    ORDER_LOST = "order.lost"
    ORDER_NODE_LOST = "order.node_lost"
    ORDER_PROGRESS = "order.progress"
    ORDER_READY = "order.ready"
    ORDER_NOT_READY = "order.not_ready"
    ACCOUNT_LOW_BALANCE = "account.low_balance"


class DeliveryStatus(StrEnum):
    """Where the delivery of one event to one endpoint is."""

    PENDING = "pending"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class IllegalTransition(RuntimeError):
    """A move the transition tables do not allow: a bug, never written."""


def check_order_move(before: OrderStatus, after: OrderStatus) -> None:
    """Raise IllegalTransition unless an order may go from `before` to `after`."""
    if after not in ORDER_TRANSITIONS[before]:
        raise IllegalTransition(f"an order cannot go from {before} to {after}")


def check_attempt_move(befores: tuple[AttemptStatus, ...], after: AttemptStatus) -> None:
    """Raise IllegalTransition unless an attempt may go from each of `befores` to `after`."""
    for before in befores:
        if after not in ATTEMPT_TRANSITIONS[before]:
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
