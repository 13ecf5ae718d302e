"""The start-up script that serves a model, run by bash against stand-ins for `nvidia-smi` and
`docker`: what it starts on a machine that holds the model, what it leaves on a cluster's node,
and what it refuses."""

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from app.open_models.catalogue import shipped
from app.open_models.serving import Serving, startup_script, tunnel_command

KIMI = next(m for m in shipped() if m.id == "moonshotai/Kimi-K3")
K27 = next(m for m in shipped() if m.id == "moonshotai/Kimi-K2.7-Code")
B300_MIB, H200_MIB = 275040, 143771  # what nvidia-smi says of one GPU's memory


REPORT_URL = "https://gpus.example.com/v1/machines/report"


@dataclass
class Boot:
    """What the script did: its exit code, the docker commands it ran, its log and note, and
    the reports it sent (their JSON bodies, and the whole curl command of each)."""

    code: int
    docker: list[str]
    log: str
    note: str | None
    reports: list[dict[str, Any]]
    report_calls: list[str]


def _curl(tmp_path: Path, unhealthy: int) -> str:
    """A stand-in for curl: a report's body is kept; the engine's /health fails `unhealthy`
    times, then answers, as does its completion."""
    return (
        "#!/bin/bash\n"
        f'case "$*" in\n'
        f'  *{REPORT_URL}*) printf "%s\\n" "$*" >> {tmp_path / "report-calls"};'
        f' printf "%s\\n" "${{@: -1}}" >> {tmp_path / "reports"} ;;\n'
        f"  */health*) n=$(cat {tmp_path / 'health-asked'} 2>/dev/null || echo 0);"
        f" echo $((n + 1)) > {tmp_path / 'health-asked'}; [ $n -ge {unhealthy} ] ;;\n"
        "esac\n"
    )


