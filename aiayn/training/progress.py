"""What a checkpoint holds besides weights and optimizer: the progress counters, the RNG states at a step
boundary, and the metrics log trimmed to match (so a resumed run continues it exactly)."""

import contextlib
import json
import math
import random
from dataclasses import dataclass
from pathlib import Path

import torch

from aiayn.io import write_text_atomic


@dataclass
class Progress:
    step: int = 0
    epoch: int = 0
    batch_index: int = 0  # next batch of this epoch's batch list
    best_bleu: float = -1.0
    best_valid_loss: float = math.inf
    best_step: int = 0
    bad_evals: int = 0
    stopped_early: bool = False
    pending_validation: bool = False  # this step's validation has not been recorded yet
    end_step: int = 0  # train.fit_steps_to_time: where the linear decay now ends (0: at train.max_steps)


def rng_states() -> dict:
    states = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def set_rng_states(states: dict) -> None:
    torch.set_rng_state(states["torch"])
    version, internal, gauss = states["python"]
    random.setstate((version, tuple(internal), gauss))
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


def trim_metrics(path: Path, progress: Progress) -> None:
    """Drop metrics rows past the resumed step (and the resumed step's validation row when that validation
    is to be redone), so the log matches the checkpoint. A link at its name is not the run's log: it is
    replaced, never read or written through."""
    if path.is_symlink():
        path.unlink()  # what it names is untouched; the run's rows go to a file of its own from now on
        return
    if not path.exists():
        return
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            row = json.loads(line)
            redone = progress.pending_validation and row.get("step") == progress.step and "valid_loss" in row
            if row.get("step", 0) <= progress.step and not redone:
                kept.append(line + "\n")
    write_text_atomic(path, "".join(kept), follow_links=False)
