"""`GET /v1/catalogue`: the names an order may use (GPU models, providers, interconnects)."""

from fastapi import APIRouter
from pydantic import BaseModel

from app.api.deps import SettingsDep
from app.api.strict_json import StrictJsonRoute
from app.core.catalogue import GPU_MODELS, Interconnect
from app.providers.registry import (
    display_name,
    enabled_providers,
    image_choosers,
    offered_providers,
    script_runners,
)

router = APIRouter(route_class=StrictJsonRoute, prefix="/v1/catalogue", tags=["catalogue"])


class GpuModelOut(BaseModel):
    """A GPU model an order can ask for."""

    name: str
    description: str


class ProviderOut(BaseModel):
    """A provider an order can accept."""

    id: str
    name: str
    enabled: bool  # whether this service has credentials for it, so can deploy there
    runs_startup_scripts: bool = False  # whether an order's `startup_script` can deploy there
    chooses_image: bool = False  # whether an order's `image` can deploy there


class CatalogueOut(BaseModel):
    """Every value `gpu_model`, `providers` and `interconnect` accept."""

    gpu_models: list[GpuModelOut]
    providers: list[ProviderOut]
    interconnects: list[str]
    dry_run: bool  # the service matches but sends no creates: nothing will be deployed


@router.get("")
async def get_catalogue(settings: SettingsDep) -> CatalogueOut:
    """The GPU models, providers and interconnects orders may name (no key needed)."""
    enabled = set(enabled_providers(settings))
    runners, choosers = script_runners(), image_choosers()
    return CatalogueOut(
        gpu_models=[GpuModelOut(name=n, description=d) for n, d in GPU_MODELS.items()],
        providers=[
            ProviderOut(
                id=str(p),
                name=display_name(p),
                enabled=p in enabled,
                runs_startup_scripts=p in runners,
                chooses_image=p in choosers,
            )
            for p in offered_providers()
        ],
        interconnects=[str(i) for i in Interconnect],
        dry_run=settings.dry_run,
    )
