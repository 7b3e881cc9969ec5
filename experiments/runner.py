"""Running many main.py trainings unattended: one subprocess per run, a log file each, progress
with an estimate of the time left, and nothing half-done left behind. Used by scripts/study.py
and scripts/figures.py.
"""
from __future__ import annotations

import contextlib
import glob
import io
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from elastic_trainer import host_load
from elastic_trainer.command_line import UserError
from experiments.sharding import Shard, host_name, resolve_shard

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

Job = Tuple[str, List[str]]  # (run name, main.py flags; they include --logdir and --run_name)


# one timed batch a machine: a second sweep beside a running one would slow both and move the seconds their
# deadlines and speeds are measured in (every checkout on the machine shares this file)
BATCH_LOCK = os.path.join(tempfile.gettempdir(), "elastic_trainer_batch.lock")


@contextlib.contextmanager
def one_batch_at_a_time(what: str, path: Optional[str] = None):
    """Hold the machine's batch lock while `what` (a sweep's command) runs; UserError naming the sweep that holds
    it. The lock is the kernel's (flock): it goes with its process, however that ends. Without fcntl (Windows): none."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    path = path or BATCH_LOCK
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise UserError(f"a timed sweep is already running on this machine ({holder}); two side by side would "
                            f"move each other's seconds: wait for it to finish, or stop it") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}: {what}")
        handle.flush()
        try:
            yield
        finally:
            handle.seek(0)
            handle.truncate()  # the lock goes when the file closes


def check_main_arguments(name: str, arguments: Sequence[str]) -> None:
    """Parse a run's flags with main.py's own parser (so a renamed flag is caught before hours of
    training); UserError naming the run when they do not parse."""
    from elastic_trainer import cli  # main.py's parser; importing it loads TensorFlow once

    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            cli.parse_args(list(arguments))
    except SystemExit as exit_:
        if exit_.code:
            message = stderr.getvalue().strip().splitlines()[-1:] or ["invalid flags"]
            raise UserError(f"run {name}: main.py rejects its flags: {message[0]}") from None


def resumable(run_dir: str) -> bool:
    """An interrupted run with a checkpoint to continue from (no summary yet)."""
    return (bool(glob.glob(os.path.join(run_dir, "checkpoints", "ckpt-*.index")))
            and not os.path.exists(os.path.join(run_dir, "summary.json")))


class BudgetRefused(UserError):
    """main.py refused the run's --time_budget as shorter than the scheme's shortest schedule (one epoch and its
    selections): a result of the plan (the scheme cannot run there), recorded as such, not a failure."""


class RunDiverged(UserError):
    """main.py stopped the run on a non-finite loss (run_control.TrainingDiverged): a result where the plan records
    it (train_all's `record_diverged`: issue 74's study scores it at chance), a failure elsewhere. `seconds`: its
    process's, start-up included (main.py writes no summary for it)."""

    def __init__(self, message: str, seconds: float):
        super().__init__(message)
        self.seconds = seconds


# main.py's one-line messages (elastic_trainer/command_line.py prints "error: ..."): the refusal of a deadline its
# scheme cannot keep (elastic_trainer/deadline.py), and a loss that stopped being finite (run_control.diverged)
REFUSED_BUDGET = re.compile(r"^error: (--time_budget \S+ is too small.*)$", re.MULTILINE)
DIVERGED = re.compile(r"^error: (the loss became \S+ at step .*)$", re.MULTILINE)


def last_error(log_path: str, pattern: re.Pattern) -> Optional[str]:
    """The message when a run's log ends with one of main.py's errors that `pattern` matches, else None."""
    try:
        with open(log_path) as handle:
            found = pattern.findall(handle.read()[-4000:])
    except OSError:
        return None
    return found[-1] if found else None


class RunStopped(UserError):
    """This process got SIGTERM (a scheduler preempting the task) and its run stopped at a checkpoint."""

    exit_code = 128 + signal.SIGTERM


