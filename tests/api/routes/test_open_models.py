"""`GET /v1/models` and `GET /v1/models/{id}/fit`: the catalogue of open models, an operator's
file added to it, and which machine shapes hold a model."""

from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

from app.settings import Settings

EXTRA = """
[[model]]
id = "acme/Tiny-70B"
name = "Tiny 70B"
checkpoint_gb = "141.2"
format = "BF16"

[model.sources]
checkpoint_gb = "our own download"
"""


async def test_the_shipped_models_are_listed_with_their_sources(
    client: httpx.AsyncClient,
) -> None:
    answer = await client.get("/v1/models")
    assert answer.status_code == 200, answer.text
    models = {m["id"]: m for m in answer.json()["data"]}
    kimi = models["moonshotai/Kimi-K3"]
    assert (kimi["name"], Decimal(kimi["checkpoint_gb"]), kimi["min_disk_gb"]) == (
        "Kimi K3",
        Decimal("1560.94"),
        1561,
    )
    assert (kimi["format"], kimi["context_tokens"]) == ("MXFP4", 1048576)
    assert "checkpoint_gb" in kimi["sources"]


async def test_the_fit_of_kimi_k3_is_one_b300_or_two_h200_or_b200(
    client: httpx.AsyncClient,
) -> None:
    answer = await client.get("/v1/models/moonshotai/Kimi-K3/fit", params={"holds": "true"})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    shapes = {(s["gpu_model"], s["gpu_count"], s["nodes"]): s for s in body["shapes"]}
    assert Decimal(shapes[("B300", 8, 1)]["cache_room_gb"]) == Decimal("371.06")
    h200 = shapes[("H200", 8, 2)]
    assert Decimal(h200["cache_room_gb"]) == Decimal("514.58")
    assert h200["cluster_providers"] == ["verda", "hyperstack"]
    assert ("B200", 8, 2) in shapes and ("H200", 8, 1) not in shapes
    assert all(s["holds"] and s["disk_gb"] == 1561 for s in body["shapes"])
    assert "92 %" in body["rule"]
    # Without the filter the shapes that do not hold it are there too, after those that do.
    every = (await client.get("/v1/models/moonshotai/Kimi-K3/fit")).json()["shapes"]
    h200_one = [s for s in every if (s["gpu_model"], s["gpu_count"], s["nodes"]) == ("H200", 8, 1)]
    assert [Decimal(s["cache_room_gb"]) for s in h200_one] == [Decimal("-523.18")]
    holds = [s["holds"] for s in every]
    assert holds == sorted(holds, reverse=True)


@pytest.mark.parametrize("named", ["Kimi K3", "kimi-k3", "Kimi-K3", "moonshotai/kimi-k3"])
async def test_a_model_is_found_by_its_name_or_its_id_in_any_case(
    client: httpx.AsyncClient, named: str
) -> None:
    answer = await client.get(f"/v1/models/{named}/fit")
    assert answer.status_code == 200, answer.text
    assert answer.json()["model"]["id"] == "moonshotai/Kimi-K3"


async def test_a_name_that_could_be_two_models_is_not_guessed(client: httpx.AsyncClient) -> None:
    answer = await client.get("/v1/models/Kimi/fit")  # Kimi K3, K3.1-Pro, K2.7 Code...
    assert answer.status_code == 404
    assert "GET /v1/models lists them" in answer.json()["error"]["message"]


async def test_a_cache_minimum_leaves_out_shapes_with_less_room(
    client: httpx.AsyncClient,
) -> None:
    answer = await client.get(
        "/v1/models/moonshotai/Kimi-K3/fit", params={"holds": "true", "min_cache_gb": 400}
    )
    shapes = {(s["gpu_model"], s["nodes"]) for s in answer.json()["shapes"]}
    assert ("B300", 1) not in shapes and ("H200", 2) in shapes  # 371 GB < 400 <= 514 GB


@pytest.mark.parametrize(
    ("path", "status", "says"),
    [
        ("/v1/models/acme/Nothing/fit", 404, "no model 'acme/Nothing'"),
        ("/v1/models/moonshotai/Kimi-K3/fit?min_cache_gb=-1", 422, "min_cache_gb"),
        ("/v1/models/moonshotai/Kimi-K3/fit?holds=maybe", 422, "holds"),
    ],
)
async def test_an_unknown_model_or_a_bad_parameter_is_a_clear_error(
    client: httpx.AsyncClient, path: str, status: int, says: str
) -> None:
    answer = await client.get(path)
    assert answer.status_code == status, answer.text
    assert says in answer.text
    assert answer.json()["error"]["code"] in ("not_found", "validation_error")


class TestAnOperatorsFile:
    @pytest.fixture
    def settings(self, settings: Settings, tmp_path: Path) -> Settings:
        path = tmp_path / "models.toml"
        path.write_text(EXTRA, encoding="utf-8")
        return settings.model_copy(update={"models_file": path})

    async def test_its_models_are_listed_beside_the_shipped_ones(
        self, client: httpx.AsyncClient
    ) -> None:
        listed = {m["id"] for m in (await client.get("/v1/models")).json()["data"]}
        assert {"acme/Tiny-70B", "moonshotai/Kimi-K3"} <= listed
        answer = await client.get("/v1/models/acme/Tiny-70B/fit", params={"holds": "true"})
        shapes = {(s["gpu_model"], s["gpu_count"], s["nodes"]) for s in answer.json()["shapes"]}
        assert ("H200", 2, 1) in shapes and ("H200", 1, 1) not in shapes


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "cannot be read"),
        ('[[model]]\nid = "a/b"\nname = "B"\n', "model 1: checkpoint_gb: Field required"),
    ],
)
def test_a_models_file_that_cannot_be_used_stops_the_settings(
    tmp_path: Path, content: str | None, says: str
) -> None:
    path = tmp_path / "models.toml"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(ValidationError) as raised:
        Settings(models_file=path)
    (error,) = raised.value.errors()
    assert error["loc"] == ("models_file",)
    assert str(path) in error["msg"] and says in error["msg"]
