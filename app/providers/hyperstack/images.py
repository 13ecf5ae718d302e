"""Which OS images run which Hyperstack flavor, in each region: the images of the flavor's
region (`GET /core/images`), less those the flavor's `image_restrictions` leave out (its
`compatible_images`) and those whose own `flavor_restrictions` leave the flavor out, less those
whose driver is too old for the GPU (the default "Ubuntu Server 22.04 LTS R535 CUDA 12.2" on a
Blackwell GPU), best first. Pure functions over the JSON; the adapter reads it with the image
lists, never on the way from a stock read to a create.

Both restriction objects are the official SDK's (`ImageRestrictions`, `FlavorRestrictions`):
`has_*_restrictions`, `restriction_type` ('hard', 'soft' or null) and the compatible list, by
id and name. A 'soft' restriction is advice, not a refusal, and is not enforced here.
"""

import re
from typing import Any

from app.core.drivers import cuda_floor
from app.providers.base import Image, ImageFit, Images, MachineKey, ranked
from app.providers.hyperstack.parse import GPU_NAMES, listed

_BRANCH = re.compile(r"\bR(\d{3})\b")


def image_driver(name: str) -> int | None:
    """The driver branch an image's name gives ("... R570 CUDA 12.8": 570), else the oldest
    its CUDA version implies; None when it names neither."""
    found = _BRANCH.search(name)
    return int(found[1]) if found is not None else cuda_floor(name)


def region_images(body: Any) -> dict[str, list[dict[str, Any]]]:
    """`GET /core/images` -> each region's image rows (those with a name)."""
    regions: dict[str, list[dict[str, Any]]] = {}
    for group in listed(body, "images"):
        for row in group.get("images") or []:
            if isinstance(row, dict) and isinstance(row.get("name"), str):
                region = row.get("region_name") or group.get("region_name")
                regions.setdefault(str(region), []).append(row)
    return regions


def _allows(restrictions: Any, has: str, compatible: str, prefix: str, row: dict[str, Any]) -> bool:
    """Whether a restriction object lets `row` (a flavor or an image, by id or name) through."""
    if not isinstance(restrictions, dict):
        return True
    entries = restrictions.get(compatible)
    entries = [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []
    restricted = restrictions.get(has)
    if restricted is False or (restricted is None and not entries):
        return True
    if restrictions.get("restriction_type") == "soft":
        return True
    return any(
        (e.get(f"{prefix}_id") is not None and e.get(f"{prefix}_id") == row.get("id"))
        or (e.get(f"{prefix}_name") is not None and e.get(f"{prefix}_name") == row.get("name"))
        for e in entries
    )


def machine_of(flavor: dict[str, Any]) -> MachineKey | None:
    """The machine a flavor is, or None when it is not a GPU VM the catalogue knows."""
    gpu, count, name = flavor.get("gpu"), flavor.get("gpu_count"), str(flavor.get("name", ""))
    mapped = GPU_NAMES.get(gpu) if isinstance(gpu, str) else None
    if mapped is None or isinstance(count, bool) or not isinstance(count, int) or count < 1:
        return None
    return None if name.endswith("k8s") else MachineKey(mapped[0], count)


def image_fits(images_body: Any, flavor_rows: list[dict[str, Any]], *, configured: str) -> Images:
    """Every image (by name, each with its driver branch) and, for each GPU flavor in each
    region, the images that run it there, best first (`configured` first where it does)."""
    regions = region_images(images_body)
    listed_images = {
        row["name"]: Image(name=row["name"], driver=image_driver(row["name"]))
        for rows in regions.values()
        for row in rows
    }
    fits = []
    for flavor in flavor_rows:
        machine, region, name = machine_of(flavor), flavor.get("region_name"), flavor.get("name")
        if machine is None or not isinstance(region, str) or not isinstance(name, str):
            continue
        fitting = [
            listed_images[row["name"]]
            for row in regions.get(region, [])
            if _allows(
                flavor.get("image_restrictions"),
                "has_image_restrictions",
                "compatible_images",
                "image",
                row,
            )
            and _allows(
                row.get("flavor_restrictions"),
                "has_flavor_restrictions",
                "compatible_flavors",
                "flavor",
                flavor,
            )
        ]
        fits.append(
            ImageFit(
                sku=name,
                machine=machine,
                images=ranked(fitting, gpu_model=machine.gpu_model, configured=configured),
                region=region,
                configured=configured,
            )
        )
    names = frozenset(listed_images)  # a cluster's nodes are VMs: they boot the same
    return Images(names, names, tuple(listed_images.values()), tuple(fits))
