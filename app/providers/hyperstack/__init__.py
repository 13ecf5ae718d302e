"""Hyperstack (NexGen Cloud's Infrahub API): an API key, per-region environments, VMs with
names and labels."""

from app.providers.hyperstack.adapter import HyperstackAdapter
from app.providers.hyperstack.spec import SPEC, HyperstackSettings

__all__ = ["SPEC", "HyperstackAdapter", "HyperstackSettings"]
