"""Build the adapters for the providers the settings give credentials for."""

import httpx

from app.catalogue import Provider
from app.providers.base import ProviderAdapter
from app.providers.hyperstack import HyperstackAdapter
from app.providers.quantacloud import QuantaCloudAdapter
from app.providers.verda import VerdaAdapter
from app.settings import Settings


def configured_providers(settings: Settings) -> list[Provider]:
    """The providers the settings hold credentials for."""
    found = []
    if settings.verda_client_id is not None and settings.verda_client_secret is not None:
        found.append(Provider.VERDA)
    if settings.hyperstack_api_key is not None:
        found.append(Provider.HYPERSTACK)
    if settings.quantacloud_api_key is not None:
        found.append(Provider.QUANTACLOUD)
    return found


def build_adapters(
    settings: Settings, client: httpx.AsyncClient
) -> dict[Provider, ProviderAdapter]:
    """One adapter per provider with credentials, all sharing `client`."""
    timeout = settings.provider_timeout_seconds
    create_timeout = settings.provider_create_timeout_seconds
    adapters: dict[Provider, ProviderAdapter] = {}
    if settings.verda_client_id is not None and settings.verda_client_secret is not None:
        adapters[Provider.VERDA] = VerdaAdapter(
            client,
            base_url=settings.verda_base_url,
            client_id=settings.verda_client_id,
            client_secret=settings.verda_client_secret,
            image=settings.verda_image,
            timeout=timeout,
            create_timeout=create_timeout,
        )
    if settings.hyperstack_api_key is not None:
        adapters[Provider.HYPERSTACK] = HyperstackAdapter(
            client,
            base_url=settings.hyperstack_base_url,
            api_key=settings.hyperstack_api_key,
            environment=settings.hyperstack_environment,
            key_name=settings.hyperstack_key_name,
            image=settings.hyperstack_image,
            timeout=timeout,
            create_timeout=create_timeout,
        )
    if settings.quantacloud_api_key is not None:
        adapters[Provider.QUANTACLOUD] = QuantaCloudAdapter(
            client,
            base_url=settings.quantacloud_base_url,
            api_key=settings.quantacloud_api_key,
            timeout=timeout,
            create_timeout=create_timeout,
        )
    return adapters
