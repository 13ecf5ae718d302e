"""Orders' OS images: what one may be, which providers let an order choose one, the image lists
the watcher read from them (each image's driver, which runs which machine), and the check an
order's image, and the driver its serve script needs, pass when it is placed."""

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.drivers import branch, gpu_min_driver
from app.core.errors import field_error
from app.core.market import MachineKey
from app.core.states import OrderEventKind
from app.core.text import quote
from app.providers.base import Image, ImageFit, Images
from app.providers.registry import display_name, image_choosers, offered, spec_for
from app.services.timeline import Line
from app.storage.models import ProviderImages

MAX_LENGTH = 200
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class ImageCheck:
    """What placing an order found about images: the providers that boot one stock image (an
    order naming an image never deploys there), those whose image list was not read yet, and
    for each alternative the providers taken out of it, each with why (its image is not listed
    for the machine, cannot drive its GPU or run its script, or no image there runs the script)."""

    stock_only: list[str]
    unread: list[str]
    unfit: dict[int, dict[str, str]]  # alternative's position (0-based) -> provider -> why

    @property
    def unlisted(self) -> dict[int, list[str]]:
        """Each alternative's providers taken out of it."""
        return {position: list(providers) for position, providers in self.unfit.items()}


NO_CHECK = ImageCheck([], [], {})


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
            fits=_stored(images),
            read_at=read_at,
        )
    )


async def known(session: AsyncSession) -> dict[str, Images]:
    """Each provider's image list as last read (providers never read are missing)."""
    rows = await session.scalars(select(ProviderImages))
    return {row.provider: _loaded(row) for row in rows}


def _stored(images: Images) -> dict[str, Any] | None:
    if not images.listed and not images.fits:
        return None
    return {
        "images": [
            {
                "name": i.name,
                "driver": i.driver,
                "aliases": sorted(i.aliases),
                "cluster": i.cluster,
                "default": i.default,
            }
            for i in images.listed
        ],
        "fits": [
            {
                "sku": f.sku,
                "region": f.region,
                "gpu_model": f.machine.gpu_model,
                "gpu_count": f.machine.gpu_count,
                "nodes": f.machine.nodes,
                "images": list(f.images),
                "configured": f.configured,
            }
            for f in images.fits
        ],
    }


def _loaded(row: ProviderImages) -> Images:
    detail = row.fits or {}
    return Images(
        machines=frozenset(row.machines or ()),
        clusters=frozenset(row.clusters or ()),
        listed=tuple(
            Image(
                name=i["name"],
                driver=i.get("driver"),
                aliases=frozenset(i.get("aliases") or ()),
                cluster=bool(i.get("cluster")),
                default=bool(i.get("default")),
            )
            for i in detail.get("images") or ()
        ),
        fits=tuple(
            ImageFit(
                sku=f["sku"],
                machine=MachineKey(f["gpu_model"], f["gpu_count"], f.get("nodes", 1)),
                images=tuple(f.get("images") or ()),
                region=f.get("region"),
                configured=f.get("configured"),
            )
            for f in detail.get("fits") or ()
        ),
    )


@dataclass(frozen=True)
class Wanted:
    """One alternative of an order as the image check sees it: its providers and its machine."""

    providers: Sequence[str]
    gpu_model: str
    gpu_count: int
    nodes: int = 1
    regions: Sequence[str] | None = None

    @property
    def cluster(self) -> bool:
        """Whether it is a cluster (a cluster image at providers that keep them apart)."""
        return self.nodes > 1

    @property
    def shape(self) -> str:
        """`8x B300`, or `2 nodes of 8x H200`."""
        machine = f"{self.gpu_count}x {self.gpu_model}"
        return machine if self.nodes == 1 else f"{self.nodes} nodes of {machine}"


def check(
    image: str | None,
    alternatives: Sequence[Wanted],
    lists: Mapping[str, Images],
    *,
    min_driver: int | None = None,
) -> ImageCheck:
    """Check an order's image, and the driver its start-up script needs (`min_driver`: it
    serves a model), against its providers' lists as last read. An image name is one
    provider's, and a provider's own lists say which of its images run which machine: a
    provider where the alternative's machine cannot boot the image, or no image with that
    driver, is taken out of that alternative. A 422 naming `image` (or `serve`) when that
    leaves the order nowhere to deploy, or when no provider it accepts lets an order choose
    its image."""
    if image is None and min_driver is None:
        return NO_CHECK
    choosers = image_choosers()
    accepted = list(dict.fromkeys(str(p) for a in alternatives for p in a.providers))
    stock_only = [p for p in accepted if p not in choosers] if image is not None else []
    if image is not None and len(stock_only) == len(accepted):
        able = [spec.name for spec in offered() if spec.name in choosers]
        which = f" ({_names(able, 'or')})" if able else ""
        raise field_error(
            "image",
            f"{_names(stock_only, 'and')} boots one stock image: accept a provider that lets "
            f"an order choose its image{which}, or leave image out",
        )
    unfit: dict[int, dict[str, str]] = {}
    bootable = False
    for position, alternative in enumerate(alternatives):
        for provider in (str(p) for p in alternative.providers if str(p) in choosers):
            listed, why = lists.get(provider), None
            if listed is not None:  # not read yet: the create is the check
                why = _unfit(image, alternative, provider, listed, min_driver)
            if why is None:
                bootable = True
            else:
                unfit.setdefault(position, {})[provider] = why
    # None judged: no provider the order accepts chooses images (the script check says why).
    if not bootable and unfit:
        raise _nowhere(image, unfit, accepted)
    unread = [p for p in accepted if p in choosers and p not in lists] if image else []
    return ImageCheck(stock_only, unread, unfit)


