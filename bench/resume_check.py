"""Interrupt a real training run and resume it: does it end where an uninterrupted run ends?

    python -m bench.resume_check                       # the study protocol, 4 epochs (~10 min)
    python -m bench.resume_check --output results/resume_check.md

Three runs of one configuration and seed (by default ElasticTrainer, rho 0.533 paper mode, on the
embedded dataset with the headline study's MobileNetV2 protocol, a selection every epoch):
  uninterrupted  trained start to end;
  killed         SIGKILL half-way through epoch --stop_epoch (nothing is written at the kill: the
                 resumed run continues from the end of the previous epoch's checkpoint), then
                 `main.py ... --resume`;
  interrupted    SIGINT at the same point (the run finishes its step, writes a checkpoint and
                 prints the command that continues it), then that command.
It prints how each stopped and where it resumed, and compares the three: every selection's
mask, the per-epoch training loss, best and final test accuracy and training seconds (which add
up across sessions). Checkpoints hold the random generators of augmentation and dropout, so the
resumed runs should make exactly the uninterrupted run's selections.
Logs: <logdir>/<run>/ (TensorBoard) and <logdir>/<run>.log (the processes' output).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from typing import Dict, List, Optional, Sequence

from elastic_trainer.command_line import UserError, run_cli
from elastic_trainer.files import atomic_write_text
from elastic_trainer.record_names import reported_accuracy
from experiments.study_plans import PROTOCOLS, require_backbone

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_flags(args: argparse.Namespace, run_name: str) -> List[str]:
    protocol = PROTOCOLS[args.model_name]
    flags = ["--model_name", args.model_name, "--dataset_name", protocol["dataset_name"],
             "--input_size", str(protocol["input_size"]), "--batch_size", str(protocol["batch_size"]),
             "--learning_rate", str(protocol["learning_rate"]), "--bn_mode", protocol["bn_mode"],
             "--weights", protocol["weights"], "--num_epochs", str(args.num_epochs),
             "--interval", str(args.interval), "--train_type", args.train_type, "--seed", str(args.seed),
             "--logdir", args.logdir, "--run_name", run_name,
             "--checkpoint_seconds", "0"]  # a checkpoint at every epoch end: it stops runs at one
    if args.train_type in ("elastic_training", "static_top_training"):
        flags += ["--rho", str(args.rho), "--rho_mode", args.rho_mode]
    return flags


def checkpoint_numbers(run_dir: str) -> List[int]:
    """The numbers (global steps) of a run's checkpoints on disk."""
    paths = glob.glob(os.path.join(run_dir, "checkpoints", "ckpt-*.index"))
    return [int(os.path.basename(path)[len("ckpt-"):-len(".index")]) for path in paths]


def run_to_end(command: Sequence[str], log_path: str, mode: str = "w") -> int:
    with open(log_path, mode) as log:
        return subprocess.run(list(command), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT).returncode


