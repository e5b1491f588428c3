"""Attention as it learns (train.attention_timeline: N): at each validation, the attention maps of the first N
dev sentences (teacher-forced with their references, the model in eval mode) go to one small NPZ file,
RUN/timeline/step_00000500.npz; the explorer (aiayn serve) shows them on a slider across training steps.

Each file holds, per sentence i: `src_i` and `tgt_i` (the source ids with </s> and the target input ids with
<s>), and its maps `cross_i`, `encoder_self_i` and `decoder_self_i`, float32 (L, H, Q, K) as the model
returned them (an RNN has `cross_i` only, L = H = 1); and `step`. Sentences are the first N dev pairs whose
source and target have at most MAX_TOKENS subwords each, so a file stays under about
N x 3 x layers x heads x MAX_TOKENS^2 x 4 bytes.

A run keeps at most MAX_SNAPSHOTS files: the latest validation's, and those on an even grid of steps, every
eval_every x 2^k steps with the smallest k that leaves at most MAX_SNAPSHOTS - 1 of them up to the latest
step; when a new snapshot makes too many, the grid's stride doubles and every other older file goes. The files
kept are a function of the step alone, and each file of the weights at its step, so an interrupted-then-resumed
run ends with the same files as an uninterrupted one (files past the step it resumed from are removed and
written again)."""

import io
from pathlib import Path

import numpy as np
import torch

from aiayn.io import write_bytes_atomic
from aiayn.run_dir import TIMELINE_DIR, snapshot_name, snapshot_steps

MAX_SENTENCES = 8  # train.attention_timeline's largest value
MAX_SNAPSHOTS = 64  # files per run
MAX_TOKENS = 40  # subwords of a timeline sentence's source and of its target (</s> and <s> included)
def grid_stride(step: int, eval_every: int, cap: int = MAX_SNAPSHOTS) -> int:
    """The grid's stride at `step`: eval_every x 2^k, the smallest that leaves at most cap - 1 older points."""
    stride = eval_every
    while step // stride > cap - 1:
        stride *= 2
    return stride


def kept_steps(steps: list[int], latest: int, eval_every: int, cap: int = MAX_SNAPSHOTS) -> list[int]:
    """Which of `steps` (all <= latest) stay after the snapshot of `latest`: it, and those on the grid."""
    stride = grid_stride(latest, eval_every, cap)
    return [s for s in steps if s == latest or (s < latest and s % stride == 0)][-cap:]


def pick_sentences(examples, n: int) -> list[int]:
    """The indices of the first n dev examples short enough for the timeline (source + </s>, <s> + target)."""
    picked = []
    for i in range(len(examples)):
        e = examples[i]
        if len(e.src) + 1 <= MAX_TOKENS and len(e.tgt) + 1 <= MAX_TOKENS:
            picked.append(i)
            if len(picked) == n:
                break
    return picked


class AttentionTimeline:
    """Writes one snapshot per validation (record) and thins the run's files to the cap."""

    def __init__(self, *, directory: Path, sentences: list[tuple[list[int], list[int]]], eval_every: int,
                 cap: int = MAX_SNAPSHOTS):
        self.directory, self.sentences, self.eval_every, self.cap = Path(directory), sentences, eval_every, cap

    @classmethod
    def for_run(cls, *, out: Path, examples, n: int, tokenizer, eval_every: int) -> "AttentionTimeline":
        """The first n short dev pairs of a run as (source ids with </s>, target input ids with <s>)."""
        pairs = [examples[i] for i in pick_sentences(examples, n)]
        sentences = [(list(e.src) + [tokenizer.eos_id], [tokenizer.bos_id] + list(e.tgt)) for e in pairs]
        return cls(directory=Path(out) / TIMELINE_DIR, sentences=sentences, eval_every=eval_every)

    def resume(self, step: int) -> None:
        """A run resumed at `step`: the files of later steps (from a run killed after them) are written again."""
        for later in (s for s in snapshot_steps(self.directory) if s > step):
            (self.directory / snapshot_name(later)).unlink(missing_ok=True)

    @torch.no_grad()
    def record(self, model, step: int) -> Path:
        """The maps of every timeline sentence at this step, in one file; then older files thinned."""
        was_training = model.training
        model.eval()
        arrays = {"step": np.array(step, dtype=np.int64)}
        device = next(model.parameters()).device
        try:
            for i, (src, tgt_in) in enumerate(self.sentences):
                _, maps = model(torch.tensor([src], device=device), torch.tensor([tgt_in], device=device),
                                return_attention=True)
                arrays[f"src_{i}"], arrays[f"tgt_{i}"] = np.array(src, dtype=np.int64), np.array(tgt_in, dtype=np.int64)
                for kind, value in maps.items():
                    if value is not None:
                        arrays[f"{kind}_{i}"] = value[0].float().cpu().numpy()  # (L, H, Q, K)
        finally:
            model.train(was_training)
        self.directory.mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        path = write_bytes_atomic(self.directory / snapshot_name(step), buffer.getvalue())
        self._thin(step)
        return path

    def _thin(self, latest: int) -> None:
        steps = [s for s in snapshot_steps(self.directory) if s <= latest]
        for gone in sorted(set(steps) - set(kept_steps(steps, latest, self.eval_every, self.cap))):
            (self.directory / snapshot_name(gone)).unlink(missing_ok=True)
