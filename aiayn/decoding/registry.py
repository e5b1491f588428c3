"""The decoding engines by name (--engine): one entry each, what it can do (Capabilities) and how it is
loaded. Everything that depends on an engine asks its capabilities here, never its name; adding an engine
is its module and one entry below.

  native   aiayn's own searches: in this process (NativeEngine), with a compiled step (CompiledEngine,
           --compile) or in worker processes (PoolEngine, --workers N); compute types float32, bfloat16,
           int8 (aiayn.cpu.compute_types)
  ct2      CTranslate2 on an export of the model (aiayn.decoding.ct2_engine)
"""

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from aiayn.cpu import check_compute_type, set_compute_type
from aiayn.decoding.ct2_engine import CT2Engine, check_ct2_compute_type
from aiayn.decoding.drift import warn_if_drifting
from aiayn.decoding.engines import Capabilities, CompiledEngine, Engine, NativeEngine, PoolEngine
from aiayn.decoding.options import check_int
from aiayn.errors import AiaynError


@dataclass(frozen=True, kw_only=True)
class EngineSettings:
    """What from_pretrained was asked for, besides the model: compute_type (None: the engine's default),
    workers (batches side by side on CPU cores), compile (the native engine's compiled step)."""

    device: torch.device
    compute_type: str | None = None
    workers: int = 1
    compile: bool = False
    use_ema: bool = False


@dataclass(frozen=True, kw_only=True)
class EngineEntry:
    """An engine as --engine names it: what it can do, which compute types it takes (checked before any
    loading), and `load(model, cfg, tokenizer, model_dir, settings) -> Engine`."""

    capabilities: Capabilities
    check_compute_type: Callable[[str, torch.device], None]
    load: Callable[..., Engine]


def _load_native(model, cfg, tokenizer, model_dir: Path, settings: EngineSettings) -> Engine:
    """In this process, with worker processes, or with the compiled step; the model's products in the
    asked compute type before any worker forks (they take this model) or the step compiles."""
    set_compute_type(model, settings.compute_type or "float32")
    warn_if_drifting(model, tokenizer)  # a low-precision compute type checked against float32 (drift.py)
    if settings.workers > 1:
        from aiayn.decoding.workers import WorkerPool

        return PoolEngine(model=model, pool=WorkerPool(
            model=model, model_dir=model_dir, workers=settings.workers, device=str(settings.device),
            use_ema=settings.use_ema, compile=settings.compile, compute_type=settings.compute_type or "float32"))
    if settings.compile:
        from aiayn.decoding.compiled import CompiledDecoder

        compiled = CompiledDecoder(model)  # compiles the products in the model's compute type
        compiled.warm_up(cfg.decode.beam)
        return CompiledEngine(model=model, compiled=compiled)
    return NativeEngine(model=model, device=settings.device)


def _load_ct2(model, cfg, tokenizer, model_dir: Path, settings: EngineSettings) -> Engine:
    """A CT2Engine on the model's CTranslate2 export (made or refreshed in the model directory)."""
    from aiayn.decoding.ct2_engine import load_engine

    if not cfg.model.multi_head:
        raise AiaynError("--engine ct2 runs Transformer models (CTranslate2 has no RNN seq2seq); "
                         "use --engine native")
    backend = load_engine(model_dir, lambda: (model.cpu(), cfg, tokenizer), tokenizer, settings.device,
                          settings.compute_type, settings.use_ema, inter_threads=settings.workers)
    model.to(settings.device)
    return backend


ENGINES = {
    "native": EngineEntry(capabilities=NativeEngine.capabilities, check_compute_type=check_compute_type,
                          load=_load_native),
    "ct2": EngineEntry(capabilities=CT2Engine.capabilities, check_compute_type=check_ct2_compute_type,
                       load=_load_ct2),
}


def entry(name: str) -> EngineEntry:
    if name not in ENGINES:
        raise AiaynError(f"--engine {name!r}: give one of {', '.join(ENGINES)}")
    return ENGINES[name]


def capabilities_of(name: str) -> Capabilities:
    """What the engine `name` can do, before anything is loaded (the CLI's and the server's checks)."""
    return entry(name).capabilities


MAX_WORKERS_PER_CORE = 4  # beyond the cores workers only wait for each other; far beyond, a typo forks hundreds


def check_workers(workers: int) -> None:
    check_int("workers", workers, 1)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if workers > MAX_WORKERS_PER_CORE * cores:
        raise AiaynError(f"--workers {workers}: this process may use {cores} CPU cores, and workers beyond the cores "
                         f"only wait for each other (each with its own buffers): give at most "
                         f"{MAX_WORKERS_PER_CORE * cores}, best the number of cores")


def check_engine_flags(name: str, settings: EngineSettings) -> Capabilities:
    """The engine flags of from_pretrained, before anything is loaded -> the engine's capabilities."""
    found = entry(name)
    if settings.compute_type is not None:
        found.check_compute_type(settings.compute_type, settings.device)
    check_workers(settings.workers)
    if settings.compile and not found.capabilities.compiles:
        raise AiaynError(f"--compile compiles the native engine's decoding step; the {name} engine is compiled "
                         f"already: drop --compile, or use --engine native")
    if settings.workers > 1 and settings.device.type not in PoolEngine.capabilities.devices:
        raise AiaynError(f"--workers {settings.workers} runs batches side by side on CPU cores; on "
                         f"{settings.device} use one (a GPU decodes a batch at a time)")
    return found.capabilities


def check_ensemble(n_models: int, name: str, settings: EngineSettings) -> None:
    """An ensemble decodes with an engine whose Capabilities.ensembles (the native engine in this process)."""
    if n_models == 1:
        return
    if not entry(name).capabilities.ensembles:
        raise AiaynError(f"an ensemble of {n_models} models decodes with the native engine in this process: "
                         f"drop --engine {name}")
    for flag, used in ((f"--workers {settings.workers}", settings.workers > 1), ("--compile", settings.compile)):
        if used:
            raise AiaynError(f"an ensemble of {n_models} models decodes with the native engine in this process: "
                             f"drop {flag}")


def load_engine(name: str, model, cfg, tokenizer, model_dir: Path, settings: EngineSettings) -> Engine:
    return entry(name).load(model, cfg, tokenizer, model_dir, settings)
