"""The training loop of §5: Adam + Noam schedule (or inverse_sqrt / constant, for fine-tuning), label
smoothing, token-budget batches, gradient accumulation, optional clipping, bf16 autocast (or float16 with loss
scaling), validation, dev BLEU (a callback), best checkpoint, early stopping, EMA, averaging of the last
checkpoints, exact resume, data parallelism."""

import contextlib
import json
import logging
import math
import time
from dataclasses import asdict
from pathlib import Path

import torch
from torch.nn.parallel import DistributedDataParallel

from aiayn.checkpoint import save_checkpoint
from aiayn.cpu import prepare_for_cpu
from aiayn.cpu.dropout import mask_generator
from aiayn.data.batching import collate, make_batches
from aiayn.data.corpora import epoch_batches
from aiayn.device import bf16_is_fast, release_free_heap
from aiayn.errors import CheckpointError
from aiayn.io import write_text_atomic
from aiayn.training import distributed as D
from aiayn.training.adam import Adam
from aiayn.training.loss import TrainingObjective
from aiayn.training.loss_scale import LossScale
from aiayn.training.micro_batches import MicroBatchWorkers, add_to_grad, micro_batch_seed, split_batch
from aiayn.training.progress import Progress, rng_states, set_rng_states, trim_metrics
from aiayn.training.progress_bar import TrainingBar
from aiayn.training.pronoun_probe import PronounProbe
from aiayn.training.resume import last_good_note, read_resume_state, resume_candidates
from aiayn.training.run_end import RunEnd
from aiayn.training.run_files import append_line, average_last, interrupted, prune_checkpoints
from aiayn.training.schedule import lr_scheduler
from aiayn.training.stop_signals import StopSignals

log = logging.getLogger(__name__)


