"""How a run stops short, and what counts as its training time: a signal asks the loop to stop
after the current step (StopRequest), the errors that end a run (RunInterrupted after a
checkpoint, TrainingDiverged on a non-finite loss), and the stopwatch that pauses for checkpoints."""
from __future__ import annotations

import contextlib
import signal
import sys
import time
from typing import Dict, Optional

from elastic_trainer.command_line import UserError


class TrainingDiverged(UserError):
    """The loss became NaN or infinite."""


def diverged(loss_value: float, step: int, epoch: int, outputs, kept, run_checkpoints) -> TrainingDiverged:
    """The error to raise when the loss stopped being finite at `step` of `epoch` (both counted from
    0). First the run's pictures and its status (Failure) are written (`outputs`: RunOutputs), and
    the weights of the last finite epoch (`kept`: KeptWeights; in memory, or the last checkpoint's
    from `run_checkpoints`) to last_good.h5."""
    outputs.flush_pictures()
    outputs.session_end(succeeded=False)  # the HParams dashboard's status: Failure
    what = kept.keep_last_good(run_checkpoints)
    return TrainingDiverged(f"the loss became {loss_value} at step {step + 1} (epoch {epoch + 1}); "
                            f"training stopped and {what}. Try a lower --learning_rate.")


class RunInterrupted(UserError):
    """Training stopped on a signal `where` (e.g. "at step 40 ..."), after writing a checkpoint; the
    message names the command that continues the run."""

    def __init__(self, signal_number: int, where: str, resume_command: str):
        super().__init__(f"stopped by {signal.Signals(signal_number).name} {where}. Continue with: {resume_command}")
        self.exit_code = 128 + signal_number


class StopRequest:
    """SIGINT/SIGTERM ask the loop to stop after the current step; a second one aborts at once.
    A second signal within SAME_REQUEST_SECONDS of the first is the same request arriving twice
    (a scheduler signals every process of a task, and the parent passes its own on): it is
    ignored, so the checkpoint is still written."""

    SAME_REQUEST_SECONDS = 1.0

    def __init__(self):
        self.signal_number: Optional[int] = None
        self._first_at = 0.0
        self._previous: Dict[int, object] = {}

    def __enter__(self) -> "StopRequest":
        try:
            for number in (signal.SIGINT, signal.SIGTERM):
                self._previous[number] = signal.signal(number, self._handle)
        except ValueError:  # not the main thread: leave signals alone
            pass
        return self

    def __exit__(self, *exc) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)

    def _handle(self, number: int, frame) -> None:
        if self.signal_number is not None:
            if time.monotonic() - self._first_at < self.SAME_REQUEST_SECONDS:
                return
            raise KeyboardInterrupt  # the second signal: stop now, no checkpoint
        self.signal_number, self._first_at = number, time.monotonic()
        print(f"\n{signal.Signals(number).name}: finishing this step and writing a checkpoint "
              f"(press Ctrl-C again to abort at once)", file=sys.stderr, flush=True)


class Stopwatch:
    """A run's training seconds: those carried over (earlier epochs and sessions) plus the time
    since this segment started, pauses (checkpoints) excluded."""

    def __init__(self, carried_seconds: float):
        self.carried, self.started = carried_seconds, time.perf_counter()

    def seconds(self) -> float:
        return self.carried + time.perf_counter() - self.started

    @contextlib.contextmanager
    def paused(self):
        begin = time.perf_counter()
        yield
        self.started += time.perf_counter() - begin


class StartupClock:
    """Seconds of the start-up's parts (imports, model, profile, data), each from the last mark."""

    def __init__(self, start: float):
        self.last, self.parts = start, {}

    def mark(self, part: str) -> None:
        now = time.perf_counter()
        self.parts[part] = self.parts.get(part, 0.0) + now - self.last
        self.last = now
