"""The watcher's reads of each provider's image list: kept for every replica to check orders
against, and a read that fails keeps the last list rather than forgetting it. In memory, with a
FakeAdapter's images."""

from app.providers.base import Images, Unavailable
from app.services import images
from app.storage.db import create_sessionmaker, session_scope
from tests.watcher.in_memory import InMemory


async def kept(memory: InMemory) -> dict[str, Images]:
    async with session_scope(create_sessionmaker(memory.engine)) as session:
        return await images.known(session)


async def test_a_read_list_is_kept_and_a_failed_read_keeps_the_last(memory: InMemory) -> None:
    assert await kept(memory) == {}
    memory.fake.known_images = Images(
        machines=frozenset({"os-12", "os-13"}), clusters=frozenset({"cluster-13"})
    )
    await memory.watcher.images.read_all()
    first = (await kept(memory))["fake"]
    assert first.lists("os-13", cluster=False) and first.lists("cluster-13", cluster=True)
    assert not first.lists("os-13", cluster=True)

    memory.fake.image_error = Unavailable(memory.fake.provider, "502 from /images")
    memory.fake.known_images = Images()
    await memory.watcher.images.read_all()
    assert (await kept(memory))["fake"] == first
    # Positive control: the same change, read without the error, replaces the list.
    memory.fake.image_error = None
    await memory.watcher.images.read_all()
    assert (await kept(memory))["fake"] == Images()
