"""An order as events store it and webhooks send it: the payload, and the fields the API's own
view of an order shares with it, so the two never drift apart."""

from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any, Self

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    field_validator,
)

from app.core import metering
from app.core.money import format_money
from app.core.states import AttemptStatus, MachineStage, OrderStatus, TerminateReason
from app.open_models.serving import PORTS, tunnel_command
from app.providers.registry import spec_for
from app.services.limits import terminates_at
from app.support.security import ssh_key_fingerprint

MoneyOut = Annotated[Decimal, PlainSerializer(format_money, return_type=str)]
HoursOut = Annotated[Decimal, PlainSerializer(float, return_type=float)]


class ProgressOut(BaseModel):
    """A download's progress as the machine reported it: bytes so far and in all, and from its
    last two reports the rate (bytes a second) and the seconds left at that rate."""

    bytes_done: int | None
    bytes_total: int | None
    rate: float | None
    eta_seconds: int | None


class DeploymentOut(BaseModel):
    """The machine an order got (or is getting)."""

    model_config = ConfigDict(from_attributes=True)

    provider: str
    region: str
    # the attempt's `sku`, under the name the API has always given it
    instance_type: str = Field(validation_alias=AliasChoices("instance_type", "sku"))
    provider_vm_id: str | None
    nodes: int = 1  # machines the create made together (a cluster: one provider object)
    alternative: int = 1  # which of the order's alternatives it is (1: the first or only one)
    price_per_hour: MoneyOut
    price_per_hour_with_fees: MoneyOut
    ip: str | None  # a cluster: its login node's
    status: AttemptStatus
    created_at: datetime
    # What the machine last reported of itself (POST /v1/machines/report), once it has.
    stage: MachineStage | None = None
    stage_detail: str | None = None
    progress: ProgressOut | None = None
    ready_at: datetime | None = None
    time_to_first_token_seconds: float | None = None


class MachineOut(BaseModel):
    """One machine of an order's deployment: the VM itself, or one node of a cluster."""

    provider_vm_id: str  # a cluster's node: its id at the provider
    name: str | None
    ip: str | None  # a cluster's node: its address inside the cluster
    state: str  # pending, running, failed, deleting, gone... (the provider's, normalized)
    provider_status: str | None  # the provider's own word


# What a single VM's attempt status says of the machine (a cluster's nodes say it themselves).
_MACHINE_STATE = {
    AttemptStatus.DEPLOYED: "pending",
    AttemptStatus.RUNNING: "running",
    AttemptStatus.TERMINATING: "deleting",
    AttemptStatus.TERMINATED: "gone",
    AttemptStatus.LOST: "gone",
    AttemptStatus.FAILED: "failed",
}


def machines(attempt: Any) -> list[MachineOut]:
    """The machines an attempt made: its cluster's nodes as last reported, or its one VM."""
    if attempt.machines:
        # Once the machine has ended, its nodes are gone whatever they last reported.
        ended = attempt.status in (AttemptStatus.TERMINATED, AttemptStatus.LOST)
        return [
            MachineOut(
                provider_vm_id=m["id"],
                name=m.get("name"),
                ip=m.get("ip"),
                state="gone" if ended else m.get("state") or "unknown",
                provider_status=m.get("provider_status"),
            )
            for m in attempt.machines
        ]
    if attempt.provider_vm_id is None or attempt.status not in _MACHINE_STATE:
        return []
    return [
        MachineOut(
            provider_vm_id=attempt.provider_vm_id,
            name=attempt.vm_name,
            ip=attempt.ip,
            state=_MACHINE_STATE[attempt.status],
            provider_status=attempt.provider_status,
        )
    ]


class AlternativeOut(BaseModel):
    """One shape an order may take: its machine, providers, price cap and constraints."""

    gpu_model: str
    gpu_count: int
    nodes: int = 1
    providers: list[str]
    max_price_per_hour: MoneyOut
    regions: list[str] | None = None
    min_disk_gb: int | None = None
    interconnect: str | None = None
    cluster_interconnect: str | None = None


def alternatives_of(order: Any) -> list[AlternativeOut]:
    """An order's alternatives, in the order listed (one, for most orders)."""
    return [AlternativeOut.model_validate(a) for a in order.alternatives]


