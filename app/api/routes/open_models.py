"""`GET /v1/models`: the open models the service knows; `GET /v1/models/{id}/fit`: which
machine shapes hold one, by the fit rule. No key needed, as for the catalogue."""

from decimal import Decimal
from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from pydantic import BaseModel

from app.api.params import MAX_MODEL_ID_LENGTH
from app.api.strict_json import StrictJsonRoute
from app.core.errors import NotFound
from app.core.text import quote
from app.open_models import catalogue as open_models
from app.open_models.catalogue import FIT_SHARE, OpenModel
from app.services import model_fit

router = APIRouter(route_class=StrictJsonRoute, prefix="/v1/models", tags=["models"])


class EngineOut(BaseModel):
    """How an engine serves the model: its image and the model's own arguments."""

    image: str
    args: list[str]


class ModelOut(BaseModel):
    """An open model: its Hugging Face id, size, and where each figure comes from."""

    id: str
    name: str
    checkpoint_gb: Decimal
    min_disk_gb: int  # the smallest disk that holds the checkpoint
    format: str | None
    context_tokens: int | None
    parameters: str | None
    notes: str | None
    sources: dict[str, str]
    # The engines' recipes the catalogue has for it (an order's `serve` may name another
    # engine: it then runs that engine's latest image).
    serve: dict[str, EngineOut]


class ModelsOut(BaseModel):
    """Every model the service knows, by id."""

    data: list[ModelOut]


class ShapeOut(BaseModel):
    """One machine shape and how the model sits on it."""

    gpu_model: str
    gpu_count: int  # per node
    nodes: int
    gpu_memory_gb: Decimal  # all the GPUs together
    cache_room_gb: Decimal  # 92 % of that less the checkpoint; negative: it does not fit
    holds: bool  # room is positive and at least min_cache_gb
    disk_gb: int  # the disk (a cluster: its shared volume) must be at least this
    cluster_providers: list[str] | None  # for a cluster: the providers that can make it


class FitOut(BaseModel):
    """Which shapes hold the model, by the rule: cache room = 92 % of the GPU memory less the
    checkpoint (an upper bound: activations and CUDA graphs are left out)."""

    model: ModelOut
    rule: str
    min_cache_gb: int
    shapes: list[ShapeOut]


def _out(model: OpenModel) -> ModelOut:
    return ModelOut(
        id=model.id,
        name=model.name,
        checkpoint_gb=model.checkpoint_gb,
        min_disk_gb=model.disk_gb,
        format=model.format,
        context_tokens=model.context_tokens,
        parameters=model.parameters,
        notes=model.notes,
        sources=model.sources,
        serve={e: EngineOut(image=r.image, args=list(r.args)) for e, r in model.serve.items()},
    )


def _known(request: Request) -> dict[str, OpenModel]:
    known: dict[str, OpenModel] = request.app.state.open_models
    return known


@router.get("")
async def list_models(request: Request) -> ModelsOut:
    """The open models the service knows (shipped, and the operator's file's)."""
    return ModelsOut(data=[_out(m) for m in _known(request).values()])


@router.get("/{model_id:path}/fit")
async def model_fit_of(
    request: Request,
    model_id: Annotated[str, Path(max_length=MAX_MODEL_ID_LENGTH)],
    min_cache_gb: Annotated[
        int, Query(ge=0, le=100_000, description="Room the cache needs, in GB.")
    ] = 0,
    holds: Annotated[bool | None, Query(description="Only shapes that hold it (or not).")] = None,
) -> FitOut:
    """For every machine shape, whether it holds the model, the cache room left and the disk
    it needs. The model is named by its Hugging Face id, or its name (`Kimi K3`) in any case."""
    model = open_models.find(_known(request), model_id)
    if model is None:
        raise NotFound(f"no model {quote(model_id)}; GET /v1/models lists them")
    shapes = model_fit.shapes(model, min_cache_gb=Decimal(min_cache_gb))
    return FitOut(
        model=_out(model),
        rule=f"cache room = {FIT_SHARE * 100:.0f} % of the GPU memory - the checkpoint",
        min_cache_gb=min_cache_gb,
        shapes=[
            ShapeOut(
                gpu_model=s.fit.gpu_model,
                gpu_count=s.fit.gpu_count,
                nodes=s.fit.nodes,
                gpu_memory_gb=s.fit.gpu_memory_gb,
                cache_room_gb=s.fit.cache_room_gb,
                holds=s.holds,
                disk_gb=s.fit.disk_gb,
                cluster_providers=None
                if s.cluster_providers is None
                else list(s.cluster_providers),
            )
            for s in shapes
            if holds is None or s.holds == holds
        ],
    )
