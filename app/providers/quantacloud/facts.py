"""What is known of QuantaCloud's API, in one place: each fact with its source and how sure it is.

QuantaCloud publishes no API description and no first-party page was reachable, so nothing here
is confirmed. Sureness, as in `../shared/providers/quantacloud.md`:

- [2H] second-hand: stated in urun.sh's public SkyPilot integration, which says it checked the
  docs or the live API. The adapter trusts these, but stays tolerant where they could be wrong.
- [P] our proposal or guess, served by our simulator; the adapter reads one only where an
  answer without it still works.

Sources (all in `urun-sh/skypilot`, also stored under `skypilot-org/skypilot`):
ADAPTOR = `sky/adaptors/quantacloud.py` ("verified against docs.quantacloud.net/api-reference/
overview on 2026-10-06"); FETCHER = `sky/catalog/data_fetchers/fetch_quantacloud.py` (the one
slug map derived from the live `GET /offers`); LANE = `tests/quantacloud/test_quantacloud_lane.py`
(an offer "captured VERBATIM from the live public GET /offers on 2026-10-07"); NOTES = our
`../shared/providers/quantacloud.md`, which reads all three.
"""

from typing import NamedTuple

from app.core.catalogue import Interconnect

# --- where and how ---------------------------------------------------------------------------

BASE_URL = "https://core.quantacloud.net/api/v1"  # [2H] ADAPTOR `API_BASE`
API_PATH = "/api/v1"  # [2H] the path part of BASE_URL, where our simulator serves it
API_KEY_HEADER = "X-API-Key"  # [2H] ADAPTOR ("the docs bless both X-API-Key and Bearer")
BEARER_ACCEPTED = True  # [2H] ADAPTOR, same sentence
# [2H] ADAPTOR, NOTES "Observed API shape": 3,000 requests per 15 minutes per IP (not per key);
# a 429 carries no retry hint.
RATE_LIMIT_REQUESTS = 3000
RATE_LIMIT_WINDOW_SECONDS = 15 * 60

# --- paths (relative to BASE_URL) --------------------------------------------------------------

OFFERS = "/offers"  # [2H] ADAPTOR; public, in-stock offers only
OFFER = "/offers/{offer_id}"  # [2H] ADAPTOR; public, 404 once the offer is gone
GPU_FAMILIES = "/gpu-families"  # [2H] ADAPTOR; public
ACCOUNT = "/account"  # [2H] ADAPTOR
BALANCE = "/account/balance"  # [2H] ADAPTOR (the path; its answer's shape is [P], below)
SSH_KEYS = "/users/me/ssh-keys"  # [2H] ADAPTOR: GET lists, POST registers
DEPLOYMENTS = "/deployments"  # [2H] ADAPTOR: POST creates, GET lists (newest first)
DEPLOYMENT = "/deployments/{deployment_id}"  # [2H] ADAPTOR
STOP = "/deployments/{deployment_id}/stop"  # [2H] ADAPTOR: stopping terminates, disk and all
STOP_STATUS = 202  # [P] NOTES "Could not confirm": the stop's success status is unknown

# --- paging ----------------------------------------------------------------------------------

PAGE = "page"  # [2H] ADAPTOR: 0-indexed
SIZE = "size"  # [2H] ADAPTOR
MAX_PAGE_SIZE = 100  # [2H] ADAPTOR `PAGE_SIZE` ("max size 100")
OFFER_ROWS = "offers"  # [2H] ADAPTOR, FETCHER: `{offers, page, totalPages, totalElements, ...}`
DEPLOYMENT_ROWS = "data"  # [2H] ADAPTOR `list_deployments`
# [2H] NOTES for the offers; [P] for the deployments. The adapter also stops on a short page
# (what ADAPTOR does), so a list without it still ends.
HAS_MORE = "hasMore"

# --- errors: `{"error": {"code", "message", ...}}` ---------------------------------------------


