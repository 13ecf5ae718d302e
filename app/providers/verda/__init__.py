"""Verda (formerly DataCrunch): OAuth2 client credentials, stock as presence per location."""

from app.providers.verda.adapter import VerdaAdapter

__all__ = ["VerdaAdapter"]
