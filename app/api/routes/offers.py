"""`GET /v1/offers`: what the providers show in stock now, with prices including fees."""

from typing import Annotated

from fastapi import APIRouter, Query

from app.api.deps import CurrentAccount, SessionDep, SettingsDep
from app.api.offer_schemas import OffersOut
from app.api.params import OfferedProvider
from app.api.strict_json import StrictJsonRoute
from app.core.catalogue import GPU_MODELS, normalize_gpu_model
from app.core.errors import ValidationFailed
from app.core.market import MAX_NODES, Fees
from app.services import offers

router = APIRouter(route_class=StrictJsonRoute, prefix="/v1/offers", tags=["offers"])


@router.get("")
async def list_offers(
    account: CurrentAccount,
    session: SessionDep,
    settings: SettingsDep,
    gpu_model: Annotated[str | None, Query(max_length=40)] = None,
    gpu_count: Annotated[int | None, Query(ge=1, le=64, description="GPUs per node.")] = None,
    nodes: Annotated[
        int | None, Query(ge=1, le=MAX_NODES, description="1: single machines; more: clusters.")
    ] = None,
    provider: OfferedProvider | None = None,
) -> OffersOut:
    """The latest offers of every provider, cheapest first (price with fees), each with the
    caller's waiting orders it would satisfy."""
    model = None
    if gpu_model is not None:
        model = normalize_gpu_model(gpu_model)
        if model is None:
            message = f"unknown GPU model; known models: {', '.join(GPU_MODELS)}"
            raise ValidationFailed(
                f"gpu_model: {message}", details=[{"field": "gpu_model", "message": message}]
            )
    latest = await offers.latest_offers(
        session,
        fees=Fees(settings.fee_percent, settings.fee_flat_per_hour),
        account_id=account.id,
        gpu_model=model,
        gpu_count=gpu_count,
        nodes=nodes,
        provider=str(provider) if provider else None,
    )
    return OffersOut.present(latest)