class OrderFields(BaseModel):
    """An order's fields but its SSH key, shared by what the API returns and events store."""

    model_config = ConfigDict(from_attributes=True)

    id: str
    name: str | None
    status: OrderStatus
    gpu_model: str
    gpu_count: int
    providers: list[str]
    # Of `providers`, those this service has no credentials for (it cannot deploy there).
    disabled_providers: list[str] = []
    max_price_per_hour: MoneyOut
    regions: list[str] | None
    min_disk_gb: int | None
    interconnect: str | None
    # Machines of `gpu_count` GPUs deployed together (1: a single machine), the fabric their
    # cluster must have (null: any), and what a node the provider loses does to the rest.
    nodes: int = 1
    cluster_interconnect: str | None = None
    on_node_lost: str = "keep"
    # Every shape the order may take (the fields above are the first); it deploys one, the
    # cheapest that shows or, with `prefer: listed`, the first listed that shows.
    alternatives: list[AlternativeOut] = []
    prefer: str = "cheapest"
    model: str | None = None  # ordered by model: its Hugging Face id
    # The engine its start-up script serves the model with (`vllm`, `sglang`), and once it runs
    # the SSH tunnel that reaches the engine's port (published on the machine's loopback only).
    serve_engine: str | None = None
    serve_tunnel: str | None = None
    expires_at: datetime | None
    created_at: datetime
    updated_at: datetime
    # The owner's limits (null: none): terminate after this many billed hours (counted from
    # when its provider starts billing), or before an hour would take `charged_usd` past this.
    max_runtime_hours: HoursOut | None = None
    max_total_usd: MoneyOut | None = None
    # Its start-up script is never shown (it may hold tokens): only the SHA-256 (hex) of its
    # UTF-8 bytes and how many there are, to check it is the one sent (null: none).
    startup_script_sha256: str | None = None
    startup_script_bytes: int | None = None
    # The OS image its machine boots, as its providers name it (null: each one's configured).
    image: str | None = None
    # Why it was terminated (null until a terminate): requested, admin, unpaid, max_runtime or
    # max_total.
    terminate_reason: TerminateReason | None = None
    deployment: DeploymentOut | None = None
    # Its machine's money and times: when it ran, until when it is paid, what was paid for it
    # so far (debits less refunds), when its limits end it, when it stopped billing.
    running_since: datetime | None = None
    paid_until: datetime | None = None
    charged_usd: MoneyOut = Decimal(0)
    terminates_at: datetime | None = None
    ended_at: datetime | None = None
    # How to reach it while it runs: `ssh ubuntu@203.0.113.7` (a cluster: its login node).
    ssh_command: str | None = None
    # One entry per machine: the VM, or each node of a cluster (provider VM id, IP, state).
    machines: list[MachineOut] = []
    # A cluster sold as one object (Verda's Instant Clusters) is reached through its login
    # node, the one public address: the nodes' own addresses are inside the cluster.
    login_ip: str | None = None

    @field_validator("disabled_providers", "alternatives", mode="before")
    @classmethod
    def _none_is_empty(cls, value: list[Any] | None) -> list[Any]:
        return value or []

    @classmethod
    def present(cls, order: Any, attempt: Any | None) -> Self:
        """The order with its latest create attempt, if it has one."""
        out = cls.model_validate(order)
        out.alternatives = alternatives_of(order)
        if attempt is None:
            return out
        out.deployment = DeploymentOut.model_validate(attempt)
        out.machines = machines(attempt)
        if attempt.machines and attempt.ip:
            out.login_ip = attempt.ip
        out.running_since = attempt.running_at
        out.charged_usd = attempt.charged
        out.ended_at = attempt.ended_at
        hour = attempt.billing_hour_seconds
        if attempt.billed_from is not None:
            out.paid_until = metering.paid_until(attempt.billed_from, attempt.paid_hours, hour)
        if attempt.status in (AttemptStatus.DEPLOYED, AttemptStatus.RUNNING):
            end = terminates_at(order, attempt)
            out.terminates_at = None if end is None else end[0]
        if attempt.status is AttemptStatus.RUNNING and attempt.ip:
            user = spec_for(attempt.provider).ssh_user
            out.ssh_command = f"ssh {user}@{attempt.ip}"
            if order.serve_engine in PORTS:
                out.serve_tunnel = tunnel_command(PORTS[order.serve_engine], user, attempt.ip)
        return out


class OrderSnapshotOut(OrderFields):
    """An order as events store and send it: its SSH key only as a fingerprint, so 30 days of
    events do not keep copies of the key."""

    ssh_key_fingerprint: str | None = None

    @classmethod
    def present(cls, order: Any, attempt: Any | None) -> Self:
        """The order with its latest deployment attempt, and its key's fingerprint."""
        out = super().present(order, attempt)
        out.ssh_key_fingerprint = ssh_key_fingerprint(order.ssh_public_key)
        return out
