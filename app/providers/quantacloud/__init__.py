"""QuantaCloud: the REST client (`client.py`) and the `ProviderAdapter` (`adapter.py`)."""

from app.providers.quantacloud.adapter import QuantaCloudAdapter

__all__ = ["QuantaCloudAdapter"]
