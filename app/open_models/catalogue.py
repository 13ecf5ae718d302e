"""The open models the service knows, and the rule that says which machines hold one.

The catalogue ships as `open_models.toml` beside this module; an operator's file of the same
shape (`AUTOPROVISION_MODELS_FILE`) adds models or replaces them by id. Reading a file is the
composition root's; this module parses text and does the arithmetic.

**The fit rule** (the one the vLLM and SGLang guides use): the room left for the KV cache is
92 % of the GPU memory of all the machine's (or cluster's) GPUs less the checkpoint. It leaves
out activations, CUDA graphs and any vision encoder, so it is an upper bound. A machine holds
a model when that room is positive (and at least what an order asks for, where it asks).
"""

import math
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from importlib import resources
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

FIT_SHARE = Decimal("0.92")  # of the GPU memory, usable for weights and cache
# The GPUs the model guides size machines of, most memory first: an order by model may take
# the smallest machine of each that holds the model.
SERVING_GPUS = ("B300", "B200", "H200", "H100")
SHIPPED_FILE = "open_models.toml"

# GB of memory per GPU, as the model guides count a machine's memory (8x H200: 1,128 GB). B300
# is NVIDIA's HGX B300 figure (2.1 TB for 8), the guides' too; the rest are the names' sizes.
GPU_MEMORY_GB: dict[str, Decimal] = {
    "GB300": Decimal(288),
    "B300": Decimal("262.5"),
    "GB200": Decimal(186),
    "B200": Decimal(180),
    "GH200": Decimal(96),
    "H200": Decimal(141),
    "H100": Decimal(80),
    "A100-80G": Decimal(80),
    "A100-40G": Decimal(40),
    "L40S": Decimal(48),
    "L40": Decimal(48),
    "RTX-PRO-6000": Decimal(96),
    "RTX-6000-ADA": Decimal(48),
    "RTX-A6000": Decimal(48),
    "RTX-A5000": Decimal(24),
    "RTX-A4000": Decimal(16),
    "A40": Decimal(48),
    "V100": Decimal(16),
    "MI300X": Decimal(192),
}


class ModelsFileError(ValueError):
    """A models file that cannot be used; the message names the file, the entry and the field."""


class _Engine(BaseModel):
    """How one engine serves a model: its image and the arguments the recipe adds."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    image: str = Field(min_length=3, max_length=200, pattern=r"^[\w./:@-]+$")
    args: list[str] = Field(default_factory=list, max_length=40)


class _Entry(BaseModel):
    """One `[[model]]` of a models file, as written."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    id: str = Field(min_length=3, max_length=200, pattern=r"^[\w.-]+/[\w.-]+$")
    name: str = Field(min_length=1, max_length=100)
    checkpoint_gb: Decimal = Field(gt=0, le=100_000, decimal_places=2)
    format: str | None = Field(default=None, max_length=40)
    context_tokens: int | None = Field(default=None, gt=0)
    parameters: str | None = Field(default=None, max_length=100)
    notes: str | None = Field(default=None, max_length=1000)
    sources: dict[str, str] = Field(default_factory=dict)
    serve: dict[Literal["vllm", "sglang"], _Engine] = Field(default_factory=dict)


@dataclass(frozen=True)
class EngineRecipe:
    """How an engine serves a model: its container image and the model's own arguments."""

    image: str
    args: tuple[str, ...] = ()


@dataclass(frozen=True)
class OpenModel:
    """A model the service knows: its Hugging Face id, size, and where each figure is from."""

    id: str
    name: str
    checkpoint_gb: Decimal
    format: str | None = None
    context_tokens: int | None = None
    parameters: str | None = None
    notes: str | None = None
    sources: dict[str, str] = field(default_factory=dict)
    serve: dict[str, EngineRecipe] = field(default_factory=dict)  # engine -> its recipe

    @property
    def disk_gb(self) -> int:
        """The smallest disk, in whole GB, that holds the checkpoint."""
        return math.ceil(self.checkpoint_gb)


