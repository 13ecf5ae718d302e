"""Hyperstack's simulated state and wire shapes: environments, key pairs, VMs, stock, prices."""

import base64
import hashlib
import itertools
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.providers.hyperstack.spec import SIMULATOR_CREDENTIALS
from app.simulators.billing import BillingPolicy
from app.simulators.core import ProviderSimulator
from app.simulators.hyperstack.catalog import (
    CATALOG,
    DEFAULT_UNPRICED_GPUS,
    GPUS,
    OTHER_PRICE_ROWS,
    PUBLIC_IP_PRICE,
    PUBLIC_IP_ROW,
    REGIONS,
)
from app.simulators.vms import CatalogEntry, SimVM

API_KEY = SIMULATOR_CREDENTIALS["api_key"]
RATE_LIMIT = 500  # requests per source IP per minute, all endpoints together
RATE_WINDOW = 60.0
CONFIG_COUNTS = (1, 2, 4, 8, 10)
PLANNED = ("planned_7_days", "planned_30_days", "planned_100_days")  # a stock model's forecast
SEED_PUBLIC_KEY = (
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAINxuGnfnwnaRbCUSazUlvGeg6bOYW5KXcd41bC2U6QZ5 operator"
)


def iso(moment: float) -> str:
    """A Unix time as Hyperstack writes timestamps."""
    return datetime.fromtimestamp(moment, UTC).isoformat(timespec="seconds")


def ok(message: str = "Success", **payload: Any) -> JSONResponse:
    """Hyperstack's success envelope: `{status, message, <payload key>: ...}`."""
    return JSONResponse({"status": True, "message": message, **payload})


def error(status: int, message: str, reason: str | None) -> JSONResponse:
    """Hyperstack's error envelope (`error_reason` is left out where the real API omits it)."""
    body: dict[str, Any] = {"status": False, "message": message}
    if reason is not None:
        body["error_reason"] = reason
    return JSONResponse(body, status_code=status)


def bad_request(message: str) -> JSONResponse:
    """400 `bad_request`."""
    return error(400, message, "bad_request")


def not_found(message: str) -> JSONResponse:
    """404 `not_found`."""
    return error(404, message, "not_found")


async def json_object(request: Request) -> dict[str, Any] | None:
    """The request body if it is a JSON object."""
    try:
        body = await request.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def fingerprint(public_key: str) -> str | None:
    """The MD5 fingerprint of an OpenSSH public key, or None if it is not one."""
    parts = public_key.split()
    if len(parts) < 2 or not parts[0].startswith(("ssh-", "ecdsa-", "sk-")):
        return None
    try:
        blob = base64.b64decode(parts[1], validate=True)
    except ValueError:
        return None
    digest = hashlib.md5(blob, usedforsecurity=False).hexdigest()
    return ":".join(digest[i : i + 2] for i in range(0, len(digest), 2))


def stock_bucket(gpus: int) -> str:
    """How the stocks endpoint rounds a GPU count down: "0".."9", "10+", "25+", "100+", "200+"."""
    for floor in (200, 100, 25, 10):
        if gpus >= floor:
            return f"{floor}+"
    return str(gpus)


@dataclass
class SimEnvironment:
    """An environment: a named place in one region that VMs and key pairs live in."""

    id: int
    name: str
    region: str
    created_at: float

    def fields(self) -> dict[str, Any]:
        """As `EnvironmentFields`."""
        return {
            "id": self.id,
            "name": self.name,
            "region": self.region,
            "created_at": iso(self.created_at),
            "features": {
                "network_optimised": True,
                "green_status": REGIONS[self.region]["green_status"],
            },
        }


@dataclass
class SimKeypair:
    """A public key registered in one environment."""

    id: int
    name: str
    environment: SimEnvironment
    public_key: str
    fingerprint: str
    created_at: float

    def fields(self) -> dict[str, Any]:
        """As `KeypairFields`."""
        return {
            "id": self.id,
            "name": self.name,
            "environment": self.environment.fields(),
            "public_key": self.public_key,
            "fingerprint": self.fingerprint,
            "created_at": iso(self.created_at),
        }