class Trainer:
    def __init__(self, cfg, model, tokenizer, train_examples, valid_examples, out_dir, bleu_fn=None,
                 dist_info: D.DistInfo | None = None, device=None):
        self.cfg, self.tc, self.tokenizer = cfg, cfg.train, tokenizer
        self.device = torch.device(device or "cpu")
        self.dist = dist_info or D.DistInfo()
        # the CPU speed-ups (aiayn.cpu), in place: its dropout masks are what micro-batch workers and exact
        # resume rely on, and validation and dev BLEU decode faster
        self.model = prepare_for_cpu(model.to(self.device))
        self.bf16 = self.tc.bf16 and bf16_is_fast(self.device)
        if self.tc.bf16 and not self.bf16:
            log.warning("train.bf16: this %s has no hardware bf16 matmuls (a CPU needs AVX-512), and emulated bf16 "
                        "is tens of times slower than float32: training in float32 instead", self.device.type)
        self.loss_scale = LossScale(enabled=self.tc.fp16, device=self.device)  # train.fp16: loss scaling
        probe = PronounProbe(tokenizer=tokenizer, weight=self.tc.pronoun_probe) if self.tc.pronoun_probe else None
        self.objective = TrainingObjective(model=self.model, pad_id=tokenizer.pad_id,
                                           epsilon=self.tc.label_smoothing, probe=probe)
        self.net = DistributedDataParallel(self.objective) if self.dist.enabled else self.objective
        self.workers = None  # train.micro_batch_workers (checked by prepare_run): the threads of the micro-batches
        if self.tc.micro_batch_workers:
            self.workers = MicroBatchWorkers(workers=self.tc.micro_batch_workers, threads_per_worker=max(
                1, torch.get_num_threads() // self.tc.micro_batch_workers))
            self._trained_params = [p for p in self.model.parameters() if p.requires_grad]  # autograd.grad's order
        self.train_examples, self.valid_examples = train_examples, valid_examples
        self.out = Path(out_dir)
        self.bleu_fn = bleu_fn
        # fused Adam: one kernel for all parameters (about 3x faster than the per-tensor loop on this CPU);
        # aiayn's, not torch.optim's, which would import torch._dynamo (~70 MB): aiayn/training/adam.py
        self.optimizer = Adam(params=self.model.parameters(), lr=0.0, betas=tuple(self.tc.adam_betas),
                              eps=self.tc.adam_eps)  # §5.3; the schedule sets lr
        self.progress = Progress()  # before the scheduler, which reads progress.end_step (see _end_step)
        self.run_end = RunEnd(tc=self.tc, dist=self.dist)  # when the run ends: steps, time, early stopping
        self.scheduler = lr_scheduler(self.optimizer, self.tc.schedule, d_model=cfg.model.d_model,
                                      warmup_steps=self.tc.warmup_steps, factor=self.tc.lr_factor, peak_lr=self.tc.lr,
                                      end_step=self._end_step)
        self.last_lr = 0.0  # the learning rate of the latest update (logged with its step)
        self.ema = None
        if self.tc.ema_decay > 0:
            self.ema = {k: v.detach().clone().float() for k, v in self.model.state_dict().items()}
        self._step_rng = rng_states()
        self.signals = StopSignals(dist=self.dist)  # the first SIGINT/SIGTERM: stop after this step
        self.stop_reason, self.resumed_from = "", None
        self._batches, self._batches_epoch = [], None  # this epoch's batch list, built once per epoch
        self._valid_batches = make_batches(valid_examples, self.tc.max_tokens, seed=0, epoch=0)
        self.tensorboard = None  # train.tensorboard: a TensorBoardLog (training/tensorboard_log.py), set by prepare_run
        self.timeline = None  # train.attention_timeline: a training/timeline.py AttentionTimeline, set by prepare_run
        self.threads = None  # aiayn.threads.ThreadChoice, set by prepare_run

    # ---- persistence -------------------------------------------------------------------------
    def state_dict(self) -> dict:
        state = {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
                 "progress": asdict(self.progress), "rng": self._step_rng}
        if self.loss_scale.enabled:  # train.fp16's scale: a resumed run goes on with it, not from 2^16
            state["loss_scale"] = self.loss_scale.state_dict()
        return state

    def resume(self, checkpoint: Path) -> None:
        """Restore weights, optimizer, schedule, progress and RNG from one checkpoint; everything is read
        (and checked) before anything is changed, so a damaged checkpoint leaves the trainer as it was."""
        found = read_resume_state(checkpoint, tokenizer=self.tokenizer, out=self.out, with_ema=self.ema is not None)
        state = found.state
        loss_scale = self.loss_scale.checked(state.get("loss_scale"))
        self.model.load_state_dict(found.weights, strict=False)
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.loss_scale.load_state_dict(loss_scale)
        self.progress = Progress(**state["progress"])
        if found.ema is not None:
            self.ema = found.ema
        set_rng_states(state["rng"])
        self._step_rng = state["rng"]
        if self.dist.is_main:
            trim_metrics(self.out / "metrics.jsonl", self.progress)
        self.resumed_from = checkpoint
        log.info("resumed from %s at step %d", checkpoint, self.progress.step)

    def resume_run(self) -> None:
        """Continue from the newest complete checkpoint of the output directory (the one `latest` names;
        if it is damaged, the one before it, with a warning). Nothing to resume: start fresh."""
        candidates = resume_candidates(self.out)
        for checkpoint in candidates:
            try:
                self.resume(checkpoint)
                return
            except CheckpointError as err:
                log.warning("cannot resume from %s: %s; trying the checkpoint before it", checkpoint.name, err)
        if candidates:
            raise CheckpointError(f"{self.out}: none of its {len(candidates)} checkpoints can be resumed from "
                                  f"(see the warnings); use a new --out")

    def save(self, interrupted_by: str = "") -> Path | None:
        """A checkpoint of this step; interrupted_by (a signal's name) marks one saved between two
        train.save_every steps, which stays out of the average (aiayn/training/run_files.py)."""
        if not self.dist.is_main:
            return None
        path = self.out / "checkpoints" / f"step_{self.progress.step:08d}"
        info = {"step": self.progress.step, "epoch": self.progress.epoch}
        save_checkpoint(path, self.model, self.cfg, self.tokenizer, self.state_dict(), self.ema,
                        {**info, "interrupted": interrupted_by} if interrupted_by else info,
                        intact=last_good_note(self.out))
        write_text_atomic(self.out / "latest", path.name + "\n", follow_links=False)
        prune_checkpoints(self.out, path, keep=max(self.tc.keep_last, self.tc.average_last))
        return path

    # ---- one optimizer step --------------------------------------------------------------------
    def _group(self) -> list[list[int]] | None:
        """The micro-batches of the next step (all processes), or None at the end of the epoch."""
        need = self.tc.accumulate * self.dist.world_size
        group = self._batches[self.progress.batch_index: self.progress.batch_index + need]
        return group if len(group) == need else None

    def _autocast(self):
        if self.tc.fp16:
            return torch.autocast(self.device.type, dtype=torch.float16)
        if not self.bf16:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=torch.bfloat16)

    def _collate(self, examples, indices: list[int]):
        """The padded batch of these examples (aiayn.data.batching.collate)."""
        tok = self.tokenizer
        return collate([examples[i] for i in indices], tok.pad_id, tok.bos_id, tok.eos_id)

    def train_step(self, group: list[list[int]]) -> tuple[float, float, int]:
        """Forward/backward over this process's share of the group (gradients only: the update is
        _apply_update). Returns the summed smoothed loss, summed nll and target tokens of the whole
        group (all processes)."""
        total_tokens = sum(int(self.train_examples.tgt_lengths[mb].sum()) + len(mb) for mb in group)
        if self.workers is not None:
            return self._train_step_in_workers(group, total_tokens)
        mine = group[self.dist.rank:: self.dist.world_size]
        loss_sum = nll_sum = 0.0
        for n, indices in enumerate(mine):
            batch = self._collate(self.train_examples, indices)
            sync = n == len(mine) - 1 or not self.dist.enabled
            with contextlib.nullcontext() if sync else self.net.no_sync(), self._autocast():
                loss, nll = self.net(batch.src.to(self.device), batch.tgt_in.to(self.device),
                                     batch.tgt_out.to(self.device))
            # normalized by the group's target tokens; DDP averages over processes, hence * world_size
            (self.loss_scale.scale(loss) * (self.dist.world_size / total_tokens)).backward()
            loss_sum, nll_sum = loss_sum + loss.item(), nll_sum + nll.item()
        loss_sum, nll_sum = D.all_reduce_sum([loss_sum, nll_sum], self.dist)
        return loss_sum, nll_sum, total_tokens

    def _train_step_in_workers(self, group: list[list[int]], total_tokens: int) -> tuple[float, float, int]:
        """train_step with train.micro_batch_workers: each micro-batch dealt into shares, the shares side by
        side in the worker threads (aiayn/training/micro_batches.py), their gradients summed into .grad in
        the shares' order."""
        params, step = self._trained_params, self.progress.step
        shares = [share for indices in group for share in split_batch(indices, self.tc.micro_batch_workers)]

        def share_step(item):  # in a worker thread: (loss, nll, gradients) of one share
            index, indices = item
            batch = self._collate(self.train_examples, indices)
            generator = torch.Generator().manual_seed(micro_batch_seed(self.tc.seed, step, index))
            with mask_generator(generator), self._autocast():  # autocast is per thread
                loss, nll = self.objective(batch.src, batch.tgt_in, batch.tgt_out)
            grads = torch.autograd.grad(self.loss_scale.scale(loss) * (1.0 / total_tokens), params, allow_unused=True)
            return loss.item(), nll.item(), grads

        results = self.workers.map(share_step, enumerate(shares))
        add_to_grad(params, [grads for _, _, grads in results])
        return sum(r[0] for r in results), sum(r[1] for r in results), total_tokens

    def _apply_update(self, group_size: int) -> None:
        """One optimizer update and the progress that records it: called inside signals.update_unit()."""
        self.loss_scale.unscale(self.optimizer)  # train.fp16: the true gradients, before their norm is clipped
        if self.tc.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.tc.clip_norm)
        self.loss_scale.step(self.optimizer)  # train.fp16: skipped when the gradients overflowed
        self.last_lr = self.optimizer.param_groups[0]["lr"]  # this update's rate (the scheduler moves on next)
        self.scheduler.step()
        self.optimizer.zero_grad()  # in place: the gradients keep their memory (aiayn/training/adam.py)
        self._update_ema()
        self.progress.step += 1
        self.progress.batch_index += group_size
        self._step_rng = rng_states()

    def _update_ema(self):
        if self.ema is None:
            return
        with torch.no_grad():
            for k, v in self.model.state_dict().items():
                self.ema[k].mul_(self.tc.ema_decay).add_(v.float(), alpha=1 - self.tc.ema_decay)

    # ---- validation ------------------------------------------------------------------------------
    @torch.no_grad()
    def validate(self) -> dict:
        """Validation loss and perplexity on every process's copy (cheap), dev BLEU on the main one."""
        release_free_heap()  # the peak RSS came with validations (BENCHMARKS.md, training memory)
        self.model.eval()
        loss_sum, nll_sum, tokens = 0.0, 0.0, 0
        for indices in self._valid_batches:
            batch = self._collate(self.valid_examples, indices)
            with self._autocast():
                loss, nll = self.objective(batch.src.to(self.device), batch.tgt_in.to(self.device),
                                           batch.tgt_out.to(self.device))
            loss_sum, nll_sum, tokens = loss_sum + loss.item(), nll_sum + nll.item(), tokens + batch.n_tokens
        metrics = {"step": self.progress.step, "valid_loss": loss_sum / tokens, "valid_nll": nll_sum / tokens,
                   "valid_ppl": math.exp(min(nll_sum / tokens, 50))}
        want_bleu = self.bleu_fn is not None and (
            self.tc.bleu_every == 0 or self.progress.step % self.tc.bleu_every == 0)
        if want_bleu:
            bleu = self.bleu_fn(self.model) if self.dist.is_main else 0.0
            metrics["bleu"] = D.broadcast_value(bleu, self.dist)
        self.model.train()
        release_free_heap()
        return metrics

    def _validate_step(self, bar) -> None:
        """Validate, then record the result; a checkpoint saved in between (a second Ctrl-C) says the
        validation is pending, so a resumed run does it first, as the uninterrupted run did."""
        self.progress.pending_validation = True
        metrics = self.validate()
        if self.timeline is not None and self.dist.is_main:
            self.timeline.record(self.model, self.progress.step)
        with self.signals.update_unit():
            if self.tc.fit_steps_to_time:
                metrics["end_step"] = self.run_end.fit(self.progress)
                self.scheduler.refresh()  # the next update's lr already from the new end
            self._after_validation(metrics)
            self._log(metrics, bar)
            self.progress.pending_validation = False

    def _after_validation(self, metrics: dict) -> None:
        """Keep the best checkpoint (by dev BLEU, else by validation loss); count evaluations without
        improvement for early stopping."""
        p = self.progress
        if "bleu" in metrics:
            better = metrics["bleu"] > p.best_bleu
        elif self.bleu_fn is None:
            better = metrics["valid_loss"] < p.best_valid_loss
        else:
            return  # a validation without BLEU neither improves nor spends patience
        if better:
            p.best_bleu = max(p.best_bleu, metrics.get("bleu", -1.0))
            p.best_valid_loss = min(p.best_valid_loss, metrics["valid_loss"])
            p.best_step, p.bad_evals = p.step, 0
            if self.dist.is_main:
                save_checkpoint(self.out / "best", self.model, self.cfg, self.tokenizer,
                                info={"step": p.step, **metrics})
        else:
            p.bad_evals += 1
            if self.tc.patience and p.bad_evals >= self.tc.patience:
                p.stopped_early = True

    def _log(self, record: dict, bar) -> None:
        if not self.dist.is_main:
            return
        append_line(self.out / "metrics.jsonl", json.dumps(record) + "\n")
        if self.tensorboard is not None:
            self.tensorboard.write(record, self.model)
        if "valid_loss" in record:
            bleu = f" | dev BLEU {record['bleu']:.2f}" if "bleu" in record else ""
            end = f" | lr 0 at step {record['end_step']}" if "end_step" in record else ""
            bar.write(f"step {record['step']} | valid loss (label-smoothed) {record['valid_loss']:.3f} | "
                      f"nll {record['valid_nll']:.3f} | ppl exp(nll) {record['valid_ppl']:.2f}{bleu}{end}")

    def _end_step(self) -> int:
        """The step where the run ends (aiayn.training.run_end): the scheduler's end of a linear decay."""
        return self.run_end.end_step(self.progress)

    # ---- the loop --------------------------------------------------------------------------------
    def _next_group(self):
        p = self.progress
        while p.epoch < self.tc.max_epochs:
            if self._batches_epoch != p.epoch:
                self._batches = epoch_batches(self.train_examples, self.tc.max_tokens, self.tc.seed, p.epoch)
                self._batches_epoch = p.epoch
            group = self._group()
            if group is not None:
                return group
            p.epoch, p.batch_index = p.epoch + 1, 0
        return None

    def train(self) -> Path:
        """Train until max_steps, max_epochs, max_minutes, early stopping or a signal; returns the output
        directory. self.stop_reason says which; after SIGINT/SIGTERM self.stopped_by_signal names it."""
        self.out.mkdir(parents=True, exist_ok=True)
        self.model.train()
        p, tc = self.progress, self.tc
        bar = TrainingBar(max_steps=tc.max_steps, step=p.step, max_minutes=tc.max_minutes, enabled=self.dist.is_main)
        window = {"loss": 0.0, "nll": 0.0, "tokens": 0, "start": time.perf_counter()}
        self._started = window["start"]  # wall time of this process (a resumed run counts from its resume)
        self.run_end.start(p.step)
        self.signals.install()
        try:
            if p.pending_validation:  # a second signal ended the last run inside this step's validation
                self._validate_step(bar)
            while True:
                self.stop_reason = self.run_end.stop_reason(p, self.last_lr)
                if self.stop_reason:
                    break
                group = self._next_group()
                if group is None:
                    self.stop_reason = f"reached train.max_epochs={tc.max_epochs}"
                    break
                self._step_rng = rng_states()  # what a resume from this step boundary restores
                with D.peer_failures(self.dist):  # DDP's gradient all-reduce: a node gone is one line
                    loss, nll, tokens = self.train_step(group)
                with self.signals.update_unit():  # the update and its log row: both or neither
                    self._apply_update(len(group))
                    window["loss"] += loss
                    window["nll"] += nll
                    window["tokens"] += tokens
                    if p.step % tc.log_every == 0 or p.step == self._end_step():
                        self._log_window(window, bar)
                bar.advance(p.step)
                if p.step % tc.eval_every == 0:
                    self._validate_step(bar)
                if p.step % tc.save_every == 0:
                    self.save()
                if self.signals.requested():
                    by = self.signals.received or "a signal in another process"
                    self.stop_reason = f"{by}: saved, stopping"
                    bar.write(f"{by}: saving a checkpoint at step {p.step}")
                    if p.step % tc.save_every:
                        self.save(interrupted_by=by)
                    return self.out
        except KeyboardInterrupt:
            bar.write(f"interrupted: saving a checkpoint at step {p.step}")
            self.save(interrupted_by=(self.signals.received or "SIGINT") if p.step % tc.save_every else "")
            raise
        finally:
            bar.close()
            self.signals.restore()
        self._finish()
        return self.out

    @property
    def stopped_by_signal(self) -> str | None:
        return self.signals.received

    def _log_window(self, window: dict, bar) -> None:
        elapsed = time.perf_counter() - window["start"]
        record = {"step": self.progress.step, "epoch": self.progress.epoch,
                  "elapsed_s": round(time.perf_counter() - self._started, 1),
                  "loss": window["loss"] / max(window["tokens"], 1), "nll": window["nll"] / max(window["tokens"], 1),
                  "lr": self.last_lr, "tokens_per_s": window["tokens"] / max(elapsed, 1e-9)}
        bar.set_postfix(loss=f"{record['loss']:.3f}", lr=f"{record['lr']:.2e}", tok_s=f"{record['tokens_per_s']:.0f}")
        self._log(record, bar)
        window.update(loss=0.0, nll=0.0, tokens=0, start=time.perf_counter())

    def _finish(self) -> None:
        """Final checkpoint, and the average of the last `average_last` checkpoints (§6.1)."""
        latest = self.out / "checkpoints" / f"step_{self.progress.step:08d}"
        if self.dist.is_main and (not latest.exists() or interrupted(latest)):  # the last step's is regular
            self.save()
        D.barrier(self.dist)
        if self.dist.is_main and self.tc.average_last > 1:
            average_last(self.out, self.tc.average_last)
