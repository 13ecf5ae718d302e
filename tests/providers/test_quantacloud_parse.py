"""QuantaCloud's parse functions on answers recorded from the simulator, and on the offer
urun.sh captured from the live API (tests/providers/quantacloud/)."""

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from app.core.catalogue import Interconnect, Provider
from app.providers.base import Offer, Unavailable, VMState
from app.providers.quantacloud import parse
from app.support.security import ssh_key_fingerprint

RECORDED = Path(__file__).parent / "quantacloud"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFkkEa055eQN0BuHueKXxmUstrKN6gSW77TuOls8f542 x"
SXM, PCIE = Interconnect.SXM, Interconnect.PCIE
# The slugs of urun-sh/skypilot's `fetch_quantacloud.py`, the one map derived from the live
# offers, with the GPU and interconnect each is; none says its interconnect but by the slug.
LIVE_SLUGS = {
    "rtx-pro-6000-blackwell": ("RTX-PRO-6000", None),
    "rtx-6000-ada": ("RTX-6000-ADA", None),
    "rtx-a6000": ("RTX-A6000", None),
    "h200-sxm": ("H200", SXM),
    "h200-nvl": ("H200", None),
    "gh200": ("GH200", None),
    "h100-sxm-80gb": ("H100", SXM),
    "h100-pcie-80gb": ("H100", PCIE),
    "h100-nvl": ("H100", None),
    "a100-sxm-80gb": ("A100-80G", SXM),
    "a100-pcie-80gb": ("A100-80G", PCIE),
    "a100-sxm-40gb": ("A100-40G", SXM),
    "a100-pcie-40gb": ("A100-40G", PCIE),
    "l40s": ("L40S", None),
    "l40": ("L40", None),
}


def recorded(name: str) -> Any:
    return json.loads((RECORDED / f"{name}.json").read_text())


def test_offers_leave_out_mig_slices_and_keep_the_offer_id() -> None:
    offers = {o.sku: o for o in parse.cheapest_offers(recorded("offers"))}
    assert set(offers) == {"h100-pcie-x2", "rtx-pro-6000-blackwell-x1", "b300-sxm-x8"}
    b300 = offers["b300-sxm-x8"]
    assert (b300.provider, b300.region, b300.gpu_model, b300.gpu_count) == (
        Provider("quantacloud"),
        "us-east-1",
        "B300",
        8,
    )
    assert (b300.price_per_hour, b300.interconnect, b300.disk_fixed) == (
        Decimal("45.52"),
        Interconnect.SXM,
        True,
    )
    assert b300.offer_id == next(r["id"] for r in recorded("offers") if r["gpuCount"] == 8)


def live_offer(slug: str, vram_gb: int | None = 80, **fields: Any) -> dict[str, Any]:
    """The offer urun.sh captured from the live API, for another GPU; without the interconnect
    fields, so that only the slug can tell it."""
    row: dict[str, Any] = recorded("live_offer")
    del row["nvlinkEnabled"], row["interconnect"]
    return {**row, "gpu": {**row["gpu"], "slug": slug, "vramGB": vram_gb}, **fields}


def test_the_live_capture_is_an_rtx_pro_6000_on_pcie() -> None:
    offer = parse.to_offer(recorded("live_offer"))
    assert offer is not None
    assert (offer.sku, offer.gpu_model, offer.interconnect, offer.price_per_hour) == (
        "rtx-pro-6000-blackwell-x1",
        "RTX-PRO-6000",
        PCIE,
        Decimal("2.39"),
    )


@pytest.mark.parametrize("slug", list(LIVE_SLUGS))
def test_offers_spelled_as_the_live_api_spells_them_are_kept(slug: str) -> None:
    offer = parse.to_offer(live_offer(slug, gpuCount=8))
    assert offer is not None
    assert (offer.sku, offer.gpu_model, offer.interconnect, offer.gpu_count) == (
        f"{slug}-x8",
        *LIVE_SLUGS[slug],
        8,
    )


