"""The OS images of the simulated Hyperstack: their ids in each region, their NVIDIA driver
branch, and which flavors they run on, said both ways as the official SDK types them: a
flavor's `image_restrictions` (`ImageRestrictions`: the images it may launch) and an image's
`flavor_restrictions` (`FlavorRestrictions`: the flavors it may launch on).

Blackwell flavors (B300, B200, RTX PRO 6000) take only the R570 and R580 images: the R535
driver of the default image cannot drive them. Which side a real restriction is said on, and
its `reason`, are not documented (docs/simulators/hyperstack.md); here both are. A create
naming an image its flavor refuses is a 400 `bad_request`.
"""

from typing import Any

from app.simulators.hyperstack.catalog import CATALOG, GPUS, IMAGES, REGIONS
from app.simulators.vms import CatalogEntry

# The driver branch each image carries (its name says it: "... R570 CUDA 12.8").
DRIVERS: dict[int, int] = {1: 535, 2: 570, 3: 535, 4: 580}
BLACKWELL = frozenset({"B300", "B200", "RTX-PRO-6000"})
MIN_BLACKWELL_DRIVER = 570
REASON = "Blackwell GPUs need an NVIDIA driver from the R570 branch or newer"


def image_id(region: str, local_id: int) -> int:
    """An image's id in a region (each region has its own copy)."""
    return int(REGIONS[region]["id"]) * 100 + local_id


def _blackwell(entry: CatalogEntry) -> bool:
    return GPUS[entry.details["gpu"]].model in BLACKWELL


def runs(local_id: int, entry: CatalogEntry) -> bool:
    """Whether the image runs on the flavor of `entry`."""
    return not _blackwell(entry) or DRIVERS[local_id] >= MIN_BLACKWELL_DRIVER


def image_restrictions(entry: CatalogEntry) -> dict[str, Any] | None:
    """A flavor's `image_restrictions`: None, or the images a Blackwell flavor may launch."""
    if not _blackwell(entry):
        return None
    return {
        "has_image_restrictions": True,
        "restriction_type": "hard",
        "compatible_images": [
            {
                "image_id": image_id(entry.region, local_id),
                "image_name": name,
                "link_type": "hard",
                "reason": REASON,
                "constraints": {},
            }
            for local_id, name, _, _ in IMAGES
            if runs(local_id, entry)
        ],
    }


def flavor_restrictions(local_id: int, region: str) -> dict[str, Any]:
    """An image's `flavor_restrictions` in `region`: `{}` (none, the SDK's example), or the
    flavors an image too old for Blackwell may launch on."""
    if DRIVERS[local_id] >= MIN_BLACKWELL_DRIVER:
        return {}
    return {
        "has_flavor_restrictions": True,
        "restriction_type": "hard",
        "compatible_flavors": [
            {
                "flavor_id": entry.details["id"],
                "flavor_name": entry.sku,
                "link_type": "hard",
                "reason": REASON,
                "constraints": {},
            }
            for entry in CATALOG
            if entry.region == region and runs(local_id, entry)
        ],
    }


def refusal(image_name: str, entry: CatalogEntry) -> str | None:
    """Why a create of `entry`'s flavor cannot boot the image named `image_name`, or None."""
    for local_id, name, _, _ in IMAGES:
        if name == image_name and not runs(local_id, entry):
            return f"Image {image_name} is not compatible with flavor {entry.sku}"
    return None


def control_images() -> list[dict[str, Any]]:
    """`GET /hyperstack/_sim/images`: each image, its driver branch, and the GPUs and flavors
    it runs on (in any region)."""
    return [
        {
            "name": name,
            "driver": DRIVERS[local_id],
            "gpus": sorted({e.gpu_model for e in CATALOG if runs(local_id, e)}),
            "flavors": sorted({e.sku for e in CATALOG if runs(local_id, e)}),
        }
        for local_id, name, _, _ in IMAGES
    ]
