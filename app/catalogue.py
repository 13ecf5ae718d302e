"""The normalized names of GPU models, providers and interconnects that orders may ask for."""

from enum import StrEnum


class Provider(StrEnum):
    """A GPU cloud the service can deploy on."""

    VERDA = "verda"
    HYPERSTACK = "hyperstack"
    QUANTACLOUD = "quantacloud"

    @property
    def display_name(self) -> str:
        """The provider's name as people write it."""
        return _PROVIDER_DISPLAY[self]

    @property
    def names_vms(self) -> bool:
        """Whether a VM can be found again by the name and tag its create was sent with."""
        return self is not Provider.QUANTACLOUD  # its deployments carry no name, label or tag


_PROVIDER_DISPLAY = {
    Provider.VERDA: "Verda",
    Provider.HYPERSTACK: "Hyperstack",
    Provider.QUANTACLOUD: "QuantaCloud",
}


class Interconnect(StrEnum):
    """How the GPUs of one machine talk to each other."""

    PCIE = "pcie"
    NVLINK = "nvlink"
    SXM = "sxm"


# Normalized GPU model names, one per distinct chip and memory size the three providers sell.
# Provider adapters map their own names (Verda `model`, Hyperstack flavor `gpu`, QuantaCloud
# `gpu.slug`) onto these; an order names one of them.
GPU_MODELS: dict[str, str] = {
    "GB300": "NVIDIA GB300 288GB",
    "B300": "NVIDIA B300 288GB",
    "GB200": "NVIDIA GB200 186GB",
    "B200": "NVIDIA B200 180GB",
    "GH200": "NVIDIA GH200 96GB",
    "H200": "NVIDIA H200 141GB",
    "H100": "NVIDIA H100 80GB",
    "A100-80G": "NVIDIA A100 80GB",
    "A100-40G": "NVIDIA A100 40GB",
    "L40S": "NVIDIA L40S 48GB",
    "L40": "NVIDIA L40 48GB",
    "RTX-PRO-6000": "NVIDIA RTX PRO 6000 Blackwell 96GB",
    "RTX-6000-ADA": "NVIDIA RTX 6000 Ada 48GB",
    "RTX-A6000": "NVIDIA RTX A6000 48GB",
    "RTX-A5000": "NVIDIA RTX A5000 24GB",
    "RTX-A4000": "NVIDIA RTX A4000 16GB",
    "A40": "NVIDIA A40 48GB",
    "V100": "NVIDIA V100 16GB",
    "MI300X": "AMD Instinct MI300X 192GB",
}

_BY_FOLDED_NAME = {name.casefold(): name for name in GPU_MODELS}


def normalize_gpu_model(name: str) -> str | None:
    """The catalogue's spelling of a GPU model name (case-insensitive), or None if unknown."""
    return _BY_FOLDED_NAME.get(name.strip().casefold())
