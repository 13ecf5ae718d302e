"""Which GPUs a provider's configured images run, from its own image lists: for `autoprovision
doctor`. Where the configured image does not run a machine, its creates boot the newest image
that does; a serve script needs R580. Pure: the provider's `images()` in, a verdict out."""

from collections import defaultdict

from app.core.catalogue import GPU_MODELS
from app.core.drivers import SERVE_MIN_DRIVER
from app.providers.base import ImageFit, Images
from app.providers.diagnosis import Status, Verdict

_ORDER = {gpu: n for n, gpu in enumerate(GPU_MODELS)}


def _gpus(gpus: list[str]) -> str:
    return ", ".join(sorted(set(gpus), key=lambda gpu: _ORDER.get(gpu, len(_ORDER))))


def image_fit_verdict(images: Images) -> Verdict:
    """For single machines and for clusters: the GPUs the configured image runs, what the others
    boot instead, and what a serve script (R580) gets; a warning when nothing runs a machine
    (an order for it never deploys there)."""
    if not images.fits:
        return Status.WARN, "the image lists say nothing of which image runs which machine"
    said, unbootable = [], []
    for cluster in (False, True):
        by_gpu: dict[str, list[ImageFit]] = defaultdict(list)
        for fit in images.fits:
            if (fit.machine.nodes > 1) == cluster:
                by_gpu[fit.machine.gpu_model].append(fit)
        if not by_gpu:
            continue
        configured = next((f.configured for fs in by_gpu.values() for f in fs), None)
        runs, instead, serving = [], defaultdict(list), defaultdict(list)
        for gpu, fits in by_gpu.items():
            chosen = [images.boots(fit).choose() for fit in fits]
            if None in chosen:
                unbootable.append(f"{gpu} clusters" if cluster else gpu)
            elif all(name == configured for name in chosen):
                runs.append(gpu)
            else:
                instead[str(next(n for n in chosen if n != configured))].append(gpu)
            served = images.boots(fits[0]).choose(SERVE_MIN_DRIVER)
            serving[served or "nothing"].append(gpu)
        what = "cluster image" if cluster else "image"
        parts = [f"{what} {configured!r} runs {_gpus(runs) or 'none of them'}"]
        parts += [f"{_gpus(gpus)} boot {name!r}" for name, gpus in sorted(instead.items())]
        parts += [
            f"a serve script (R{SERVE_MIN_DRIVER}) gets {name!r} on {_gpus(gpus)}"
            if name != "nothing"
            else f"no image with R{SERVE_MIN_DRIVER} on {_gpus(gpus)}"
            for name, gpus in sorted(serving.items(), key=lambda kv: (kv[0] == "nothing", kv[0]))
        ]
        said.append("; ".join(parts))
    if unbootable:
        said.append(f"nothing boots {_gpus(unbootable)}: orders for them never deploy here")
        return Status.WARN, ". ".join(said)
    return ". ".join(said)
