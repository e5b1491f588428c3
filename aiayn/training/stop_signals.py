"""How a training run stops on SIGINT (Ctrl-C) or SIGTERM (sent by schedulers and `timeout`): the first one
finishes the current step, saves and stops; a second one stops at once, but never inside an update."""

import contextlib
import signal
import threading

from aiayn.training import distributed as D

HANDLED = (signal.SIGINT, signal.SIGTERM)


class StopSignals:
    """received: the name of the first signal ("SIGINT", "SIGTERM"; None: none yet). Its handlers are
    installed by install() (in the main thread only: Python runs handlers there) and put back by restore()."""

    def __init__(self, *, dist: D.DistInfo):
        self.dist = dist
        self.received: str | None = None
        self._in_update, self._abort_pending = False, False
        self._previous: dict = {}

    def _on_signal(self, signum, frame):
        if self.received is None:
            self.received = signal.Signals(signum).name
        elif self._in_update:
            self._abort_pending = True
        else:
            raise KeyboardInterrupt

    def install(self) -> None:
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.signal(s, self._on_signal) for s in HANDLED}

    def restore(self) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)
        self._previous = {}

    @contextlib.contextmanager
    def update_unit(self):
        """The optimizer update, the step counter and the saved RNG state change together or not at all:
        a second signal arriving in between is held until the unit is complete."""
        self._in_update = True
        try:
            yield
        finally:
            self._in_update = False
        if self._abort_pending:
            raise KeyboardInterrupt

    def requested(self) -> bool:
        """A signal reached this process or another one: every process must agree, or the others would wait
        for it in the next all-reduce."""
        return D.all_reduce_sum([float(self.received is not None)], self.dist)[0] > 0
