"""A provider in memory for tests (`FakeAdapter`): scripted offers and create outcomes, no HTTP.

It has no wire API, so no `client.py` or `parse.py`; and it is for tests only: orders may name
it only while a test offers it (`app.providers.registry.offering`).
"""

from app.providers.fake.adapter import Create, CreateCall, FakeAdapter
from app.providers.fake.spec import SPEC, FakeSettings, fake_spec

__all__ = ["SPEC", "Create", "CreateCall", "FakeAdapter", "FakeSettings", "fake_spec"]
