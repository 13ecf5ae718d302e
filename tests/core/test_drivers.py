"""NVIDIA's driver facts: what Blackwell needs, and the branch a CUDA version implies."""

from app.core.drivers import branch, cuda_floor, gpu_min_driver


def test_blackwell_needs_r570_and_older_gpus_any_current_driver() -> None:
    assert [gpu_min_driver(g) for g in ("B200", "B300", "GB200", "RTX-PRO-6000")] == [570] * 4
    assert gpu_min_driver("H100") is None and gpu_min_driver("V100") is None


def test_a_cuda_version_implies_the_oldest_driver_it_runs_on() -> None:
    assert cuda_floor("Ubuntu 24.04 + CUDA 13.0 Open + Docker") == 580
    assert cuda_floor("ubuntu-24.04-cuda-12.8-open-docker") == 570
    assert cuda_floor("CUDA 12.4") == 550
    assert cuda_floor("CUDA 12.7") == 560  # not in NVIDIA's table: the newest one below it
    assert cuda_floor("CUDA 13.2") == 580  # newer than the table: what it knows, no more
    assert cuda_floor("CUDA 10.2") is None and cuda_floor("Ubuntu 24.04") is None
    assert (branch(580), branch(None)) == ("R580", "an unknown driver")
