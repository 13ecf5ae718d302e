"""The catalogue: the names orders may use."""

import httpx


async def test_the_catalogue_lists_what_orders_may_name(client: httpx.AsyncClient) -> None:
    answer = await client.get("/v1/catalogue")
    assert answer.status_code == 200
    body = answer.json()
    assert {"name": "B300", "description": "NVIDIA B300 288GB"} in body["gpu_models"]
    can = {"runs_startup_scripts": True, "chooses_image": True}
    assert body["providers"] == [
        {"id": "verda", "name": "Verda", "enabled": True, **can},
        {"id": "hyperstack", "name": "Hyperstack", "enabled": True, **can},
        {
            "id": "quantacloud",
            "name": "QuantaCloud",
            "enabled": True,
            "runs_startup_scripts": False,
            "chooses_image": False,
        },
    ]
    assert body["interconnects"] == ["pcie", "nvlink", "sxm"]
