"""The start-up script that serves a model: what it runs, checked as text and by bash itself."""

import shutil
import subprocess

import pytest

from app.core.open_models import shipped
from app.core.serving import Serving, startup_script, tunnel_command

KIMI = next(m for m in shipped() if m.id == "moonshotai/Kimi-K3")
K27 = next(m for m in shipped() if m.id == "moonshotai/Kimi-K2.7-Code")


def bash_accepts(script: str) -> bool:
    bash = shutil.which("bash")
    assert bash is not None
    return subprocess.run([bash, "-n"], input=script, text=True).returncode == 0


def test_vllm_on_one_machine_runs_the_recipe_on_loopback_with_a_long_ready_timeout() -> None:
    script = startup_script(Serving(KIMI, "vllm", gpus_per_node=8))
    assert script.startswith("#!/bin/bash\n") and bash_accepts(script)
    assert "docker pull vllm/vllm-openai:kimi-k3" in script
    (run,) = [line for line in script.splitlines() if line.startswith("docker run -d")]
    assert "-p 127.0.0.1:8000:8000" in run  # published on loopback only
    assert "--tensor-parallel-size 8" in run and "moonshotai/Kimi-K3" in run
    assert "--tool-call-parser kimi_k3 --reasoning-parser kimi_k3" in run
    assert "VLLM_ENGINE_READY_TIMEOUT_S=3600" in run
    assert "-v /var/lib/autoprovision/hf:/root/.cache/huggingface" in run
    assert "-lt 580" in script  # the driver check


def test_sglang_uses_its_port_shared_memory_and_tp_of_the_gpus_per_node() -> None:
    script = startup_script(Serving(KIMI, "sglang", gpus_per_node=8))
    assert bash_accepts(script)
    (run,) = [line for line in script.splitlines() if line.startswith("docker run -d")]
    assert "-p 127.0.0.1:30000:30000" in run and "--shm-size 32g" in run
    assert "lmsysorg/sglang:kimi-k3 sglang serve --model-path moonshotai/Kimi-K3" in run
    assert "--tp-size 8" in run


def test_a_model_without_an_engines_recipe_gets_its_latest_image() -> None:
    script = startup_script(Serving(K27, "sglang", gpus_per_node=4))
    assert "docker pull lmsysorg/sglang:latest" in script and "--tp-size 4" in script


def test_a_cluster_prepares_each_node_and_says_how_to_start_the_engine() -> None:
    script = startup_script(Serving(KIMI, "vllm", gpus_per_node=8, nodes=2))
    assert bash_accepts(script)
    lines = script.splitlines()
    assert not [line for line in lines if line.startswith("docker run -d")]  # not started
    assert any(
        "huggingface-cli" in line and "download moonshotai/Kimi-K3" in line for line in lines
    )
    assert "/root/autoprovision-serve.txt" in script and "2 nodes" in script


def test_an_unknown_engine_is_refused() -> None:
    with pytest.raises(ValueError):
        startup_script(Serving(KIMI, "llama.cpp", gpus_per_node=8))


def test_the_tunnel_reaches_the_loopback_port() -> None:
    assert tunnel_command(8000, "ubuntu", "203.0.113.7") == (
        "ssh -N -L 8000:127.0.0.1:8000 ubuntu@203.0.113.7"
    )