class ErrorCode(NamedTuple):
    """An `error.code` and the HTTP status it comes with."""

    code: str
    status: int


ERROR = "error"  # [2H] ADAPTOR: the envelope's key, holding `code` and `message`
# [2H] ADAPTOR: the account cannot pay one hour of the offer; `required_balance` and
# `current_balance` come as strings.
INSUFFICIENT_BALANCE = ErrorCode("insufficient_balance", 402)
# [2H] ADAPTOR for the code (out of stock or withdrawn since the listing); the status is 400 only
# in LANE's fixture, so the adapter keys on the code at any status.
OFFER_UNAVAILABLE = ErrorCode("offer_unavailable", 400)
# [2H] ADAPTOR: a recent attempt hit capacity for this offer and location; seconds in
# `error.retry_after`.
OFFER_COOLING_DOWN = ErrorCode("offer_cooling_down", 503)
RETRY_AFTER = "retry_after"  # [2H] ADAPTOR `_retry_after_s`
NOT_FOUND = ErrorCode("not_found", 404)  # [2H] ADAPTOR (status); [2H] NOTES (code)
RATE_LIMITED = ErrorCode("rate_limited", 429)  # [2H] ADAPTOR
# [2H] ADAPTOR for the code (e.g. stopping what is already stopping: "cannot stop"); the status
# is [P].
VALIDATION_ERROR = ErrorCode("validation_error", 400)
PROVIDER_NOT_FOUND = ErrorCode("provider_not_found", 400)  # [2H] ADAPTOR (code); status [P]
INTERNAL_ERROR = ErrorCode("internal_error", 500)  # [2H] NOTES
UNAUTHORIZED = ErrorCode("unauthorized", 401)  # [2H] ADAPTOR (status); the code is [P]

# --- deployments -----------------------------------------------------------------------------

PROVIDER_FIELD = "provider"  # [2H] ADAPTOR: the create body is `{provider, offer_id, ssh_key_ids}`
PROVIDER_SLUG = "quantacloud"  # [2H] ADAPTOR: "the ONLY provider value" of `provider`
OFFER_ID = "offer_id"  # [2H] ADAPTOR: the create's offer
# [2H] ADAPTOR `create_deployment`: "`ssh_key_ids` omitted/empty injects EVERY key on the
# account (documented)". Every customer key this service registers sits on that one account, so
# a create always names the keys its VM gets, and never sends an empty list (`keys.py`).
SSH_KEY_IDS = "ssh_key_ids"
CREATED_STATUS = 202  # [2H] ADAPTOR: the create answers 202 `{id, status}`

# [2H] ADAPTOR (docs `deployments.md`); the set is open: anything else is read as unknown.
PROVISIONING = "provisioning"
CONNECTING = "connecting"
ACTIVE = "active"
STOPPING = "stopping"
TERMINATED = "terminated"
FAILED = "failed"
INTERRUPTED = "interrupted"

# [2H] ADAPTOR, LANE: a deployment object is `{id, status, failure_code, connection}`, and
# `connection` (`public_ip`, `ssh_port`, `ssh_user`) is filled in once it is active.
SSH_USER = "ubuntu"  # [2H] ADAPTOR (the docs say so; the fork reads `connection.ssh_user`)
SSH_PORT = 22  # [2H] NOTES
# [P] Fields no public source shows on a deployment; our simulator adds them unless told not
# to. Where a deployment carries one, the adapter uses it only to rule a deployment out in
# values that cannot differ for its own VM (`parse.candidates`). Snake-case spellings are read
# too, as the documented deployment fields are snake case.
CREATED_AT = ("createdAt", "created_at")
GPU = "gpu"  # holding `slug`, as an offer's does
GPU_COUNT = ("gpuCount", "gpu_count")
REGION = "region"

# --- SSH keys --------------------------------------------------------------------------------

