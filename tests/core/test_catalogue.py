"""The GPU catalogue that orders are checked against."""

from app.core.catalogue import GPU_MODELS, normalize_gpu_model
from app.providers.registry import display_name, offered_providers


def test_catalogue_has_the_models_the_providers_sell() -> None:
    for name in ("B300", "B200", "H200", "H100", "A100-80G", "L40S", "RTX-PRO-6000"):
        assert name in GPU_MODELS


def test_names_are_matched_case_insensitively_and_unknown_names_are_refused() -> None:
    assert normalize_gpu_model(" b300 ") == "B300"
    assert normalize_gpu_model("rtx-pro-6000") == "RTX-PRO-6000"
    assert normalize_gpu_model("B301") is None


def test_providers_have_display_names() -> None:
    assert [display_name(p) for p in offered_providers()] == ["Verda", "Hyperstack", "QuantaCloud"]