def run_and_stop(command: Sequence[str], run_dir: str, log_path: str, stop_epoch: int, number: int) -> Dict:
    """Start a run; when its checkpoint of epoch stop_epoch - 1 appears, wait half an epoch (as long
    as half the time between its last two checkpoints) and send signal `number`."""
    start = time.time()
    with open(log_path, "w") as log:
        process = subprocess.Popen(list(command), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        appeared: Dict[int, float] = {}  # checkpoint number -> when it appeared (one per epoch)
        while process.poll() is None and len(appeared) < stop_epoch - 1:
            for checkpoint in checkpoint_numbers(run_dir):
                appeared.setdefault(checkpoint, time.time())
            time.sleep(0.2)
        if process.poll() is not None:
            raise UserError(f"{run_dir} ended (exit {process.returncode}) before epoch {stop_epoch}; see {log_path}")
        times = [start] + sorted(appeared.values())
        time.sleep((times[-1] - times[-2]) / 2)
        sent = time.time() - start
        process.send_signal(number)
        code = process.wait()
    return {"signal": signal.Signals(number).name, "sent_after_s": sent, "exit": code}


def log_lines(log_path: str, *needles: str) -> List[str]:
    with open(log_path, errors="replace") as handle:
        return [line.strip() for line in handle if any(needle in line for needle in needles)]


def run_record(run_dir: str) -> Dict:
    from experiments import plot

    with open(os.path.join(run_dir, "summary.json")) as handle:
        summary = json.load(handle)
    history = summary["history"]
    run = plot.Run(run_dir)
    masks = run.masks() if summary["train_type"] in ("elastic_training", "static_top_training") else []
    return {"summary": summary, "history": history, "masks": masks,
            "losses": [entry["train_loss"] for entry in history]}


def comparison(records: Dict[str, Dict]) -> str:
    reference = records["uninterrupted"]
    lines = ["| run | sessions | selections (step: tensors) | masks equal to uninterrupted | "
             "train loss per epoch | max loss difference | best acc % | final acc % | train s |",
             "|---|---:|---|---|---|---:|---:|---:|---:|"]
    for name, record in records.items():
        summary = record["summary"]
        equal = [a == b for a, b in zip(record["masks"], reference["masks"])]
        same_steps = [s for s, _ in record["masks"]] == [s for s, _ in reference["masks"]]
        masks_equal = "-" if name == "uninterrupted" else (
            f"{sum(equal)}/{len(reference['masks'])}" + ("" if same_steps else " (steps differ)"))
        difference = max((abs(a - b) for a, b in zip(record["losses"], reference["losses"])), default=0.0)
        lines.append(
            f"| {name} | {summary.get('sessions', 1)} | "
            + ", ".join(f"{step}: {sum(mask)}" for step, mask in record["masks"])
            + f" | {masks_equal} | " + ", ".join(f"{loss:.4f}" for loss in record["losses"])
            + f" | {'-' if name == 'uninterrupted' else f'{difference:.2g}'} | "
            f"{100 * reported_accuracy(summary):.2f} | {100 * summary['final_test_accuracy']:.2f} | "
            f"{summary['train_seconds']:.0f} |")
    return "\n".join(lines)


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--model_name", default="mobilenetv2", choices=sorted(PROTOCOLS),
                        help="a model with a study protocol (experiments/study_plans.py) and its source backbone")
    parser.add_argument("--train_type", default="elastic_training", help="the scheme to interrupt")
    parser.add_argument("--rho", type=float, default=0.533, help="elastic schemes: the time budget")
    parser.add_argument("--rho_mode", default="paper", choices=["exact", "paper"], help="elastic schemes: rho's meaning")
    parser.add_argument("--num_epochs", type=int, default=4, help="epochs of each run")
    parser.add_argument("--interval", type=float, default=1, help="epochs between re-selections")
    parser.add_argument("--stop_epoch", type=int, default=3, help="interrupt the runs half-way through this epoch")
    parser.add_argument("--seed", type=int, default=0, help="the seed of all three runs")
    parser.add_argument("--logdir", default="logs/resume_check", help="where the runs go (emptied first)")
    parser.add_argument("--output", default=None, help="also write the report (markdown) to this file")
    args = parser.parse_args(argv)
    if not 2 <= args.stop_epoch <= args.num_epochs:
        parser.error(f"--stop_epoch must be between 2 and --num_epochs ({args.num_epochs}): the run needs an "
                     f"epoch's checkpoint before the interruption")
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    require_backbone(args.model_name, "the resume check")
    args.logdir = os.path.abspath(args.logdir)
    if os.path.isdir(args.logdir):
        shutil.rmtree(args.logdir)
    os.makedirs(args.logdir)
    main_py = [sys.executable, os.path.join(ROOT, "main.py")]
    report = [f"Configuration: python main.py {' '.join(run_flags(args, 'NAME'))}", ""]

    def say(line: str) -> None:
        print(line, flush=True)
        report.append(line)

    start = time.time()
    say("1. uninterrupted run")
    if run_to_end(main_py + run_flags(args, "uninterrupted"), os.path.join(args.logdir, "uninterrupted.log")):
        raise UserError(f"the uninterrupted run failed; see {args.logdir}/uninterrupted.log")
    for index, (name, number) in enumerate((("killed", signal.SIGKILL), ("interrupted", signal.SIGINT)), 2):
        run_dir, log_path = os.path.join(args.logdir, name), os.path.join(args.logdir, f"{name}.log")
        say(f"{index}. {name}: {signal.Signals(number).name} half-way through epoch {args.stop_epoch}")
        stopped = run_and_stop(main_py + run_flags(args, name), run_dir, log_path, args.stop_epoch, number)
        say(f"   sent after {stopped['sent_after_s']:.0f} s; the process exited with code {stopped['exit']}")
        for line in log_lines(log_path, "stopped by", "Traceback"):
            say(f"   its last words: {line}")
        say(f"   then: python main.py ... --run_name {name} --resume")
        code = run_to_end(main_py + run_flags(args, name) + ["--resume"], log_path, "a")
        for line in log_lines(log_path, "resuming "):
            say(f"   {line[line.index('resuming'):]}")
        if code:
            raise UserError(f"resuming {name} failed (exit {code}); see {log_path}")
    records = {name: run_record(os.path.join(args.logdir, name)) for name in ("uninterrupted", "killed", "interrupted")}
    say("")
    say(comparison(records))
    say("")
    say(f"({time.time() - start:.0f} s in all; logs in {os.path.relpath(args.logdir, ROOT)})")
    if args.output:
        atomic_write_text(args.output, "\n".join(report) + "\n")
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