# [2H] ADAPTOR: the list is a bare array of `{id, name, managed, fingerprint}`, without the key;
# a new key is `{name, publicKey}`. The fingerprint is `SHA256:<base64>` of the key's blob, as
# `ssh-keygen -lf` prints it, though ADAPTOR keeps the `=` padding: compare without it.
KEY_ID = "id"
KEY_NAME = "name"
KEY_FINGERPRINT = "fingerprint"
KEY_PUBLIC = "publicKey"
# [P] What this service names the keys it registers: a customer's after a hash of the key, its
# no-login key (`keys.py`) after a hash of the key's fingerprint.
KEY_NAME_PREFIX = "autoprovision-"
NO_LOGIN_KEY_PREFIX = "autoprovision-no-login-"

# --- account ---------------------------------------------------------------------------------

# [P] NOTES "Minimal contract": the balance's shape was never seen; we propose
# `{"balance": "12.340000", "currency": "USD"}` and read any of these keys, number or string.
BALANCE_KEYS = ("balance", "amount", "available")
CURRENCY = "USD"  # [2H] NOTES: dollar amounts in the 402 message

# --- offers and GPU slugs --------------------------------------------------------------------

# [2H] FETCHER, ADAPTOR `MIG_SLUG_MARKER`: a MIG slice has its own slug
# (`rtx-pro-6000-blackwell-mig-48gb`) and must never sell as the whole GPU. Matched as a token of
# the slug, wherever it stands (ADAPTOR looks for `-mig-`).
MIG_MARKER = "mig"

# A slug is a chip, a form and a memory size, in any order, each optional but the chip. FETCHER's
# live-derived map spells the form then the memory (`h100-sxm-80gb`, `a100-pcie-40gb`), or no
# memory (`h200-sxm`, `h100-nvl`); our first guesses did otherwise (`h100-sxm`, `a100-80gb-sxm`).
# Every such spelling reads the same, and a form may carry a generation (`sxm5`) [P].
FORMS = {  # a slug's form token -> the interconnect it says
    "sxm": Interconnect.SXM,  # [2H] FETCHER `h100-sxm-80gb`, `h200-sxm`
    "pcie": Interconnect.PCIE,  # [2H] FETCHER `h100-pcie-80gb`
    "nvl": None,  # [2H] FETCHER `h100-nvl`: PCIe cards with NVLink bridges; the offer says which
}
MEMORY_SUFFIX = "gb"  # [2H] FETCHER `-80gb`, `-40gb`, `-48gb`
# The chip part of a slug -> the catalogue's GPU model, or per memory size where the chip comes
# in two (A100 40 and 80 GB must never be sold as each other). A chip not listed falls back to
# the catalogue's own names (`a40`, `v100`, `rtx-a5000`).
CHIPS: dict[str, str | dict[int, str]] = {
    "rtx-pro-6000-blackwell": "RTX-PRO-6000",  # [2H] LANE's live capture, FETCHER
    "rtx-6000-ada": "RTX-6000-ADA",  # [2H] FETCHER
    "rtx-a6000": "RTX-A6000",  # [2H] FETCHER
    "h200": "H200",  # [2H] FETCHER `h200-sxm`, `h200-nvl`
    "gh200": "GH200",  # [2H] FETCHER `gh200` (it counts it as H200; the catalogue keeps it apart)
    "h100": "H100",  # [2H] FETCHER `h100-sxm-80gb`, `h100-pcie-80gb`, `h100-nvl`
    "a100": {40: "A100-40G", 80: "A100-80G"},  # [2H] FETCHER `a100-{sxm,pcie}-{40,80}gb`
    "l40s": "L40S",  # [2H] FETCHER
    "l40": "L40",  # [2H] FETCHER
    "b300": "B300",  # [P] no public source shows a Blackwell SXM slug
    "b200": "B200",  # [P]
    "gb300": "GB300",  # [P]
    "gb200": "GB200",  # [P]
}
