"""The start-up script that serves an open model on the machine it boots on: pure text from the
catalogue's facts (the engine's image and the model's arguments, the checkpoint's size).

One script serves every shape an order may deploy (its alternatives differ in GPUs and nodes),
because it reads the machine it runs on:
- it checks the NVIDIA driver (the engines' CUDA 13 images need R580 or newer) and Docker;
- it keeps the Hugging Face cache on the machine's own disk (`/var/lib/autoprovision/hf`),
  mounted into the engine, so the first download (1.5 TB for Kimi K3) survives restarts;
- where this machine holds the model by the fit rule (92 % of its GPU memory, as
  `nvidia-smi` reports it, less the checkpoint), it starts the engine with tensor parallel equal
  to its GPUs, the port published on the loopback address only (reach it through an SSH
  tunnel), and a ready timeout long enough for the first load;
- where it does not, it is one node of a cluster: an engine spanning nodes needs each node's
  rank and the first node's address, which a script sent alike to every node does not know,
  so it prepares the node (image, weights) and leaves the command to start the engine in
  `/root/autoprovision-serve.txt`.
"""

import shlex
from dataclasses import dataclass

from app.core.drivers import SERVE_MIN_DRIVER
from app.open_models.catalogue import FIT_SHARE, EngineRecipe, OpenModel

ENGINES = ("vllm", "sglang")
PORTS = {"vllm": 8000, "sglang": 30000}
READY_TIMEOUT_SECONDS = 3600  # the vLLM recipe's, for a first load of 1.5 TB
MIN_DRIVER = SERVE_MIN_DRIVER
DEFAULT_IMAGES = {"vllm": "vllm/vllm-openai:latest", "sglang": "lmsysorg/sglang:latest"}
# Where things go on the machine; the variables exist so the script can be run in a test.
PLACES = (
    'log="${AUTOPROVISION_SERVE_LOG:-/var/log/autoprovision-serve.log}"',
    'cache="${AUTOPROVISION_HF_CACHE:-/var/lib/autoprovision/hf}"',
    'note="${AUTOPROVISION_SERVE_NOTE:-/root/autoprovision-serve.txt}"',
)
GPUS = '"$gpus"'  # the GPUs this machine has, counted at boot


@dataclass(frozen=True)
class Serving:
    """A model served by an engine."""

    model: OpenModel
    engine: str

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


def _docker_run(serving: Serving) -> str:
    """`docker run ...` for the engine, tensor parallel over this machine's GPUs."""
    port, recipe, model = serving.port, serving.recipe, serving.model.id
    run = [
        "docker", "run", "-d", "--name", f"autoprovision-{serving.engine}",
        "--restart", "unless-stopped", "--gpus", "all", "--ipc=host",
        "-v", "CACHE:/root/.cache/huggingface", "-p", f"127.0.0.1:{port}:{port}",
    ]  # fmt: skip
    if serving.engine == "vllm":
        run += ["-e", f"VLLM_ENGINE_READY_TIMEOUT_S={READY_TIMEOUT_SECONDS}", recipe.image, model]
        tp, rest = "--tensor-parallel-size", ["--port", str(port), *recipe.args]
    else:
        run += ["--shm-size", "32g", recipe.image, "sglang", "serve", "--model-path", model]
        tp, rest = "--tp-size", ["--host", "0.0.0.0", "--port", str(port), *recipe.args]
    text = f"{shlex.join(run)} {tp} {GPUS} {shlex.join(rest)}"
    return text.replace("CACHE:", '"$cache":', 1)


def _in_heredoc(command: str) -> str:
    """`command` for an unquoted heredoc: only its `$cache` and `$gpus` expand."""
    escaped = command.replace("\\", "\\\\").replace("`", "\\`").replace("$", "\\$")
    return escaped.replace(r'"\$cache"', '"$cache"').replace(r'"\$gpus"', '"$gpus"')


def startup_script(serving: Serving) -> str:
    """The bash script that serves `serving.model` when its machine boots."""
    if serving.engine not in ENGINES:
        raise ValueError(f"unknown engine {serving.engine!r}")
    model, image, engine = serving.model, serving.recipe.image, serving.engine
    what = f"{model.id} with {engine}"
    # nvidia-smi counts MiB; the catalogue's sizes are GB.
    holds = (
        f'awk -v mib="$memory_mib" \'BEGIN {{ exit !(mib * 1.048576 / 1000 * {FIT_SHARE} '
        f"> {model.checkpoint_gb}) }}'"
    )
    download = (
        'docker run --rm -v "$cache":/root/.cache/huggingface --entrypoint huggingface-cli '
        f"{shlex.quote(image)} download {shlex.quote(model.id)}"
    )
    lines = [
        "#!/bin/bash",
        f"# Written by autoprovision: serves {what} (see the order's page).",
        "set -euo pipefail",
        *PLACES,
        'exec >>"$log" 2>&1',
        f'echo "autoprovision: serving {what}"',
        # awk reads it all: `head` would close the pipe early, and pipefail end the script.
        "driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | awk 'NR == 1')",
        f'if [ "${{driver%%.*}}" -lt {MIN_DRIVER} ]; then',
        f"  echo \"NVIDIA driver $driver is older than R{MIN_DRIVER}: the engine's CUDA 13 "
        'image will not run; boot an image with a newer driver" >&2',
        "  exit 1",
        "fi",
        'command -v docker >/dev/null || { echo "this image has no docker" >&2; exit 1; }',
        "gpus=$(nvidia-smi -L | grep -c '^GPU ')",
        "memory_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits"
        " | awk '{ s += $1 } END { print s }')",
        'mkdir -p "$cache"',
        f"docker pull {shlex.quote(image)}",
        f"if {holds}; then",
        f"  {_docker_run(serving)}",
        f'  echo "autoprovision: {engine} is starting on 127.0.0.1:{serving.port} over $gpus GPUs;'
        f' the first load takes long (docker logs -f autoprovision-{engine})"',
        "else",
        f"  {download}",
        # Unquoted, so the note has this node's cache and GPU count where the command names them.
        '  cat >"$note" <<AUTOPROVISION',
        f"This machine alone does not hold {model.id}: it is one node of a cluster. It has",
        f"{image} and the weights in its Hugging Face cache. Start {engine} across the nodes",
        "(one engine spans them: Ray for vLLM, --nnodes/--node-rank/--dist-init-addr for",
        "SGLang) with this on the first node, adding those arguments:",
        f"  {_in_heredoc(_docker_run(serving))}",
        "AUTOPROVISION",
        '  echo "autoprovision: node ready; how to start the engine: $note"',
        "fi",
    ]
    return "\n".join(lines) + "\n"
