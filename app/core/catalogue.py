"""The normalized names of GPU models, providers and interconnects that orders may ask for."""

from enum import StrEnum
from typing import Any

from pydantic import GetCoreSchemaHandler
from pydantic_core import CoreSchema, core_schema


class Provider(str):
    """A GPU cloud the service can deploy on: a bare name, as dstack's `BackendType` is.

    Any string converts (names come back from the database this way). What is known of a
    provider is its spec (`app.providers.registry.spec_for`); the API accepts only the names the
    registry offers to orders (`app.api.params.OfferedProvider`).
    """

    __slots__ = ()

    def __new__(cls, name: str) -> "Provider":
        # One object per name, as enum members were: `provider is Provider("verda")` holds.
        name = str(name)
        found = _PROVIDERS.get(name)
        if found is None:
            found = _PROVIDERS[name] = super().__new__(cls, name)
        return found

    def __repr__(self) -> str:
        return f"Provider({str.__repr__(self)})"

    @classmethod
    def __get_pydantic_core_schema__(
        cls, _source: Any, _handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        return core_schema.no_info_after_validator_function(
            cls, core_schema.str_schema(), serialization=core_schema.to_string_ser_schema()
        )


_PROVIDERS: dict[str, Provider] = {}


class Interconnect(StrEnum):
    """How the GPUs of one machine talk to each other."""

    PCIE = "pcie"
    NVLINK = "nvlink"
    SXM = "sxm"


class ClusterInterconnect(StrEnum):
    """The fabric between the nodes of a cluster (none: a single machine, or no fast fabric)."""

    INFINIBAND = "infiniband"


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