@pytest.mark.parametrize(
    ("slug", "vram_gb", "model"),
    [
        ("a100-80gb-sxm", 80, "A100-80G"),  # our first spelling
        ("a100-40gb-pcie", 40, "A100-40G"),
        ("h100-sxm", 80, "H100"),
        ("h100-80gb-sxm5", 80, "H100"),
        ("a100-sxm", 80, "A100-80G"),  # no size in the slug: the card's memory tells
        ("a100-sxm", 40, "A100-40G"),
        ("a100-pcie", 39, "A100-40G"),
        ("a100-sxm-40gb", 80, "A100-40G"),  # the slug's size first
    ],
)
def test_every_spelling_of_a_gpu_is_that_gpu(slug: str, vram_gb: int, model: str) -> None:
    offer = parse.to_offer(live_offer(slug, vram_gb))
    assert offer is not None and offer.gpu_model == model


@pytest.mark.parametrize(
    ("slug", "vram_gb"),
    [
        ("rtx-pro-6000-blackwell-mig-48gb", 48),
        ("h100-sxm-80gb-mig-40gb", 40),
        ("a100-sxm", None),  # 40 or 80 GB: cannot tell
        ("a100-sxm", 60),
        ("totally-new-gpu", 80),
    ],
)
def test_mig_slices_and_gpus_that_cannot_be_told_are_never_offers(
    slug: str, vram_gb: int | None
) -> None:
    assert parse.to_offer(live_offer(slug, vram_gb)) is None


def test_the_cheapest_row_of_a_kind_is_the_offer() -> None:
    rows = recorded("offers")
    h100 = next(r for r in rows if r["gpu"]["slug"] == "h100-pcie")
    cheaper = {**h100, "id": "cheaper", "priceHourly": 4.0}
    (offer,) = [o for o in parse.cheapest_offers([h100, cheaper, h100]) if o.gpu_model == "H100"]
    assert (offer.offer_id, offer.price_per_hour) == ("cheaper", Decimal("4.0"))


def test_a_deployment_created_and_running() -> None:
    (offer,) = [o for o in parse.cheapest_offers(recorded("offers")) if o.gpu_model == "H100"]
    created = parse.created_deployment(recorded("deploy"), offer)
    running = parse.deployment(recorded("deployment_active"))
    assert created is not None and running is not None and created.id == running.id
    assert (created.state, created.sku, created.region) == (
        VMState.PENDING,
        "h100-pcie-x2",
        "us-midwest-1",
    )
    assert (running.state, running.ip, running.sku, running.name) == (
        VMState.RUNNING,
        "203.0.113.1",
        "h100-pcie-x2",
        None,
    )
    assert parse.created_deployment({"status": "provisioning"}, offer) is None


def test_candidates_are_live_deployments_of_the_kind_since_the_time() -> None:
    (offer,) = [o for o in parse.cheapest_offers(recorded("offers")) if o.gpu_model == "H100"]
    rows = recorded("deployments")  # the rows of every page
    made = parse.timestamp(rows[0]["createdAt"])
    assert made is not None
    assert [vm.id for vm in parse.candidates(rows, offer, made)] == [rows[0]["id"]]
    assert parse.candidates(rows, offer, made + timedelta(seconds=1)) == []
    (b300,) = [o for o in parse.cheapest_offers(recorded("offers")) if o.gpu_model == "B300"]
    assert parse.candidates(rows, b300, made) == []
    stopped = [{**rows[0], "status": "terminated"}]
    assert parse.candidates(stopped, offer, made) == []
    assert parse.live_deployments(stopped) == []


def h100_offer() -> Offer:
    """An offer of 8 H100 SXM in us-east-1, under our first spelling of its slug."""
    offer = parse.to_offer(live_offer("h100-sxm", gpuCount=8))
    assert offer is not None and offer.gpu_model == "H100"
    return offer


def ours(**fields: Any) -> dict[str, Any]:
    """The deployment its create made, as `GET /deployments` might list it."""
    row = {**recorded("deployments")[0], "id": "dep_ours", "region": "us-east-1", "gpuCount": 8}
    row["gpu"] = {"slug": "h100-sxm", "name": "NVIDIA H100"}
    row["createdAt"] = "2026-11-30T19:28:10.974Z"
    return {**row, **fields}


BEGUN = datetime(2026, 11, 30, 19, 28, 5, tzinfo=UTC)  # the attempt, less the clock skew
MADE = datetime(2026, 11, 30, 19, 28, 10, 974000, tzinfo=UTC)


