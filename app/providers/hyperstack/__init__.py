"""The Hyperstack adapter (`HyperstackAdapter`) and its HTTP layer."""

from app.providers.hyperstack.adapter import HyperstackAdapter

__all__ = ["HyperstackAdapter"]
