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


M_MMAP_THRESHOLD = -3  # glibc mallopt parameter (malloc.h)


def fix_mmap_threshold(threshold: int = 128 * 1024) -> bool:
    """Serve every allocation above `threshold` bytes by mmap, returned to the system when freed.

    glibc raises this threshold each time a large block is freed (up to 32 MB), after which tensors of
    training steps whose shapes change every batch come from the heap, fragment it, and are never given
    back: a Multi30k training's RSS grew 1.1 GB in 40 steps. A fixed threshold (setting it disables the
    raising) brought the 40-step peak from 2.1 to 1.4 GB (BENCHMARKS.md). Process-wide, so called by the
    command line (aiayn train), not on import. False where the C library is not glibc."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(M_MMAP_THRESHOLD, threshold))
    except (OSError, AttributeError):
        return False


def limit_primitive_cache(capacity: int = 0) -> None:
    """oneDNN (torch's CPU matmul and convolution library) caches a compiled primitive per tensor shape,
    1024 of them by default. Token-budget batches bring new shapes at every step, so the cache only
    grows (220 MB more RSS after 40 Multi30k steps) and is seldom hit. Read by oneDNN when it first builds a
    primitive, so this must run before the first matmul; a value the user set in the environment wins."""
    os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", str(capacity))
