"""The training progress bar: over steps, or over the time budget when train.max_minutes is set, so that
its total and ETA tell the truth about when the run will end (the step count is then in its postfix)."""

import time

from tqdm import tqdm


class TrainingBar:
    def __init__(self, *, max_steps: int, step: int, max_minutes: float, enabled: bool, clock=time.monotonic):
        self.timed = max_minutes > 0
        self._clock = clock
        self._start, self._postfix = clock(), {}
        if self.timed:  # seconds of this run's budget (a resumed run's budget restarts with it)
            self.bar = tqdm(total=round(max_minutes * 60), unit="s", disable=not enabled, dynamic_ncols=True,
                            bar_format="{l_bar}{bar}| {n:.0f}/{total_fmt} s [{elapsed}<{remaining}{postfix}]")
        else:
            self.bar = tqdm(total=max_steps, initial=step, unit="step", disable=not enabled, dynamic_ncols=True)

    def advance(self, step: int) -> None:
        """After each step: one step, or the seconds elapsed so far."""
        self._postfix["step"] = step
        self.bar.set_postfix(self._postfix, refresh=False)
        if self.timed:
            self.bar.update(min(self._clock() - self._start, self.bar.total) - self.bar.n)
        else:
            self.bar.update(1)

    def set_postfix(self, **values) -> None:
        self._postfix.update(values)
        self.bar.set_postfix(self._postfix)

    def write(self, text: str) -> None:
        self.bar.write(text)

    def close(self) -> None:
        self.bar.close()
