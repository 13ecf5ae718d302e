"""`GET /v1/admin/providers`: each provider's stock read, our balance there, recent creates."""

from fastapi import APIRouter
from pydantic import BaseModel

from app.api.deps import AdminOnly, SessionDep, SettingsDep
from app.api.strict_json import StrictJsonRoute
from app.core.clock import utcnow
from app.providers.registry import enabled_providers
from app.services import provider_status
from app.services.views import ProviderStatusOut

router = APIRouter(
    route_class=StrictJsonRoute, prefix="/v1/admin", tags=["admin"], dependencies=[AdminOnly]
)


class ProvidersOut(BaseModel):
    """Every provider this service knows, configured or not."""

    data: list[ProviderStatusOut]


@router.get("/providers")
async def get_providers(session: SessionDep, settings: SettingsDep) -> ProvidersOut:
    """Each provider: enabled or not, last stock read, last balance read, creates in the last
    hour (admin key only)."""
    enabled = {str(p) for p in enabled_providers(settings)}
    return ProvidersOut(data=await provider_status.report(session, now=utcnow(), enabled=enabled))
