"""The simulated Verda: OAuth2 tokens, rate limits, instance lifecycle and its JSON shapes."""

import base64
import hashlib
import math
import secrets
import time
import uuid
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.providers.verda.spec import SIMULATOR_CREDENTIALS
from app.simulators.billing import BillingPolicy
from app.simulators.verda.catalog import CATALOG_ENTRIES, VOLUME_PRICES
from app.simulators.verda.cluster_catalog import CLUSTER_ENTRIES
from app.simulators.verda.cluster_fleet import ClusterFleet
from app.simulators.vms import SimVM
from app.simulators.volumes import DELETED, SimVolume, new_volume

CLIENT_ID = SIMULATOR_CREDENTIALS["client_id"]
CLIENT_SECRET = SIMULATOR_CREDENTIALS["client_secret"]
DEFAULT_TOKEN_TTL = 3600.0
SCOPE = "cloud-api-v1"
USER_ID = "7dfc5e2a-3c0b-4f5e-9a41-51c1b0d2e6a8"

PROJECT_LIMIT = 500  # authenticated requests per project per window
ENDPOINT_LIMIT = 60  # per (method, full path) per window
PATH_OVERRIDES = {("GET", "/v1/instances"): 120, ("GET", "/v1/volumes"): 120}
WINDOW = 60.0
RATE_LIMIT_POLICY = f'"project";q={PROJECT_LIMIT};w=60, "endpoint";q={ENDPOINT_LIMIT};w=60'

PENDING_STATUSES = ("ordered", "provisioning")
HOURS_PER_MONTH = Decimal(730)  # what a GB-month price is divided by (as verda-cli does)


def error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> Response:
    """Verda's error body: `{"code": ..., "message": ...}`."""
    return JSONResponse({"code": code, "message": message}, status_code=status, headers=headers)


def api_path(request: Request) -> str:
    """The path below the mount point, as the real API sees it (`/v1/...`)."""
    path = request.url.path
    root = str(request.scope.get("root_path", ""))
    return path[len(root) :] if root and path.startswith(root) else path


