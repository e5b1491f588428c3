"""`--device` as the user wrote it -> a torch.device that exists on this machine, or a clear error; and the
process-wide memory settings of CPU training (matmul caches, glibc's free heap)."""

import ctypes
import os
import sys

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


def limit_primitive_cache() -> None:
    """Two caches keep a compiled matmul per tensor shape, and token-budget batches bring new shapes at
    almost every step, so both only grow and are seldom hit:
    - oneDNN's own primitive cache (1024 entries by default): ONEDNN_PRIMITIVE_CACHE_CAPACITY=0;
    - ideep's, the layer between torch and oneDNN that bf16 matmuls go through (also 1024 entries):
      LRU_CACHE_CAPACITY=1, the smallest it takes (0 crashes torch 2.13).
    Measured on Multi30k training, 100 steps: RSS between steps 1.41 GB with both at their defaults,
    0.72 GB with both capped, at no measurable cost in speed (BENCHMARKS.md, training memory). Both are read when the
    first primitive is built, so this must run before the first matmul; a value the user set wins."""
    os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "0")
    os.environ.setdefault("LRU_CACHE_CAPACITY", "1")


def release_free_heap() -> None:
    """Give the heap pages glibc holds free back to the system (malloc_trim). The trainer calls it around
    each validation: the training steps leave ~300 MB of freed blocks sized for their batches, and the
    validation's differently sized tensors would otherwise come from new pages on top of them. A no-op
    where the C library has no malloc_trim (macOS, musl)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
