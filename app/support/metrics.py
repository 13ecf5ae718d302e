"""Prometheus metrics (served at `GET /metrics`)."""

from prometheus_client import Counter, Gauge, Histogram

LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
BOOT_BUCKETS = (5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600)

POLL_SECONDS = Histogram(
    "autoprovision_poll_seconds",
    "Time one stock read of a provider took.",
    ["provider"],
    buckets=LATENCY_BUCKETS,
)
POLL_ERRORS = Counter(
    "autoprovision_poll_errors_total",
    "Stock reads that failed, by provider and kind of failure.",
    ["provider", "kind"],
)
POLLS_SKIPPED = Counter(
    "autoprovision_polls_skipped_total",
    "Times a provider's stock was not read because no waiting order accepts the provider.",
    ["provider"],
)
PROVIDER_CONNECTIONS = Counter(
    "autoprovision_provider_connections_opened_total",
    "New connections to a provider (TCP, and TLS when it is HTTPS), by the request that opened "
    "it: a create that opens one pays the handshake's round trips on the create path.",
    ["provider", "request"],  # request: create, or other
)
PROVIDER_RATE_LIMIT_LEFT = Gauge(
    "autoprovision_provider_rate_limit_remaining",
    "What a provider last reported is left of a shared rate-limit bucket (its RateLimit header).",
    ["provider", "bucket"],
)
PROVIDER_REQUEST_RATE = Gauge(
    "autoprovision_provider_requests_per_minute",
    "Per rate-limit bucket stock reads count against: its limit, what the poll budget plans "
    "to send in it (everything else sent plus the stock reads' share), and what was sent, "
    "over its window, per minute.",
    ["provider", "bucket", "kind"],
)
PROVIDER_RATE_LIMIT_HELD = Counter(
    "autoprovision_provider_requests_held_total",
    "Requests not sent because the provider had reported the limit they count against used up "
    "(or a shared one down to the creates' reserve).",
    ["provider"],
)
ORDERS = Gauge("autoprovision_orders", "Orders by status.", ["status"])
STOCK_TO_CREATE_SECONDS = Histogram(
    "autoprovision_stock_to_create_seconds",
    "From the poll that first saw an offer to the create call sent for it.",
    ["provider"],
    buckets=LATENCY_BUCKETS,
)
CREATES = Counter(
    "autoprovision_creates_total",
    "Create calls by provider and outcome.",
    ["provider", "outcome"],
)
PROVIDER_BALANCE = Gauge(
    "autoprovision_provider_balance_usd",
    "Our account balance at each provider, as last read.",
    ["provider"],
)
WOULD_DEPLOY = Counter(
    "autoprovision_would_deploy_total",
    "Dry run: offers a waiting order would have been deployed on (once per appearance).",
    ["provider"],
)
DEPLOY_TO_RUNNING_SECONDS = Histogram(
    "autoprovision_deploy_to_running_seconds",
    "From the create call to the VM running with an IP.",
    ["provider"],
    buckets=BOOT_BUCKETS,
)
UNKNOWN_VM_STATUSES = Counter(
    "autoprovision_unknown_vm_statuses_total",
    "Reads of a deployed VM not running yet that answered a status the service does not know "
    "(it is waited on until its provider's boot deadline).",
    ["provider"],
)
BOOT_DEADLINES_MISSED = Counter(
    "autoprovision_boot_deadlines_missed_total",
    "Machines deleted, refunded and their orders waiting again for not running within their "
    "provider's boot deadline.",
    ["provider"],
)
UNTRACKED_VMS = Gauge(
    "autoprovision_untracked_vms",
    "VMs on our provider accounts that no order owns (tagged by us where the provider has tags).",
    ["provider"],
)
LEADER = Gauge("autoprovision_leader", "1 while this process runs the watcher (holds the lease).")
WEBHOOK_ATTEMPTS = Counter(
    "autoprovision_webhook_attempts_total",
    "Webhook requests sent, by result (delivered: 2xx; failed: anything else).",
    ["result"],
)
REQUESTS_SHED = Counter(
    "autoprovision_requests_shed_total",
    "Requests answered 503 at once, by the bound they met: process (the process was serving "
    "its limit), client (the client had its share in flight), costly (the costly reads' budget "
    "was taken).",
    ["bound"],
)
SLOW_CLIENTS_DROPPED = Counter(
    "autoprovision_slow_clients_dropped_total",
    "Clients cut off for being too slow or too many, by phase: head (request head not sent in "
    "time), body (408), response (not read in time), connections (over the per-address cap).",
    ["phase"],
)
