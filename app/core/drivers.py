"""NVIDIA driver branches: which a GPU needs, which a served model's engine needs, and the
branch an OS image's CUDA version implies. Facts of NVIDIA's, not of any provider; the
adapters read each image's own words (Verda's `details`, Hyperstack's names) with these.
"""

import re

# Blackwell GPUs run only on the R570 branch or newer (NVIDIA's Blackwell support starts at
# 570; Verda's instance types warn "use an image with NVIDIA driver 570 or higher").
GPU_MIN_DRIVER: dict[str, int] = {
    "B200": 570,
    "B300": 570,
    "GB200": 570,
    "GB300": 570,
    "RTX-PRO-6000": 570,
}

# The engines' CUDA 13 images a generated serve script runs need R580 or newer
# (../shared/models.md); the script itself stops on an older driver.
SERVE_MIN_DRIVER = 580

# The oldest driver each CUDA toolkit release runs on (NVIDIA's CUDA Toolkit release notes,
# "CUDA Toolkit and Corresponding Driver Versions", Linux, GA): an image built with CUDA X
# carries at least that branch.
CUDA_MIN_DRIVER: dict[tuple[int, int], int] = {
    (11, 8): 520,
    (12, 0): 525,
    (12, 1): 530,
    (12, 2): 535,
    (12, 3): 545,
    (12, 4): 550,
    (12, 5): 555,
    (12, 6): 560,
    (12, 8): 570,
    (12, 9): 575,
    (13, 0): 580,
}

_CUDA = re.compile(r"\bCUDA[ -]?(\d+)\.(\d+)", re.IGNORECASE)


def gpu_min_driver(gpu_model: str) -> int | None:
    """The oldest driver branch that runs `gpu_model` (None: any current one does)."""
    return GPU_MIN_DRIVER.get(gpu_model)


def cuda_floor(text: str) -> int | None:
    """The driver branch a "CUDA 12.8" in `text` implies at least (a CUDA newer than this
    table knows: the newest branch it knows), or None when `text` names no CUDA version."""
    found = _CUDA.search(text)
    if found is None:
        return None
    version = (int(found[1]), int(found[2]))
    known = [driver for release, driver in CUDA_MIN_DRIVER.items() if release <= version]
    return max(known) if known else None


def branch(driver: int | None) -> str:
    """`R580`, or `an unknown driver`."""
    return "an unknown driver" if driver is None else f"R{driver}"
