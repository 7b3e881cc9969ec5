"""Small helpers shared by the command-line tools: user errors, boolean flags, atomic writes.
Imports no TensorFlow, so every CLI can set TensorFlow's log level before it loads TF.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import platform
import sys
import tempfile
import warnings
from typing import Any, Callable, Iterator, Optional, Sequence


# The TensorBoard tags of a run's selections: run_outputs.py writes them, experiments/plot.py reads
# them back (here, where neither has to import the other).
SELECTION_TAG = "elastic/selection"  # each selection as text, "0110...": tensors in model order, 1 = trained
SELECTIONS_PICTURE_TAG = "selection/all"  # the picture of every selection so far (an image, at each selection)
SELECTION_PICTURE_TAG = "selection/each"  # the picture of the selection made at that step alone
IMPORTANCE_TAG = "elastic/importance"  # the importance each selection was made on, JSON, tensors in model order
BLOCKS_TAG = "elastic/blocks"  # JSON [[block name, first tensor index], ...], once
CLASSIFIER_TAG = "elastic/classifier"  # JSON [first tensor index of the classifier], once

# TensorBoard sorts card groups (a tag up to its first "/") by name and Time Series opens only the
# first two. Scalars are named by what they measure ("validation/accuracy"); run_outputs.py files each
# under the tag `shown_scalar` gives, and experiments/plot.py looks names up through it: accuracy, loss
# and step time first, then summary and times, the rest under INTERNALS; fractions as percentages.
SPLITS = ("train", "validation", "test")
SHOWN_GROUPS = ("accuracy", "loss", "step_time", "summary", "time")  # written as they are named
INTERNALS = "under_the_hood"  # selection internals, memory, energy, the learning rate
PERCENT_ENDINGS = ("accuracy", "_share", "_fraction")


def shown_scalar(name: str) -> tuple:
    """(tag, scale): where TensorBoard shows the scalar named `name`, and the factor its values are
    written with (100 for names ending in PERCENT_ENDINGS). "<split>/accuracy" becomes
    "accuracy/<split>", "<split>/classification_loss" "loss/<split>"; names in SHOWN_GROUPS stay;
    any other goes under INTERNALS."""
    group, _, quantity = name.partition("/")
    scale = 100.0 if name.endswith(PERCENT_ENDINGS) else 1.0
    if group in SPLITS and quantity in ("accuracy", "classification_loss"):
        return f"{'accuracy' if quantity == 'accuracy' else 'loss'}/{group}", scale
    if group in SHOWN_GROUPS:
        return name, scale
    return f"{INTERNALS}/{name}", scale


class UserError(ValueError):
    """A problem with what the user asked for: shown as one message, no traceback, exit 2."""


def str2bool(value: str) -> bool:
    """argparse type for booleans: true/false, yes/no, 1/0 (not Python's `bool('false') == True`)."""
    lowered = value.strip().lower()
    if lowered in ("true", "t", "yes", "y", "1"):
        return True
    if lowered in ("false", "f", "no", "n", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def positive_int(value: str) -> int:
    """argparse type for integers >= 1."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {number}")
    return number


def prepare_tensorflow_environment() -> None:
    """Settings that must be made before TensorFlow is imported; call it first in every CLI.

    Silences TensorFlow's start-up chatter and the tensorflow-addons banner, turns on the CPU
    allocator that keeps memory statistics and, on x86-64, oneDNN kernels, which TF 2.15 enables by
    default only on recent CPUs and without which steps are much slower
    (docs/benchmarks/reproducibility.md). TF_ENABLE_ONEDNN_OPTS=0 opts out.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # errors still surface as Python exceptions
    # The CPU allocator keeps statistics (for the memory model, --memory_budget_mb) only as BFC, which is
    # no slower (docs/benchmarks/memory.md). TF_CPU_ALLOCATOR_USE_BFC=false opts out.
    os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")
    if platform.machine().lower() in ("x86_64", "amd64"):
        os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
    warnings.filterwarnings("ignore", message=r"(?s).*TensorFlow Addons")
    warnings.filterwarnings("ignore", message=r".*Tensorflow Addons supports using Python ops.*")
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    # One compiled step per selection is deliberate (see train_step.StepCache); TensorFlow's
    # "triggered tf.function retracing" advice does not apply.
    logging.getLogger("tensorflow").addFilter(
        lambda record: "triggered tf.function retracing" not in record.getMessage())


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """One flag a line or two: a 100-column page, and a default shown only where it says something
    (not None, not off, not already in the help)."""

    def __init__(self, prog: str):
        super().__init__(prog, max_help_position=30, width=100)

    def _get_help_string(self, action: argparse.Action) -> str:
        if action.default is None or action.default is False or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def run_cli(main: Callable[[Optional[Sequence[str]]], int], argv: Optional[Sequence[str]] = None) -> int:
    """Run a CLI `main(argv)`, turning user errors into one readable line and exit code 2."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("absl").setLevel(logging.WARNING)  # TFDS's per-dataset INFO lines
    try:
        return main(argv)
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        return getattr(error, "exit_code", 2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


@contextlib.contextmanager
def atomic_path(path: str) -> Iterator[str]:
    """Yield a temporary path next to `path`; move it onto `path` only if the block succeeds, so a
    crash leaves the old file and no half-written one (for writers that want a file name)."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    base, extension = os.path.splitext(os.path.basename(path))
    handle, temporary = tempfile.mkstemp(prefix=f".{base}.", suffix=f".tmp{extension}", dir=directory)
    os.close(handle)
    try:
        yield temporary
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)  # mkstemp makes 0600; outputs follow the umask
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def atomic_write_text(path: str, text: str) -> None:
    """Write `text` to `path` atomically (readers see the old file or the whole new one)."""
    with atomic_path(path) as temporary:
        with open(temporary, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())


def atomic_write_json(path: str, data: Any) -> None:
    """Write `data` as indented JSON to `path` atomically."""
    atomic_write_text(path, json.dumps(data, indent=2) + "\n")


def ensure_writable_dir(directory: str, flag: str) -> None:
    """Create `directory` if needed and prove it is writable, or raise UserError naming `flag`."""
    try:
        os.makedirs(directory, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".write_test_"):
            pass
    except OSError as error:
        raise UserError(f"cannot write to {flag} {directory} ({error.strerror or error}); "
                        f"choose a writable directory") from None


def read_json(path: str, what: str) -> Any:
    """Read a JSON file, raising UserError that names `what` when it is missing or corrupt."""
    try:
        with open(path, encoding="utf-8") as stream:
            return json.load(stream)
    except FileNotFoundError:
        raise UserError(f"{what} {path} does not exist") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise UserError(f"{what} {path} is not valid JSON (truncated or corrupt?): {error}") from None


def overhead_share(compile_s: float, selection_seconds: Sequence[float], train_seconds: float) -> float:
    """The share of a run's training wall time spent selecting (probes, DP) and compiling steps;
    every run pays its first step's compile, so full training's share is not zero."""
    return (compile_s + sum(selection_seconds)) / train_seconds if train_seconds else 0.0


def reported_accuracy_name(summary: dict) -> str:
    """Which test accuracy of a run summary to report in one figure: the best over epochs when
    every epoch was tested (the original's figure, --test_every_epoch), else the final epoch's."""
    return "best_test_accuracy" if summary.get("best_test_accuracy") is not None else "final_test_accuracy"


def reported_accuracy(summary: dict) -> float:
    """The value of `reported_accuracy_name(summary)`."""
    return summary[reported_accuracy_name(summary)]


CHANCE_MARGIN = 0.01  # an epoch's training loss within 1 % of ln(classes) is "at chance"


def at_chance(train_loss: float, num_classes: int, epochs_done: int, num_epochs: int) -> Optional[str]:
    """A warning when a run is a third or more of its epochs in and its training loss is still within
    CHANCE_MARGIN of ln(num_classes), what predicting every class alike scores; else None. A fresh
    classifier can flatten the backbone's features onto that plateau, which some runs never leave
    (docs/benchmarks/fresh_validation.md)."""
    if num_classes < 2 or epochs_done * 3 < num_epochs or not math.isfinite(train_loss):
        return None
    chance = math.log(num_classes)
    if train_loss < (1.0 - CHANCE_MARGIN) * chance:
        return None
    return (f"after {epochs_done} of {num_epochs} epochs the training loss is {train_loss:.3f}, within "
            f"{100 * CHANCE_MARGIN:.0f} % of ln({num_classes}) = {chance:.3f}: the model predicts no better than "
            f"chance. The fresh classifier's gradients have flattened the backbone's features; --head_init zeros "
            f"starts the classifier at zero, which kept such runs off this plateau (docs/benchmarks/fresh_validation.md)")


MIX_BATCHES = 4  # the first training batches whose classes the loop counts (class_mix)


def class_mix(labels: Sequence[Sequence[int]], num_classes: int) -> "tuple[str, bool]":
    """What the first training batches hold, and whether their order looks class-sorted.

    `labels` holds the labels of a run's first training batches, one sequence a batch. Returns (one
    sentence for the log, flagged): flagged when draws from a balanced split would fall in so few
    classes with a chance below one in a million (bounded by C(num_classes, seen) * (seen /
    num_classes) ** draws), as when a class-sorted split is read unshuffled or shuffled in too small
    a buffer, so that the run trains on one class after another.
    """
    flat = [int(label) for batch in labels for label in batch]
    seen, draws = len(set(flat)), len(flat)
    expected = num_classes * (1.0 - (1.0 - 1.0 / num_classes) ** draws) if num_classes > 0 else 0.0
    per_batch = sum(len({int(label) for label in batch}) for batch in labels) / max(len(labels), 1)
    sentence = (f"the first {len(labels)} training batches ({draws} examples) hold {seen} of {num_classes} "
                f"classes, {per_batch:.1f} a batch (a shuffled balanced split: about {expected:.1f})")
    if not 0 < seen < num_classes:
        return sentence, False
    log_chance = (math.lgamma(num_classes + 1) - math.lgamma(seen + 1) - math.lgamma(num_classes - seen + 1)
                  + draws * math.log(seen / num_classes))
    return sentence, log_chance < math.log(1e-6)



class FirstBatches:
    """The labels of a session's first MIX_BATCHES training batches, reported once (class_mix): an
    info line, or a warning when their order looks class-sorted (such a pipeline trains, and learns
    little)."""

    def __init__(self, num_classes: int):
        self.num_classes = num_classes
        self.labels: Optional[list] = []  # None once reported

    def add(self, labels) -> None:
        """One batch's labels (a tensor); the report once MIX_BATCHES are in."""
        if self.labels is not None:
            self.labels.append(labels.numpy())
            if len(self.labels) == MIX_BATCHES:
                self.report()

    def report(self) -> None:
        """The report now (an epoch shorter than MIX_BATCHES), unless made or nothing was seen."""
        if not self.labels:
            return
        sentence, sorted_looking = class_mix(self.labels, self.num_classes)
        self.labels = None
        if sorted_looking:
            logging.warning("%s: the training order looks class-sorted; a training pipeline must shuffle the "
                            "whole split (data.load_epochs does) or this run learns one class after another",
                            sentence)
        else:
            logging.info("%s", sentence)