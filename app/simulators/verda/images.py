"""The OS images the simulated Verda boots, and which instance and cluster types each runs on.

`GET /v1/images?instance_type=` lists what fits that type, as the document says it filters;
an instance or cluster create naming an image its type does not list is refused 400
`invalid_request` "Operating system is not valid for this instance type" (what dstack saw, on
a 1A6000.10V with the CUDA 12.8 open-driver image). Which image fits which type is a guess
from what is known (docs/simulators/verda.md): the open-driver images not on V100 (NVIDIA's
open kernel modules start at Turing) nor RTX A6000 (dstack's capture), and no image older than
R570 on Blackwell. `GET /verda/_sim/images` shows each image's driver and the GPUs it runs.
"""

import uuid
from dataclasses import dataclass
from typing import Any

from app.simulators.verda.catalog import ALL_TYPES, CATALOG_ENTRIES, GPU_TYPES
from app.simulators.verda.cluster_catalog import CLUSTER_ENTRIES, CLUSTER_TYPES

NOT_VALID = "Operating system is not valid for this instance type"
BLACKWELL = frozenset({"B200", "B300", "RTX-PRO-6000"})  # they need R570 or newer
_NS = uuid.UUID("5b0e3c52-6a43-4c36-9d61-2f1f0a3b7c11")  # the instance catalogue's
_CLUSTER_NS = uuid.UUID("0c6f3f8e-2b6a-4a57-9d1e-5f4c3a2b1d0e")  # the cluster catalogue's


@dataclass(frozen=True)
class SimImage:
    """One image: what `GET /v1/images` shows of it, the driver branch it carries (its details
    do not always say), and the GPUs whose types do not list it."""

    image_type: str
    name: str
    details: tuple[str, ...]
    driver: int | None
    refuses: frozenset[str] = frozenset()
    hard_coded_id: str | None = None  # the id clients hard-code, where one does
    cluster: bool = False

    @property
    def image_id(self) -> str:
        """Its id: a real one clients hard-code, else made up (uuid5 of the image type)."""
        return self.hard_coded_id or str(
            uuid.uuid5(_CLUSTER_NS if self.cluster else _NS, self.image_type)
        )

    def runs(self, gpu_model: str) -> bool:
        """Whether a type of this GPU lists it."""
        return gpu_model not in self.refuses


DEFAULT_IMAGE = "ubuntu-24.04-cuda-12.8-open-docker"
DEFAULT_CLUSTER_IMAGE = "ubuntu-24.04-cuda-13.0-cluster"
_OPEN_DRIVER_REFUSES = frozenset({"V100", "RTX-A6000"})

# The ids are the real ones clients hard-code: dstack's Verda backend (77777777-... for 24.04
# + CUDA 12.8, 2088da25-... for V100 and A6000), the CUDA 13.0 one from the client captures in
# issue 13. No client names an id for the others, so theirs are made up.
INSTANCE_IMAGES: tuple[SimImage, ...] = (
    SimImage(DEFAULT_IMAGE, "Ubuntu 24.04 + CUDA 12.8 Open + Docker",
             ("Ubuntu 24.04", "CUDA 12.8", "NVIDIA open driver 570", "Docker"), 570,
             _OPEN_DRIVER_REFUSES, "77777777-4f48-4249-82b3-f199fb9b701b"),
    SimImage("ubuntu-24.04-cuda-13.0-open-docker", "Ubuntu 24.04 + CUDA 13.0 Open + Docker",
             ("Ubuntu 24.04", "CUDA 13.0", "NVIDIA open driver 580", "Docker"), 580,
             _OPEN_DRIVER_REFUSES, "2404f580-1300-1111-82b3-f199fb9b701b"),
    SimImage("ubuntu-22.04-cuda-12.0-docker", "Ubuntu 22.04 + CUDA 12.0 + Docker",
             ("Ubuntu 22.04", "CUDA 12.0", "Docker"), 525, BLACKWELL,
             "2088da25-bb0d-41cc-a191-dccae45d96fd"),
    SimImage("ubuntu-22.04-cuda-12.4-docker", "Ubuntu 22.04 + CUDA 12.4 + Docker",
             ("Ubuntu 22.04", "CUDA 12.4", "NVIDIA driver 550", "Docker"), 550, BLACKWELL),
    SimImage("ubuntu-24.04", "Ubuntu 24.04", ("Ubuntu 24.04", "Minimal Image"), None),
)  # fmt: skip
CLUSTER_IMAGE_ROWS: tuple[SimImage, ...] = (
    SimImage(DEFAULT_CLUSTER_IMAGE, "Ubuntu 24.04 + CUDA 13.0 Cluster",
             ("Ubuntu 24.04", "CUDA 13.0", "NVIDIA open driver 580", "Slurm"), 580,
             cluster=True),
    SimImage("ubuntu-22.04-cuda-12.4-cluster", "Ubuntu 22.04 + CUDA 12.4 Cluster",
             ("Ubuntu 22.04", "CUDA 12.4", "NVIDIA driver 550", "Slurm"), 550, BLACKWELL,
             cluster=True),
)  # fmt: skip


