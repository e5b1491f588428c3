"""`--device` as the user wrote it -> a torch.device that exists on this machine, or a clear error; and the
process-wide memory settings of CPU training (matmul caches, glibc's free heap) and decoding (glibc's
thresholds)."""

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


def bf16_is_fast(device: torch.device) -> bool:
    """Whether bf16 matmuls run in hardware here: a CUDA GPU with bf16, or a CPU with AVX-512 (oneDNN's
    bf16 kernels: AVX512-BF16 and AMX natively, plain AVX-512 by conversion). Without them torch falls back
    to a reference loop: on an AVX2-only CPU (an AMD EPYC, 2026-11-25) a bf16 matmul of (2048, 512) x
    (512, 2048) ran at 0.5 GFLOP/s against 117 in float32, and a training step took 18 s against 1.1 s in
    float32."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        return torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()
    return True


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


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)


def keep_freed_memory(mmap_mb: int = 64, trim_mb: int = 256) -> None:
    """Let glibc reuse freed blocks for decoding's large tensors instead of returning them to the system.
    A beam-search step at batch 64 allocates and frees megabytes (the (rows, V) logits and log-probs, the
    KV caches); by default glibc maps blocks above a moving threshold fresh from the system and trims the
    heap top past twice that, so every step paid ~1200 page faults (zero-filled pages) here. With blocks up
    to mmap_mb from the heap and up to trim_mb of free heap kept, a batch-64 search took 8-15% less
    time, with the same outputs (BENCHMARKS.md, decoding speed); the cost is that a decoding process keeps its
    peak heap. Process-wide, so the Translator's loaders call it (decoding processes), never training.
    A no-op where the C library is not glibc (macOS, musl)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return
    mallopt(M_MMAP_THRESHOLD, mmap_mb << 20)
    mallopt(M_TRIM_THRESHOLD, trim_mb << 20)
