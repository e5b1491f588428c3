"""Reading a run back: a checkpoint's trainer state, weights and EMA, read and checked before anything of the
trainer changes (a damaged checkpoint leaves it as it was); the order in which a run's checkpoints are tried;
and what a checkpoint that could not be written leaves to resume from."""

import contextlib
from dataclasses import dataclass
from pathlib import Path

from aiayn.checkpoint import load_trainer_state, read_weights
from aiayn.data.tokenizer import TOKENIZER_FILES
from aiayn.errors import CheckpointError
from aiayn.run_dir import latest_checkpoint, step_checkpoints

TRAINER_STATE_KEYS = {"optimizer", "scheduler", "progress", "rng"}


@dataclass(frozen=True, kw_only=True)
class ResumeState:
    """What one checkpoint restores: state (trainer_state.pt: optimizer, scheduler, progress, rng; loss_scale with
    train.fp16), the model's weights, and the EMA weights (None: not asked for, or the checkpoint has none)."""

    state: dict
    weights: dict
    ema: dict | None


def read_resume_state(checkpoint: Path, *, tokenizer, out: Path, with_ema: bool) -> ResumeState:
    """Everything a resume from this checkpoint needs, checked: its trainer state is whole and for its own
    step, and each tokenizer file it holds is the run's (out: the run directory, named in the error)."""
    state = load_trainer_state(checkpoint)
    weights, _ = read_weights(checkpoint / "model.safetensors")
    ema_file = checkpoint / "ema.safetensors"
    ema = read_weights(ema_file)[0] if with_ema and ema_file.exists() else None
    missing = TRAINER_STATE_KEYS - set(state if isinstance(state, dict) else ())
    if missing:
        raise CheckpointError(f"{checkpoint}: trainer_state.pt lacks {sorted(missing)}")
    step = state["progress"].get("step")
    if step != int(checkpoint.name[5:]):
        raise CheckpointError(f"{checkpoint}: trainer_state.pt is for step {step}, not this checkpoint's")
    _check_tokenizer_files(checkpoint, tokenizer, out)
    return ResumeState(state=state, weights=weights, ema=ema)


def _check_tokenizer_files(checkpoint: Path, tokenizer, out: Path) -> None:
    """Each tokenizer file the checkpoint holds (tokenizer.model, or source.spm, vocab.json, ...) must be the
    run's own."""
    ours = tokenizer.files()
    for name in TOKENIZER_FILES:
        file = checkpoint / name
        if file.exists() and file.read_bytes() != ours.get(name):
            raise CheckpointError(f"{checkpoint}: its {name} differs from the run's tokenizer "
                                  f"({out}/{tokenizer.name})")


def resume_candidates(out: Path) -> list[Path]:
    """The run's checkpoints in the order a resume tries them: the newest complete one (the one `latest`
    names), then the older ones, newest first."""
    latest = latest_checkpoint(out)
    older = [p for p in reversed(step_checkpoints(out)) if p != latest]
    return ([latest] if latest is not None else []) + older


def last_good_note(out: Path, remedy: str = "free space") -> str:
    """What a write that failed mid-run leaves, in its error: the last good checkpoint, and what to do
    (`remedy`, then resume)."""
    name = ""
    with contextlib.suppress(OSError, UnicodeDecodeError):
        name = (out / "latest").read_text(encoding="utf-8").strip()
    latest = out / "checkpoints" / name
    if name and latest.is_dir():
        return f"training stopped; the last good checkpoint, {latest}, is intact: {remedy} and resume with " \
               f"the same command"
    return f"training stopped before its first checkpoint: {remedy} and run the same command again"
