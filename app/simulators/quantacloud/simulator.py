"""QuantaCloud's simulated state: ephemeral offer ids, cool-downs, deployments, SSH keys."""

import base64
import hashlib
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.providers.quantacloud import facts
from app.providers.quantacloud.spec import SIMULATOR_CREDENTIALS
from app.simulators.billing import BillingPolicy, Span
from app.simulators.core import ProviderSimulator
from app.simulators.quantacloud.catalog import build_entries, kind_of, per_gpu_price
from app.simulators.vms import CatalogEntry, SimVM

API_KEY = SIMULATOR_CREDENTIALS["api_key"]
DEFAULT_COOLDOWN_SECONDS = 5.0
FAILURE_CODE = "provisioning_failed"  # a guess: the reference names the field, not its values


def error(kind: facts.ErrorCode, message: str, **extra: Any) -> JSONResponse:
    """QuantaCloud's error envelope: `{"error": {"code", "message", ...}}`."""
    body = {facts.ERROR: {"code": kind.code, "message": message, **extra}}
    return JSONResponse(body, status_code=kind.status)


def iso(unix: float) -> str:
    """Unix seconds as ISO 8601 UTC with milliseconds and a `Z`."""
    moment = datetime.fromtimestamp(unix, UTC).isoformat(timespec="milliseconds")
    return moment.replace("+00:00", "Z")


def fingerprint(public_key: str) -> str | None:
    """The `SHA256:...` fingerprint `ssh-keygen -lf` prints, or None if this is not a key line."""
    parts = public_key.strip().split()
    if len(parts) < 2 or not parts[0].startswith(("ssh-", "ecdsa-", "sk-")):
        return None
    try:
        blob = base64.b64decode(parts[1], validate=True)
    except ValueError:
        return None
    if not blob:
        return None
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


@dataclass
class SSHKey:
    """A key on the account; the API lists it without its material."""

    id: str
    name: str
    fingerprint: str
    created_at: float

    def to_json(self) -> dict[str, Any]:
        """As `GET /users/me/ssh-keys` lists it."""
        return {
            facts.KEY_ID: self.id,
            facts.KEY_NAME: self.name,
            "managed": False,
            facts.KEY_FINGERPRINT: self.fingerprint,
            "createdAt": iso(self.created_at),
        }


