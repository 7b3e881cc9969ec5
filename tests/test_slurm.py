"""The sbatch examples come back after preemption: scripts/slurm/requeue.sh, given the signals
SLURM sends, lets main.py write its checkpoint, asks SLURM to queue the task again, and the run
resumes from that checkpoint."""
from __future__ import annotations

import glob
import json
import os
import shlex
import signal
import subprocess
import sys
import time

import pytest

from conftest import MAIN_BASE

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REQUEUE = os.path.join(ROOT, "scripts", "slurm", "requeue.sh")


def _fake_scontrol(tmp_path) -> dict:
    """A PATH whose `scontrol` records its arguments, and SLURM's job id."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text('#!/bin/sh\necho "$@" >> "$SCONTROL_LOG"\n')
    (bin_dir / "scontrol").chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "SLURM_JOB_ID": "4242",
            "SCONTROL_LOG": str(tmp_path / "scontrol.log")}


def _requeueable(command, environment, cwd, output) -> subprocess.Popen:
    """The command under requeue.sh, in a session of its own (as the batch script of a SLURM task)."""
    script = f"set -euo pipefail; source {shlex.quote(REQUEUE)}; requeueable {shlex.join(command)}"
    return subprocess.Popen(["bash", "-c", script], cwd=cwd, env=environment, start_new_session=True,
                            stdout=output, stderr=subprocess.STDOUT)


def _finish(task: subprocess.Popen, timeout: float) -> int:
    try:
        return task.wait(timeout=timeout)
    finally:
        if task.poll() is None:
            os.killpg(task.pid, signal.SIGKILL)


def _steps(run_dir) -> list:
    indexes = glob.glob(os.path.join(run_dir, "checkpoints", "ckpt-*.index"))
    return sorted(int(os.path.basename(path)[5:-6]) for path in indexes if os.path.basename(path)[5:-6].isdigit())


def test_the_sbatch_examples_ask_for_requeue_and_a_warning_signal():
    for name in ("study_cpu.sbatch", "figures_gpu.sbatch"):
        text = open(os.path.join(ROOT, "scripts", "slurm", name)).read()
        assert "#SBATCH --requeue" in text and "#SBATCH --signal=B:USR1@" in text
        assert "source scripts/slurm/requeue.sh" in text and "\nrequeueable .venv/bin/python scripts/" in text


def test_usr1_before_the_time_limit_checkpoints_requeues_and_the_run_resumes(tmp_path, workdir, tfds_dir):
    environment = _fake_scontrol(tmp_path)
    logdir = tmp_path / "logs"
    command = [sys.executable, os.path.join(ROOT, "main.py"), *MAIN_BASE, "--data_dir", tfds_dir, "--num_epochs", "6",
               "--checkpoint_seconds", "0", "--run_name", "preempted", "--logdir", str(logdir)]
    run_dir = logdir / "preempted"
    log = tmp_path / "task.log"
    with open(log, "w") as output:
        task = _requeueable(command, environment, workdir, output)
        deadline = time.time() + 300
        while not _steps(run_dir) and task.poll() is None and time.time() < deadline:  # training is under way
            time.sleep(0.2)
        assert task.poll() is None, log.read_text()[-3000:]
        first = _steps(run_dir)[-1]
        os.kill(task.pid, signal.SIGUSR1)  # what --signal=B:USR1@120 sends: to the batch shell only
        code = _finish(task, 300)
    output = log.read_text()
    assert code == 128 + signal.SIGTERM, output[-3000:]
    assert "writing a checkpoint" in output and "Continue with" in output and "Traceback" not in output
    assert (tmp_path / "scontrol.log").read_text().split() == ["requeue", "4242"]
    assert _steps(run_dir)[-1] >= first and not (run_dir / "summary.json").exists()

    # SLURM starts the task again: the run continues from that checkpoint and finishes
    resumed = subprocess.run(command + ["--resume"], cwd=workdir, env=environment, capture_output=True, text=True,
                             timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert [entry["epoch"] for entry in summary["history"]] == [1, 2, 3, 4, 5, 6] and summary["sessions"] == 2


STAND_IN = """
import signal, sys, time
seen = []
def stop(number, frame):
    seen.append(number)
    if len(seen) > 1:
        return  # the same request twice (the scheduler's and the parent's), as main.py counts it
    time.sleep(1.0)  # writing its checkpoint
    open(sys.argv[1], "w").write("written")
    sys.exit(143)
signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
time.sleep(60)
"""

PARENT = """
import sys
sys.path.insert(0, sys.argv[1])
from experiments.runner import run_to_its_checkpoint
code, stopped = run_to_its_checkpoint([sys.executable, "-c", sys.argv[2], sys.argv[3]], sys.stdout)
sys.exit(143 if stopped else code)
"""


@pytest.mark.parametrize("through_the_runner", [False, True])
def test_preemption_waits_for_the_checkpoint_and_leaves_the_requeue_to_slurm(tmp_path, through_the_runner):
    """Preemption: SLURM signals every process of the task at once. The shell, and scripts/study.py
    between it and main.py (the runner), wait for main.py's checkpoint before they end; the shell
    asks for no requeue (SLURM's PreemptMode does it; scancel also sends SIGTERM)."""
    environment = _fake_scontrol(tmp_path)
    marker = tmp_path / "checkpoint"
    command = [sys.executable, "-c", STAND_IN, str(marker)]
    if through_the_runner:
        command = [sys.executable, "-c", PARENT, ROOT, STAND_IN, str(marker)]
    log = tmp_path / "task.log"
    with open(log, "w") as output:
        task = _requeueable(command, environment, str(tmp_path), output)
        deadline = time.time() + 120
        while "ready" not in log.read_text() and time.time() < deadline:
            time.sleep(0.05)
        ready = log.read_text()
        if "ready" not in ready:  # a signal now would test a start-up race, not the waiting
            os.killpg(task.pid, signal.SIGKILL)
            pytest.fail(f"the stand-in did not start within 120 s: {ready!r}")
        os.killpg(task.pid, signal.SIGTERM)  # every process of the task, as SLURM does
        code = _finish(task, 60)
    assert code == 143, log.read_text()
    assert marker.exists(), log.read_text()  # the checkpoint was written before the task ended
    assert marker.read_text() == "written"
    assert not (tmp_path / "scontrol.log").exists()
