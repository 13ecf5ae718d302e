"""Which image the Verda adapter's offers boot: its image read asks Verda, for every instance
and cluster type, which images fit (`?instance_type=`), leaves out those too old for the GPU,
and puts the configured image first where it fits. Against the simulated Verda on a socket."""

import ssl
from collections.abc import AsyncIterator

import httpx
import pytest
from pydantic import SecretStr

from app.providers.base import ImageFit, Images, MachineKey
from app.providers.verda import VerdaAdapter

DEFAULT = "ubuntu-24.04-cuda-12.8-open-docker"  # R570, the setting's default
CUDA_13 = "ubuntu-24.04-cuda-13.0-open-docker"  # R580
CUDA_12_4 = "ubuntu-22.04-cuda-12.4-docker"  # R550, not an open driver
CLUSTER_13 = "ubuntu-24.04-cuda-13.0-cluster"
TLS = ssl.create_default_context()

pytestmark = pytest.mark.usefixtures("sim_sync")  # every simulator reset first


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(verify=TLS) as client:
        yield client


def adapter_for(http: httpx.AsyncClient, verda_url: str, image: str = DEFAULT) -> VerdaAdapter:
    return VerdaAdapter(
        http,
        base_url=f"{verda_url}/v1",
        client_id=SecretStr("sim-client"),
        client_secret=SecretStr("sim-secret"),
        image=image,
    )


def fit(images: Images, sku: str) -> ImageFit:
    return next(f for f in images.fits if f.sku == sku)


async def test_each_type_boots_what_verda_lists_for_it_configured_first(
    http: httpx.AsyncClient, verda_url: str
) -> None:
    images = await adapter_for(http, verda_url).images()
    b300 = fit(images, "8B300.240V")
    assert b300.machine == MachineKey("B300", 8)
    assert b300.images[:2] == (DEFAULT, CUDA_13)  # the configured first, then the newest
    assert CUDA_12_4 not in b300.images  # Verda does not list it for Blackwell
    # A V100 lists no open-driver image: the configured one does not fit, the newest that does
    # comes first.
    v100 = fit(images, "1V100.6V")
    assert v100.configured == DEFAULT and DEFAULT not in v100.images
    assert v100.images[0] == CUDA_12_4
    # Clusters: their own images, per cluster type.
    assert fit(images, "16B200").images == (CLUSTER_13,)
    assert fit(images, "16H200").machine == MachineKey("H200", 8, 2)
    assert fit(images, "16H200").images[0] == CLUSTER_13
    # Every image with its driver branch, as its details say (or its CUDA version implies).
    drivers = {i.name: i.driver for i in images.listed}
    assert (drivers[DEFAULT], drivers[CUDA_13], drivers["ubuntu-22.04-cuda-12.0-docker"]) == (
        570,
        580,
        525,
    )
    assert drivers["ubuntu-24.04"] is None


async def test_offers_carry_what_their_type_boots(
    http: httpx.AsyncClient, verda_url: str, sim_sync: object
) -> None:
    adapter = adapter_for(http, verda_url)
    async with httpx.AsyncClient(base_url=verda_url, verify=TLS) as control:
        for sku, region in (("8B300.240V", "FIN-03"), ("1V100.6V", "FIN-01")):
            body = {"sku": sku, "region": region, "quantity": 1}
            assert (await control.put("/_sim/stock", json=body)).status_code == 200
    unread = {o.sku: o for o in await adapter.fetch_offers()}
    assert unread["8B300.240V"].boots is None  # before the image read: not known
    await adapter.images()
    offers = {o.sku: o for o in await adapter.fetch_offers()}
    b300, v100 = offers["8B300.240V"].boots, offers["1V100.6V"].boots
    assert b300 is not None and v100 is not None
    assert b300.choose() == DEFAULT  # the configured image, where it fits
    assert b300.choose(580) == CUDA_13  # a serve script needs R580
    assert v100.choose() == CUDA_12_4 and v100.choose(580) is None


async def test_the_configured_image_may_be_named_by_its_id(
    http: httpx.AsyncClient, verda_url: str
) -> None:
    by_id = adapter_for(http, verda_url, image="77777777-4f48-4249-82b3-f199fb9b701b")
    b300 = fit(await by_id.images(), "8B300.240V")
    assert b300.configured == DEFAULT and b300.images[0] == DEFAULT
