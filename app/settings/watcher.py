"""What the watcher does between the orders and the providers: billing, calls, timing."""

from pathlib import Path
from typing import ClassVar

from pydantic import Field

from app.settings.group import SettingsGroup


class BillingSettings(SettingsGroup):
    """Billed hours, what happens when they cannot be paid, and machines that go wrong."""

    title: ClassVar[str] = "Billing and machines"

    billing_hour_seconds: float = Field(
        default=3600.0,
        ge=1,
        le=86400,
        description="How long a billed hour lasts (demo mode: 60 unless set). Every billing rule "
        "(grace, runway, limits, the providers' blocks) is measured in billed time, so a shorter "
        "hour speeds them all up together.",
    )
    low_balance_hours: float = Field(
        default=2.0,
        ge=0,
        le=8760,
        description="An account whose available balance pays its machines for fewer billed "
        "hours than this gets one `account.low_balance` event (stream, webhook) per crossing, "
        "and a banner on the dashboard.",
    )
    unpaid_grace_minutes: float = Field(
        default=10.0,
        ge=0,
        le=1440,
        description="A billing hour that cannot be paid: the machine runs on this long (billed "
        "minutes) for a top-up, which pays the hour; then it is terminated with reason "
        "`unpaid`.",
    )
    cluster_assembly_minutes: float = Field(
        default=15.0,
        gt=0,
        le=1440,
        description="A cluster made of single VMs (at a provider that sells no cluster; the "
        "clusters guide says which) whose nodes are not all running with an IP this long "
        "after the creates were sent is taken apart: every node made is deleted, the hour "
        "refunded, and the order waits again.",
    )
    delete_untracked_vms: bool = Field(
        default=False,
        description="Delete VMs that carry our tag but no order owns (otherwise they are "
        "reported in the log and the `autoprovision_untracked_vms` metric).",
    )


class ProviderCallSettings(SettingsGroup):
    """What the watcher reads at the providers, how often, and how long a call may take."""

    title: ClassVar[str] = "Calls to the providers"

    poll_plan: bool = Field(
        default=True,
        description="Providers whose `POLL_SECONDS` is not set have their stock reads planned "
        "by the poll budget from their published limits: as often as what the limits leave "
        "after everything else allows. `false`: each is read at its fixed default period.",
    )
    history_poll_seconds: float = Field(
        default=30.0,
        ge=0,
        le=3600,
        description="While no waiting order accepts a provider, its stock is still read this "
        "often, for the stock history; `0`: not read. Unset, demo mode uses `5`, so the Stock "
        "page fills within a minute.",
    )
    provider_balance_seconds: float = Field(
        default=60.0,
        ge=0,
        le=86400,
        description="How often our balance at each provider is read (also at start and after "
        "each create's outcome); before a create it must cover one hour. `0`: never read, "
        "nothing held back.",
    )
    provider_images_seconds: float = Field(
        default=3600.0,
        ge=0,
        le=86400,
        description="How often the providers' image lists are read (also at start), so each "
        "machine boots an image that runs it. `0`: never read; machines boot the configured "
        "image, and orders serving a model never deploy.",
    )
    provider_timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        le=120,
        description="Timeout of every provider call but creates.",
    )
    provider_create_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        le=300,
        description="Timeout of a create call; past it the outcome is unknown and the VM is "
        "looked up by name or tag instead of created again.",
    )
    provider_ca_file: Path | None = Field(
        default=None,
        description="A PEM file of certificate authorities to trust for provider APIs besides "
        "the usual ones (a company proxy's, or `autoprovision sim --tls`'s certificate). "
        "Verification is never turned off.",
    )


class WatcherTimingSettings(SettingsGroup):
    """How often the watcher and the webhook dispatcher look again, and the lease replicas
    compete for."""

    title: ClassVar[str] = "Advanced: the watcher's inner timing"
    advanced: ClassVar[bool] = True

    capacity_cooldown_seconds: float = Field(
        default=5.0,
        ge=0,
        le=3600,
        description="After a capacity error, nothing is sent to that offer for this long.",
    )
    follow_seconds: float = Field(
        default=3.0,
        ge=0.1,
        le=600,
        description="How often a deployed VM's status is read until it runs; also how often "
        "billing hours are paid and a terminate made on another replica is picked up.",
    )
    outcome_check_seconds: float = Field(
        default=10.0,
        ge=0,
        le=3600,
        description="After a create with no clear answer, wait this long, then look the VM up "
        "by name or tag. Keep it above how late a provider makes a VM: at one that can neither "
        "name nor tag VMs, a VM that appears after the look-up is nobody's.",
    )
    waiting_refresh_seconds: float = Field(
        default=1.0,
        ge=0.05,
        le=60,
        description="How often the watcher re-reads the waiting orders (it also does right "
        "after a place or cancel).",
    )
    running_check_seconds: float = Field(
        default=30.0,
        ge=0.1,
        le=3600,
        description="How often every running VM's status is read at its provider (one list call "
        "per provider, counted in the poll budget), to find machines the provider ended: their "
        "orders end `lost`, billing stopped when seen.",
    )
    reconcile_seconds: float = Field(
        default=60.0,
        ge=1,
        le=3600,
        description="How often open holds and the providers' VMs are checked for anything left "
        "behind.",
    )
    leader_lease_seconds: float = Field(
        default=10.0,
        ge=1,
        le=300,
        description="The watcher lease replicas compete for; a survivor takes over within about "
        "1.3 times this after the holder dies.",
    )
    webhook_poll_seconds: float = Field(
        default=0.5,
        ge=0.05,
        le=60,
        description="How often the dispatcher looks for due deliveries (changes made by its own "
        "process wake it at once).",
    )
