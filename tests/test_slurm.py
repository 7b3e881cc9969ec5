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


def _requeueable(command, environment, cwd) -> subprocess.Popen:
    script = f"set -euo pipefail; source {shlex.quote(REQUEUE)}; requeueable {shlex.join(command)}"
    return subprocess.Popen(["bash", "-c", script], cwd=cwd, env=environment, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


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
    task = _requeueable(command, environment, workdir)
    deadline = time.time() + 300
    while not _steps(run_dir) and task.poll() is None and time.time() < deadline:  # training is under way
        time.sleep(0.2)
    assert task.poll() is None, task.communicate()[0][-3000:]
    first = _steps(run_dir)[-1]
    os.kill(task.pid, signal.SIGUSR1)  # what --signal=B:USR1@120 sends: to the batch shell only
    output = task.communicate(timeout=300)[0]
    assert task.returncode == 128 + signal.SIGTERM, output[-3000:]
    assert "writing a checkpoint" in output and "Continue with" in output and "Traceback" not in output
    assert (tmp_path / "scontrol.log").read_text().split() == ["requeue", "4242"]
    assert _steps(run_dir)[-1] > first  # the signal's own checkpoint, mid-epoch
    assert not (run_dir / "summary.json").exists()

    # SLURM starts the task again: the run continues from that checkpoint and finishes
    resumed = subprocess.run(command + ["--resume"], cwd=workdir, env=environment, capture_output=True, text=True,
                             timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert [entry["epoch"] for entry in summary["history"]] == [1, 2, 3, 4, 5, 6] and summary["sessions"] == 2


def test_sigterm_to_every_process_is_passed_on_once_and_waited_for(tmp_path):
    """Preemption: SLURM signals every process of the task; the shell must not signal again (a
    second signal makes main.py stop without its checkpoint) and must wait for the checkpoint."""
    environment = _fake_scontrol(tmp_path)
    marker = tmp_path / "checkpoint"
    child = ("import signal, sys, time\n"
             "count = []\n"
             "def stop(number, frame):\n"
             "    count.append(number)\n"
             "    if len(count) > 1: sys.exit(99)\n"
             "    time.sleep(1.0)\n"
             f"    open({str(marker)!r}, 'w').write(str(len(count)))\n"
             "    sys.exit(143)\n"
             "signal.signal(signal.SIGTERM, stop)\n"
             "print('ready', flush=True)\n"
             "time.sleep(60)\n")
    task = _requeueable([sys.executable, "-c", child], environment, str(tmp_path))
    assert task.stdout.readline().strip() == "ready"
    os.killpg(task.pid, signal.SIGTERM)  # every process of the task, as SLURM does
    output = task.communicate(timeout=60)[0]
    assert task.returncode == 143, output
    assert marker.read_text() == "1"  # one signal, and the shell waited for its handler to finish
    assert (tmp_path / "scontrol.log").read_text().split() == ["requeue", "4242"]
