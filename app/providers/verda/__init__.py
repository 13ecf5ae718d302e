"""Verda (formerly DataCrunch): OAuth2 client credentials, stock as presence per location."""

from app.providers.verda.adapter import VerdaAdapter
from app.providers.verda.spec import SPEC, VerdaSettings

__all__ = ["SPEC", "VerdaAdapter", "VerdaSettings"]