def run_to_its_checkpoint(command: Sequence[str], log) -> Tuple[int, bool]:
    """Run main.py and wait for it: its exit code, and whether this process was told to stop. A SIGTERM to this process is
    passed on to main.py once (it finishes its step and writes a checkpoint; the same signal sent
    to both by a scheduler counts once there), and this process waits for that instead of dying
    and leaving main.py to be killed mid-write when the task ends."""
    stopped, started = [], []  # the handler is in place before main.py starts: no SIGTERM falls between

    def stop(number, frame):
        if not stopped:
            stopped.append(number)
            if started:
                started[0].send_signal(signal.SIGTERM)

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread: signals stay as they are
        previous = None
    try:
        process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        started.append(process)
        if stopped:  # told to stop while main.py was starting: pass it on now
            process.send_signal(signal.SIGTERM)
        code = process.wait()
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return code, bool(stopped)


def train_one(name: str, arguments: Sequence[str], log_root: str) -> Tuple[Dict, float]:
    """Train one run in a subprocess (its output goes to <log_root>/<name>.log); its summary and
    the process's seconds. An earlier interrupted attempt is resumed from its checkpoint; one
    that stopped before its first checkpoint is removed, so partial logs never mix."""
    run_dir = os.path.join(log_root, name)
    resume = resumable(run_dir)
    if os.path.isdir(run_dir) and not resume:
        shutil.rmtree(run_dir)
    os.makedirs(log_root, exist_ok=True)
    command = [sys.executable, os.path.join(ROOT, "main.py"), *arguments] + (["--resume"] if resume else [])
    if resume:
        print("  resuming the interrupted run from its checkpoint", flush=True)
    start = time.perf_counter()
    with open(run_dir + ".log", "a" if resume else "w") as log:
        code, stopped = run_to_its_checkpoint(command, log)
    seconds = time.perf_counter() - start
    if stopped:
        raise RunStopped(f"stopped by SIGTERM: run {name} wrote its checkpoint; the same command resumes it")
    if code != 0:
        refusal = last_error(run_dir + ".log", REFUSED_BUDGET)
        if refusal:
            raise BudgetRefused(refusal)
        divergence = last_error(run_dir + ".log", DIVERGED)
        if divergence:
            raise RunDiverged(f"run {name} diverged: {divergence} (see {run_dir}.log)", seconds)
        raise UserError(f"run {name} failed (exit {code}); see {run_dir}.log")
    with open(os.path.join(run_dir, "summary.json")) as handle:
        return json.load(handle), seconds


def train_all(jobs: Sequence[Job], log_root: str, dry_run: bool,
              on_done: Optional[Callable[[str, Dict, float], None]] = None,
              estimates: Optional[Sequence[float]] = None, record_diverged: bool = False) -> List[Dict]:
    """Train `jobs` in order, printing progress and the time left (from `estimates`, seconds per
    job, until measured durations replace them). With `dry_run`, check every job's flags with
    main.py's parser and print its command instead. A run main.py refused (BudgetRefused) is passed
    to `on_done` as {"run_name", "refused"}; with `record_diverged`, a diverged one (RunDiverged) as
    {"run_name", "diverged"} with its process's seconds, and the plan goes on; without, it stops the plan."""
    durations: List[float] = []
    summaries = []
    for index, (name, arguments) in enumerate(jobs):
        left = len(jobs) - index
        if durations:
            remaining = f", about {sum(durations) / len(durations) * left / 60:.0f} min left"
        elif estimates:
            remaining = f", about {sum(estimates[index:]) / 60:.0f} min left (estimated)"
        else:
            remaining = ""
        print(f"[{index + 1}/{len(jobs)}] {name}{remaining}", flush=True)
        if dry_run:
            check_main_arguments(name, arguments)
            print("  python main.py " + " ".join(arguments))
            continue
        try:
            summary, seconds = train_one(name, arguments, log_root)
        except BudgetRefused as refusal:  # recorded, and the plan goes on
            print(f"  refused: {refusal}", flush=True)
            if on_done:
                on_done(name, {"run_name": name, "refused": str(refusal)}, 0.0)
            continue
        except RunDiverged as divergence:
            if not record_diverged:
                raise
            print(f"  diverged: {divergence}", flush=True)
            if on_done:
                on_done(name, {"run_name": name, "diverged": str(divergence)}, divergence.seconds)
            continue
        summary["ran_on"] = {"executor": "local", "host": host_name()}
        durations.append(seconds)
        summaries.append(summary)
        if on_done:
            on_done(name, summary, seconds)
        steal = summary.get("host_steal_share") or 0.0  # the VM's host's share of the CPU (Linux steal time)
        print(f"  {accuracy_line(summary)}, {summary['train_seconds']:.0f} s of training, "
              f"{step_ratio_line(summary)}, {seconds:.0f} s in all"
              + (f", the host took {100 * steal:.0f} % of the CPU" if steal > host_load.STEAL_WARNING else ""), flush=True)
    return summaries


