"""When a training run ends: train.max_steps, train.max_minutes on this process's clock, the end step that
train.fit_steps_to_time fits into that time, early stopping, and the words that say which one ended it.
(train.max_epochs and signals end the loop in the Trainer, which knows the batches and the handlers.)"""

import logging
import math
import time

from aiayn.training import distributed as D

log = logging.getLogger(__name__)
FIT_MARGIN = 0.99  # train.fit_steps_to_time plans for 99% of the time left: the pace varies a little


class RunEnd:
    """This process's clock (started by Trainer.train: where, at which step, and when train.max_minutes ends
    it) and the rules that end the run, read against the run's Progress."""

    def __init__(self, *, tc, dist: D.DistInfo):
        self.tc, self.dist = tc, dist
        self.clock_start, self.first_step, self.deadline = time.monotonic(), 0, math.inf

    def start(self, step: int) -> None:
        """The clock starts at this step (a resumed run counts from its resume)."""
        self.clock_start, self.first_step = time.monotonic(), step
        self.deadline = self.clock_start + self.tc.max_minutes * 60 if self.tc.max_minutes > 0 else math.inf

    def end_step(self, progress) -> int:
        """The step where the run ends and a linear schedule reaches lr 0: train.max_steps, or the earlier
        step that train.fit_steps_to_time chose."""
        end = progress.end_step
        return min(end, self.tc.max_steps) if end else self.tc.max_steps

    def fit(self, progress) -> int:
        """train.fit_steps_to_time, after a validation: the last step that fits in the time left at this
        process's pace so far (validations included, so the ones to come are paid for), one figure for all
        processes, never before this step nor past train.max_steps; recorded in progress.end_step, which the
        caller's scheduler then reads. Returns the new end."""
        p, now = progress, time.monotonic()
        steps = p.step - self.first_step
        if steps <= 0 or p.step >= self.end_step(p):  # nothing timed yet (a redone validation), or the end
            return self.end_step(p)
        seconds_per_step, seconds_left = (x / self.dist.world_size for x in D.all_reduce_sum(
            [(now - self.clock_start) / steps, self.deadline - now], self.dist))
        fits = int(FIT_MARGIN * max(seconds_left, 0.0) / max(seconds_per_step, 1e-9))
        p.end_step = max(p.step, min(self.tc.max_steps, p.step + fits))
        if p.end_step <= self.tc.warmup_steps:
            log.warning("only %d steps fit in train.max_minutes=%g: the run ends within the lr warmup "
                        "(train.warmup_steps=%d), before any decay", p.end_step, self.tc.max_minutes,
                        self.tc.warmup_steps)
        return p.end_step

    def stop_reason(self, progress, last_lr: float) -> str:
        """Why the run ends before its next step ("" while it goes on); last_lr: the latest update's rate."""
        p, tc, end = progress, self.tc, self.end_step(progress)
        if p.stopped_early:
            return f"early stopping: {tc.patience} validations without improvement"
        if p.step >= end and end < tc.max_steps:
            return (f"reached step {p.step}, the end of the linear decay that train.fit_steps_to_time chose to fit "
                    f"train.max_minutes={tc.max_minutes:g} (last lr {last_lr:.2e})")
        if p.step >= tc.max_steps:
            return f"reached train.max_steps={tc.max_steps}"
        # every process must agree (one that stopped alone would leave the others waiting in an all-reduce)
        if self.deadline < math.inf and \
                D.all_reduce_sum([float(time.monotonic() >= self.deadline)], self.dist)[0] > 0:
            return f"reached train.max_minutes={tc.max_minutes:g}" + self._cut_decay_note(end, last_lr)
        return ""

    def _cut_decay_note(self, end: int, last_lr: float) -> str:
        """What a time stop left undone of a linear decay, and what to change."""
        if self.tc.schedule != "linear":
            return ""
        note = f" before step {end}, where train.schedule=linear reaches lr 0 (last lr {last_lr:.2e}); "
        if self.tc.fit_steps_to_time:  # the pace fell after the last fit
            return note + "validate more often (train.eval_every) so that the end is fitted closer to the deadline"
        return note + "lower train.max_steps to what fits in the time, or set train.fit_steps_to_time=true"
