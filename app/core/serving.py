"""The start-up script that serves an open model on the machine it boots on: pure text from the
catalogue's facts (the engine's image and the model's arguments), the machine's GPUs per node
and its nodes.

What the script does (and the order's page says how to reach it):
- checks the NVIDIA driver (the engines' CUDA 13 images need R580 or newer) and Docker;
- keeps the Hugging Face cache on the machine's own disk (`/var/lib/autoprovision/hf`), mounted
  into the engine, so the first start's download (1.5 TB for Kimi K3) is kept across restarts;
- starts the engine with tensor parallel equal to the GPUs per node, its port published on the
  loopback address only (reach it through an SSH tunnel), and a ready timeout long enough for
  the first load.

A cluster's engine spans its nodes and needs each node's rank and the first node's address,
which a script sent alike to every node does not know: there the script prepares each node
(driver, image, weights) and leaves the command to start it in `/root/autoprovision-serve.txt`.
"""

import shlex
from dataclasses import dataclass

from app.core.open_models import EngineRecipe, OpenModel

ENGINES = ("vllm", "sglang")
PORTS = {"vllm": 8000, "sglang": 30000}
READY_TIMEOUT_SECONDS = 3600  # the vLLM recipe's, for a first load of 1.5 TB
MIN_DRIVER = 580
CACHE = "/var/lib/autoprovision/hf"
LOG = "/var/log/autoprovision-serve.log"
DEFAULT_IMAGES = {"vllm": "vllm/vllm-openai:latest", "sglang": "lmsysorg/sglang:latest"}


@dataclass(frozen=True)
class Serving:
    """A model served by an engine on `nodes` machines of `gpus_per_node` GPUs."""

    model: OpenModel
    engine: str
    gpus_per_node: int
    nodes: int = 1

    @property
    def port(self) -> int:
        """The engine's port on the machine's loopback address."""
        return PORTS[self.engine]

    @property
    def recipe(self) -> EngineRecipe:
        """The catalogue's image and arguments for this engine, or the engine's latest image."""
        return self.model.serve.get(self.engine) or EngineRecipe(DEFAULT_IMAGES[self.engine])


def tunnel_command(port: int, user: str, ip: str) -> str:
    """The SSH tunnel that reaches an engine's loopback port from the user's machine."""
    return f"ssh -N -L {port}:127.0.0.1:{port} {user}@{ip}"


def _engine_command(serving: Serving) -> list[str]:
    model, recipe = serving.model.id, serving.recipe
    port = str(serving.port)
    tp = str(serving.gpus_per_node)
    if serving.engine == "vllm":
        return [recipe.image, model, "--tensor-parallel-size", tp, "--port", port, *recipe.args]
    return [
        recipe.image, "sglang", "serve", "--model-path", model,
        "--tp-size", tp, "--host", "0.0.0.0", "--port", port, *recipe.args,
    ]  # fmt: skip


def _docker_run(serving: Serving) -> list[str]:
    port = serving.port
    run = [
        "docker", "run", "-d", "--name", f"autoprovision-{serving.engine}",
        "--restart", "unless-stopped", "--gpus", "all", "--ipc=host",
        "-v", f"{CACHE}:/root/.cache/huggingface", "-p", f"127.0.0.1:{port}:{port}",
    ]  # fmt: skip
    if serving.engine == "vllm":
        run += ["-e", f"VLLM_ENGINE_READY_TIMEOUT_S={READY_TIMEOUT_SECONDS}"]
    else:
        run += ["--shm-size", "32g"]
    return run + _engine_command(serving)


def _download(serving: Serving) -> list[str]:
    return [
        "docker", "run", "--rm", "-v", f"{CACHE}:/root/.cache/huggingface",
        "--entrypoint", "huggingface-cli", serving.recipe.image, "download", serving.model.id,
    ]  # fmt: skip


def startup_script(serving: Serving) -> str:
    """The bash script that serves `serving.model` when its machine boots."""
    if serving.engine not in ENGINES:
        raise ValueError(f"unknown engine {serving.engine!r}")
    quoted = shlex.join
    what = (
        f"{serving.model.id} with {serving.engine} on "
        f"{f'{serving.nodes} nodes of ' if serving.nodes > 1 else ''}{serving.gpus_per_node} GPUs"
    )
    lines = [
        "#!/bin/bash",
        f"# Written by autoprovision: serves {what}.",
        "set -euo pipefail",
        f"exec >>{LOG} 2>&1",
        f'echo "autoprovision: serving {what}"',
        "driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n1)",
        f'if [ "${{driver%%.*}}" -lt {MIN_DRIVER} ]; then',
        f"  echo \"NVIDIA driver $driver is older than R{MIN_DRIVER}: the engine's CUDA 13 "
        'image will not run; boot an image with a newer driver" >&2',
        "  exit 1",
        "fi",
        'command -v docker >/dev/null || { echo "this image has no docker" >&2; exit 1; }',
        f"mkdir -p {CACHE}",
        quoted(["docker", "pull", serving.recipe.image]),
    ]
    if serving.nodes == 1:
        lines += [
            quoted(_docker_run(serving)),
            f'echo "autoprovision: {serving.engine} is starting on 127.0.0.1:{serving.port}; '
            "the first load takes long (follow it: docker logs -f "
            f'autoprovision-{serving.engine})"',
        ]
    else:
        note = "/root/autoprovision-serve.txt"
        lines += [
            quoted(_download(serving)),
            f"cat >{note} <<'AUTOPROVISION'",
            f"This node has {serving.recipe.image} and {serving.model.id}'s weights in {CACHE}.",
            f"Start {serving.engine} across the cluster's {serving.nodes} nodes (one engine "
            "spans them: Ray for vLLM, --nnodes/--node-rank/--dist-init-addr for SGLang),",
            "with this on the first node, adding those arguments:",
            "  " + quoted(_docker_run(serving)),
            "AUTOPROVISION",
            f'echo "autoprovision: node ready; how to start the engine: {note}"',
        ]
    return "\n".join(lines) + "\n"
