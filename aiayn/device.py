"""`--device` as the user wrote it -> a torch.device that exists on this machine, or a clear error."""

import os

import torch

from aiayn.errors import AiaynError


def resolve_device(name: str | torch.device) -> torch.device:
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        raise AiaynError(f"--device {name!r} is not a device name; use cpu, cuda or cuda:N") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise AiaynError(f"--device {name}: cuda requested but no GPU is visible here; use --device cpu")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise AiaynError(f"--device {name}: this machine has {torch.cuda.device_count()} GPU(s), "
                             f"numbered from 0")
    elif device.type == "mps" and not torch.backends.mps.is_available():
        raise AiaynError(f"--device {name}: mps requested but this machine has no Apple GPU; use --device cpu")
    elif device.type == "cpu" and device.index not in (None, 0):  # torch has one CPU device
        raise AiaynError(f"--device {name}: there is one CPU device; use --device cpu (threads: "
                         f"train.num_threads, or serve --threads)")
    elif device.type not in ("cpu", "mps"):
        raise AiaynError(f"--device {name}: unsupported here; use cpu or cuda")
    return device


def limit_primitive_cache(capacity: int = 0) -> None:
    """oneDNN (torch's CPU matmul and convolution library) caches a compiled primitive per tensor shape,
    1024 of them by default. Token-budget batches bring new shapes at every step, so the cache only
    grows (220 MB more RSS after 40 Multi30k steps) and is seldom hit. Read by oneDNN when it first builds a
    primitive, so this must run before the first matmul; a value the user set in the environment wins."""
    os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", str(capacity))
