"""Orders' OS images: what one may be, which providers let an order choose one, the image lists
the watcher read from them, and the check an order's image passes when it is placed."""

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import field_error
from app.core.states import OrderEventKind
from app.core.text import quote
from app.providers.base import Images
from app.providers.registry import display_name, image_choosers, offered
from app.services.timeline import Line
from app.storage.models import ProviderImages

MAX_LENGTH = 200
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class ImageCheck:
    """What placing an order with an image found: the providers that boot one stock image
    (it never deploys there), those whose image list was not read yet, and each alternative's
    providers that list no such image for its machine (taken out of that alternative)."""

    stock_only: list[str]
    unread: list[str]
    unlisted: dict[int, list[str]]  # alternative's position (0-based) -> those providers


def problem(image: str) -> str | None:
    """What is wrong with an image name, or None: 1 to MAX_LENGTH characters, no control
    characters, not only blanks."""
    if not image.strip():
        return "must not be empty (leave it out for the provider's configured image)"
    if len(image) > MAX_LENGTH:
        return f"must be at most {MAX_LENGTH} characters ({len(image)} given)"
    if _CONTROL.search(image):
        return "must not contain control characters"
    return None


async def keep(session: AsyncSession, *, provider: str, images: Images, read_at: datetime) -> None:
    """Keep a provider's image list as just read."""
    await session.merge(
        ProviderImages(
            provider=provider,
            machines=sorted(images.machines),
            clusters=sorted(images.clusters),
            read_at=read_at,
        )
    )


async def known(session: AsyncSession) -> dict[str, Images]:
    """Each provider's image list as last read (providers never read are missing)."""
    rows = await session.scalars(select(ProviderImages))
    return {
        row.provider: Images(
            machines=frozenset(row.machines or ()), clusters=frozenset(row.clusters or ())
        )
        for row in rows
    }


@dataclass(frozen=True)
class Wanted:
    """One alternative of an order as the image check sees it: its providers, and whether it
    is a cluster (a cluster image at providers that keep them apart)."""

    providers: Sequence[str]
    cluster: bool


def check(
    image: str | None, alternatives: Sequence[Wanted], lists: Mapping[str, Images]
) -> ImageCheck:
    """Check an order's image against its providers' lists (`lists`: as last read). An image
    name is one provider's: a provider that lists no such image for an alternative's machine
    is taken out of that alternative. A 422 naming `image` when that leaves the order nowhere
    to deploy, or when no provider it accepts lets an order choose its image."""
    if image is None:
        return ImageCheck([], [], {})
    choosers = image_choosers()
    accepted = list(dict.fromkeys(str(p) for a in alternatives for p in a.providers))
    stock_only = [p for p in accepted if p not in choosers]
    if len(stock_only) == len(accepted):
        able = [spec.name for spec in offered() if spec.name in choosers]
        which = f" ({_names(able, 'or')})" if able else ""
        raise field_error(
            "image",
            f"{_names(stock_only, 'and')} boots one stock image: accept a provider that lets "
            f"an order choose its image{which}, or leave image out",
        )
    unlisted: dict[int, list[str]] = {}
    bootable = False
    for position, alternative in enumerate(alternatives):
        for provider in (str(p) for p in alternative.providers if str(p) in choosers):
            listed = lists.get(provider)
            if listed is None or listed.lists(image, cluster=alternative.cluster):
                bootable = True
            else:
                unlisted.setdefault(position, []).append(provider)
    if not bootable:
        unable = sorted({p for some in unlisted.values() for p in some}, key=accepted.index)
        verb = "lists" if len(unable) == 1 else "list"
        raise field_error(
            "image",
            f"{_names(unable, 'and')} {verb} no image {quote(image, MAX_LENGTH)} for the "
            "machines this order wants: name one the provider's image list holds, or leave "
            "image out",
        )
    unread = [p for p in accepted if p in choosers and p not in lists]
    return ImageCheck(stock_only, unread, unlisted)


def placed_lines(order_id: str, image: str, found: ImageCheck, usable: Sequence[str]) -> list[Line]:
    """Said once, when the order is placed: the providers its image keeps it from, and those
    whose lists were not read yet (their create is the check)."""
    lines = []
    unlisted = sorted({p for some in found.unlisted.values() for p in some})
    if unlisted:
        lines.append(
            Line(
                order_id,
                OrderEventKind.PROVIDERS_DISABLED,
                f"{_names(unlisted, 'and')}: lists no image {quote(image, MAX_LENGTH)} for the "
                "machine wanted there; this order does not deploy there.",
            )
        )
    if found.stock_only:
        lines.append(
            Line(
                order_id,
                OrderEventKind.PROVIDERS_DISABLED,
                f"{_names(found.stock_only, 'and')}: boots one stock image; this order deploys "
                f"only on {_names(usable, 'or')}.",
            )
        )
    if found.unread:
        lines.append(
            Line(
                order_id,
                OrderEventKind.PLACED,
                f"{_names(found.unread, 'and')}: image list not read yet, so image "
                f"{quote(image, MAX_LENGTH)} is checked by the create itself.",
            )
        )
    return lines


def _names(providers: Sequence[str], last: str) -> str:
    names = [display_name(p) for p in providers]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" {last} " + names[-1]