def test_our_deployment_under_the_other_slug_spelling_is_still_a_candidate() -> None:
    offer = h100_offer()
    (vm,) = parse.candidates([ours(gpu={"slug": "h100-sxm-80gb"})], offer, BEGUN)
    # What the watcher's adoption compares with the attempt: the offer's own sku and region.
    assert (vm.id, vm.sku, vm.region) == ("dep_ours", offer.sku, offer.region)


@pytest.mark.parametrize(
    ("fields", "unknown"),
    [
        ({"createdAt": "2026-11-30T14:28:10"}, "created_at"),  # no zone: US Eastern, or any
        ({"createdAt": None, "created_at": "soon"}, "created_at"),
        ({"region": "US East (Virginia)"}, "region"),
        ({"region": {"name": "us-east-1"}}, "region"),
        ({"gpu": {"slug": "hopper-80"}}, "sku"),  # a spelling we do not know
        ({"gpu": "h100"}, "sku"),
        ({"gpuCount": "eight"}, "sku"),
    ],
)
def test_a_field_that_cannot_be_read_never_rules_our_deployment_out(
    fields: dict[str, Any], unknown: str
) -> None:
    offer = h100_offer()
    (vm,) = parse.candidates([ours(**fields)], offer, BEGUN)
    known = {"sku": offer.sku, "region": offer.region, "created_at": MADE}
    assert vm.id == "dep_ours"
    assert {name: getattr(vm, name) for name in known} == {**known, unknown: None}


@pytest.mark.parametrize(
    "fields",
    [
        {"createdAt": "2026-11-30T19:20:00Z"},  # made before the attempt began
        {"createdAt": None, "created_at": 1796066400},  # the same, in Unix seconds
        {"region": "us-midwest-1"},
        {"region": "US-MIDWEST-1"},
        {"gpu": {"slug": "b300-sxm"}},
        {"gpu": {"slug": "h100-pcie-80gb"}},
        {"gpu": {"slug": "h100-sxm-80gb-mig-40gb"}},
        {"gpuCount": 4},
        {"status": "terminated"},
    ],
)
def test_a_deployment_that_says_it_is_something_else_is_ruled_out(
    fields: dict[str, Any],
) -> None:
    offer = h100_offer()
    assert [vm.id for vm in parse.candidates([ours()], offer, BEGUN)] == ["dep_ours"]  # control
    assert parse.candidates([ours(**fields)], offer, BEGUN) == []


def test_a_deployment_with_only_the_documented_fields_is_a_candidate_of_no_known_kind() -> None:
    bare = {"id": "dep_bare", "status": "provisioning", "failure_code": None, "connection": None}
    (vm,) = parse.candidates([bare], h100_offer(), BEGUN)
    assert (vm.id, vm.sku, vm.region, vm.created_at) == ("dep_bare", None, None, None)


def test_ssh_keys_by_fingerprint_and_the_balance() -> None:
    fingerprint = ssh_key_fingerprint(SSH_KEY)
    assert fingerprint is not None and fingerprint == recorded("ssh_keys")[0]["fingerprint"]
    assert parse.ssh_key_id(recorded("ssh_keys"), fingerprint) == recorded("ssh_keys")[0]["id"]
    assert parse.ssh_key_id(recorded("ssh_keys"), fingerprint + "x") is None
    assert ssh_key_fingerprint("not-a-key") is None
    assert parse.balance(recorded("balance")) == Decimal("9995.750000")
    assert parse.balance({"amount": {"value": "3.5"}}) == Decimal("3.5")


def test_times_in_iso_or_unix_seconds_or_milliseconds() -> None:
    moment = datetime(2026, 11, 30, 19, 28, 10, tzinfo=UTC)
    for value in ("2026-11-30T19:28:10Z", moment.timestamp(), moment.timestamp() * 1000):
        assert parse.timestamp(value) == moment
    assert parse.timestamp("yesterday") is None
    assert parse.timestamp("2026-11-30T19:28:10") is None  # in which zone?


def test_answers_of_the_wrong_shape_are_unavailable() -> None:
    with pytest.raises(Unavailable):
        parse.balance({"currency": "USD"})
    with pytest.raises(Unavailable):
        parse.deployment([])
