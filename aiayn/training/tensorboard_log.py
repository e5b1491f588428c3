"""train.tensorboard: the run's metrics as TensorBoard event files under RUN/tensorboard/ (the `tensorboard`
package's writer, through torch.utils.tensorboard; pip install 'aiayn[tensorboard]').

Written: every training log row (train/loss, train/nll, train/lr, train/tokens_per_s), every validation
(valid/loss, valid/nll, valid/ppl, valid/bleu when dev BLEU was computed) and, at each validation, the
cross-attention of one fixed dev pair (the first validation pair, teacher-forced: the model's forward with
attention, no decoding), one grayscale image per decoder layer, heads averaged, rows = target tokens,
columns = source tokens; the pair's tokens are written once as text. A resumed run purges the events
past its checkpoint's step (purge_step), so no step is written twice.

W&B: `wandb sync --sync-tensorboard RUN/tensorboard`, or wandb.tensorboard.patch(root_logdir=...) before
training (docs/guides/train.md).
"""

import logging
from pathlib import Path

import torch

from aiayn.errors import AiaynError

log = logging.getLogger(__name__)
SUBDIR = "tensorboard"
CELL = 8  # pixels per attention cell: a 10 x 12 map becomes 80 x 96
SCALARS = {"loss": "train/loss", "nll": "train/nll", "lr": "train/lr", "tokens_per_s": "train/tokens_per_s",
           "valid_loss": "valid/loss", "valid_nll": "valid/nll", "valid_ppl": "valid/ppl", "bleu": "valid/bleu",
           "end_step": "train/end_step"}


def log_dir(out: str | Path) -> Path:
    return Path(out) / SUBDIR


def summary_writer_class():
    """torch's SummaryWriter; a one-line error naming the extra when the tensorboard package is missing."""
    try:
        import tensorboard  # noqa: F401 (torch.utils.tensorboard needs it, and says so less clearly)
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as err:
        raise AiaynError(f"train.tensorboard=true needs the tensorboard package: pip install 'aiayn[tensorboard]' "
                         f"(or set train.tensorboard=false) ({err})") from None
    return SummaryWriter


class TensorBoardLog:
    """Writes the trainer's log rows (and the attention image at validations) as TensorBoard events."""

    def __init__(self, *, out: str | Path, resumed_step: int, pair=None, labels=None):
        """pair: (src (1, S), tgt_in (1, T)) of the fixed dev sentence, or None; labels: (source tokens,
        target input tokens), written once as text. resumed_step: the step the run continues from (0: new)."""
        writer_class = summary_writer_class()
        self.writer = writer_class(log_dir=str(log_dir(out)), purge_step=resumed_step + 1 if resumed_step else None)
        self.pair = pair
        if labels is not None and not resumed_step:
            source, target = labels
            self.writer.add_text("attention/dev_pair", f"source: {' '.join(source)}  \n"
                                                       f"target input: {' '.join(target)}", 0)

    def write(self, record: dict, model) -> None:
        """One log row of the trainer (a training window or a validation)."""
        step = record["step"]
        for key, tag in SCALARS.items():
            if key in record:
                self.writer.add_scalar(tag, float(record[key]), step)
        if "valid_loss" in record and self.pair is not None:
            for layer, image in enumerate(cross_attention_images(model, *self.pair)):
                self.writer.add_image(f"attention/cross_layer{layer}", image, step, dataformats="HW")
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


@torch.no_grad()
def cross_attention_images(model, src: torch.Tensor, tgt_in: torch.Tensor) -> list:
    """One (T * CELL, S * CELL) float image in [0, 1] per decoder layer: the teacher-forced cross-attention
    of the pair, heads averaged, each image scaled by its largest weight."""
    was_training = model.training
    model.eval()
    try:
        device = next(model.parameters()).device
        _, maps = model(src.to(device), tgt_in.to(device), return_attention=True)
    finally:
        model.train(was_training)
    cross = maps["cross"][0].float().mean(dim=1).cpu()  # (L, H, T, S) -> (L, T, S)
    images = []
    for layer in cross:
        scaled = layer / layer.max().clamp_min(1e-9)
        images.append(scaled.repeat_interleave(CELL, 0).repeat_interleave(CELL, 1).numpy())
    return images


def open_log(trainer) -> TensorBoardLog:
    """The writer of a trainer whose config has train.tensorboard on (main process only), with the first
    validation pair as the attention's dev sentence."""
    pair = labels = None
    if len(trainer.valid_examples):
        batch = trainer._collate(trainer.valid_examples, [0])
        src, tgt_in = batch.src[:1], batch.tgt_in[:1]
        pair = (src, tgt_in)
        tok = trainer.tokenizer
        labels = (tok.source_id_to_piece(src[0].tolist()), tok.id_to_piece(tgt_in[0].tolist()))
    return TensorBoardLog(out=trainer.out, resumed_step=trainer.progress.step, pair=pair, labels=labels)
