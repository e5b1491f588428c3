"""train.tensorboard: the run's metrics as TensorBoard event files under RUN/tensorboard/ (the `tensorboard`
package's writer, through torch.utils.tensorboard; pip install 'aiayn[tensorboard]').

Written: every training log row (train/loss, train/nll, train/lr, train/tokens_per_s), every validation
(valid/loss, valid/nll, valid/ppl, valid/bleu when dev BLEU was computed) and, at each validation, the
cross-attention of one fixed dev pair (the first validation pair, teacher-forced: the model's forward with
attention, no decoding), one grayscale image per decoder layer, heads averaged, rows = target tokens,
columns = source tokens; the pair's tokens are written once as text. A resumed run purges the events
past its checkpoint's step (purge_step), so no step is written twice.

A write that fails (a full disk, a read-only folder; tensorboard writes in a thread of its own, whose
traceback is not printed: the next write raises the same error) stops the run in one line naming
RUN/tensorboard and the last good checkpoint, and cuts the event file back to its last whole flush.

W&B: `wandb sync --sync-tensorboard RUN/tensorboard`, or wandb.tensorboard.patch(root_logdir=...) before
training (docs/guides/train.md).
"""

import contextlib
import errno
import logging
import os
import threading
from pathlib import Path

import torch

from aiayn.errors import AiaynError, OutputError
from aiayn.io import write_error
from aiayn.training.resume import last_good_note

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


def check_log_dir(out: str | Path) -> None:
    """RUN/tensorboard must be a folder (or a link to one) or absent: a user's file there is named, before
    the run writes anything."""
    path = log_dir(out)
    if (path.exists() or path.is_symlink()) and not path.is_dir():
        what = f"a symbolic link to {os.readlink(path)}" if path.is_symlink() else "a file"
        raise OutputError(f"{path} is {what}, not a folder: train.tensorboard=true writes its event files in "
                          f"a folder of that name; move it away, or set train.tensorboard=false")


def quiet_writer_threads() -> None:
    """Installs (once) a threading.excepthook that prints nothing for an OSError in tensorboard's writer
    thread: the thread keeps the error and the next write or flush raises it, which TensorBoardLog reports
    in one line. Every other thread's exception goes to the hook that was there."""
    previous = threading.excepthook
    if getattr(previous, "quiets_tensorboard", False):
        return

    def hook(args) -> None:
        if isinstance(args.exc_value, OSError) and type(args.thread).__module__.startswith("tensorboard."):
            return
        previous(args)

    hook.quiets_tensorboard = True
    threading.excepthook = hook


class TensorBoardLog:
    """Writes the trainer's log rows (and the attention image at validations) as TensorBoard events."""

    def __init__(self, *, out: str | Path, resumed_step: int, pair=None, labels=None):
        """pair: (src (1, S), tgt_in (1, T)) of the fixed dev sentence, or None; labels: (source tokens,
        target input tokens), written once as text. resumed_step: the step the run continues from (0: new)."""
        self.out, self.dir = Path(out), log_dir(out)
        check_log_dir(out)
        writer_class = summary_writer_class()
        quiet_writer_threads()
        self.earlier = self._event_files()
        self.event_file, self.flushed = None, 0  # this run's event file and its size at the last good flush
        with self._stop_on_write_error():
            self.writer = writer_class(log_dir=str(self.dir), purge_step=resumed_step + 1 if resumed_step else None)
            self.event_file = next(iter(self._event_files() - self.earlier), None)
            self.pair = pair
            if labels is not None and not resumed_step:
                source, target = labels
                self.writer.add_text("attention/dev_pair", f"source: {' '.join(source)}  \n"
                                                           f"target input: {' '.join(target)}", 0)
            self._flush()

    def _event_files(self) -> set[Path]:
        with contextlib.suppress(OSError):
            return set(self.dir.glob("events.out.tfevents.*"))
        return set()

    def _flush(self) -> None:
        self.writer.flush()
        if self.event_file is not None:
            self.flushed = self.event_file.stat().st_size

    @contextlib.contextmanager
    def _stop_on_write_error(self):
        """A failed write: the event file cut back to its last good flush (no half record left), and one
        line naming RUN/tensorboard, what happened and the checkpoint to resume from."""
        try:
            yield
        except Exception as err:
            remedy = "free space" if getattr(err, "errno", None) in (errno.ENOSPC, errno.EDQUOT) else "fix that"
            note = last_good_note(self.out, f"{remedy} (or set train.tensorboard=false)")
            error = write_error(err, self.dir, note)
            if error is None and isinstance(err, OSError):  # any other: its words, never tensorboard's bytes name
                error = OutputError(f"{self.dir}: could not write it: {err.strerror or err}; {note}")
            if error is None:
                raise
            with contextlib.suppress(OSError):
                if self.event_file is not None:
                    os.truncate(self.event_file, self.flushed)
                else:  # the writer did not start: what it began holds no step
                    for file in self._event_files() - self.earlier:
                        file.unlink()
            raise error from None

    def write(self, record: dict, model) -> None:
        """One log row of the trainer (a training window or a validation)."""
        step = record["step"]
        with self._stop_on_write_error():
            for key, tag in SCALARS.items():
                if key in record:
                    self.writer.add_scalar(tag, float(record[key]), step)
            if "valid_loss" in record and self.pair is not None:
                for layer, image in enumerate(cross_attention_images(model, *self.pair)):
                    self.writer.add_image(f"attention/cross_layer{layer}", image, step, dataformats="HW")
            self._flush()

    def close(self) -> None:
        with self._stop_on_write_error():
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