def boot(
    tmp_path: Path,
    script: str,
    *,
    gpus: int,
    mib: int,
    driver: str = "580.65.06",
    report: bool = False,
    unhealthy: int = 0,
) -> Boot:
    """Run `script` as a machine with `gpus` GPUs of `mib` MiB each would at boot; with
    `report`, told where and how to report (as the service's create tells it)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "docker-calls"
    (bin_dir / "curl").write_text(_curl(tmp_path, unhealthy))
    (bin_dir / "nvidia-smi").write_text(
        "#!/bin/bash\n"
        f'case "$*" in\n'
        f"  *driver_version*) for i in $(seq {gpus}); do echo {driver}; done ;;\n"
        f"  *memory.total*) for i in $(seq {gpus}); do echo {mib}; done ;;\n"
        f'  -L) for i in $(seq 0 {gpus - 1}); do echo "GPU $i: NVIDIA (UUID: GPU-$i)"; done ;;\n'
        "esac\n"
    )
    (bin_dir / "docker").write_text(f'#!/bin/bash\necho "$*" >> {calls}\n')
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    log, note = tmp_path / "serve.log", tmp_path / "serve.txt"
    bash = shutil.which("bash")
    assert bash is not None
    ran = subprocess.run(
        [bash, "-c", script],
        env={
            "PATH": f"{bin_dir}:/usr/bin:/bin",
            "AUTOPROVISION_SERVE_LOG": str(log),
            "AUTOPROVISION_HF_CACHE": str(tmp_path / "hf"),
            "AUTOPROVISION_SERVE_NOTE": str(note),
            "AUTOPROVISION_REPORT_EVERY": "0",
            **(
                {"AUTOPROVISION_REPORT_URL": REPORT_URL, "AUTOPROVISION_REPORT_TOKEN": "apm_t"}
                if report
                else {}
            ),
        },
        timeout=30,
    )
    reports, report_calls = tmp_path / "reports", tmp_path / "report-calls"
    return Boot(
        ran.returncode,
        calls.read_text().splitlines() if calls.exists() else [],
        log.read_text() if log.exists() else "",
        note.read_text() if note.exists() else None,
        [json.loads(line) for line in reports.read_text().splitlines()] if reports.exists() else [],
        report_calls.read_text().splitlines() if report_calls.exists() else [],
    )


def test_vllm_on_a_machine_that_holds_the_model_serves_it_on_loopback(tmp_path: Path) -> None:
    ran = boot(tmp_path, startup_script(Serving(KIMI, "vllm")), gpus=8, mib=B300_MIB)
    assert ran.code == 0, ran.log
    pull, run = ran.docker
    assert pull == "pull vllm/vllm-openai:kimi-k3"
    assert run.startswith("run -d --name autoprovision-vllm --restart unless-stopped")
    assert "-p 127.0.0.1:8000:8000" in run  # published on loopback only
    assert f"-v {tmp_path / 'hf'}:/root/.cache/huggingface" in run
    assert "-e VLLM_ENGINE_READY_TIMEOUT_S=3600 vllm/vllm-openai:kimi-k3 moonshotai/Kimi-K3" in run
    assert "--tensor-parallel-size 8 --port 8000 --trust-remote-code" in run
    assert "--tool-call-parser kimi_k3 --reasoning-parser kimi_k3" in run
    assert (tmp_path / "hf").is_dir() and ran.note is None
    assert "vllm is starting on 127.0.0.1:8000 over 8 GPUs" in ran.log


def test_sglang_takes_its_port_shared_memory_and_the_gpus_it_finds(tmp_path: Path) -> None:
    ran = boot(tmp_path, startup_script(Serving(K27, "sglang")), gpus=4, mib=B300_MIB)
    assert ran.code == 0, ran.log
    pull, run = ran.docker
    assert pull == "pull lmsysorg/sglang:latest"  # no sglang recipe in the catalogue: latest
    assert "-p 127.0.0.1:30000:30000" in run and "--shm-size 32g" in run
    assert "sglang serve --model-path moonshotai/Kimi-K2.7-Code --tp-size 4" in run


def test_a_node_that_alone_does_not_hold_it_is_prepared_and_told_how_to_start(
    tmp_path: Path,
) -> None:
    # One node of 8 H200 (about 1,150 GB) does not hold Kimi K3's 1,561 GB: a cluster's node.
    ran = boot(tmp_path, startup_script(Serving(KIMI, "vllm")), gpus=8, mib=H200_MIB)
    assert ran.code == 0, ran.log
    pull, download = ran.docker
    assert pull == "pull vllm/vllm-openai:kimi-k3"
    assert "download moonshotai/Kimi-K3" in download and not download.startswith("run -d")
    assert ran.note is not None and "one node of a cluster" in ran.note
    # The command in it runs as pasted: this node's cache and GPU count, no shell variables.
    cache = tmp_path / "hf"
    assert f'-v "{cache}":/root/.cache/huggingface' in ran.note
    assert '--tensor-parallel-size "8" --port 8000' in ran.note
    assert "$" not in ran.note


def test_an_old_driver_stops_it_before_anything_is_pulled(tmp_path: Path) -> None:
    ran = boot(
        tmp_path, startup_script(Serving(KIMI, "vllm")), gpus=8, mib=B300_MIB, driver="570.1"
    )
    assert ran.code == 1 and ran.docker == []
    assert "older than R580" in ran.log


def test_an_unknown_engine_is_refused() -> None:
    with pytest.raises(ValueError):
        startup_script(Serving(KIMI, "llama.cpp"))


def test_the_tunnel_reaches_the_loopback_port() -> None:
    assert tunnel_command(8000, "ubuntu", "203.0.113.7") == (
        "ssh -N -L 8000:127.0.0.1:8000 ubuntu@203.0.113.7"
    )


class TestReports:
    def test_a_machine_that_holds_the_model_reports_each_stage_up_to_ready(
        self, tmp_path: Path
    ) -> None:
        script = startup_script(Serving(KIMI, "vllm"))
        ran = boot(tmp_path, script, gpus=8, mib=B300_MIB, report=True, unhealthy=1)
        assert ran.code == 0, ran.log
        assert [r["stage"] for r in ran.reports] == [
            "booted",
            "driver_ok",
            "image_pulled",
            "engine_starting",
            "downloading",  # /health did not answer at first: the cache's bytes so far
            "healthy",
            "ready",
        ]
        driver_ok, downloading, ready = ran.reports[1], ran.reports[4], ran.reports[6]
        assert driver_ok["detail"] == "driver 580.65.06"
        assert downloading["bytes_total"] == 1_560_940_000_000  # Kimi K3's checkpoint
        assert downloading["bytes_done"] >= 0
        assert isinstance(ready["time_to_first_token_seconds"], float)  # measured, in seconds
        assert 0 <= ready["time_to_first_token_seconds"] < 30
        assert all("Authorization: Bearer apm_t" in call for call in ran.report_calls)

    def test_an_old_driver_is_reported_as_the_failure_it_is(self, tmp_path: Path) -> None:
        script = startup_script(Serving(KIMI, "vllm"))
        ran = boot(tmp_path, script, gpus=8, mib=B300_MIB, driver="570.1", report=True)
        assert ran.code == 1
        assert ran.reports == [
            {"stage": "booted"},
            {
                "stage": "failed",
                "cause": "driver_too_old",
                "detail": "driver 570.1, older than R580",
            },
        ]

    def test_no_gpu_is_reported_as_such(self, tmp_path: Path) -> None:
        ran = boot(tmp_path, startup_script(Serving(KIMI, "vllm")), gpus=0, mib=0, report=True)
        assert ran.code == 1 and ran.docker == []
        assert ran.reports == [
            {"stage": "booted"},
            {"stage": "failed", "cause": "no_gpu", "detail": "nvidia-smi lists no GPU"},
        ]

    def test_a_machine_not_told_where_reports_nothing_and_serves_all_the_same(
        self, tmp_path: Path
    ) -> None:
        ran = boot(tmp_path, startup_script(Serving(KIMI, "vllm")), gpus=8, mib=B300_MIB)
        assert ran.code == 0 and ran.reports == []
        assert "vllm answered: ready" in ran.log  # control: it did reach ready
