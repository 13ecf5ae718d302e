"""QuantaCloud: an `X-API-Key`, paged in-stock offers with ephemeral ids, deployments without
names."""

from app.providers.quantacloud.adapter import QuantaCloudAdapter
from app.providers.quantacloud.spec import SPEC, QuantaCloudSettings

__all__ = ["SPEC", "QuantaCloudAdapter", "QuantaCloudSettings"]