def image_json(image: SimImage) -> dict[str, Any]:
    """An image as `GET /v1/images` (or `/v1/images/cluster`) lists it (the `Os` schema)."""
    default = DEFAULT_CLUSTER_IMAGE if image.cluster else DEFAULT_IMAGE
    return {
        "id": image.image_id,
        "image_type": image.image_type,
        "name": image.name,
        "is_default": image.image_type == default,
        "details": list(image.details),
        "category": "ubuntu",
        "is_cluster": image.cluster,
    }


IMAGES = tuple(image_json(image) for image in INSTANCE_IMAGES)
CLUSTER_IMAGES = tuple(image_json(image) for image in CLUSTER_IMAGE_ROWS)
# A create names its image by id or by image type (`image` in the body takes either).
IMAGES_BY_KEY: dict[str, SimImage] = {
    key: image for image in INSTANCE_IMAGES for key in (image.image_type, image.image_id)
}
CLUSTER_IMAGES_BY_KEY: dict[str, SimImage] = {
    key: image for image in CLUSTER_IMAGE_ROWS for key in (image.image_type, image.image_id)
}
# Each instance and cluster type's GPU model.
TYPE_GPUS: dict[str, str] = {e.sku: e.gpu_model for e in (*CATALOG_ENTRIES, *CLUSTER_ENTRIES)}


def images_of_type(instance_type: str, *, cluster: bool) -> list[dict[str, Any]] | None:
    """What `GET /v1/images[/cluster]?instance_type=` lists; None for a type it does not know."""
    if instance_type not in (CLUSTER_TYPES if cluster else ALL_TYPES):
        return None
    gpu = TYPE_GPUS.get(instance_type)  # None: a CPU type, which every instance image boots
    rows = CLUSTER_IMAGE_ROWS if cluster else INSTANCE_IMAGES
    return [image_json(image) for image in rows if gpu is None or image.runs(gpu)]


def refusal(image: SimImage, instance_type: str) -> str | None:
    """Why a create of `instance_type` (or of that cluster type) cannot boot `image`."""
    gpu = TYPE_GPUS.get(instance_type)
    return NOT_VALID if gpu is not None and not image.runs(gpu) else None


def control_images() -> list[dict[str, Any]]:
    """`GET /verda/_sim/images`: each image, its driver branch, and the GPUs and types it
    runs on (the instance types for an instance image, the cluster types for a cluster one)."""
    rows = []
    for image in (*INSTANCE_IMAGES, *CLUSTER_IMAGE_ROWS):
        types = CLUSTER_TYPES if image.cluster else GPU_TYPES
        runs = sorted(t for t in types if image.runs(TYPE_GPUS[t]))
        rows.append(
            {
                "id": image.image_id,
                "image_type": image.image_type,
                "cluster": image.cluster,
                "driver": image.driver,
                "gpus": sorted({TYPE_GPUS[t] for t in runs}),
                "instance_types": runs,
            }
        )
    return rows
