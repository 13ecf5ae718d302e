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

Told where and how (`AUTOPROVISION_REPORT_URL` and `_TOKEN`, which the create adds), it reports
each stage to the service: booted, the driver, the image, the download (the cache's bytes while
the engine loads), healthy once `/health` answers, ready once a one-token completion comes back
(with the seconds it took), or failed with the cause.
"""

import json
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


# `report '<json>'` posts a stage to the service (`POST /v1/machines/report`) when the machine
# was given where and how (`AUTOPROVISION_REPORT_URL`, `_TOKEN`); a report never stops serving.
REPORT = (
    "report() {",
    '  [ -n "${AUTOPROVISION_REPORT_URL:-}" ] || return 0',
    '  curl -fsS -m 10 -X POST "$AUTOPROVISION_REPORT_URL" -H "Content-Type: application/json" \\',
    '    -H "Authorization: Bearer ${AUTOPROVISION_REPORT_TOKEN:-}" -d "$1" >/dev/null || true',
    "}",
)
PROGRESS_SECONDS = 10  # between download reports while the engine loads (a test sets less)


def _failed(cause: str, detail: str, *, indent: str) -> str:
    """The `report` line of a failure (`detail` may name shell variables, never a quote)."""
    body = (
        f'{{\\"stage\\": \\"failed\\", \\"cause\\": \\"{cause}\\", \\"detail\\": \\"{detail}\\"}}'
    )
    return f'{indent}report "{body}"'


def _until_ready(serving: Serving, total: int) -> list[str]:
    """Wait for the engine's /health, reporting the download (the cache's bytes) meanwhile,
    then time a one-token completion: `healthy`, then `ready` with the time to first token."""
    port, model = serving.port, serving.model.id
    completion = json.dumps({"model": model, "prompt": "Hello", "max_tokens": 1})
    return [
        f"  deadline=$((SECONDS + {READY_TIMEOUT_SECONDS}))",
        f"  until curl -fsS -m 5 http://127.0.0.1:{port}/health >/dev/null 2>&1; do",
        '    if [ "$SECONDS" -ge "$deadline" ]; then',
        _failed(
            "engine_failed",
            f"no answer on /health within {READY_TIMEOUT_SECONDS} s",
            indent="      ",
        ),
        "      exit 1",
        "    fi",
        "    done_bytes=$(du -sb \"$cache\" | awk '{ print $1 }')",
        f'    report "{{\\"stage\\": \\"downloading\\", \\"bytes_done\\": $done_bytes, '
        f'\\"bytes_total\\": {total}}}"',
        f'    sleep "${{AUTOPROVISION_REPORT_EVERY:-{PROGRESS_SECONDS}}}"',
        "  done",
        '  report \'{"stage": "healthy"}\'',
        "  asked=$(date +%s%N)",
        f"  curl -fsS -m 600 http://127.0.0.1:{port}/v1/completions"
        f" -H 'Content-Type: application/json' -d {shlex.quote(completion)} >/dev/null || {{",
        _failed("engine_failed", "healthy, but no completion answered", indent="    "),
        "    exit 1",
        "  }",
        "  ttft=$(awk -v ns=$(( $(date +%s%N) - asked )) 'BEGIN { printf \"%.3f\", ns / 1e9 }')",
        '  report "{\\"stage\\": \\"ready\\", \\"time_to_first_token_seconds\\": $ttft}"',
        f'  echo "autoprovision: {serving.engine} answered: ready"',
    ]


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
    total = int(model.checkpoint_gb * 10**9)
    lines = [
        "#!/bin/bash",
        f"# Written by autoprovision: serves {what} (see the order's page).",
        "set -euo pipefail",
        *PLACES,
        'exec >>"$log" 2>&1',
        *REPORT,
        'report \'{"stage": "booted"}\'',
        f'echo "autoprovision: serving {what}"',
        "command -v nvidia-smi >/dev/null || {",
        '  echo "this image has no nvidia-smi" >&2',
        _failed("no_gpu", "this image has no nvidia-smi", indent="  "),
        "  exit 1",
        "}",
        # awk reads it all: `head` would close the pipe early, and pipefail end the script.
        "driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | awk 'NR == 1')",
        'if [ -z "$driver" ]; then',
        '  echo "nvidia-smi lists no GPU" >&2',
        _failed("no_gpu", "nvidia-smi lists no GPU", indent="  "),
        "  exit 1",
        "fi",
        f'if [ "${{driver%%.*}}" -lt {MIN_DRIVER} ]; then',
        f"  echo \"NVIDIA driver $driver is older than R{MIN_DRIVER}: the engine's CUDA 13 "
        'image will not run; boot an image with a newer driver" >&2',
        _failed("driver_too_old", f"driver $driver, older than R{MIN_DRIVER}", indent="  "),
        "  exit 1",
        "fi",
        'report "{\\"stage\\": \\"driver_ok\\", \\"detail\\": \\"driver $driver\\"}"',
        "command -v docker >/dev/null || {",
        '  echo "this image has no docker" >&2',
        _failed("other", "this image has no docker", indent="  "),
        "  exit 1",
        "}",
        "gpus=$(nvidia-smi -L | grep -c '^GPU ' || true)",
        'if [ "$gpus" -eq 0 ]; then',
        '  echo "nvidia-smi lists no GPU" >&2',
        _failed("no_gpu", "nvidia-smi lists no GPU", indent="  "),
        "  exit 1",
        "fi",
        "memory_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits"
        " | awk '{ s += $1 } END { print s }')",
        'mkdir -p "$cache"',
        f"docker pull {shlex.quote(image)}",
        'report \'{"stage": "image_pulled"}\'',
        f"if {holds}; then",
        f"  {_docker_run(serving)}",
        f'  echo "autoprovision: {engine} is starting on 127.0.0.1:{serving.port} over $gpus GPUs;'
        f' the first load takes long (docker logs -f autoprovision-{engine})"',
        '  report \'{"stage": "engine_starting"}\'',
        *_until_ready(serving, total),
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