@dataclass(frozen=True)
class Fit:
    """How a model sits on `nodes` machines of `gpu_count` `gpu_model` each."""

    gpu_model: str
    gpu_count: int  # per node
    nodes: int
    gpu_memory_gb: Decimal  # of all the GPUs together
    cache_room_gb: Decimal  # 92 % of that less the checkpoint; negative: does not fit
    disk_gb: int  # the disk (a cluster: its shared volume) must be at least this

    def holds(self, min_cache_gb: Decimal = Decimal(0)) -> bool:
        """Whether the room left for the cache is positive and at least `min_cache_gb`."""
        return self.cache_room_gb > 0 and self.cache_room_gb >= min_cache_gb


def fit(model: OpenModel, gpu_model: str, gpu_count: int, nodes: int = 1) -> Fit:
    """The fit rule for `model` on `nodes` x `gpu_count` `gpu_model` (a GPU model we know)."""
    memory = GPU_MEMORY_GB[gpu_model] * gpu_count * nodes
    return Fit(
        gpu_model=gpu_model,
        gpu_count=gpu_count,
        nodes=nodes,
        gpu_memory_gb=memory,
        cache_room_gb=(memory * FIT_SHARE - model.checkpoint_gb).quantize(Decimal("0.01")),
        disk_gb=model.disk_gb,
    )


def parse(text: str, source: str) -> list[OpenModel]:
    """The models of a models file's text; `ModelsFileError` naming `source` if it is wrong."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ModelsFileError(f"{source}: not TOML: {exc}") from exc
    unknown = set(document) - {"model"}
    if unknown:
        raise ModelsFileError(f"{source}: unknown table {sorted(unknown)[0]!r}; use [[model]]")
    entries = document.get("model", [])
    if not isinstance(entries, list):
        raise ModelsFileError(f"{source}: `model` must be an array of tables ([[model]])")
    models: list[OpenModel] = []
    seen: set[str] = set()
    for index, entry in enumerate(entries, start=1):
        model = _model(entry, f"{source}: model {index}")
        if model.id in seen:
            raise ModelsFileError(f"{source}: model {index}: id {model.id!r} appears twice")
        seen.add(model.id)
        models.append(model)
    return models


def _model(entry: Any, where: str) -> OpenModel:
    try:
        valid = _Entry.model_validate(entry)
    except ValidationError as exc:
        error = exc.errors()[0]
        place = ".".join(str(part) for part in error["loc"]) or "entry"
        raise ModelsFileError(f"{where}: {place}: {error['msg']}") from exc
    values = valid.model_dump(exclude={"serve"})
    recipes: dict[str, EngineRecipe] = {
        engine: EngineRecipe(r.image, tuple(r.args)) for engine, r in valid.serve.items()
    }
    return OpenModel(**values, serve=recipes)


def shipped() -> list[OpenModel]:
    """The models that ship with the service."""
    text = resources.files(__package__).joinpath(SHIPPED_FILE).read_text(encoding="utf-8")
    return parse(text, SHIPPED_FILE)


def merged(base: Iterable[OpenModel], extra: Iterable[OpenModel]) -> list[OpenModel]:
    """`base` with `extra` added, an `extra` model replacing a `base` one of the same id."""
    by_id = {model.id: model for model in base}
    by_id.update((model.id, model) for model in extra)
    return sorted(by_id.values(), key=lambda model: model.id.lower())


def _folded(text: str) -> str:
    return re.sub(r"[\s_-]+", "-", text.strip().casefold())


def find(known: Mapping[str, OpenModel], named: str) -> OpenModel | None:
    """The model `named` means: its Hugging Face id, or in any case and spacing its id, its id
    without the owner (`Kimi-K3`) or its name (`Kimi K3`); None when none or several match."""
    if named in known:
        return known[named]
    wanted = _folded(named)
    matches = {
        m.id
        for m in known.values()
        if wanted in (_folded(m.id), _folded(m.id.rsplit("/", 1)[-1]), _folded(m.name))
    }
    return known[matches.pop()] if len(matches) == 1 else None
