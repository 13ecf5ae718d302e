"""The open models catalogue and the fit rule, checked against the model guides' figures."""

from decimal import Decimal

import pytest

from app.core.catalogue import GPU_MODELS
from app.open_models import catalogue as open_models
from app.open_models.catalogue import ModelsFileError, fit, merged, parse, shipped


def model(model_id: str) -> open_models.OpenModel:
    (found,) = [m for m in shipped() if m.id == model_id]
    return found


def test_every_gpu_an_order_may_name_has_a_memory_size() -> None:
    assert open_models.GPU_MEMORY_GB.keys() == GPU_MODELS.keys()


@pytest.mark.parametrize(
    ("model_id", "gpu", "nodes", "room"),
    [
        # The guides' own figures: Kimi K3 on 8x B300 leaves about 371 GB; K2.7 Code on 8x
        # H200, B200, B300 about 443, 730 and 1,337 GB.
        ("moonshotai/Kimi-K3", "B300", 1, "371.06"),
        ("moonshotai/Kimi-K2.7-Code", "H200", 1, "442.58"),
        ("moonshotai/Kimi-K2.7-Code", "B200", 1, "729.62"),
        ("moonshotai/Kimi-K2.7-Code", "B300", 1, "1336.82"),
        # Two nodes of 8 H200: 2,256 GB, about 514 GB left (the clusters guide's figure).
        ("moonshotai/Kimi-K3", "H200", 2, "514.58"),
    ],
)
def test_the_fit_rule_gives_the_guides_figures(
    model_id: str, gpu: str, nodes: int, room: str
) -> None:
    found = fit(model(model_id), gpu, 8, nodes)
    assert found.cache_room_gb == Decimal(room)
    assert found.holds() and found.disk_gb == model(model_id).disk_gb


def test_kimi_k3_fits_no_single_machine_but_b300() -> None:
    kimi = model("moonshotai/Kimi-K3")
    assert kimi.disk_gb == 1561
    holding = {gpu for gpu in ("B300", "B200", "H200", "H100") if fit(kimi, gpu, 8).holds()}
    assert holding == {"B300"}
    assert not fit(kimi, "B300", 8).holds(min_cache_gb=Decimal(400))  # room is 371 GB


def test_an_operators_model_replaces_a_shipped_one_by_id_and_adds_others() -> None:
    extra = parse(
        '[[model]]\nid = "moonshotai/Kimi-K3"\nname = "K3 (ours)"\ncheckpoint_gb = "1600"\n'
        '[[model]]\nid = "acme/Tiny"\nname = "Tiny"\ncheckpoint_gb = "12.5"\n',
        "ours.toml",
    )
    catalogue = {m.id: m for m in merged(shipped(), extra)}
    assert catalogue["moonshotai/Kimi-K3"].name == "K3 (ours)"
    assert catalogue["acme/Tiny"].checkpoint_gb == Decimal("12.5")
    assert "moonshotai/Kimi-K2.7-Code" in catalogue


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[[model]\n", "ours.toml: not TOML"),
        ("[models]\n", "unknown table 'models'"),
        ('model = "x"\n', "array of tables"),
        ('[[model]]\nid = "Kimi"\nname = "K"\ncheckpoint_gb = "1"\n', "model 1: id: String"),
        ('[[model]]\nid = "a/b"\nname = "B"\n', "model 1: checkpoint_gb: Field required"),
        ('[[model]]\nid = "a/b"\nname = "B"\ncheckpoint_gb = "-1"\n', "checkpoint_gb: Input"),
        ('[[model]]\nid = "a/b"\nname = "B"\ncheckpoint_gb = "1"\nsize = 3\n', "size: Extra"),
        (
            '[[model]]\nid = "a/b"\nname = "B"\ncheckpoint_gb = "1"\n'
            '[[model]]\nid = "a/b"\nname = "C"\ncheckpoint_gb = "2"\n',
            "model 2: id 'a/b' appears twice",
        ),
    ],
)
def test_a_bad_models_file_names_the_file_entry_and_field(text: str, says: str) -> None:
    with pytest.raises(ModelsFileError) as raised:
        parse(text, "ours.toml")
    assert str(raised.value).startswith("ours.toml: ") and says in str(raised.value)
