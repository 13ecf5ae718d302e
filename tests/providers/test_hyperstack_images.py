"""Which image each Hyperstack flavor boots, from the restrictions said on either side (a
flavor's `image_restrictions`, an image's `flavor_restrictions`), the region, and the GPU's
driver: pure, over recorded shapes; then the adapter's offers against the simulated
Hyperstack, Blackwell flavors never booting the default R535 image."""

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from app.providers.base import MachineKey
from app.providers.hyperstack import HyperstackAdapter
from app.providers.hyperstack.images import image_driver, image_fits

R535 = "Ubuntu Server 22.04 LTS R535 CUDA 12.2"
R570 = "Ubuntu Server 24.04 LTS R570 CUDA 12.8"
R580 = "Ubuntu Server 24.04 LTS R580 CUDA 13.0 with Docker"


def images_body(*rows: dict[str, Any]) -> dict[str, Any]:
    return {
        "status": True,
        "message": "ok",
        "images": [{"region_name": "CANADA-1", "images": rows}],
    }


def image(local_id: int, name: str, region: str = "CANADA-1", **extra: Any) -> dict[str, Any]:
    return {"id": local_id, "name": name, "region_name": region, "flavor_restrictions": {}, **extra}


def flavor(name: str, gpu: str, count: int, region: str = "CANADA-1", **extra: Any) -> Any:
    return {"id": 7, "name": name, "gpu": gpu, "gpu_count": count, "region_name": region, **extra}


def hard(**entries: Any) -> dict[str, Any]:
    kind = next(iter(entries))
    return {
        f"has_{kind}_restrictions": True,
        "restriction_type": "hard",
        **{f"compatible_{kind}s": entries[kind]},
    }


class TestImageFits:
    def test_the_driver_is_read_from_the_name(self) -> None:
        assert (image_driver(R535), image_driver(R570), image_driver(R580)) == (535, 570, 580)
        assert image_driver("Ubuntu 24.04 with CUDA 12.4") == 550  # implied by its CUDA
        assert image_driver("Debian 12") is None

    def test_an_image_too_old_for_blackwell_never_boots_it_restrictions_or_not(self) -> None:
        body = images_body(image(1, R535), image(2, R570), image(4, R580))
        read = image_fits(body, [flavor("n3-B200-SXM6x8", "B200-SXM", 8)], configured=R535)
        (b200,) = read.fits
        assert b200.machine == MachineKey("B200", 8)
        assert b200.images == (R580, R570) and b200.configured == R535
        # Positive control: an H100 boots all three, the configured one first.
        read = image_fits(body, [flavor("n3-H100x1", "H100-80G-PCIe", 1)], configured=R535)
        assert read.fits[0].images == (R535, R580, R570)

    def test_restrictions_on_either_side_by_id_or_name_and_soft_ones_are_advice(self) -> None:
        only_570 = {"image": [{"image_id": 2, "image_name": R570}]}
        body = images_body(image(1, R535), image(2, R570), image(4, R580))
        fits = image_fits(
            body,
            [flavor("n3-H100x1", "H100-80G-PCIe", 1, image_restrictions=hard(**only_570))],
            configured=R535,
        )
        assert fits.fits[0].images == (R570,)
        by_id = {"image": [{"image_id": 4}]}
        fits = image_fits(
            body,
            [flavor("n3-H100x1", "H100-80G-PCIe", 1, image_restrictions=hard(**by_id))],
            configured=R535,
        )
        assert fits.fits[0].images == (R580,)
        soft = {**hard(**only_570), "restriction_type": "soft"}
        fits = image_fits(
            body,
            [flavor("n3-H100x1", "H100-80G-PCIe", 1, image_restrictions=soft)],
            configured=R535,
        )
        assert len(fits.fits[0].images) == 3
        # The image's side: R535 may launch only on flavor 99, so not on this one (id 7).
        leaves_out = hard(flavor=[{"flavor_id": 99, "flavor_name": "n3-L40x1"}])
        body = images_body(image(1, R535, flavor_restrictions=leaves_out), image(2, R570))
        fits = image_fits(body, [flavor("n3-H100x1", "H100-80G-PCIe", 1)], configured=R535)
        assert fits.fits[0].images == (R570,)

    def test_an_image_of_another_region_is_not_booted_and_k8s_flavors_are_left_out(
        self,
    ) -> None:
        body = images_body(image(1, R535), image(302, R580, region="US-1"))
        rows = [
            flavor("n3-H100x1", "H100-80G-PCIe", 1),
            flavor("n3-H100x8-k8s", "H100-80G-PCIe", 8),
            flavor("n1-cpu-small", "", 0),
        ]
        read = image_fits(body, rows, configured=R535)
        assert [(f.sku, f.region, f.images) for f in read.fits] == [
            ("n3-H100x1", "CANADA-1", (R535,))
        ]
        assert read.lists(R580, cluster=True)  # a cluster's nodes are VMs: the same names


pytestmark = pytest.mark.usefixtures("sim_sync")


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client


async def test_offers_boot_what_their_flavor_takes_in_their_region(
    http: httpx.AsyncClient, hyperstack_url: str
) -> None:
    adapter = HyperstackAdapter(
        http,
        base_url=f"{hyperstack_url}/v1",
        api_key=SecretStr("sim-key"),
        environment="autoprovision-{region}",
        key_name="autoprovision",
        image=R535,
    )
    for sku in ("n3-B200-SXM6x8", "n3-H100x1"):
        body = {"sku": sku, "region": "CANADA-1", "quantity": 2}
        assert (await http.put(f"{hyperstack_url}/_sim/stock", json=body)).status_code == 200
    assert all(o.boots is None for o in await adapter.fetch_offers())  # not read yet
    await adapter.images()
    offers = {o.sku: o for o in await adapter.fetch_offers([MachineKey("B200", 8, 2)])}
    b200, h100 = offers["n3-B200-SXM6x8"].boots, offers["n3-H100x1"].boots
    assert b200 is not None and h100 is not None
    assert b200.choose() == R580 and not b200.runs(R535)  # not the configured R535
    assert h100.choose() == R535 and h100.choose(580) == R580
    # A cluster made of B200 VMs boots what each of them does.
    cluster = offers["n3-B200-SXM6x8.x2"].boots
    assert cluster is not None and cluster.choose() == R580