class QuantaCloudSimulator(ProviderSimulator):
    """QuantaCloud: in-stock-only offers with ephemeral ids, deployments without names."""

    name = "quantacloud"
    catalog_entries = build_entries()
    # Prepaid per hour (the reference): each hour begun is taken in full, nothing comes back.
    billing = BillingPolicy(block_seconds=3600.0, refund_unused=False)
    ended_status = facts.INTERRUPTED  # what `/_sim/vms/{id}/end` makes of a deployment

    def reset(self) -> None:
        """Back to a fresh start (see `ProviderSimulator.reset`)."""
        super().reset()
        self.offer_ids: dict[tuple[str, str], str] = {}  # current id of each in-stock offer
        self.offer_keys: dict[str, tuple[str, str]] = {}  # every id ever issued -> its offer
        self.cooling_until: dict[tuple[str, str], float] = {}  # monotonic seconds
        self.cooldown_seconds = DEFAULT_COOLDOWN_SECONDS
        self.deployment_details = True
        self.ssh_keys: dict[str, SSHKey] = {}

    # --- offers ----------------------------------------------------------------------------

    def on_stock_change(self, entry: CatalogEntry, quantity: int) -> None:
        """An offer that comes back into stock comes back under a new id."""
        if quantity <= 0:
            self.offer_ids.pop(entry.key, None)
        elif entry.key not in self.offer_ids:
            offer_id = str(uuid.uuid4())
            self.offer_ids[entry.key] = offer_id
            self.offer_keys[offer_id] = entry.key

    def take_one(self, entry: CatalogEntry) -> bool:
        """Take one machine out of stock; the offer (and its id) goes when the last one does."""
        taken = super().take_one(entry)
        if self.in_stock(entry) <= 0:
            self.offer_ids.pop(entry.key, None)
        return taken

    def live_offers(self) -> list[tuple[CatalogEntry, str]]:
        """In-stock offers with their ids, cheapest per GPU first."""
        live = [
            (entry, self.offer_ids[key])
            for key, entry in self.catalog.items()
            if self.in_stock(entry) > 0 and key in self.offer_ids
        ]
        live.sort(key=lambda pair: (per_gpu_price(pair[0]), pair[0].sku, pair[0].region))
        return live

    def offer_by_id(self, offer_id: str) -> CatalogEntry | None:
        """The in-stock offer with this id, or None once it is gone."""
        key = self.offer_keys.get(offer_id)
        if key is None or self.offer_ids.get(key) != offer_id:
            return None
        return self.catalog[key]

    def cooling_for(self, key: tuple[str, str]) -> float | None:
        """Seconds left of this offer's capacity cool-down, or None."""
        until = self.cooling_until.get(key)
        if until is None:
            return None
        left = until - time.monotonic()
        return left if left > 0 else None

    def start_cooldown(self, key: tuple[str, str]) -> None:
        """A create just hit capacity on this offer+location."""
        if self.cooldown_seconds > 0:
            self.cooling_until[key] = time.monotonic() + self.cooldown_seconds

    # --- deployments -----------------------------------------------------------------------

    def vm_status(self, vm: SimVM) -> str:
        """provisioning -> connecting -> active, or failed; stopping -> terminated."""
        stopped = self.deletion_progress(vm)
        if stopped is not None:
            return facts.TERMINATED if stopped >= 1 else facts.STOPPING
        if vm.ended is not None:
            return self.ended_status
        progress = self.progress(vm)
        if vm.fail_after_accept and progress >= 0.5:
            return facts.FAILED
        if progress < 0.5:
            return facts.PROVISIONING
        return facts.CONNECTING if progress < 1 else facts.ACTIVE

    def billable_span(self, vm: SimVM) -> Span:
        """From the create (the first hour is taken then) until a stop is accepted or the
        deployment fails; `provisioning` and `connecting` bill, as the reference proposes."""
        end = vm.stopped_billing
        if vm.fail_after_accept:
            failed = vm.started + 0.5 * max(self.boot_seconds, 0.0)
            end = failed if end is None else min(end, failed)
        return Span(vm.started, end)

    def deployment_json(self, vm: SimVM) -> dict[str, Any]:
        """A deployment as `GET /deployments/{id}` shows it."""
        real = self.vm_status(vm)
        body: dict[str, Any] = {
            "id": vm.id,
            "status": self.status_for_response(vm),
            "failure_code": FAILURE_CODE if real == facts.FAILED else None,
            "connection": (
                {"public_ip": vm.ip, "ssh_port": facts.SSH_PORT, "ssh_user": facts.SSH_USER}
                if real == facts.ACTIVE
                else None
            ),
        }
        if self.deployment_details:
            # Proposal, not seen in the reference: what crash recovery needs to match a
            # deployment to the offer it came from.
            kind = kind_of(vm.entry)
            body.update(
                {
                    facts.CREATED_AT[0]: iso(vm.created_at),
                    "offerId": vm.details.get("offer_id"),
                    facts.GPU: {"slug": kind.slug, "name": kind.name},
                    facts.GPU_COUNT[0]: vm.entry.gpu_count,
                    facts.REGION: vm.entry.region,
                    "priceHourly": float(vm.entry.price_per_hour),
                }
            )
        return body

    def describe_vm(self, vm: SimVM) -> dict[str, Any]:
        """A deployment for the control API, with the offer it was created from, the ids of
        the keys it got and (`ssh_keys`) their fingerprints: who can log in to it."""
        return {
            **super().describe_vm(vm),
            "offer_id": vm.details.get("offer_id"),
            "ssh_key_ids": vm.details.get("ssh_key_ids", []),
            "ssh_keys": vm.details.get("ssh_keys", []),
        }

    def new_deployment(self, entry: CatalogEntry, offer_id: str, ssh_key_ids: list[str]) -> SimVM:
        """Take one from stock and start a deployment booting, with these keys put on it now
        (a key added to the account later never reaches it); its first hour is charged now."""
        self.take_one(entry)
        vm = self.new_vm(f"dep_{uuid.uuid4().hex[:24]}", entry, name=None, tags=[])
        fingerprints = [self.ssh_keys[key_id].fingerprint for key_id in ssh_key_ids]
        vm.details.update(offer_id=offer_id, ssh_key_ids=ssh_key_ids, ssh_keys=fingerprints)
        self.settle()
        return vm

    # --- SSH keys --------------------------------------------------------------------------

    def add_ssh_key(self, name: str, fp: str) -> SSHKey:
        """Register a key on the account."""
        key = SSHKey(f"key_{uuid.uuid4().hex[:16]}", name, fp, time.time())
        self.ssh_keys[key.id] = key
        return key

    # --- wire format -----------------------------------------------------------------------

    def refusal_response(self, status: int, reason: str | None, message: str) -> Response:
        """A refusal in QuantaCloud's envelope: `{"error": {"code", "message"}}` (no code when
        `reason` is None)."""
        if reason is None:
            return JSONResponse({facts.ERROR: {"message": message}}, status_code=status)
        return error(facts.ErrorCode(reason, status), message)

    def server_error_response(self, status: int = 500) -> Response:
        """QuantaCloud's 5xx."""
        return error(facts.INTERNAL_ERROR._replace(status=status), "Internal server error.")

    def rate_limited_response(self, retry_after: float) -> Response:
        """QuantaCloud's 429: no Retry-After, no hint in the body."""
        return error(facts.RATE_LIMITED, "Too many requests.")

    def rate_limit(self, request: Request) -> Response | None:
        """3,000 requests per 15 minutes per client IP, every endpoint counted."""
        return self.limit_per_ip(
            request, facts.RATE_LIMIT_REQUESTS, float(facts.RATE_LIMIT_WINDOW_SECONDS)
        )

    def configure(self, body: dict[str, Any]) -> str | None:
        """`cooldown_seconds` (capacity cool-down) and `deployment_details` (proposal fields)."""
        if "cooldown_seconds" in body:
            value = body["cooldown_seconds"]
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                return "cooldown_seconds must be a number >= 0"
            self.cooldown_seconds = float(value)
        if "deployment_details" in body:
            if not isinstance(body["deployment_details"], bool):
                return "deployment_details must be true or false"
            self.deployment_details = body["deployment_details"]
        return None

    def config_view(self) -> dict[str, Any]:
        """The QuantaCloud-specific settings."""
        return {
            "cooldown_seconds": self.cooldown_seconds,
            "deployment_details": self.deployment_details,
        }

    def balance_text(self) -> str:
        """The balance as the 402 body and the balance proposal write it: six decimals."""
        return str(self.balance.quantize(Decimal("0.000001")))