def iso_time(unix: float) -> str:
    """Unix seconds as Verda writes a time: ISO 8601 in UTC, milliseconds, `Z`."""
    return (
        datetime.fromtimestamp(unix, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


def _seconds(value: float) -> int | float:
    return int(value) if value.is_integer() else value


def _fingerprint(key: str) -> str:
    parts = key.split()
    try:
        blob = base64.b64decode(parts[1], validate=True) if len(parts) > 1 else key.encode()
    except ValueError:
        blob = key.encode()
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    return f"SHA256:{digest}"


class VerdaSimulator(ClusterFleet):
    """Verda's public API as far as deploying a plain GPU instance, or a cluster, goes."""

    name = "verda"
    catalog_entries = CATALOG_ENTRIES
    cluster_entries = CLUSTER_ENTRIES
    # In 10-minute blocks, each begun in full, from `running` (`offline` still bills) until a
    # delete is accepted or Verda discontinues it: the shared default span. Third parties cite
    # 10-minute blocks with the unused rest refunded; the blocks are what the service bills by.
    billing = BillingPolicy(block_seconds=600.0, refund_unused=False)
    ended_status = "discontinued"

    def reset(self) -> None:
        """Back to a fresh start: also forgets every token, SSH key, startup script and
        cluster."""
        super().reset()
        self.token_ttl_seconds = DEFAULT_TOKEN_TTL
        self.access_tokens: dict[str, float] = {}  # token -> monotonic expiry
        self.refresh_tokens: set[str] = set()
        self.grants: list[str] = []  # grant types of successful token requests, in order
        self.ssh_keys: dict[str, dict[str, Any]] = {}
        self.startup_scripts: dict[str, dict[str, Any]] = {}

    # --- auth ------------------------------------------------------------------------------

    def issue_token(self, grant_type: str) -> dict[str, Any]:
        """A new access + refresh token pair, in Verda's five-field shape."""
        access = "eyJhbGciOiJSUzI1NiJ9." + secrets.token_urlsafe(32)
        refresh = "eyJhbGciOiJSUzI1NiJ9." + secrets.token_urlsafe(32)
        self.access_tokens[access] = time.monotonic() + self.token_ttl_seconds
        self.refresh_tokens.add(refresh)
        self.grants.append(grant_type)
        return {
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": _seconds(self.token_ttl_seconds),
            "refresh_token": refresh,
            "scope": SCOPE,
        }

    def authorized(self, request: Request) -> bool:
        """Whether the request carries a bearer token that is known and not expired."""
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token:
            return False
        expiry = self.access_tokens.get(token.strip())
        return expiry is not None and time.monotonic() < expiry

    def configure(self, body: dict[str, Any]) -> str | None:
        """`token_ttl_seconds`: how long new access tokens live."""
        if "token_ttl_seconds" in body:
            value = body["token_ttl_seconds"]
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                return "token_ttl_seconds must be a number > 0"
            self.token_ttl_seconds = float(value)
        return None

    def config_view(self) -> dict[str, Any]:
        """The token lifetime."""
        return {"token_ttl_seconds": self.token_ttl_seconds}

    # --- rate limits and canned errors -----------------------------------------------------

    def rate_limit(self, request: Request) -> Response | None:
        """Verda counts authenticated requests: 500/min per project, 60/min per method+path."""
        if not self.authorized(request):
            return None
        path = api_path(request)
        now = time.monotonic()
        endpoint_limit = PATH_OVERRIDES.get((request.method, path), ENDPOINT_LIMIT)
        waits = [
            self.limiter.hit("project", PROJECT_LIMIT, WINDOW, now),
            self.limiter.hit(f"{request.method} {path}", endpoint_limit, WINDOW, now),
        ]
        over = [w for w in waits if w is not None]
        return self.rate_limited_response(max(over)) if over else None

    def rate_limit_headers(self, request: Request) -> dict[str, str]:
        """`RateLimit-Policy` and `RateLimit` (what is left of each bucket, and when it resets)
        on every counted answer, as Verda's API sends them."""
        if not self.authorized(request):
            return {}
        now = time.monotonic()
        path = api_path(request)
        endpoint_limit = PATH_OVERRIDES.get((request.method, path), ENDPOINT_LIMIT)
        buckets = (
            ("project", self.limiter.left("project", PROJECT_LIMIT, WINDOW, now)),
            (
                "endpoint",
                self.limiter.left(f"{request.method} {path}", endpoint_limit, WINDOW, now),
            ),
        )
        reported = ", ".join(f'"{name}";r={r};t={math.ceil(t)}' for name, (r, t) in buckets)
        return {"RateLimit-Policy": RATE_LIMIT_POLICY, "RateLimit": reported}

    def rate_limited_response(self, retry_after: float) -> Response:
        """429 `rate_limit_exceeded` with Retry-After and the RateLimit headers."""
        seconds = max(1, math.ceil(retry_after))
        return error(
            429,
            "rate_limit_exceeded",
            "Too many requests",
            headers={
                "Retry-After": str(seconds),
                "RateLimit-Policy": RATE_LIMIT_POLICY,
                "RateLimit": f'"project";r=0;t={seconds}, "endpoint";r=0;t={seconds}',
            },
        )

    def refusal_response(self, status: int, reason: str | None, message: str) -> Response:
        """A refusal as Verda words one: `{"code", "message"}` (no code when `reason` is None)."""
        if reason is None:
            return JSONResponse({"message": message}, status_code=status)
        return error(status, reason, message)

    def server_error_response(self, status: int = 500) -> Response:
        """Verda's 5xx."""
        return error(status, "server_error", "Internal server error")

    # --- instances -------------------------------------------------------------------------

    def vm_status(self, vm: SimVM) -> str:
        """ordered -> provisioning -> running (or error); delete: deleting -> discontinued."""
        deleting = self.deletion_progress(vm)
        if deleting is not None:
            return "deleting" if deleting < 1 else "discontinued"
        if vm.ended is not None:
            return self.ended_status
        progress = self.progress(vm)
        if vm.fail_after_accept and progress >= 0.5:
            return "error"
        if progress < 0.2:
            return "ordered"
        if progress < 1:
            return "provisioning"
        return "offline" if vm.details.get("offline") else "running"

    def describe_vm(self, vm: SimVM) -> dict[str, Any]:
        """The control API's view, plus its OS volume: its size, and what became of it
        (`attached`, `detached` or `trash` after a delete that kept it, `deleted`)."""
        volume = self.volumes.get(vm.details.get("os_volume_id") or "")
        return {
            **super().describe_vm(vm),
            "os_volume_size": None if volume is None else volume.size_gb,
            "os_volume_status": None if volume is None else volume.status,
        }

    def new_volume(
        self, *, name: str, kind: str, size_gb: int, location: str, **owner: Any
    ) -> SimVolume:
        """A volume of `kind` (`NVMe`, `NVMe_Shared_Cluster`) made now with its machine, billed
        at that type's price from when the machine starts billing."""
        volume = new_volume(
            name=name,
            kind=kind,
            size_gb=size_gb,
            location=location,
            price_per_gb_hour=VOLUME_PRICES[kind] / HOURS_PER_MONTH,
            billed_from=self.clock() + max(self.boot_seconds, 0.0),
            **owner,
        )
        self.volumes[volume.id] = volume
        return volume

    def attached_to(
        self, *, vm_id: str | None = None, cluster_id: str | None = None
    ) -> list[SimVolume]:
        """The volumes (not deleted) of a VM or a cluster, attached or not."""
        return [
            v
            for v in self.volumes.values()
            if v.status != DELETED
            and (
                (vm_id is not None and v.vm_id == vm_id)
                or (cluster_id is not None and v.cluster_id == cluster_id)
            )
        ]

    def visible(self, vm: SimVM) -> bool:
        """Whether `GET /v1/instances` (no status filter) still lists the VM."""
        return self.vm_status(vm) != "discontinued"

    def instance_json(self, vm: SimVM) -> dict[str, Any]:
        """The Instance object of `GET /v1/instances[/{id}]`."""
        status = self.status_for_response(vm)
        up = self.vm_status(vm) in ("running", "offline", "deleting", "discontinued")
        details = vm.details
        entry = vm.entry
        return {
            "id": vm.id,
            "ip": vm.ip if up else None,
            "status": status,
            "created_at": iso_time(vm.created_at),
            "created_by_user_id": USER_ID,
            "hostname": vm.name,
            "description": details.get("description", ""),
            "location": entry.region,
            "instance_type": entry.sku,
            "price_per_hour": float(vm.hourly_price),
            "is_spot": False,
            "contract": "PAY_AS_YOU_GO",
            # "DYNAMIC_PRICE is removed. Only FIXED_PRICE is supported now" (the document).
            "pricing": "FIXED_PRICE",
            "image": details.get("image"),
            "os_name": details.get("os_name"),
            "startup_script_id": details.get("startup_script_id"),
            "ssh_key_ids": details.get("ssh_key_ids", []),
            "os_volume_id": details.get("os_volume_id") if up else None,
            "volume_ids": [v.id for v in self.attached_to(vm_id=vm.id)] if up else [],
            "jupyter_token": details.get("jupyter_token"),
            "cpu": {k: v for k, v in entry.details["cpu"].items() if k != "model"},
            "gpu": entry.details["gpu"],
            "gpu_memory": entry.details["gpu_memory"],
            "memory": entry.details["memory"],
            "storage": entry.details["storage"],
            "tags": details.get("tags", []),
        }

    def new_instance_id(self) -> str:
        """A fresh instance UUID."""
        return str(uuid.uuid4())

    # --- SSH keys --------------------------------------------------------------------------

    def add_ssh_key(self, name: str, key: str) -> dict[str, Any]:
        """Register a public key; returns its JSON."""
        key_id = str(uuid.uuid4())
        record = {
            "id": key_id,
            "name": name,
            "key": key,
            "fingerprint": _fingerprint(key),
            "created_by_user_id": USER_ID,
        }
        self.ssh_keys[key_id] = record
        return record

    # --- startup scripts -------------------------------------------------------------------

    def add_startup_script(self, name: str, script: str) -> dict[str, Any]:
        """Store a startup script; returns its JSON."""
        script_id = str(uuid.uuid4())
        created_at = iso_time(time.time())
        record = {"id": script_id, "name": name, "script": script, "created_at": created_at}
        self.startup_scripts[script_id] = record
        return record
