"""Each provider's OS image list, read now and then and kept, so that any replica can check an
order's image when it is placed (the API process sends no request to a provider)."""

import asyncio
import logging

from app.core.catalogue import Provider
from app.providers.base import ProviderError
from app.providers.registry import described, image_choosers
from app.services import images
from app.storage.db import session_scope
from app.watcher.context import WatcherContext

log = logging.getLogger(__name__)


class ImageLists:
    """Reads the image lists of the providers that let an order choose its image."""

    def __init__(self, context: WatcherContext) -> None:
        choosers = image_choosers()
        # Only providers whose images the service can choose among.
        self.adapters = {p: a for p, a in context.adapters.items() if str(p) in choosers}
        self.sessionmaker = context.sessionmaker
        self.clock = context.clock

    async def read_all(self) -> None:
        """Read and keep every list, side by side; a list that cannot be read keeps the last."""
        await asyncio.gather(*(self.read(p) for p in self.adapters))

    async def read(self, provider: Provider) -> None:
        """Read one provider's image list and keep it (a failed read keeps the last one)."""
        try:
            found = await self.adapters[provider].images()
        except ProviderError as exc:
            log.warning("image list not read: %s (the last one read stays)", described(exc))
            return
        except Exception as exc:  # a shape we do not understand is not a reason to stop
            log.warning("%s image list unreadable (%s)", provider, type(exc).__name__)
            return
        async with session_scope(self.sessionmaker) as session:
            await images.keep(session, provider=str(provider), images=found, read_at=self.clock())