class HyperstackSimulator(ProviderSimulator):
    """Hyperstack (NexGen Cloud Infrahub API) as a local fake."""

    name = "hyperstack"
    catalog_entries = CATALOG
    # Per minute, each minute begun in full (Hyperstack sells "per-minute billing"), from ACTIVE
    # until a delete is accepted: the shared default span.
    billing = BillingPolicy(block_seconds=60.0, refund_unused=False)
    # What a prepaid account's VMs become when its credit falls below $0 ("temporarily
    # suspended until a payment is made"); what `/_sim/vms/{id}/end` makes of a VM.
    ended_status = "SUSPENDED"

    def reset(self) -> None:
        """Fresh state: one operator environment with the `autoprovision` key pair in it."""
        super().reset()
        self.environments: dict[str, SimEnvironment] = {}
        self.keypairs: list[SimKeypair] = []
        self.threshold = Decimal(0)
        self.pricebook_string_values = False
        self.unpriced_gpus: set[str] = set(DEFAULT_UNPRICED_GPUS)
        self.public_ip_priced = True
        # (region, GPU name) -> its `planned_*` strings (`PUT /_sim/forecast`); none: null.
        self.forecasts: dict[tuple[str, str], dict[str, str | None]] = {}
        self._ids = itertools.count(1)
        if not hasattr(self, "_vm_ids"):  # like the real API, never hand out a VM id twice,
            self._vm_ids = itertools.count(412001)  # not even across a reset
        seed = self.add_environment("default-CANADA-1", "CANADA-1")
        self.add_keypair("autoprovision", seed, SEED_PUBLIC_KEY)

    # --- account objects -------------------------------------------------------------------

    def add_environment(self, name: str, region: str) -> SimEnvironment:
        """Make an environment (the caller checked the name is free and the region exists)."""
        environment = SimEnvironment(next(self._ids), name, region, time.time())
        self.environments[name] = environment
        return environment

    def add_keypair(self, name: str, environment: SimEnvironment, public_key: str) -> SimKeypair:
        """Register a key pair (the caller checked the key and that the name is free there)."""
        keypair = SimKeypair(
            next(self._ids),
            name,
            environment,
            public_key,
            fingerprint(public_key) or "",
            time.time(),
        )
        self.keypairs.append(keypair)
        return keypair

    def keypair(self, name: str, environment: str) -> SimKeypair | None:
        """The key pair with this name in this environment."""
        for keypair in self.keypairs:
            if keypair.name == name and keypair.environment.name == environment:
                return keypair
        return None

    def next_vm_id(self) -> str:
        """A fresh integer VM id, as a string for the shared core."""
        return str(next(self._vm_ids))

    # --- VMs -------------------------------------------------------------------------------

    def vm_status(self, vm: SimVM) -> str:
        """CREATING -> BUILD -> ACTIVE (or ERROR); DELETING -> gone."""
        deleting = self.deletion_progress(vm)
        if deleting is not None:
            return "DELETING" if deleting < 1 else "DELETED"
        if vm.ended is not None:
            return self.ended_status
        progress = self.progress(vm)
        if vm.fail_after_accept and progress >= 0.5:
            return "ERROR"
        if progress < 0.3:
            return "CREATING"
        return "BUILD" if progress < 1 else "ACTIVE"

    def purge_deleted(self) -> None:
        """Forget VMs whose deletion has finished: from now on they answer 404. Their charge
        is settled first, so forgetting them does not forget what they cost."""
        self.settle()
        for vm_id in [i for i, vm in self.vms.items() if self.vm_status(vm) == "DELETED"]:
            del self.vms[vm_id]

    def instance_fields(self, vm: SimVM) -> dict[str, Any]:
        """A VM as `InstanceFields`; the floating IP shows a little after the VM is ACTIVE."""
        actual = self.vm_status(vm)
        status = self.status_for_response(vm)
        wants_ip = bool(vm.details.get("assign_floating_ip"))
        has_ip = wants_ip and actual in ("ACTIVE", "DELETING") and self.progress(vm) >= 1.2
        entry = vm.entry
        states = {
            "CREATING": ("building", "NOSTATE"),
            "BUILD": ("building", "NOSTATE"),
            "ACTIVE": ("active", "RUNNING"),
            "ERROR": ("error", "NOSTATE"),
            "SUSPENDED": ("suspended", "SHUTDOWN"),
        }
        vm_state, power_state = states.get(actual, ("deleted", "SHUTDOWN"))
        rules = [
            {**rule, "id": n, "status": "SUCCESS", "created_at": iso(vm.created_at)}
            for n, rule in enumerate(vm.details.get("security_rules", []), start=1)
        ]
        return {
            "id": int(vm.id),
            "name": vm.name,
            "status": status,
            "vm_state": vm_state,
            "power_state": power_state,
            "fixed_ip": f"10.0.{int(vm.id) % 250}.{int(vm.id) % 200 + 10}",
            "floating_ip": vm.ip if has_ip else None,
            "floating_ip_status": ("ATTACHED" if has_ip else "ATTACHING") if wants_ip else None,
            "environment": {  # `InstanceEnvironmentFields`: no time of its own
                **{
                    k: v for k, v in vm.details["environment"].fields().items() if k != "created_at"
                },
                "org_id": 5,
            },
            "flavor": {
                "id": entry.details["id"],
                "name": entry.sku,
                "cpu": entry.vcpus,
                "ram": float(entry.ram_gb),
                "disk": entry.disk_gb,
                "ephemeral": entry.details["ephemeral"],
                "gpu": entry.details["gpu"],
                "gpu_count": entry.gpu_count,
                "labels": [],
                "features": {},
            },
            "image": {"name": vm.details["image_name"]},
            "keypair": {"name": vm.details["key_name"]},
            "labels": list(vm.tags),
            "os": "ubuntu",
            "locked": False,
            "created_at": iso(vm.created_at),
            "callback_url": vm.details.get("callback_url"),
            "contract_id": None,
            "cluster_id": None,
            "dedicated_inference_id": None,
            "requires_public_ip": wants_ip,
            "port_randomization": False,
            "port_randomization_status": None,
            "security_rules": rules,
            "volume_attachments": [],
            "features": {},
            "enhanced_metrics": {"enabled": False},
        }

    # --- stock and money -------------------------------------------------------------------

    def stock_models(self, region: str) -> list[str]:
        """The GPU names `GET /core/stocks` lists in `region`: those it sells there."""
        return sorted({e.details["gpu"] for e in self.catalog.values() if e.region == region})

    def stocks(self) -> list[dict[str, Any]]:
        """`GET /core/stocks`: per region and GPU, deployable slots per size, GPUs bucketed,
        and the forecast set for it (null where none is)."""
        result = []
        for region in REGIONS:
            slots: dict[str, dict[int, int]] = {}
            for entry in self.catalog.values():
                if entry.region == region:
                    by_count = slots.setdefault(entry.details["gpu"], {})
                    by_count[entry.gpu_count] = by_count.get(entry.gpu_count, 0) + self.in_stock(
                        entry
                    )
            models = [
                {
                    "model": gpu,
                    "available": stock_bucket(sum(n * k for n, k in counts.items())),
                    **dict.fromkeys(PLANNED),
                    **self.forecasts.get((region, gpu), {}),
                    "configurations": {f"{n}x": counts.get(n, 0) for n in CONFIG_COUNTS},
                }
                for gpu, counts in sorted(slots.items())
            ]
            result.append({"region": region, "stock-type": "GPU", "models": models})
        return result

    def pricebook(self) -> list[dict[str, Any]]:
        """`GET /pricebook`: per-GPU (and other resource) hourly prices."""
        rows = [(g.name, g.price, True) for g in GPUS.values() if g.name not in self.unpriced_gpus]
        rows += [(name, price, False) for name, price in OTHER_PRICE_ROWS]
        if self.public_ip_priced:
            rows.append((PUBLIC_IP_ROW, PUBLIC_IP_PRICE, False))
        result = []
        for row_id, (name, price, is_gpu) in enumerate(rows, start=1):
            value: float | str = float(price)
            if self.pricebook_string_values and is_gpu:
                value = f"{price:.9f}"
            result.append(
                {
                    "id": row_id,
                    "name": name,
                    "value": value,
                    "original_value": value,
                    "discount_applied": False,
                    "start_time": None,
                    "end_time": None,
                }
            )
        return result

    def hourly_price(self, entry: CatalogEntry, *, floating_ip: bool) -> Decimal:
        """What a VM of this flavor bills an hour: the flavor, and its public IP at the
        pricebook's `PublicIP` row when it has one (and the row is listed)."""
        public_ip = PUBLIC_IP_PRICE if floating_ip and self.public_ip_priced else Decimal(0)
        return entry.price_per_hour + public_ip

    def credit(self) -> dict[str, Any]:
        """`GET /billing/user-credit/credit` data."""
        return {
            "credit": float(self.balance),
            "threshold": float(self.threshold),
            "can_create_instance": self.balance > self.threshold,
        }

    # --- wire-level behaviour for the shared gate -------------------------------------------

    def refusal_response(self, status: int, reason: str | None, message: str) -> Response:
        """A refusal in Hyperstack's envelope: `{status: false, message, error_reason}` (no
        `error_reason` when `reason` is None, as some real answers have none)."""
        return error(status, message, reason)

    def server_error_response(self, status: int = 500) -> Response:
        """A legacy 5xx: just a message."""
        return JSONResponse({"message": "Internal Server Error"}, status_code=status)

    def rate_limited_response(self, retry_after: float) -> Response:
        """429 with no Retry-After: Hyperstack documents none."""
        return error(429, "Too many requests. Please slow down.", "too_many_requests")

    def rate_limit(self, request: Request) -> Response | None:
        """500 requests per minute per source IP, over all endpoints."""
        return self.limit_per_ip(request, RATE_LIMIT, RATE_WINDOW)

    def configure(self, body: dict[str, Any]) -> str | None:
        """`pricebook_string_values` (bool), `unpriced_gpus` (list of GPU names) and
        `public_ip_priced` (bool: whether the pricebook lists, and VMs bill, a `PublicIP`)."""
        if "public_ip_priced" in body:
            if not isinstance(body["public_ip_priced"], bool):
                return "public_ip_priced must be true or false"
            self.public_ip_priced = body["public_ip_priced"]
        if "pricebook_string_values" in body:
            if not isinstance(body["pricebook_string_values"], bool):
                return "pricebook_string_values must be true or false"
            self.pricebook_string_values = body["pricebook_string_values"]
        if "unpriced_gpus" in body:
            names = body["unpriced_gpus"]
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                return "unpriced_gpus must be a list of GPU names"
            self.unpriced_gpus = set(names)
        return None

    def config_view(self) -> dict[str, Any]:
        """The Hyperstack-specific settings."""
        return {
            "pricebook_string_values": self.pricebook_string_values,
            "unpriced_gpus": sorted(self.unpriced_gpus),
            "public_ip_priced": self.public_ip_priced,
        }

    def flavor_in_any_region(self, name: str) -> bool:
        """Whether some region sells a flavor of this name."""
        return any(entry.sku == name for entry in self.catalog.values())

    def entry(self, flavor: str, region: str) -> CatalogEntry | None:
        """The catalogue entry for a flavor in a region."""
        return self.catalog.get((flavor, region))
