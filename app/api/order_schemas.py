"""Request bodies of orders: the machine wanted, its alternatives, by model, limits."""

import base64
import binascii
from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Annotated, Any, Literal, Self, cast

from pydantic import (
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    StrictInt,
    StrictStr,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails

from app.api.params import MAX_MODEL_ID_LENGTH, OfferedProvider
from app.api.schemas import HoursIn, PriceIn, Region, ShortText, TotalIn
from app.core.catalogue import (
    GPU_MODELS,
    ClusterInterconnect,
    Interconnect,
    Provider,
    normalize_gpu_model,
)
from app.core.errors import ValidationFailed, field_error
from app.core.market import MAX_ALTERNATIVES, MAX_NODES
from app.core.states import AlternativePreference, NodeLostPolicy
from app.core.text import OneLine, quote
from app.open_models.catalogue import OpenModel
from app.providers.registry import offered_providers
from app.services import images, startup_scripts
from app.services.order_request import ModelOrder, NewAlternative, NewOrder

MAX_GPU_COUNT = 16  # per node
# Verda documents no largest OS volume; 10 TB is above every disk the three providers sell
# (QuantaCloud's largest fixed disk is 8 x 1 TB), and bounds what an order can make us rent.
MAX_DISK_GB = 10_000
# The largest real key, RSA at OpenSSH's most (16,384 bits), is 2,772 characters of type and
# blob; this leaves its comment 1,300 more. A key is kept with its order, so no more than that.
MAX_SSH_KEY_LENGTH = 4_096
NODES_DESCRIPTION = (
    "Machines of `gpu_count` GPUs each, deployed together: 1 for a single machine, more for a"
    " cluster (at one provider, in one region; the price is for all of them). A cluster's stock"
    " never counts for one of its machines, nor the reverse."
)
SSH_KEY_TYPES = (
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
)


def _lower(value: object) -> object:
    return value.strip().lower() if isinstance(value, str) else value


GpuModelIn = Annotated[
    str,
    StringConstraints(max_length=40),
    Field(json_schema_extra={"enum": list(GPU_MODELS)}, description="Case-insensitive."),
]
GpuCountIn = Annotated[StrictInt, Field(ge=1, le=MAX_GPU_COUNT)]
ProvidersIn = Annotated[
    list[Annotated[OfferedProvider, BeforeValidator(_lower)]],
    Field(min_length=1, max_length=10),
]
# What an order's machine is: the fields an order's top level and each alternative share.
MACHINE_FIELDS = (
    "gpu_model",
    "gpu_count",
    "providers",
    "max_price_per_hour",
    "regions",
    "min_disk_gb",
    "interconnect",
    "nodes",
    "cluster_interconnect",
)
REQUIRED_MACHINE_FIELDS = MACHINE_FIELDS[:4]
# What an order by model leaves to the model (providers, price, regions and disk stay its own).
BY_MODEL_CHOSEN = ("gpu_model", "gpu_count", "nodes", "interconnect", "cluster_interconnect")


def gpu_model_name(value: str) -> str:
    """The catalogue's spelling of a GPU model (ValueError naming the known ones)."""
    normalized = normalize_gpu_model(value)
    if normalized is None:
        raise ValueError(f"unknown GPU model; known models: {', '.join(GPU_MODELS)}")
    return normalized


class MachineWanted(BaseModel):
    """What machine, where, and the most it may cost per hour: the fields an order and a stock
    estimate share, with one set of rules."""

    model_config = ConfigDict(extra="forbid")

    gpu_model: GpuModelIn
    gpu_count: GpuCountIn
    providers: ProvidersIn
    max_price_per_hour: PriceIn
    regions: Annotated[list[Region], Field(min_length=1, max_length=50)] | None = None
    min_disk_gb: Annotated[StrictInt, Field(ge=1, le=MAX_DISK_GB)] | None = None
    interconnect: Annotated[Interconnect, BeforeValidator(_lower)] | None = None
    nodes: Annotated[StrictInt, Field(ge=1, le=MAX_NODES, description=NODES_DESCRIPTION)] = 1
    cluster_interconnect: (
        Annotated[
            ClusterInterconnect,
            BeforeValidator(_lower),
            Field(description="The fabric a cluster's nodes must share; null: any."),
        ]
        | None
    ) = None

    @field_validator("gpu_model")
    @classmethod
    def _known_gpu_model(cls, value: str | None) -> str | None:
        # None: an order that lists alternatives has no machine at its top level.
        return None if value is None else gpu_model_name(value)

    @field_validator("providers")
    @classmethod
    def _unique_providers(cls, value: list[Provider] | None) -> list[Provider] | None:
        return None if value is None else sorted(set(value), key=offered_providers().index)

    @field_validator("regions")
    @classmethod
    def _unique_regions(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else list(dict.fromkeys(value))


class OrderLimits(BaseModel):
    """The limits an order's owner sets on its machine: terminate it after `max_runtime_hours`
    billed (counted from when its provider starts billing: when it runs, or at QuantaCloud the
    accepted create), or before a billing hour would take what it was charged past
    `max_total_usd`."""

    model_config = ConfigDict(extra="forbid")

    max_runtime_hours: HoursIn | None = None
    max_total_usd: TotalIn | None = None


class OrderLimitsUpdate(OrderLimits):
    """Body of `PATCH /v1/orders/{id}`: the limits to change (null removes one); nothing else
    of an order can change."""

    def changes(self) -> dict[str, Decimal | None]:
        """The limits the body names, with their new values."""
        return {name: getattr(self, name) for name in self.model_fields_set}


class AlternativeIn(MachineWanted):
    """One shape an order may take: its machine, providers, price cap (the whole deployment,
    fees included) and constraints."""

    def new_alternative(self) -> NewAlternative:
        """The alternative as the services take it."""
        return NewAlternative(**self.model_dump())


class ShapePriceIn(BaseModel):
    """An order by model's own price cap for one of the shapes it expands to."""

    model_config = ConfigDict(extra="forbid")

    gpu_model: GpuModelIn
    gpu_count: GpuCountIn
    nodes: Annotated[StrictInt, Field(ge=1, le=MAX_NODES)] = 1
    max_price_per_hour: PriceIn

    @field_validator("gpu_model")
    @classmethod
    def _known_gpu_model(cls, value: str) -> str:
        return gpu_model_name(value)


class ServeIn(BaseModel):
    """Serve the ordered model when the machine boots, with this engine."""

    model_config = ConfigDict(extra="forbid")

    engine: Annotated[Literal["vllm", "sglang"], BeforeValidator(_lower)]


class OrderCreate(MachineWanted, OrderLimits):
    """Body of `POST /v1/orders`: what machine, where, and the most it may cost per hour; or
    `alternatives`, several such shapes of which it deploys one."""

    # At the top level unless the order lists `alternatives` (then none of them is given).
    gpu_model: GpuModelIn | None = None  # type: ignore[assignment]
    gpu_count: GpuCountIn | None = None  # type: ignore[assignment]
    providers: ProvidersIn | None = None  # type: ignore[assignment]
    max_price_per_hour: PriceIn | None = None  # type: ignore[assignment]
    alternatives: (
        Annotated[
            list[AlternativeIn],
            Field(
                min_length=1,
                max_length=MAX_ALTERNATIVES,
                description="Up to 8 shapes, each with its own machine, providers, price and "
                "constraints; the order deploys one of them. Without it, the top level is the "
                "order's one shape.",
            ),
        ]
        | None
    ) = None
    model: (
        Annotated[
            str,
            StringConstraints(max_length=MAX_MODEL_ID_LENGTH),
            Field(
                description="Order by model: a Hugging Face id from GET /v1/models. The order "
                "takes every shape that holds it (the alternatives it shows), at "
                "`max_price_per_hour` or the shape's own in `prices`."
            ),
        ]
        | None
    ) = None
    serve: (
        Annotated[
            ServeIn,
            Field(
                description="With model: a start-up script, generated from the catalogue, "
                "that serves it (its port on the machine's loopback; the order shows the SSH "
                "tunnel once it runs). POST /v1/orders/preview shows the script."
            ),
        ]
        | None
    ) = None
    min_cache_gb: Annotated[
        StrictInt,
        Field(ge=0, le=100_000, description="With model: room the KV cache needs, in GB."),
    ] = 100
    prices: (
        Annotated[
            list[ShapePriceIn],
            Field(
                min_length=1,
                max_length=MAX_ALTERNATIVES,
                description="With model: a price cap per shape, over max_price_per_hour.",
            ),
        ]
        | None
    ) = None
    prefer: Annotated[
        AlternativePreference,
        BeforeValidator(_lower),
        Field(
            description="With alternatives: `cheapest` takes the cheapest offer any of them "
            "matches; `listed` takes them strictly in the order given."
        ),
    ] = AlternativePreference.CHEAPEST

    on_node_lost: Annotated[
        NodeLostPolicy,
        BeforeValidator(_lower),
        Field(
            description="When the provider loses a node of a cluster: `keep` the rest (you"
            " decide) or `terminate` it (the unused time refunded)."
        ),
    ] = NodeLostPolicy.KEEP
    expires_at: AwareDatetime | None = None
    name: ShortText | None = None
    ssh_public_key: (
        Annotated[
            str,
            StringConstraints(strip_whitespace=True, max_length=MAX_SSH_KEY_LENGTH),
            OneLine,
        ]
        | None
    ) = None
    startup_script: (
        Annotated[
            StrictStr,
            Field(
                description="Run once when the machine boots, at the providers that can (the"
                " catalogue's `runs_startup_scripts`); an order with one never deploys at the"
                f" others. UTF-8 text, at most {startup_scripts.MAX_BYTES} bytes, no NUL. Kept"
                " encrypted and never shown again: orders show its `startup_script_sha256`"
                " and `startup_script_bytes`.",
                json_schema_extra={"maxLength": startup_scripts.MAX_BYTES},
            ),
        ]
        | None
    ) = None
    image: (
        Annotated[
            StrictStr,
            Field(
                description="The OS image the machine boots, as its providers name it (an"
                " image type, name or id), checked against their image lists when placed. Only"
                " providers that let an order choose one (the catalogue's `chooses_image`)"
                " deploy it; null: each provider's configured image.",
                json_schema_extra={"maxLength": images.MAX_LENGTH},
            ),
        ]
        | None
    ) = None

    @field_validator("expires_at")
    @classmethod
    def _future_expiry(cls, value: datetime | None) -> datetime | None:
        if value is None:
            return None
        value = value.astimezone(UTC)
        if value <= datetime.now(UTC):
            raise ValueError("expires_at must be in the future")
        if value.year > datetime.now(UTC).year + 10:
            raise ValueError("expires_at must be within ten years")
        return value

    @field_validator("startup_script")
    @classmethod
    def _usable_script(cls, value: str | None) -> str | None:
        problem = None if value is None else startup_scripts.problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("image")
    @classmethod
    def _usable_image(cls, value: str | None) -> str | None:
        problem = None if value is None else images.problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("ssh_public_key")
    @classmethod
    def _openssh_public_key(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = value.strip()
        if not is_openssh_public_key(value):
            raise ValueError(
                "must be one OpenSSH public key line, e.g. 'ssh-ed25519 AAAA... me@host'"
            )
        return value

    @model_validator(mode="wrap")
    @classmethod
    def _machine_required(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        """Without alternatives or a model, the top-level machine's fields are required: said
        with the body's other errors, so a form can mark every field at once."""
        missing: list[InitErrorDetails] = []
        if (
            isinstance(data, dict)
            and data.get("alternatives") is None
            and data.get("model") is None
        ):
            missing = [
                InitErrorDetails(type="missing", loc=(field,), input=data)
                for field in REQUIRED_MACHINE_FIELDS
                if data.get(field) is None
            ]
        try:
            order = handler(data)
        except ValidationError as exc:
            if not missing:
                raise
            said = [cast(InitErrorDetails, e) for e in exc.errors()]
            raise ValidationError.from_exception_data(exc.title, [*missing, *said]) from None
        if missing:
            raise ValidationError.from_exception_data(cls.__name__, missing)
        return order

    def new_order(self, models: Mapping[str, OpenModel] | None = None) -> NewOrder:
        """The order as the services take it: a machine at the top level, alternatives, or a
        model (one of `models`), which placing expands into them (422 naming the field when it
        is more than one of those, or none)."""
        values = self.model_dump(
            exclude={"alternatives", "model", "min_cache_gb", "prices", "serve", *MACHINE_FIELDS}
        )
        if self.model is not None:  # placing expands it (`placing.expand`)
            return NewOrder(
                alternatives=(),
                model=self.model,
                by_model=self._by_model(models or {}),
                serve_engine=None if self.serve is None else self.serve.engine,
                **values,
            )
        for field in ("prices", "min_cache_gb", "serve"):
            if field in self.model_fields_set:
                raise field_error(field, "is for an order by model: give model too")
        if self.alternatives is not None:
            given = [f for f in MACHINE_FIELDS if f in self.model_fields_set]
            if given:
                raise field_error(
                    given[0], "give each machine in alternatives, or one at the top level, not both"
                )
            listed = tuple(alternative.new_alternative() for alternative in self.alternatives)
        else:
            missing = [f for f in REQUIRED_MACHINE_FIELDS if getattr(self, f) is None]
            if missing:
                raise ValidationFailed(
                    "; ".join(f"{f}: Field required" for f in missing),
                    details=[{"field": f, "message": "Field required"} for f in missing],
                )
            machine = self.model_dump(include=set(MACHINE_FIELDS))
            listed = (NewAlternative(**machine),)
        return NewOrder(alternatives=listed, **values)

    def _by_model(self, models: Mapping[str, OpenModel]) -> ModelOrder:
        chosen = [f for f in ("alternatives", *BY_MODEL_CHOSEN) if f in self.model_fields_set]
        if chosen:
            raise field_error(
                chosen[0], "is chosen from the model: leave it out, or leave out model"
            )
        assert self.model is not None
        model = models.get(self.model)
        if model is None:
            raise field_error(
                "model", f"unknown model {quote(self.model)}; GET /v1/models lists them"
            )
        if self.providers is None:
            raise field_error("providers", "Field required")
        prices = {
            (p.gpu_model, p.gpu_count, p.nodes): p.max_price_per_hour for p in self.prices or []
        }
        return ModelOrder(
            model=model,
            providers=[str(p) for p in self.providers],
            max_price_per_hour=self.max_price_per_hour,
            min_cache_gb=self.min_cache_gb,
            regions=self.regions,
            min_disk_gb=self.min_disk_gb,
            prices=prices,
        )


def is_openssh_public_key(line: str) -> bool:
    """Whether `line` is one OpenSSH public key: type, base64 blob naming that type, comment."""
    parts = line.split(maxsplit=2)
    if len(parts) < 2 or parts[0] not in SSH_KEY_TYPES or "\n" in line:
        return False
    try:
        blob = base64.b64decode(parts[1], validate=True)
    except (binascii.Error, ValueError):
        return False
    if len(blob) < 4:
        return False
    type_length = int.from_bytes(blob[:4], "big")
    return blob[4 : 4 + type_length] == parts[0].encode()
