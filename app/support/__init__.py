"""Generic helpers (asyncio, metrics, security) that know nothing of the domain."""