def accuracy_line(summary: Dict) -> str:
    """A finished run's test accuracies for a progress line: final, and at the validation-best epoch."""
    line = f"final {100 * summary['final_test_accuracy']:.1f} %"
    if summary.get("test_accuracy_at_best_val") is not None:
        line += f" (val-best epoch {100 * summary['test_accuracy_at_best_val']:.1f} %)"
    return line


def step_ratio_line(summary: Dict) -> str:
    """The run's step-time ratio: timed live against full steps when the run did (--reference_steps),
    else its median step against the profile's full step."""
    live = summary.get("step_time_ratio_live", float("nan"))
    if math.isfinite(live):
        return f"step ratio {live:.3f} (live)"
    return f"step ratio {summary.get('step_time_ratio_achieved', float('nan')):.3f} (against the profile)"


def add_distribution_flags(parser, by_seed: bool = False) -> None:
    """--shard, --executor and the Ray executor's flags (scripts/study.py and scripts/figures.py;
    `by_seed`: the study's --shard_by)."""
    group = parser.add_argument_group("spreading runs over machines (docs/cluster.md)")
    group.add_argument("--shard", metavar="I/N", default=None,
                       help="run only shard I of N (1 <= I <= N): a fixed, balanced share of the plan's runs that "
                            "every machine computes alike; under a SLURM array job it defaults to the array task's")
    if by_seed:
        group.add_argument("--shard_by", choices=["run", "seed"], default="run",
                           help="seed: keep each seed's runs together in one shard (their wall-time ratios then "
                                "compare runs made together on one machine)")
    group.add_argument("--executor", choices=["local", "ray"], default="local",
                       help="local: train here, one run at a time; ray: send each run to a node of a Ray cluster "
                            "offering the elastic_trainer_device resource (needs requirements-cluster.txt)")
    group.add_argument("--address", metavar="HOST:PORT", default=None, help="ray: the cluster's head (ray start --head)")
    group.add_argument("--device_kind", metavar="KIND", default=None,
                       help="ray: run on nodes offering elastic_trainer_kind:KIND only (needed when the cluster "
                            "has several kinds of device)")
    group.add_argument("--remote_root", metavar="PATH", default=None,
                       help="ray: where this repository is on the nodes (default: the same path as here)")


def distribution(args, environ=None) -> Optional[Shard]:
    """Check the distribution flags; the shard to run (None: every run)."""
    if args.executor == "ray" and not args.address:
        raise UserError("--executor ray needs --address HOST:PORT, the Ray head's address (ray start --head prints it)")
    if args.executor == "local" and (args.address or args.device_kind or args.remote_root):
        raise UserError("--address, --device_kind and --remote_root belong to --executor ray")
    shard = resolve_shard(args.shard, os.environ if environ is None else environ)
    if shard and shard.source != "--shard":
        print(f"shard {shard} (from {shard.source})", flush=True)
    return shard
