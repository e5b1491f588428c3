"""Run directories: what a training run leaves, and which model `--model RUN` means.

A run directory (aiayn train --out RUN) holds, besides its run files (aiayn.training.run_files):

    checkpoints/step_NNNNNNNN/   checkpoint directories (aiayn.checkpoint), every train.save_every steps
    latest                       the name of the newest checkpoint: a bare step_NNNNNNNN, never a path
    best/                        the checkpoint of the best validation
    average/                     the average of the last checkpoints (§6.1)
    timeline/step_NNNNNNNN.npz   attention as it learns (aiayn.training.timeline writes it, the explorer reads it)

A command that takes a model takes a checkpoint directory or a run directory; of a run it uses average/,
else best/, else the checkpoint `latest` names, else the newest one (resolve_model_dir).
"""

import re
from pathlib import Path

from aiayn.errors import CheckpointError

STEP_NAME = re.compile(r"step_\d{8}")
TIMELINE_DIR = "timeline"
TIMELINE_FILE = re.compile(r"step_(\d{8})\.npz")


def step_checkpoints(run_dir: str | Path) -> list[Path]:
    """The run's step_NNNNNNNN checkpoint directories, oldest first."""
    root = Path(run_dir) / "checkpoints"
    return sorted(p for p in root.glob("step_*") if STEP_NAME.fullmatch(p.name) and p.is_dir())


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The checkpoint named by `run_dir/latest` (a bare step_NNNNNNNN name, never a path), or None."""
    latest = Path(run_dir) / "latest"
    if not latest.exists():
        return None
    if not latest.is_file():  # a directory, FIFO or device (/dev/zero) would hang or never end
        raise CheckpointError(f"{latest}: not a regular file; delete it (the newest checkpoint in "
                              f"{run_dir}/checkpoints is then used)")
    with open(latest, "rb") as f:
        name = f.read(64).decode("utf-8", errors="replace").strip()  # a name is 13 characters
    if not STEP_NAME.fullmatch(name):
        raise CheckpointError(f"{latest}: says {name[:80]!r}, not a checkpoint name like step_00000500; "
                              f"fix or delete the file (the newest checkpoint in {run_dir}/checkpoints is then used)")
    return Path(run_dir) / "checkpoints" / name


def resolve_model_dir(path: str | Path, option: str = "--model") -> Path:
    """A checkpoint directory, or a training output directory (average, else best, else latest).
    `option` is the command-line option that gave the path, named in errors."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"{path}: no such directory; pass {option} DIR (a checkpoint or training output)")
    if (path / "model.safetensors").exists():
        return path
    for name in ("average", "best"):
        if (path / name / "model.safetensors").exists():
            return path / name
    latest = latest_checkpoint(path)
    if latest is None and step_checkpoints(path):
        latest = step_checkpoints(path)[-1]
    if latest is not None:
        return latest
    raise CheckpointError(f"{path}: neither a checkpoint directory (model.safetensors, config.yaml, "
                          f"tokenizer.model) nor a training output directory; pass {option} DIR")


def snapshot_name(step: int) -> str:
    """The timeline file of `step`."""
    return f"step_{step:08d}.npz"


def snapshot_steps(directory: Path) -> list[int]:
    """The steps of the timeline files in `directory`, in order ([] when there is none)."""
    if not directory.is_dir():
        return []
    return sorted(int(m.group(1)) for p in directory.iterdir() if (m := TIMELINE_FILE.fullmatch(p.name)))