def _unfit(
    image: str | None, wanted: Wanted, provider: str, listed: Images, min_driver: int | None
) -> str | None:
    """Why `provider` cannot deploy `wanted` for this order, as its lists say; None if it can
    (or its lists do not say)."""
    fits = _fits_of(listed, wanted, provider)
    if image is None:
        if fits and not any(listed.boots(fit).runs(None, min_driver) for fit in fits):
            return (
                f"no image there runs {wanted.shape} with R{min_driver} or newer, the driver "
                "the order's serve script needs"
            )
        return None
    if not listed.lists(image, cluster=wanted.cluster):
        return f"lists no image {quote(image, MAX_LENGTH)} for the machine wanted there"
    found = listed.image(image)
    driver = None if found is None else found.driver
    gpu_needs = gpu_min_driver(wanted.gpu_model)
    if gpu_needs is not None and driver is not None and driver < gpu_needs:
        return (
            f"image {quote(image, MAX_LENGTH)} has R{driver}, which cannot drive "
            f"{wanted.gpu_model} (R{gpu_needs} or newer)"
        )
    if min_driver is not None and (driver is None or driver < min_driver):
        return (
            f"image {quote(image, MAX_LENGTH)} has {branch(driver)}; the order's serve script "
            f"needs R{min_driver} or newer"
        )
    if fits and not any(listed.boots(fit).runs(image) for fit in fits):
        return f"image {quote(image, MAX_LENGTH)} does not run {wanted.shape} there"
    return None


def _fits_of(listed: Images, wanted: Wanted, provider: str) -> list[ImageFit]:
    """What `listed` says of the machines `wanted` takes (a cluster made of single VMs: of its
    nodes), in its regions."""
    shapes = spec_for(provider).clusters
    nodes = 1 if wanted.nodes > 1 and shapes is not None and shapes.assembled else wanted.nodes
    machine = MachineKey(wanted.gpu_model, wanted.gpu_count, nodes)
    regions = {r.upper() for r in wanted.regions} if wanted.regions else None
    return [
        fit
        for fit in listed.fits
        if fit.machine == machine
        and (regions is None or fit.region is None or fit.region.upper() in regions)
    ]


def _nowhere(image: str | None, unfit: dict[int, dict[str, str]], accepted: list[str]) -> Exception:
    """The 422 of an order every alternative's providers are taken out of."""
    whys = {provider: why for found in unfit.values() for provider, why in found.items()}
    unable = sorted(whys, key=accepted.index)
    if image is not None and all(why.startswith("lists no image") for why in whys.values()):
        verb = "lists" if len(unable) == 1 else "list"
        return field_error(
            "image",
            f"{_names(unable, 'and')} {verb} no image {quote(image, MAX_LENGTH)} for the "
            "machines this order wants: name one the provider's image list holds, or leave "
            "image out",
        )
    said = "; ".join(f"{display_name(p)}: {whys[p]}" for p in unable)
    if image is not None:
        return field_error("image", f"{said}: name an image that runs them, or leave image out")
    return field_error("serve", f"{said}: the order cannot serve its model on these machines")


def placed_lines(
    order_id: str,
    image: str | None,
    found: ImageCheck,
    usable: Sequence[str],
    alternatives: Sequence[Wanted] = (),
) -> list[Line]:
    """Said once, when the order is placed: the providers its image (or its script's driver)
    keeps each alternative from, and why; those that boot one stock image; and those whose
    lists were not read yet (their create is the check)."""
    lines = []
    listed = len(alternatives) > 1
    said: set[str] = set()
    for position, providers in sorted(found.unfit.items()):
        for provider, why in providers.items():
            where = (
                f" for alternative {position + 1} ({alternatives[position].shape})"
                if listed
                else ""
            )
            text = f"{display_name(provider)}: {why}; this order does not deploy there{where}."
            if text not in said:
                said.add(text)
                lines.append(Line(order_id, OrderEventKind.PROVIDERS_DISABLED, text))
    if found.stock_only:
        lines.append(
            Line(
                order_id,
                OrderEventKind.PROVIDERS_DISABLED,
                f"{_names(found.stock_only, 'and')}: boots one stock image; this order deploys "
                f"only on {_names(usable, 'or')}.",
            )
        )
    if found.unread and image is not None:
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
